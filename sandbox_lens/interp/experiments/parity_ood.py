"""``parity-ood`` — thesis §3.4.5, Fig. 3.20: parity out of distribution.

Twins trained on uniform words (Pr[σ=1] = 0.5 for parity) are evaluated on words drawn with
another probability of the counted symbol, and on words with exactly k of it; the LSTM baseline
and the exact construction (``modular_counter`` for counters) see the same words. A linear probe
for the running count of that symbol at every residual hook asks whether the twin counts and then
takes the count mod 2, as Lemma 15's construction does.

Any catalogue automaton works (``--automaton C3``, ``--automaton S3``): the counted symbol is the
alphabet's second (``1`` for C_n); the shift moves its probability, the rest share the remainder.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sandbox_lens.interp.evaluate import Shift, automaton_shifts, evaluate, skyline
from sandbox_lens.interp.experiments.base import Context, ExperimentError, mean_se
from sandbox_lens.interp.experiments.rules import Rule, count, exactness_rule
from sandbox_lens.interp.stats import estimate
from sandbox_lens.interp.streams import ExperimentSeed, Stream
from sandbox_lens.interp.tasks.batches import AutomatonTask, step_rng
from sandbox_lens.interp.tasks.catalogue import get_automaton
from sandbox_lens.interp.train import ModelShape, TrainConfig, default_shape, load_trained
from sandbox_lens.probes.linear import automaton_probe_data, probe_accuracy

SEEDS, QUICK_SEEDS = tuple(range(25)), (0,)  # the thesis's 25 replicates (10 until deviation 29)
COUNT_SYMBOL = 1
PS = (0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95)
#: the verdict rules (stated in the report beside each verdict)
LEARNED, DROP_REPRODUCED, DROP_NONE = 0.95, 0.10, 0.02
READABLE = 0.9  # a latent is "readable" at a hook where the twins' mean probe accuracy reaches this


def _scale(quick: bool) -> dict[str, Any]:
    if quick:
        return {"length": 8, "steps": 100, "lstm_steps": 60, "samples": 48, "probe_words": 32, "counts": 3}
    return {"length": 20, "steps": 2000, "lstm_steps": 300, "samples": 400, "probe_words": 300, "counts": 11}


def check(options: dict[str, Any]) -> None:
    """Refuse a task option this experiment cannot take, in one line, before ``--out`` is claimed."""

    a = get_automaton(options["automaton"])
    if a.n_symbols < 2:
        raise ExperimentError(f"{a.name} has one symbol: there is no symbol distribution to shift")


def run(ctx: Context) -> None:
    """Train this experiment's populations (or reuse finished runs), evaluate them and rule on every claim into
    ``ctx`` (the module docstring says what and how)."""

    sc = _scale(ctx.quick)
    a = get_automaton(ctx.options["automaton"])
    T, sym = sc["length"], a.alphabet[COUNT_SYMBOL]
    task = AutomatonTask(a, T)
    twin_cfg = TrainConfig(steps=sc["steps"], batch=32, lr=3e-3, eval_every=100, target_accuracy=0.999)
    lstm_cfg = TrainConfig(
        steps=sc["lstm_steps"], batch=64, lr=3e-3, weight_decay=1e-9, eval_every=50, target_accuracy=0.999
    )
    twins = ctx.sweep("twin", task, ModelShape(), twin_cfg)
    lstms = ctx.sweep("lstm", task, default_shape(task, "lstm"), lstm_cfg)
    # Only twins that learned the task say anything about shortcuts; a quick run keeps them all.
    held_out = {r["seed"]: r["final_accuracy"] for r in twins["runs"]}
    learned = [s for s in ctx.seeds if held_out[s] >= LEARNED or ctx.quick] or list(ctx.seeds)
    ctx.data("twins_learned", {"seeds": learned, "held_out": held_out, "threshold": LEARNED})
    models = {f"twin {s}": load_trained(d) for s, d in ctx.run_dirs("twin", learned).items()}
    models.update({f"lstm {s}": load_trained(d) for s, d in ctx.run_dirs("lstm").items()})
    exact = skyline(next(iter(models.values())), T)
    if exact is not None:
        models[exact.card.construction] = exact

    uniform = 1.0 / a.n_symbols
    ps = sorted(set(PS) | {uniform})
    others = a.n_symbols - 1

    def law(p: float) -> list[float]:
        return [p if i == COUNT_SYMBOL else (1 - p) / others for i in range(a.n_symbols)]

    counts = sorted(set(np.linspace(0, T, sc["counts"]).round().astype(int).tolist()))
    shifts = [Shift(f"Pr[{sym}] = {p:g}", "automaton", {"length": T, "probs": law(p), "p": p}) for p in ps]
    shifts += automaton_shifts(a, T, counts=counts, count_symbol=COUNT_SYMBOL)[1:]
    rows = evaluate(models, shifts, samples=sc["samples"], seed=ExperimentSeed.PARITY_OOD_EVALUATION)
    ctx.data("evaluation", rows)

    def series(prefix: str, key: str, by: str) -> tuple[list[float], list[float], list[float]]:
        xs, means, ses = [], [], []
        for s in shifts:
            if (by == "p") != ("p" in s.params):
                continue
            vals = [r[key] for r in rows if r["shift"] == s.label and r["model"].startswith(prefix)]
            m, se = mean_se(vals)
            xs.append(s.params["p"] if by == "p" else s.params["count"])
            means.append(m), ses.append(se)
        return xs, means, ses

    names = {"twin": "twins", "lstm": "LSTMs"}
    curves = {who: {by: series(who + " ", "accuracy", by) for by in ("p", "count")} for who in names}
    if exact is not None:
        curves["exact"] = {by: series(exact.card.construction, "accuracy", by) for by in ("p", "count")}
    ctx.data("curves", curves)
    _figure(ctx, curves, a.name, sym, T, uniform, exact.card.construction if exact else None)

    table = []
    for s in shifts:
        line = [s.label]
        for who in ("twin ", "lstm ", exact.card.construction if exact else None):
            if who is None:
                continue
            vals = [r for r in rows if r["shift"] == s.label and r["model"].startswith(who)]
            line += [np.mean([r["accuracy"] for r in vals]), np.mean([r["final_accuracy"] for r in vals])]
        table.append(line)
    cols = ["shift", "twins: accuracy", "twins: final", "LSTMs: accuracy", "LSTMs: final"]
    if exact is not None:
        cols += [f"{exact.card.construction}: accuracy", f"{exact.card.construction}: final"]
    ctx.table(
        "Accuracy under shift (mean over seeds; 'final' is the state after the whole word)",
        cols,
        table,
        note=f"{sc['samples']} words per shift, the same words for every model.",
    )

    probe = _count_probe(ctx, a, T, sc["probe_words"], exact, learned)
    _claims(ctx, a, sym, T, uniform, curves, twins, lstms, rows, exact, probe, learned)


def _figure(ctx: Context, curves: dict, name: str, sym: str, T: int, uniform: float, exact: str | None) -> None:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 3.6))
    axes = fig.subplots(1, 2)
    styles = {"twin": ("C0", "o", "twins (mean ± s.e.)"), "lstm": ("C1", "s", "LSTMs"), "exact": ("k", "", exact or "")}
    for ax, by in zip(axes, ("p", "count")):
        for who, (colour, marker, label) in styles.items():
            if who not in curves:
                continue
            xs, m, se = curves[who][by]
            ax.errorbar(
                xs,
                m,
                yerr=se,
                color=colour,
                marker=marker or None,
                ls="--" if who == "exact" else "-",
                label=label,
                capsize=2,
                ms=4,
            )
        ax.axhline(1 / 2 if name == "parity" else 0, color="0.7", lw=0.8, ls=":")
        ax.set_ylim(-0.02, 1.02)
        ax.set_ylabel("accuracy (every position)")
        ax.grid(alpha=0.3)
    axes[0].axvline(uniform, color="0.6", lw=0.8)
    axes[0].set_xlabel(f"test Pr[σ = {sym}] (training: {uniform:g})")
    axes[1].axvline(T * uniform, color="0.6", lw=0.8)
    axes[1].set_xlabel(f"number of {sym}s in the word (T = {T}; training mean {T * uniform:g})")
    axes[0].legend(fontsize=8, loc="lower center")
    fig.suptitle(f"{name}: twins trained on uniform words, tested off the training law")
    ctx.figure(
        "accuracy_under_shift",
        fig,
        "Accuracy at every position against the test probability of the counted "
        "symbol (left) and against its number of occurrences (right). Grey line: the training law; dotted: "
        "chance for parity.",
    )


def _count_probe(ctx: Context, a, T: int, n_words: int, exact, seeds: list[int]) -> dict[str, Any]:
    """Held-out accuracy of a linear probe for the running count of the counted symbol, per hook."""

    words = step_rng(ExperimentSeed.PARITY_OOD_PROBE_WORDS, 0, Stream.PROBE_WORDS).integers(
        a.n_symbols, size=(n_words, T)
    )
    running = np.cumsum(words == COUNT_SYMBOL, axis=1)
    chance = float(np.bincount(running.ravel()).max() / running.size)
    per_model: dict[str, dict[str, float]] = {}
    state: dict[str, dict[str, float]] = {}
    loaded = {f"twin {s}": load_trained(d) for s, d in ctx.run_dirs("twin", seeds).items()}
    if exact is not None:
        loaded[exact.card.construction] = exact
    for name, model in loaded.items():
        tokens, labels, mask = automaton_probe_data(model, a, words, latent=lambda states: running)
        per_model[name] = probe_accuracy(model, tokens, labels, mask, seed=ExperimentSeed.PROBE_SPLIT)
        tokens, labels, mask = automaton_probe_data(model, a, words)
        state[name] = probe_accuracy(model, tokens, labels, mask, seed=ExperimentSeed.PROBE_SPLIT)
    hooks = list(next(iter(per_model.values())))
    twin_names = [n for n in per_model if n.startswith("twin ")]
    rows = []
    for h in hooks:
        count_vals = [per_model[n][h] for n in twin_names]
        state_vals = [state[n][h] for n in twin_names]
        rows.append(
            [
                h,
                float(np.mean(count_vals)),
                float(np.min(count_vals)),
                float(np.max(count_vals)),
                float(np.mean(state_vals)),
            ]
        )
    ctx.table(
        "Linear probes on the twins (held-out accuracy, mean / min / max over seeds)",
        ["hook", "running count: mean", "min", "max", "state: mean"],
        rows,
        note=f"Probe words: {n_words} uniform words of length {T} (70% train, 30% test), logistic regression. "
        f"Chance for the count (majority class) {chance:.3f}.",
    )
    best = {n: max(v.values()) for n, v in per_model.items()}

    def first(table: dict[str, dict[str, float]]) -> str | None:  # first hook where the twins' mean reaches 0.9
        return next((h for h in hooks if np.mean([table[n][h] for n in twin_names]) >= READABLE), None)

    order = {"count": first(per_model), "state": first(state)}
    ctx.data(
        "count_probe",
        {
            "per_model": per_model,
            "state_probe": state,
            "chance": chance,
            "best": best,
            "first_readable": order,
            "readable_at": READABLE,
        },
    )
    return {"best": best, "chance": chance, "twins": twin_names, "order": order, "hooks": hooks}


#: Each verdict's rule (changes after a run are in docs/deviations.md, with the way they moved a verdict). The
#: thesis gives no numbers for Fig. 3.20: "degrades sharply" is read as a drop of at least 0.10 in accuracy. The shifts a drop is measured at are named in advance
#: (the most extreme probabilities, the most extreme counts with more than one word), so no maximum over
#: shifts is taken and no null of a maximum is needed.
RULES = {
    "drop_p": Rule(
        f"accuracy at the training law − mean accuracy at Pr[σ] ∈ {{{PS[0]}, {PS[-1]}}}, per learned twin",
        "above",
        DROP_REPRODUCED,
    ),
    "drop_count": Rule(
        "accuracy at the training law − mean accuracy at the lowest and highest tested counts that have "
        "more than one word, per learned twin",
        "above",
        DROP_REPRODUCED,
    ),
    "low_counts": Rule(
        "accuracy at the high count − at the mirrored low count (c and T − c, the most extreme with more "
        "than one word), per learned twin",
        "above",
        0.0,
    ),
    # the thesis's claim is a size ("stays perfect"), not only a direction: the LSTM's own worst accuracy must stay
    # near 1 (until 2026-11-26 the rule asked only that LSTMs degrade less than the twins; docs/deviations.md)
    "lstm": Rule("worst accuracy over every shift, per LSTM", "above", 0.95, null=0.5),
    "exact": exactness_rule("wrong states of the construction over every shifted word"),
}


def _claims(
    ctx: Context, a, sym: str, T: int, uniform: float, curves, twins, lstms, rows, exact, probe, seeds: list[int]
) -> None:
    by_seed = {r["seed"]: r["final_accuracy"] for r in twins["runs"]}
    trained = float(np.mean([by_seed[s] for s in seeds]))
    learned = trained >= LEARNED
    floor = None if learned else f"the twins did not learn {a.name} at T = {T} (held-out {trained:.3f} < {LEARNED})"
    labels = {r["shift"] for r in rows}

    def acc(model: str, label: str) -> float:
        return next(r["accuracy"] for r in rows if r["model"] == model and r["shift"] == label)

    law = next(lb for lb in labels if lb == f"Pr[{sym}] = {uniform:g}")
    extremes_p = [f"Pr[{sym}] = {p:g}" for p in (PS[0], PS[-1])]
    twin_names = [f"twin {s}" for s in seeds]
    lstm_names = sorted({r["model"] for r in rows if r["model"].startswith("lstm ")})

    def drop(name: str, at: list[str]) -> float:
        return acc(name, law) - float(np.mean([acc(name, lb) for lb in at]))

    drops_p = [drop(n, extremes_p) for n in twin_names]
    ctx.rule(
        f"A twin trained on uniform words degrades as the test Pr[{sym}] moves away from training",
        "degrades sharply (Fig. 3.20; mean ± s.e. over 25 replicates, T = 40, no numbers in the text)",
        RULES["drop_p"],
        estimate(drops_p),
        f"{len(seeds)} of {len(twins['runs'])} twins "
        f"{'kept (a quick run keeps every twin)' if ctx.quick else 'learned'} (held-out {trained:.3f}); accuracy "
        f"{np.mean([acc(n, law) for n in twin_names]):.3f} at the training law, "
        f"{np.mean([np.mean([acc(n, lb) for lb in extremes_p]) for n in twin_names]):.3f} at Pr[{sym}] ∈ "
        f"{{{PS[0]}, {PS[-1]}}}",
        floor=floor,
    )
    ctx.data("drop_by_p", float(np.mean(drops_p)))
    _count_claims(ctx, rows, twin_names, sym, T, uniform, floor, acc, drop)
    lstm_drops = [drop(n, extremes_p) for n in lstm_names]
    lstm_trained = float(np.mean([r["final_accuracy"] for r in lstms["runs"]]))
    worst = [min(r["accuracy"] for r in rows if r["model"] == name) for name in lstm_names]
    ctx.rule(
        "The LSTM stays correct off the training law",
        "stays perfect (Fig. 3.20)",
        RULES["lstm"],
        estimate(worst),
        f"{len(lstm_names)} LSTMs (held-out {lstm_trained:.3f}): worst accuracy over every shift and seed "
        f"{min(r['accuracy'] for r in rows if r['model'].startswith('lstm ')):.4f}; mean drop "
        f"{np.mean(lstm_drops):.3f} (twins {np.mean(drops_p):.3f})",
        floor=floor,
    )
    if exact is not None:
        wrong = sum(round((1 - r["accuracy"]) * r["scored"]) for r in rows if r["model"] == exact.card.construction)
        n_shifts = sum(r["model"] == exact.card.construction for r in rows)
        ctx.rule(
            f"The construction ({exact.card.construction}) is exact on every shift",
            "exact for every input (Lemma 15 / the construction's theorem)",
            RULES["exact"],
            count(wrong),
            f"{wrong} wrong states over {n_shifts} shifts",
        )
    ctx.data("twin_held_out", trained)
    best = probe["best"]
    twin_best = [best[n] for n in probe["twins"]]
    count_text = (
        f"the running count of {sym}s is linearly readable from the twins' residual stream at best "
        f"{np.mean(twin_best):.3f} on average (min {np.min(twin_best):.3f}; chance {probe['chance']:.3f})"
    )
    if exact is not None:
        count_text += f"; from {exact.card.construction}'s at {best[exact.card.construction]:.3f}"
    order, hooks = probe["order"], probe["hooks"]
    if order["count"] and order["state"] and hooks.index(order["count"]) < hooks.index(order["state"]):
        how = (
            f" The count is readable (mean ≥ {READABLE}) from {order['count']}, the state only from "
            f"{order['state']}: the order of Lemma 15's count-then-mod in what a probe can read. A probe shows a "
            f"latent is readable, not that the twin uses it (interp align tests that by interchange)."
        )
    elif order["count"] and order["state"]:
        how = (
            f" The count (from {order['count']}) is not readable before the state (from {order['state']}): the "
            f"probes do not show a count-then-mod order."
        )
    else:
        how = (
            f" The count is readable (mean ≥ {READABLE}) at {order['count'] or 'no hook'}, the state at "
            f"{order['state'] or 'no hook'}."
        )
    ctx.conclude(count_text + "." + how)
    if learned:
        ctx.conclude(
            f"Trained at the uniform law, the twins lose {ctx.numbers['drop_by_p']:.3f} of accuracy at the "
            f"most extreme tested probabilities"
            + (
                f" and {ctx.numbers['drop_by_count']:.3f} at the most extreme counts"
                if "drop_by_count" in ctx.numbers
                else ""
            )
            + f", the LSTMs {np.mean(lstm_drops):.3f}"
            + (" and the construction is exact." if exact else ".")
        )
    else:
        ctx.conclude(
            f"The twins did not learn {a.name} at this scale (held-out {trained:.3f}); their behaviour under "
            f"shift says nothing about shortcuts."
        )
    if not ctx.quick:
        ctx.caveat(
            f"Scale: T = {T} (the thesis trains at T = 40 with 512-wide, 8-head models); our 2-layer, width-64 "
            f"twin does not learn parity at T = 40 within 1000 steps (held-out 0.56 in a trial run), so the "
            f"population is trained at T = 20. {len(twins['runs'])} seeds"
            + ("." if len(twins["runs"]) >= 25 else ", not 25.")
        )
    ctx.caveat(
        "Accuracy is over every position; the table also gives the final position's (the state after the "
        "whole word), which is where a count that was never seen in training matters most."
    )


def _count_claims(
    ctx: Context,
    rows: list[dict],
    twin_names: list[str],
    sym: str,
    T: int,
    uniform: float,
    floor: str | None,
    acc,
    drop,
) -> None:
    """Fig. 3.20 right: the drop at the most extreme counts with more than one word, and low vs high counts."""
    count_label = {int(r["count"]): r["shift"] for r in rows if "count" in r}
    inner = sorted(c for c in count_label if 0 < c < T)  # k = 0 and k = T are one word each, repeated
    drop_claim = (
        f"…and as the number of {sym}s moves away from the training mean",
        "degrades as the count moves away from the expected number during training (Fig. 3.20 right)",
    )
    low_claim = (
        "Twins fail more at low counts than at high ones",
        "GPT fails more at lower counts (count–position correlation in training)",
    )
    if len(inner) < 2:  # every claim keeps its row: one this run cannot test says so
        why = f"fewer than two counts with more than one word were tested at T = {T}"
        for (claim, thesis), key in ((drop_claim, "drop_count"), (low_claim, "low_counts")):
            ctx.rule(claim, thesis, RULES[key], estimate([]), "not measured", floor=why)
        return
    c_lo, c_hi = inner[0], inner[-1]
    at = [count_label[c_lo], count_label[c_hi]]
    drops_c = [drop(n, at) for n in twin_names]
    ctx.rule(
        *drop_claim,
        RULES["drop_count"],
        estimate(drops_c),
        f"accuracy {np.mean([acc(n, at[0]) for n in twin_names]):.3f} with {c_lo} and "
        f"{np.mean([acc(n, at[1]) for n in twin_names]):.3f} with {c_hi} {sym}s (T = {T}; training mean "
        f"{T * uniform:g})",
        floor=floor,
    )
    ctx.data("drop_by_count", float(np.mean(drops_c)))
    mirrored = [c for c in inner if c < T - c and (T - c) in count_label]
    if not mirrored:
        ctx.rule(
            *low_claim,
            RULES["low_counts"],
            estimate([]),
            "not measured",
            floor=f"no count c was tested beside its mirror T − c at T = {T}",
        )
    else:
        lo, hi = mirrored[0], T - mirrored[0]
        gap = [acc(n, count_label[hi]) - acc(n, count_label[lo]) for n in twin_names]
        ctx.rule(
            *low_claim,
            RULES["low_counts"],
            estimate(gap),
            f"accuracy with {hi} {sym}s minus with {lo}, per twin: {', '.join(f'{g:+.3f}' for g in gap)}",
            floor=floor,
        )
