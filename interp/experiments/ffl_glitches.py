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

from interp.streams import ExperimentSeed
from interp.experiments.base import Context

SEEDS, QUICK_SEEDS = tuple(range(5)), (0,)
MIXTURE = (0.9, 0.98, 0.1)
SHARPEN = 0.01  # λ of the entropy penalty (flipflop.md §7.2 item 11: the thesis's 1L1H setting)
LEARNED = 0.99  # in-distribution read accuracy a model must reach for its OOD errors to count
MIN_COMPARED = 3  # learned models a population needs before its errors are compared with another's
SHORT = {"twin": "FFL(0.8)", "mixture": "mixture", "sharpened": "sharpened", "lstm": "LSTM",
         "ffl (construction)": "exact"}
POPULATIONS = {"twin": "twins, FFL(0.8)", "mixture": "twins, mixture {0.9, 0.98, 0.1}",
               "sharpened": f"twins, FFL(0.8) + sharpening λ={SHARPEN}", "lstm": "LSTMs, FFL(0.8)"}


def _scale(quick: bool) -> dict[str, Any]:
    if quick:
        return {"length": 24, "steps": 100, "lstm_steps": 60, "strings": {0.8: 100, 0.98: 200, 0.1: 50},
                "attention_strings": 16}
    return {"length": 64, "steps": 1000, "lstm_steps": 500, "strings": {0.8: 2000, 0.98: 10000, 0.1: 1000},
            "attention_strings": 64}


def run(ctx: Context) -> None:
    from interp.evaluate import evaluate, ffl_shifts, skyline
    from interp.tasks.batches import FFLTask
    from interp.train import ModelShape, TrainConfig, default_shape, load_trained

    sc = _scale(ctx.quick)
    T = sc["length"]
    base = TrainConfig(steps=sc["steps"], batch=32, lr=1e-3, eval_every=100)
    from dataclasses import replace

    runs = {
        "twin": ctx.sweep("twin", FFLTask(0.8, T), ModelShape(), base),
        "mixture": ctx.sweep("mixture", FFLTask(list(MIXTURE), T), ModelShape(), base),
        "sharpened": ctx.sweep("sharpened", FFLTask(0.8, T), ModelShape(), replace(base, sharpen=SHARPEN)),
        "lstm": ctx.sweep("lstm", FFLTask(0.8, T), default_shape(FFLTask(0.8, T), "lstm"),
                          TrainConfig(steps=sc["lstm_steps"], batch=64, lr=3e-3, weight_decay=1e-9, eval_every=50)),
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
            entry[p] = {"read_errors": errs, "strings_with_error": strings, "reads": of(names[0], p)["scored"],
                        "strings": of(names[0], p)["inputs"], "accuracy": [of(m, p)["accuracy"] for m in names]}
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
        table.append([label, len(names), len(keep)] + [f"{np.median(entry[p]['read_errors']):g} ({min(entry[p]['read_errors'])}–"
                                                       f"{max(entry[p]['read_errors'])})" for p in sc["strings"]]
                     + [f"{entry['zero_ood']}/{len(keep)}"])
    ctx.data("errors", {pop: {str(k): v for k, v in e.items()} for pop, e in per_pop.items()})
    reads = {p: per_pop["twin"][p]["reads"] for p in sc["strings"]}
    ctx.table("Read errors per model: median (min–max) over seeds",
              ["population", "models", f"learned (≥ {LEARNED} in distribution)"]
              + [f"FFL({p:g}): {sc['strings'][p]} strings, {reads[p]} reads" for p in sc["strings"]]
              + ["learned models with 0 OOD errors"], table,
              note="The same strings for every model; the error columns cover every model. OOD = FFL(0.98) and FFL(0.1).")
    _strip_figure(ctx, per_pop, sc["strings"])
    heads = _heads(ctx, models, T, sc["attention_strings"])
    _claims(ctx, per_pop, runs, heads, sc)


def _strip_figure(ctx: Context, per_pop: dict, strings: dict) -> None:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 3.6))
    axes = fig.subplots(1, len(strings), sharey=True)
    pops = list(per_pop)
    for ax, p in zip(axes, strings):
        for i, pop in enumerate(pops):
            errs = np.asarray(per_pop[pop][p]["read_errors"], dtype=float)
            jitter = np.linspace(-0.15, 0.15, len(errs)) if len(errs) > 1 else np.zeros(1)
            ax.scatter(i + jitter, errs + 1, s=18, color=f"C{i}")
        ax.set_yscale("log")
        ax.set_xticks(range(len(pops)), [SHORT.get(q, q) for q in pops], fontsize=8, rotation=20)
        ax.set_title(f"FFL({p:g}): {strings[p]} strings, {per_pop[pops[0]][p]['reads']} reads", fontsize=9)
        ax.grid(alpha=0.3, axis="y")
    axes[0].set_ylabel("read errors + 1 (log scale; 1 = none)")
    fig.suptitle("Read errors of every seed, in distribution (left) and out of it")
    ctx.figure("read_errors", fig, "Each dot is one trained model (or the construction); the y axis is read errors + 1 "
               "so that an error-free model sits on the bottom line.")


def _heads(ctx: Context, models: dict, T: int, n: int) -> dict[str, Any]:
    """Per transformer population: each last-layer head's sharpness at the reads and closest reference."""
    from interp.compare.analyse import attention_scores, comparison_of_task
    from interp.model.run import attention_patterns

    out: dict[str, Any] = {}
    rows = []
    for pop in ("twin", "mixture", "sharpened"):
        names = [m for m in models if m.startswith(pop + " ")]
        comparison = comparison_of_task(models[names[0]].card.task)
        words = comparison.words(n, seed=ExperimentSeed.FFL_GLITCH_ATTENTION_WORDS)
        last = models[names[0]].cfg.n_layers - 1
        heads = [(last, h) for h in range(models[names[0]].cfg.n_heads)]
        sharp, refs = [], {}
        for m in names:
            model = models[m]
            tokens = comparison.inputs(model, words, with_latents=False).tokens
            pats = attention_patterns(model, tokens, heads)
            reads = np.asarray(words) == 1  # r tokens: the queries the task scores
            for head, pat in pats.items():
                sharp.append(float(pat[:, : reads.shape[1]][reads].max(axis=-1).mean()))
            scores, _ = attention_scores(comparison, model, heads, words[: min(len(words), 20)])
            for sc_ in scores.values():
                refs[sc_["best_reference"]] = refs.get(sc_["best_reference"], 0) + 1
        out[pop] = {"sharpness": sharp, "references": refs, "heads": len(sharp)}
        rows.append([POPULATIONS[pop], len(sharp), float(np.mean(sharp)), float(np.min(sharp)), float(np.max(sharp)),
                     ", ".join(f"{r}: {c}" for r, c in sorted(refs.items(), key=lambda kv: -kv[1]))])
    ctx.table("Last-layer heads at the reads: sharpness (mean largest attention weight) and closest reference",
              ["population", "heads", "sharpness: mean", "min", "max", "closest reference (heads)"], rows,
              note=f"{n} FFL strings of the training law; a reference is chosen by total-variation distance at the "
                   f"reads (latest write = Proposition 3's layer 2; all writes = the dense solution of Fig. 3.34a).")
    ctx.data("heads", out)
    return out


def _median(values: list) -> float:
    return float(np.median(values)) if len(values) else float("nan")


def _claims(ctx: Context, per_pop: dict, runs: dict, heads: dict, sc: dict) -> None:
    n = {pop: len(per_pop[pop]["learned"]) for pop in per_pop}
    total = {pop: len(per_pop[pop]["models"]) for pop in per_pop}
    indist = {pop: per_pop[pop]["in_distribution"] for pop in per_pop}
    ok = {pop: n[pop] > 0 for pop in per_pop}
    twin = per_pop["twin"]
    glitching = n["twin"] - twin["zero_ood"]
    learned_rule = f"only models with FFL(0.8) read accuracy ≥ {LEARNED} count"
    if not ok["twin"]:
        v, why = "not tested", "no twin learned FFL(0.8)"
    else:
        v, why = ("reproduced" if glitching > n["twin"] / 2 else "not reproduced" if glitching == 0 else "differs"), ""
    ctx.claim("Twins trained on FFL(0.8) make out-of-distribution read errors (R1)",
              "most runs fail to reach 0 OOD error (Fig. 3.27, 3 seeds per architecture; baseline 500 replicates)",
              f"{glitching} of the {n['twin']} twins that learned ({total['twin']} trained) have ≥ 1 read error on "
              f"FFL(0.98) or FFL(0.1) (in distribution {indist['twin']:.4f})", v, learned_rule + "; reproduced if more than half the twins have an OOD error, "
              "not reproduced if none has", why)
    sparse = sum(e > 0 for e in twin["sparse_errors"])
    dense = sum(e > 0 for e in twin["dense_errors"])
    both = sparse > 0 and dense > 0
    ctx.claim("The errors occur on both sparse and dense strings (R1)",
              "errors on both sparse and dense sequences (sparse: long-range, dense: short-range failures)",
              f"learned twins with errors: {sparse} of {n['twin']} on FFL(0.98) (median "
              f"{_median(twin['sparse_errors']):g} errors), {dense} on FFL(0.1) (median "
              f"{_median(twin['dense_errors']):g})",
              "not tested" if not ok["twin"] else "reproduced" if both else "differs" if sparse or dense else "not reproduced",
              "reproduced if some twin errs on each; differs if only one kind of string shows errors")
    lstm = per_pop["lstm"]
    ctx.claim("A 1-layer LSTM makes no read errors (R2)", "0 final-iterate OOD errors in 100/100 replicates "
              "(hidden 128, 500 steps, T = 512)",
              f"{lstm['zero_ood']} of {n['lstm']} LSTMs with 0 OOD errors (in distribution {indist['lstm']:.4f}; worst OOD "
              f"{max(lstm['ood_errors'], default=0)} errors)",
              "not tested" if not ok["lstm"] else "reproduced" if lstm["zero_ood"] == n["lstm"] else "not reproduced",
              learned_rule + "; reproduced if every LSTM has 0 errors on FFL(0.98) and FFL(0.1)")
    mix = per_pop["mixture"]
    med_t, med_m = _median(twin["ood_errors"]), _median(mix["ood_errors"])
    few = [pop for pop in ("twin", "mixture") if n[pop] < MIN_COMPARED and not ctx.quick]
    if not (ok["twin"] and ok["mixture"]) or few:
        v, why = "not tested", "; ".join(f"only {n[p]} of {total[p]} {POPULATIONS[p]} learned FFL(0.8) to {LEARNED}"
                                         for p in few or [p for p in ("twin", "mixture") if not ok[p]])
    elif med_t == 0:
        v, why = "not tested", "the FFL(0.8) twins made no OOD errors, so there was nothing to reduce"
    else:
        v, why = ("reproduced" if med_m < med_t else "not reproduced"), ""
    ctx.claim("Training on the mixture {0.9, 0.98, 0.1} reduces OOD errors (R4)",
              "6/25 runs with 0 detected errors; errors reduced on all three distributions",
              f"median OOD read errors {med_m:g} (mixture) vs {med_t:g} (FFL(0.8)); {mix['zero_ood']} of {n['mixture']} "
              f"learned mixture twins ({total['mixture']} trained) with 0", v,
              f"at least {MIN_COMPARED} learned models per population; reproduced if the mixture's median OOD errors are "
              f"below the FFL(0.8) twins'", why)
    sh = per_pop["sharpened"]
    s_sharp, t_sharp = float(np.mean(heads["sharpened"]["sharpness"])), float(np.mean(heads["twin"]["sharpness"]))
    ctx.claim("Attention sharpening makes the heads sparser (R8)", "sharpening produces hard, 1-sparse attention "
              "(Fig. 3.34b, 3.38)", f"mean largest weight at the reads {s_sharp:.3f} (sharpened) vs {t_sharp:.3f}",
              "reproduced" if s_sharp > t_sharp + 0.02 else "not reproduced",
              "reproduced if the sharpened last-layer heads' mean largest weight exceeds the plain twins' by > 0.02")
    med_s = _median(sh["ood_errors"])
    persist = n["sharpened"] - sh["zero_ood"]
    if n["sharpened"] < (1 if ctx.quick else MIN_COMPARED):
        v, why = "not tested", f"only {n['sharpened']} of {total['sharpened']} sharpened twins learned FFL(0.8) to {LEARNED}"
    elif med_t == 0:
        v, why = "not tested", "the FFL(0.8) twins made no OOD errors"
    else:
        v, why = ("reproduced" if persist > 0 else "not reproduced"), ""
    ctx.claim("…but errors persist under sharpening (R6–R8)", "about an order of magnitude fewer errors, never 0 "
              "across all runs", f"{persist} of {n['sharpened']} learned sharpened twins ({total['sharpened']} trained) "
              f"still err; median OOD errors {med_s:g} vs {med_t:g}", v,
              f"at least {MIN_COMPARED} learned sharpened twins; reproduced if at least one still has an OOD error", why)
    exact = per_pop["ffl (construction)"]
    wrong = sum(exact[p]["read_errors"][0] for p in sc["strings"])
    ctx.claim("Proposition 3's construction reads every bit correctly", "exact on FFL(p) for every p",
              f"{wrong} read errors over {sum(exact[p]['reads'] for p in sc['strings'])} reads",
              "reproduced" if wrong == 0 else "not reproduced", "reproduced if it makes no read error")
    refs = heads["twin"]["references"]
    top = max(refs, key=refs.get) if refs else "—"
    ctx.conclude(f"Plain twins' last-layer heads most often match “{top}” ({refs.get(top, 0)} of {heads['twin']['heads']} "
                 f"heads); with sharpening: " + ", ".join(f"{r} {c}" for r, c in heads["sharpened"]["references"].items())
                 + ". The thesis's unregularised 1L1H model found the dense “all writes” solution; "
                   "Proposition 3's layer 2 attends to the latest write.")
    ctx.conclude(f"OOD read errors (FFL(0.98) + FFL(0.1)), median over seeds: FFL(0.8) twins {med_t:g}, mixture {med_m:g}, "
                 f"sharpened {med_s:g}, LSTM {_median(lstm['ood_errors']):g}, construction {wrong} (learned models only: "
                 + ", ".join(f"{pop} {n[pop]}/{total[pop]}" for pop in POPULATIONS) + ").")
    if not ctx.quick:
        ctx.caveat(f"Scale: T = {sc['length']} and 2-layer, width-64 twins trained for {sc['steps']} steps × 32 strings "
                   f"(the thesis: T = 512, 6 layers, width 512, 10⁴ steps × 16, 500 replicates). R1 is a statistical "
                   f"tail claim; {n['twin']} seeds and 10⁴ sparse strings see only part of that tail.")
        ctx.caveat(f"Sharpening uses λ = {SHARPEN} (the value for 1-layer models in the notes); the thesis swept λ, "
                   f"schedules and start times. At FFL(0.98) and T = {sc['length']} most reads refer to the first "
                   f"write, which is closer than the thesis's sparse reads at T = 512.")
