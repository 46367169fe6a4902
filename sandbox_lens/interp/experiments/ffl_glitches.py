"""``ffl-glitches`` — thesis §3.5 (R1, R2, R4, R7, R8): attention glitches on the flip-flop language.

Four populations of the same seeds, all at one length T: transformer twins trained on FFL(0.8);
twins trained on the mixture {FFL(0.9), FFL(0.98), FFL(0.1)} (R4's fix); twins trained on FFL(0.8)
with attention sharpening (λ × mean attention entropy, R8); the thesis's 1-layer LSTM (R2). Every
model, and Proposition 3's exact construction, reads the same strings: in distribution FFL(0.8),
sparse FFL(0.98) (long-range reads) and dense FFL(0.1) (many writes). Errors are counted per read
and per string (the thesis's ℓ∞ criterion: any error is a glitch). For the twins' last layer we
measure how sharp each head is at the reads (mean largest weight) and which reference it matches
(latest write, Proposition 3's pattern, or all writes, the "dense solution" of Fig. 3.34a).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sandbox_lens.interp.compare.analyse import attention_scores, comparison_of_task
from sandbox_lens.interp.evaluate import evaluate, ffl_shifts, skyline
from sandbox_lens.interp.experiments.base import Context
from sandbox_lens.interp.experiments.rules import Rule, count, exactness_rule
from sandbox_lens.interp.model.run import attention_patterns
from sandbox_lens.interp.stats import Estimate, difference, estimate, poisson_interval
from sandbox_lens.interp.streams import ExperimentSeed
from sandbox_lens.interp.tasks.batches import FFLTask
from sandbox_lens.interp.train import ModelShape, TrainConfig, default_shape, load_trained

SEEDS, QUICK_SEEDS = tuple(range(12)), (0,)  # 5 by default and 8 published until deviation 30
MIXTURE = (0.9, 0.98, 0.1)
SHARPEN = 0.01  # λ of the entropy penalty (flipflop.md §7.2 item 11: the thesis's 1L1H setting)
LEARNED = 0.99  # in-distribution read accuracy a model must reach for its OOD errors to count
MIN_COMPARED = 3  # learned models a population needs before its errors are compared with another's
SHORT = {
    "twin": "FFL(0.8)",
    "mixture": "mixture",
    "sharpened": "sharpened",
    "lstm": "LSTM",
    "ffl (construction)": "exact",
}
POPULATIONS = {
    "twin": "twins, FFL(0.8)",
    "mixture": "twins, mixture {0.9, 0.98, 0.1}",
    "sharpened": f"twins, FFL(0.8) + sharpening λ={SHARPEN}",
    "lstm": "LSTMs, FFL(0.8)",
}


def _scale(quick: bool) -> dict[str, Any]:
    if quick:
        return {
            "length": 24,
            "steps": 100,
            "lstm_steps": 60,
            "strings": {0.8: 100, 0.98: 200, 0.1: 50},
            "attention_strings": 16,
        }
    return {
        "length": 64,
        "steps": 2000,  # 1000 until deviation 38: 7 of 12 twins learned FFL(0.8) in 1000 steps
        "lstm_steps": 500,
        "strings": {0.8: 2000, 0.98: 10000, 0.1: 1000},
        "attention_strings": 64,
    }


def run(ctx: Context) -> None:
    """Train this experiment's populations (or reuse finished runs), evaluate them and rule on every claim into
    ``ctx`` (the module docstring says what and how)."""

    sc = _scale(ctx.quick)
    T = sc["length"]
    base = TrainConfig(steps=sc["steps"], batch=32, lr=1e-3, eval_every=100)
    from dataclasses import replace

    runs = {
        "twin": ctx.sweep("twin", FFLTask(0.8, T), ModelShape(), base),
        "mixture": ctx.sweep("mixture", FFLTask(list(MIXTURE), T), ModelShape(), base),
        "sharpened": ctx.sweep("sharpened", FFLTask(0.8, T), ModelShape(), replace(base, sharpen=SHARPEN)),
        "lstm": ctx.sweep(
            "lstm",
            FFLTask(0.8, T),
            default_shape(FFLTask(0.8, T), "lstm"),
            TrainConfig(steps=sc["lstm_steps"], batch=64, lr=3e-3, weight_decay=1e-9, eval_every=50),
        ),
    }
    models = {f"{pop} {s}": load_trained(d) for pop in POPULATIONS for s, d in ctx.run_dirs(pop).items()}
    exact = skyline(models[f"twin {ctx.seeds[0]}"], T)
    models["ffl (construction)"] = exact
    rows = []
    for i, (p, n) in enumerate(sc["strings"].items()):
        rows += evaluate(models, ffl_shifts(T, (p,)), samples=n, seed=ExperimentSeed.FFL_GLITCH_EVALUATION + i)
    ctx.data("evaluation", rows)

    def of(model: str, p: float) -> dict[str, Any]:
        return next(r for r in rows if r["model"] == model and r["p"] == p)

    per_pop: dict[str, dict[str, Any]] = {}
    table = []
    for pop, label in {**POPULATIONS, "ffl (construction)": "Proposition 3 (exact)"}.items():
        names = [m for m in models if m == pop or m.startswith(pop + " ")]
        entry: dict[str, Any] = {"models": names}
        for p in sc["strings"]:
            errs = [of(m, p)["read_errors"] for m in names]
            strings = [of(m, p)["strings_with_error"] for m in names]
            entry[p] = {
                "read_errors": errs,
                "strings_with_error": strings,
                "reads": of(names[0], p)["scored"],
                "strings": of(names[0], p)["inputs"],
                "accuracy": [of(m, p)["accuracy"] for m in names],
            }
        # Only models that learned the training law say anything about glitches out of it (seeds of
        # this size sometimes plateau near 0.86); a quick run keeps them all.
        keep = [i for i, a in enumerate(entry[0.8]["accuracy"]) if a >= LEARNED or ctx.quick]
        entry["learned"] = [names[i] for i in keep]
        entry["sparse_errors"] = [entry[0.98]["read_errors"][i] for i in keep]
        entry["dense_errors"] = [entry[0.1]["read_errors"][i] for i in keep]
        entry["ood_errors"] = [a + b for a, b in zip(entry["sparse_errors"], entry["dense_errors"])]
        entry["zero_ood"] = sum(e == 0 for e in entry["ood_errors"])
        entry["in_distribution"] = float(np.mean([entry[0.8]["accuracy"][i] for i in keep])) if keep else float("nan")
        per_pop[pop] = entry
        table.append(
            [label, len(names), len(keep)]
            + [
                f"{np.median(entry[p]['read_errors']):g} ({min(entry[p]['read_errors'])}–"
                f"{max(entry[p]['read_errors'])})"
                for p in sc["strings"]
            ]
            + [f"{entry['zero_ood']}/{len(keep)}"]
        )
    ctx.data("errors", {pop: {str(k): v for k, v in e.items()} for pop, e in per_pop.items()})
    reads = {p: per_pop["twin"][p]["reads"] for p in sc["strings"]}
    ctx.table(
        "Read errors per model: median (min–max) over seeds",
        ["population", "models", f"learned (≥ {LEARNED} in distribution)"]
        + [f"FFL({p:g}): {sc['strings'][p]} strings, {reads[p]} reads" for p in sc["strings"]]
        + ["learned models with 0 OOD errors"],
        table,
        note="The same strings for every model; the error columns cover every model. OOD = FFL(0.98) and FFL(0.1).",
    )
    _strip_figure(ctx, per_pop, sc["strings"])
    heads = _heads(ctx, models, {pop: e["learned"] for pop, e in per_pop.items()}, sc["attention_strings"])
    _claims(ctx, per_pop, runs, heads, sc)


def read_error_strips(columns: dict[str, dict[str, list[float]]], suptitle: str) -> Any:
    """One panel per test law (``columns``: panel title → population label → read errors, one per model), each model
    a dot at read errors + 1 on a log axis (an error-free model on the bottom line)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 3.6))
    axes = fig.subplots(1, len(columns), sharey=True)
    for ax, (title, by_pop) in zip(axes, columns.items()):
        for i, values in enumerate(by_pop.values()):
            errs = np.asarray(values, dtype=float)
            jitter = np.linspace(-0.15, 0.15, len(errs)) if len(errs) > 1 else np.zeros(len(errs))
            ax.scatter(i + jitter, errs + 1, s=18, color=f"C{i}")
        ax.set_yscale("log")
        ax.set_xticks(range(len(by_pop)), list(by_pop), fontsize=8, rotation=20)
        ax.set_title(title, fontsize=9)
        ax.grid(alpha=0.3, axis="y")
    axes[0].set_ylabel("read errors + 1 (log scale; 1 = none)")
    fig.suptitle(suptitle)
    return fig


def _strip_figure(ctx: Context, per_pop: dict, strings: dict) -> None:
    pops = list(per_pop)
    columns = {
        f"FFL({p:g}): {strings[p]} strings, {per_pop[pops[0]][p]['reads']} reads": {
            SHORT.get(pop, pop): per_pop[pop][p]["read_errors"] for pop in pops
        }
        for p in strings
    }
    ctx.figure(
        "read_errors",
        read_error_strips(columns, "Read errors of every seed, in distribution (left) and out of it"),
        "Each dot is one trained model (or the construction); the y axis is read errors + 1 "
        "so that an error-free model sits on the bottom line.",
    )


def _heads(ctx: Context, models: dict, learned: dict[str, list[str]], n: int) -> dict[str, Any]:
    """Per transformer population, over its ``learned`` models only (an unlearned model's attention says nothing
    about how the learned ones read): each last-layer head's sharpness at the reads and closest reference."""

    out: dict[str, Any] = {}
    rows = []
    for pop in ("twin", "mixture", "sharpened"):
        names = [m for m in models if m.startswith(pop + " ") and m in learned.get(pop, ())]
        if not names:
            out[pop] = {"sharpness": [], "per_model": [], "references": {}, "heads": 0}
            rows.append([POPULATIONS[pop], 0, "—", "—", "—", "no learned model"])
            continue
        comparison = comparison_of_task(models[names[0]].card.task)
        words = comparison.words(n, seed=ExperimentSeed.FFL_GLITCH_ATTENTION_WORDS)
        last = models[names[0]].cfg.n_layers - 1
        heads = [(last, h) for h in range(models[names[0]].cfg.n_heads)]
        sharp, refs, per_model = [], {}, []
        for m in names:
            model = models[m]
            tokens = comparison.inputs(model, words, with_latents=False).tokens
            pats = attention_patterns(model, tokens, heads)
            reads = np.asarray(words) == 1  # r tokens: the queries the task scores
            mine = [float(pat[:, : reads.shape[1]][reads].max(axis=-1).mean()) for pat in pats.values()]
            sharp += mine
            per_model.append(float(np.mean(mine)))
            scores, _ = attention_scores(comparison, model, heads, words[: min(len(words), 20)])
            for sc_ in scores.values():
                refs[sc_["best_reference"]] = refs.get(sc_["best_reference"], 0) + 1
        out[pop] = {"sharpness": sharp, "per_model": per_model, "references": refs, "heads": len(sharp)}
        rows.append(
            [
                POPULATIONS[pop],
                len(sharp),
                float(np.mean(sharp)),
                float(np.min(sharp)),
                float(np.max(sharp)),
                ", ".join(f"{r}: {c}" for r, c in sorted(refs.items(), key=lambda kv: -kv[1])),
            ]
        )
    ctx.table(
        "Last-layer heads at the reads: sharpness (mean largest attention weight) and closest reference",
        ["population", "heads", "sharpness: mean", "min", "max", "closest reference (heads)"],
        rows,
        note=f"{n} FFL strings of the training law, learned models only; a reference is chosen by total-variation distance at the "
        f"reads (latest write = Proposition 3's layer 2; all writes = the dense solution of Fig. 3.34a).",
    )
    ctx.data("heads", out)
    return out


def _median(values: list) -> float:
    return float(np.median(values)) if len(values) else float("nan")


#: Each verdict's rule (changes after a run are in docs/deviations.md, with the way they moved a verdict;
#: tests/experiments/test_rules.py reaches every outcome of each with synthetic numbers).
RULES = {
    "sparse": Rule(
        "FFL(0.98) read-error rate − FFL(0.8) read-error rate, per learned twin (errors per read)", "above", 0.0
    ),
    "dense": Rule(
        "FFL(0.1) read-error rate − FFL(0.8) read-error rate, per learned twin (errors per read)", "above", 0.0
    ),
    # a size: the thesis's LSTMs make no OOD error at all; until 2026-11-26 the rule asked only that they make fewer
    # than the twins (docs/deviations.md). 10^-3 errors per read is about one error per model here.
    "lstm": Rule("OOD read-error rate per learned LSTM (errors per read)", "below", 1e-3, null=1e-3),
    # R4 and R6–R8 compare two populations of under 10 learned twins: until 2026-11-29 a difference of medians, which
    # has no interval there (both rows "not tested"); now means of log10 rates, Welch's t (docs/deviations.md)
    "mixture": Rule(
        "mean log10 OOD read-error rate, mixture twins − FFL(0.8) twins (learned models; ½ error added to every count)",
        "below",
        0.0,
    ),
    "sharpness": Rule(
        "mean largest attention weight at the reads, sharpened − plain twins (per model, last layer)", "above", 0.0
    ),
    "persist": Rule("OOD read-error rate − FFL(0.8) read-error rate, per learned sharpened twin", "above", 0.0),
    "tenfold": Rule(
        "mean log10 OOD read-error rate, plain twins − sharpened twins (learned models; ½ error added to every count)",
        "above",
        1.0,
    ),
    "exact": exactness_rule("read errors of Proposition 3's construction over every evaluated read"),
}


def _rates(entry: dict, p: float, keep_only: bool = True) -> list[float]:
    """Errors per read at FFL(p), one per (learned) model."""
    idx = range(len(entry["models"]))
    keep = [entry["models"].index(m) for m in entry["learned"]] if keep_only else list(idx)
    return [entry[p]["read_errors"][i] / max(entry[p]["reads"], 1) for i in keep]


def _log_ood(entry: dict) -> list[float]:
    """log10 of each learned model's OOD read-error rate (FFL(0.98) and FFL(0.1) together), ½ error added to the
    count and 1 to the reads (a model with none stays finite)."""
    reads = entry[0.98]["reads"] + entry[0.1]["reads"]
    return [float(np.log10((e + 0.5) / (reads + 1))) for e in entry["ood_errors"]]


def _claims(ctx: Context, per_pop: dict, runs: dict, heads: dict, sc: dict) -> None:
    n = {pop: len(per_pop[pop]["learned"]) for pop in per_pop}
    total = {pop: len(per_pop[pop]["models"]) for pop in per_pop}
    indist = {pop: per_pop[pop]["in_distribution"] for pop in per_pop}
    learned_floor = {
        pop: None if n[pop] else f"no {POPULATIONS.get(pop, pop)} model learned FFL(0.8) to {LEARNED}"
        for pop in per_pop
    }
    twin = per_pop["twin"]
    sparse_p, dense_p = 0.98, 0.1
    in_rate = {pop: _rates(per_pop[pop], 0.8) for pop in POPULATIONS}
    ood_rate = {
        pop: [
            (a * per_pop[pop][sparse_p]["reads"] + b * per_pop[pop][dense_p]["reads"])
            / (per_pop[pop][sparse_p]["reads"] + per_pop[pop][dense_p]["reads"])
            for a, b in zip(_rates(per_pop[pop], sparse_p), _rates(per_pop[pop], dense_p))
        ]
        for pop in POPULATIONS
    }
    reads = {p: twin[p]["reads"] for p in sc["strings"]}

    def excess(pop: str, p: float) -> Estimate:
        return estimate([a - b for a, b in zip(_rates(per_pop[pop], p), in_rate[pop])])

    # R1: a distribution effect, not the in-distribution error rate seen on more reads
    for key, p, kind in (("sparse", sparse_p, "sparse (long-range reads)"), ("dense", dense_p, "dense (many writes)")):
        e = excess("twin", p)
        errs = [twin[p]["read_errors"][twin["models"].index(m)] for m in twin["learned"]]
        ctx.rule(
            f"Twins trained on FFL(0.8) make more read errors on {kind} strings than in distribution (R1)",
            "errors on both sparse and dense sequences; most runs fail to reach 0 OOD error (Fig. 3.27)",
            RULES[key],
            e,
            f"{sum(x > 0 for x in errs)} of {n['twin']} learned twins ({total['twin']} trained) err on FFL({p:g}); "
            f"read errors per twin {errs} of {reads[p]} reads; in-distribution accuracy {indist['twin']:.4f}",
            floor=learned_floor["twin"],
        )
    lstm_e = estimate(ood_rate["lstm"])
    lstm = per_pop["lstm"]
    ctx.rule(
        "A 1-layer LSTM makes fewer OOD read errors than the twins — none in the thesis (R2)",
        "0 final-iterate OOD errors in 100/100 replicates (hidden 128, 500 steps, T = 512)",
        RULES["lstm"],
        lstm_e,
        f"{lstm['zero_ood']} of {n['lstm']} learned LSTMs with 0 OOD errors (in distribution {indist['lstm']:.4f}; "
        f"worst {max(lstm['ood_errors'], default=0)} errors)",
        floor=learned_floor["lstm"] or learned_floor["twin"],
    )
    few = [pop for pop in ("twin", "mixture") if n[pop] < MIN_COMPARED and not ctx.quick]
    mix_e = difference(_log_ood(per_pop["mixture"]), _log_ood(twin), labels=("mixture", "twin"))
    floor = (
        learned_floor["twin"]
        or learned_floor["mixture"]
        or (
            "; ".join(f"only {n[p]} of {total[p]} {POPULATIONS[p]} learned FFL(0.8) to {LEARNED}" for p in few)
            if few
            else None
        )
    )
    if not floor and not any(ood_rate["twin"]):
        floor = "the FFL(0.8) twins made no OOD errors, so there was nothing to reduce"
    mix = per_pop["mixture"]
    ctx.rule(
        "Training on the mixture {0.9, 0.98, 0.1} reduces OOD errors (R4)",
        "6/25 runs with 0 detected errors; errors reduced on all three distributions",
        RULES["mixture"],
        mix_e,
        f"median OOD read errors {_median(mix['ood_errors']):g} (mixture) vs {_median(twin['ood_errors']):g} "
        f"(FFL(0.8)); {mix['zero_ood']} of {n['mixture']} learned mixture twins ({total['mixture']} trained) with 0",
        floor=floor,
    )
    _sharpening_claims(ctx, per_pop, heads, n, total, learned_floor, in_rate, ood_rate)
    exact = per_pop["ffl (construction)"]
    wrong = sum(exact[p]["read_errors"][0] for p in sc["strings"])
    total_reads = sum(exact[p]["reads"] for p in sc["strings"])
    ctx.rule(
        "Proposition 3's construction reads every bit correctly",
        "exact on FFL(p) for every p",
        RULES["exact"],
        count(wrong),
        f"{wrong} read errors over {total_reads} reads (95% Poisson bound on its error rate: "
        f"< {poisson_interval(wrong, total_reads)[1]:.2g} per read)",
    )
    refs = heads["twin"]["references"]
    top = max(refs, key=refs.get) if refs else "—"
    ctx.conclude(
        f"Plain twins' last-layer heads most often match “{top}” ({refs.get(top, 0)} of {heads['twin']['heads']} "
        f"heads); with sharpening: "
        + ", ".join(f"{r} {c}" for r, c in heads["sharpened"]["references"].items())
        + ". The thesis's unregularised 1L1H model found the dense “all writes” solution; "
        "Proposition 3's layer 2 attends to the latest write."
    )
    ctx.conclude(
        f"OOD read errors (FFL(0.98) + FFL(0.1)), median over seeds: FFL(0.8) twins {_median(twin['ood_errors']):g}, "
        f"mixture {_median(mix['ood_errors']):g}, sharpened {_median(per_pop['sharpened']['ood_errors']):g}, LSTM "
        f"{_median(lstm['ood_errors']):g}, construction {wrong} (learned models only: "
        + ", ".join(f"{pop} {n[pop]}/{total[pop]}" for pop in POPULATIONS)
        + ")."
    )
    ctx.caveat(
        f"Scale and what the verdicts respect: T = {sc['length']} and 2-layer, width-64 twins trained for "
        f"{sc['steps']} steps × 32 strings (the thesis: T = 512, 6 layers, width 512, 10⁴ steps × 16, 500 "
        f"replicates); {len(ctx.seeds)} seeds, so an interval over seeds is wide and R1, a tail claim, is seen "
        f"only in part. Errors count as a distribution effect only beyond each twin's own in-distribution "
        f"error rate. At FFL(0.98) and T = {sc['length']} a string has about "
        f"{reads[sparse_p] / max(sc['strings'][sparse_p], 1):.2f} reads, most of them the final one, which mostly "
        f"refers to the first write: the sparse half is tested at a far shorter range than the thesis's."
    )
    ctx.caveat(
        f"Sharpening uses λ = {SHARPEN} (the value for 1-layer models in the notes); the thesis swept λ, "
        f"schedules and start times."
    )


def _sharpening_claims(
    ctx: Context, per_pop: dict, heads: dict, n: dict, total: dict, learned_floor: dict, in_rate: dict, ood_rate: dict
) -> None:
    """R6–R8: sharper heads, errors that persist, about tenfold fewer."""
    twin = per_pop["twin"]
    s_per, t_per = heads["sharpened"]["per_model"], heads["twin"]["per_model"]
    sharp_e = difference(s_per, t_per, labels=("sharpened", "plain"), unit="models")
    ctx.rule(
        "Attention sharpening makes the heads sparser (R8)",
        "sharpening produces hard, 1-sparse attention (Fig. 3.34b, 3.38)",
        RULES["sharpness"],
        sharp_e,
        f"mean largest weight at the reads {np.mean(s_per):.3f} (sharpened) vs {np.mean(t_per):.3f} (plain)",
    )
    sh = per_pop["sharpened"]
    floor = learned_floor["sharpened"] or (
        f"only {n['sharpened']} of {total['sharpened']} sharpened twins learned FFL(0.8) to {LEARNED}"
        if n["sharpened"] < MIN_COMPARED and not ctx.quick
        else None
    )
    persist = estimate([a - b for a, b in zip(ood_rate["sharpened"], in_rate["sharpened"])])
    ctx.rule(
        "Errors persist under sharpening (R6–R8)",
        "never 0 across all runs",
        RULES["persist"],
        persist,
        f"{n['sharpened'] - sh['zero_ood']} of {n['sharpened']} learned sharpened twins ({total['sharpened']} "
        f"trained) still err out of distribution; median OOD errors {_median(sh['ood_errors']):g}",
        floor=floor,
    )
    ten = difference(_log_ood(per_pop["twin"]), _log_ood(sh), labels=("plain", "sharpened"))
    ctx.rule(
        "…about an order of magnitude fewer than without (R6–R8)",
        "about an order of magnitude fewer errors",
        RULES["tenfold"],
        ten,
        f"median OOD errors {_median(sh['ood_errors']):g} (sharpened) vs {_median(twin['ood_errors']):g} (plain)",
        floor=floor or learned_floor["twin"],
    )
