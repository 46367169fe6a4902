"""``pe-at-2t`` — thesis §3.4.5.2.4, Fig. 3.22: sinusoidal against linear position codes at twice the training
length.

"While having similar or even superior in-distribution performance (on sequences of length T = 40), sinusoidal
positional encoding may suffer a larger generalization gap than linear positional encoding when testing on length
2T" — on Grid₉ both codes reach comparable accuracy in distribution, "however the sinusoidal encoding performs
significantly worse when tested on sequences of doubled length".

Twins of the default automaton shape with fixed sinusoidal positions and with linear positions (p_i ∝ i) are
trained on the 1-D gridworld (``grid9``; any catalogue automaton with ``--automaton``) at length T, with a context
of 2T, and tested on fresh words of length T and 2T (the same words for every twin). A twin's *gap* is its
accuracy at T minus at 2T; the claim is ruled on the sinusoidal twins' mean gap minus the linear twins', over the
twins that learned the task (held-out accuracy ≥ :data:`LEARNED`).

The figure's other half, partially observed (abab)*: "sinusoidal has a clear advantage" in distribution, but at 2T
"the performance gap … shrinks significantly". The catalogue's ``abab`` recogniser observed as accepting, trained
on the thesis's second law (``--periodic a,b:0.5``: the alternating word half the time, else a uniform a/b word; the
first law, one word only, leaves nothing to test) by the same two populations, and every twin scored on fresh words
of that law at T and 2T. Ruled on the sinusoidal twins' mean accuracy at T minus the linear twins' (the advantage),
and on the advantage at T minus at 2T (the shrinking — the same statistic as Grid₉'s, the difference of mean gaps),
over every twin: here learning is itself the claim.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from sandbox_lens.interp.evaluate import automaton_shifts, evaluate
from sandbox_lens.interp.experiments.base import Context
from sandbox_lens.interp.experiments.rules import Rule
from sandbox_lens.interp.model.run import predict
from sandbox_lens.interp.stats import Estimate, difference, estimate
from sandbox_lens.interp.streams import ExperimentSeed, Stream, rng
from sandbox_lens.interp.tasks.batches import AutomatonTask
from sandbox_lens.interp.tasks.catalogue import get_automaton
from sandbox_lens.interp.train import TrainConfig, default_shape, load_trained

SEEDS, QUICK_SEEDS = tuple(range(10)), (0, 1)
CODES = ("sinusoidal", "linear")
LEARNED = 0.95  # held-out accuracy at T a twin needs for its gap to count
#: the smallest difference of gaps (sinusoidal − linear) that counts as "significantly worse"
WORSE = 0.05

#: the (abab)* half: the catalogue automaton, its observation (accepting) and the thesis's second word law
ABAB, ACCEPT, LAW = "abab", (0, 0, 0, 1, 0), ((0, 1), 0.5)
#: the smallest advantage of sinusoidal over linear positions, and of its shrinking, that counts ("clear",
#: "significantly")
ADVANTAGE = 0.05

RULES = {
    "abab advantage at T": Rule(
        "(abab)*: mean accuracy at T, sinusoidal twins − linear twins (every twin)",
        "above",
        ADVANTAGE,
        null=0.0,
        min_n=3,
        unit="twins",
    ),
    "abab shrinks at 2T": Rule(
        "(abab)*: the advantage at T − the advantage at 2T, i.e. gap (T − 2T): sinusoidal − linear (every twin)",
        "above",
        ADVANTAGE,
        null=0.0,
        min_n=3,
        unit="twins",
    ),
    "worse at 2T": Rule(
        "accuracy gap (at T − at 2T): sinusoidal twins − linear twins (difference of means over learned twins)",
        "above",
        WORSE,
        null=0.0,
        min_n=3,
        unit="twins",
    ),
}


def _scale(quick: bool) -> dict[str, Any]:
    if quick:
        return {"length": 8, "steps": 60, "samples": 32}
    return {"length": 32, "steps": 2000, "samples": 400}


def check(options: dict[str, Any]) -> None:
    """Refuse an automaton the catalogue does not have, in one line, before ``--out`` is claimed."""
    get_automaton(options["automaton"])


def gaps(rows: list[dict[str, Any]], code: str, learned_only: bool = True) -> list[float]:
    """Per twin of ``code``: accuracy at T − at 2T (only twins whose held-out accuracy is ≥ :data:`LEARNED`)."""
    return [
        r["at_T"] - r["at_2T"] for r in rows if r["code"] == code and (r["held_out"] >= LEARNED or not learned_only)
    ]


def gap_difference(rows: list[dict[str, Any]], learned_only: bool = True) -> Estimate:
    """The sinusoidal twins' mean gap − the linear twins' (learned twins, or every twin), with its interval."""
    return difference(
        gaps(rows, "sinusoidal", learned_only), gaps(rows, "linear", learned_only), labels=CODES, unit="twins"
    )


def advantage_at_t(rows: list[dict[str, Any]]) -> Estimate:
    """Mean accuracy at T of the sinusoidal twins − of the linear twins (every twin), with its interval."""
    at = {c: [r["at_T"] for r in rows if r["code"] == c] for c in CODES}
    return difference(at["sinusoidal"], at["linear"], labels=CODES, unit="twins")


def run(ctx: Context) -> None:
    """Train both populations on each half (or reuse finished runs), test every twin at T and 2T, rule."""
    sc = _scale(ctx.quick)
    a = get_automaton(ctx.options["automaton"])
    T = sc["length"]
    config = TrainConfig(steps=sc["steps"], batch=32, lr=1e-3, eval_every=100, target_accuracy=0.999)
    shifts = automaton_shifts(a, T)[:1] + automaton_shifts(a, 2 * T)[:1]
    rows: list[dict[str, Any]] = []
    for code in CODES:
        task = AutomatonTask(a, T)
        summary = ctx.sweep(code, task, _shape(task, code, T), config)
        held_out = {r["seed"]: r["final_accuracy"] for r in summary["runs"]}
        models = {f"{code} {s}": load_trained(d) for s, d in ctx.run_dirs(code).items()}
        measured = evaluate(models, shifts, samples=sc["samples"], seed=ExperimentSeed.PE_AT_2T_WORDS)
        for s in ctx.seeds:
            at = [next(r for r in measured if r["model"] == f"{code} {s}" and r["shift"] == sh.label) for sh in shifts]
            rows.append(
                {
                    "code": code,
                    "seed": s,
                    "held_out": held_out[s],
                    "at_T": at[0]["accuracy"],
                    "at_2T": at[1]["accuracy"],
                }
            )
    ctx.data("twins", rows)
    _report(ctx, rows, a.name, T, sc)
    abab = _abab_rows(ctx, config, T, sc["samples"])
    ctx.data("abab_twins", abab)
    _report_abab(ctx, abab, T, sc)


def _shape(task: Any, code: str, T: int) -> Any:
    return replace(default_shape(task), positional=code, n_ctx=2 * T + 1)


def _abab_rows(ctx: Context, config: Any, T: int, samples: int) -> list[dict[str, Any]]:
    """The (abab)* half: both populations trained on the observed recogniser under the thesis's second law, every
    twin scored on the same fresh words of that law at T and at 2T."""
    a = get_automaton(ABAB)
    rows = []
    tests = [
        AutomatonTask(a, L, observe=ACCEPT, periodic=LAW).batch(
            rng(ExperimentSeed.PE_AT_2T_WORDS, Stream.EVALUATION, L), samples
        )
        for L in (T, 2 * T)
    ]
    for code in CODES:
        task = AutomatonTask(a, T, observe=ACCEPT, periodic=LAW)
        summary = ctx.sweep(f"{ABAB}/{code}", task, _shape(task, code, T), config)
        held_out = {r["seed"]: r["final_accuracy"] for r in summary["runs"]}
        for s, d in ctx.run_dirs(f"{ABAB}/{code}").items():
            twin = load_trained(d)
            at = [float((predict(twin, b.tokens[:, 1:] - 1) == b.targets[:, 1:]).mean()) for b in tests]
            rows.append({"code": code, "seed": s, "held_out": held_out[s], "at_T": at[0], "at_2T": at[1]})
    return rows


def _report(ctx: Context, rows: list[dict[str, Any]], name: str, T: int, sc: dict[str, Any]) -> None:
    table = []
    for code in CODES:
        mine = [r for r in rows if r["code"] == code]
        learned = [r for r in mine if r["held_out"] >= LEARNED]
        table.append(
            [
                code,
                f"{len(learned)}/{len(mine)}",
                estimate([r["at_T"] for r in learned]).text("{:.3f}") if learned else "—",
                estimate([r["at_2T"] for r in learned]).text("{:.3f}") if learned else "—",
                estimate(gaps(rows, code)).text("{:.3f}") if learned else "—",
            ]
        )
    ctx.table(
        f"{name}: accuracy at the training length T = {T} and at 2T = {2 * T} (learned twins; mean [95% interval])",
        ["positions", f"learned (held-out ≥ {LEARNED:g})", "at T", "at 2T", "gap (T − 2T)"],
        table,
        note=f"{sc['samples']} fresh words per length, the same for every twin; both codes have a context of 2T.",
    )
    ctx.table(
        "Per twin",
        ["positions", "seed", "held-out", "at T", "at 2T"],
        [[r["code"], r["seed"], f"{r['held_out']:.3f}", f"{r['at_T']:.3f}", f"{r['at_2T']:.3f}"] for r in rows],
    )
    e = gap_difference(rows)
    floor = None
    if min(len(gaps(rows, c)) for c in CODES) < RULES["worse at 2T"].min_n:
        floor = "too few twins of one code learned the task at T"
    ctx.rule(
        "Sinusoidal positions generalise worse to 2T than linear ones",
        "sinusoidal encoding performs significantly worse on doubled length, with comparable in-distribution "
        "accuracy (Fig. 3.22, Grid₉, trained at T = 40)",
        RULES["worse at 2T"],
        e,
        "mean gap sinusoidal "
        + (f"{np.mean(gaps(rows, 'sinusoidal')):.3f}" if gaps(rows, "sinusoidal") else "—")
        + ", linear "
        + (f"{np.mean(gaps(rows, 'linear')):.3f}" if gaps(rows, "linear") else "—"),
        floor=floor,
    )
    _figure(ctx, rows, T)
    ctx.conclude(
        "Mean accuracy at T / at 2T over every twin, learned or not: "
        + "; ".join(
            f"{code} {np.mean([r['at_T'] for r in rows if r['code'] == code]):.3f} / "
            f"{np.mean([r['at_2T'] for r in rows if r['code'] == code]):.3f}"
            for code in CODES
        )
        + "."
    )
    ctx.caveat(
        f"Trained at T = {T}, not the thesis's 40; one shape (the default automaton twin); (abab)* under the "
        "thesis's second law only (the first is one word)."
    )


def _report_abab(ctx: Context, rows: list[dict[str, Any]], T: int, sc: dict[str, Any]) -> None:
    ctx.table(
        f"(abab)*, observed as accepting, words half abab…: accuracy at T = {T} and 2T = {2 * T} (every twin; mean "
        "[95% interval])",
        ["positions", f"held-out ≥ {LEARNED:g}", "at T", "at 2T", "gap (T − 2T)"],
        [
            [
                code,
                f"{sum(r['held_out'] >= LEARNED for r in rows if r['code'] == code)}/{sum(r['code'] == code for r in rows)}",
                estimate([r["at_T"] for r in rows if r["code"] == code]).text("{:.3f}"),
                estimate([r["at_2T"] for r in rows if r["code"] == code]).text("{:.3f}"),
                estimate(gaps(rows, code, learned_only=False)).text("{:.3f}"),
            ]
            for code in CODES
        ],
        note=f"{sc['samples']} fresh words of the training law per length, the same for every twin.",
    )
    mean = {c: {k: np.mean([r[k] for r in rows if r["code"] == c]) for k in ("at_T", "at_2T")} for c in CODES}
    ctx.rule(
        "Sinusoidal positions learn (abab)* better than linear ones",
        "on partially observed (abab)*, sinusoidal has a clear advantage in distribution (Fig. 3.22; learning is "
        "challenging for linear encodings, easy for sinusoidal ones)",
        RULES["abab advantage at T"],
        advantage_at_t(rows),
        f"mean accuracy at T: sinusoidal {mean['sinusoidal']['at_T']:.3f}, linear {mean['linear']['at_T']:.3f}",
    )
    ctx.rule(
        "The sinusoidal advantage on (abab)* shrinks at 2T",
        "at 2T the performance gap between the encodings shrinks significantly (Fig. 3.22)",
        RULES["abab shrinks at 2T"],
        gap_difference(rows, learned_only=False),
        f"advantage at T {mean['sinusoidal']['at_T'] - mean['linear']['at_T']:+.3f}, at 2T "
        f"{mean['sinusoidal']['at_2T'] - mean['linear']['at_2T']:+.3f}",
    )


def _figure(ctx: Context, rows: list[dict[str, Any]], T: int) -> None:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6, 3.4))
    ax = fig.subplots()
    for i, code in enumerate(CODES):
        for r in (r for r in rows if r["code"] == code):
            ax.plot([0, 1], [r["at_T"], r["at_2T"]], color=f"C{i}", alpha=0.6, marker="o", ms=3)
        ax.plot([], [], color=f"C{i}", label=code)
    ax.set_xticks([0, 1], [f"T = {T}", f"2T = {2 * T}"])
    ax.set(ylabel="accuracy", title="Every twin at the training length and at twice it")
    ax.legend(fontsize=8)
    ctx.figure("pe-at-2t", fig, "One line a twin: accuracy at T and at 2T, by position code.")
