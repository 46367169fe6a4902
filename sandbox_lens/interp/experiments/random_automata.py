"""``random-automata`` — random permutation semiautomata: exact decorrelation, final-state against every-prefix
supervision, and the constructions beside them (the issue's reading of arXiv 2510.04115).

Three parts, on random permutation automata from the catalogue (``random<n>-<k>-<seed>``: n points, k symbols,
each a uniform random permutation, q0 = 0):

(a) **Exact, no training.** Two independent random automata with the same alphabet read the same uniform random
    word; their pair of states is a Markov chain on n² states (the *pair chain*: symbol σ moves (a, b) to
    (δ_A(σ, a), δ_B(σ, b))). Its distribution after T symbols is computed exactly; the *dependence* of the two
    final states is the total-variation distance between that joint distribution and the product of its
    marginals. Where it falls to 0, the final state of one random automaton says nothing of another's: a learner
    that only sees final states gets no signal from what it already fits of a nearby automaton (the
    statistical-query argument behind the paper's hardness claim, as the issue states it).
(b) **Twins.** Transformers of the default automaton shape trained on one random automaton each, with the loss on
    the final state only (``--supervision final``) or on every prefix's state (the default), at two lengths; the
    score is held-out accuracy on the *final* state, beside the best constant guess (the most likely final
    state, exact from the chain).
(c) **Constructions.** For every trained instance, the prefix scan (Theorem 10) built and verified at the longest
    length, and the Krohn–Rhodes cascade (Theorem 11) where the group the symbols generate is solvable (the
    builder refuses the rest, and its reason is recorded).

The paper's own numbers are not in this project's references: what is ruled here is the direction the issue
gives (random automata decorrelate; final-state supervision is harder than every-prefix supervision; the
constructions are exact on every instance), with thresholds stated in :data:`RULES`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sandbox_lens.constructions.registry import build
from sandbox_lens.interp.errors import ConstructionError
from sandbox_lens.interp.experiments.base import Context
from sandbox_lens.interp.experiments.rules import Rule, count, exactness_rule
from sandbox_lens.interp.model.run import predict
from sandbox_lens.interp.stats import Estimate, estimate, share
from sandbox_lens.interp.streams import ExperimentSeed
from sandbox_lens.interp.tasks.automata import Semiautomaton
from sandbox_lens.interp.tasks.batches import AutomatonTask
from sandbox_lens.interp.tasks.catalogue import get_automaton
from sandbox_lens.interp.train import TrainConfig, default_shape, load_trained
from sandbox_lens.interp.verify import verify

SEEDS, QUICK_SEEDS = (0,), (0,)
#: (a): the dependence a pair must fall below, and by when
DECORRELATED, HORIZON = 0.01, 64
#: (b): every-prefix twins must reach this mean final-state accuracy for the comparison to say anything
LEARNED = 0.9
#: (b): the smallest mean accuracy gap (every prefix − final state only) that counts as "harder"
GAP = 0.1
#: the automata of (a) and (b) are catalogue names random<n>-<k>-<seed>: (a)'s pairs take seeds from here on
PAIR_SEED_BASE = 1000

RULES = {
    "decorrelate": Rule(
        f"share of random pairs whose final states' dependence (TV from independence) is below {DECORRELATED:g} "
        f"by the horizon (T = {HORIZON} at full scale)",
        "above",
        0.9,
        null=0.0,
        min_n=10,
        unit="pairs",
    ),
    "harder": Rule(
        "final-state accuracy at the longest length, every-prefix twin − final-state-only twin (mean over automata)",
        "above",
        GAP,
        null=0.0,
        min_n=3,
        unit="automata",
    ),
    "scan exact": exactness_rule("trained instances on which the prefix scan construction is not exact"),
}


def _scale(quick: bool) -> dict[str, Any]:
    if quick:
        return {
            "pair_points": (3, 4),
            "pairs": 10,
            "horizon": 16,
            "points": (3,),
            "lengths": (4, 8),
            "automata": 2,
            "steps": 60,
            "words": 64,
        }
    return {
        "pair_points": (3, 4, 5, 6),
        "pairs": 50,
        "horizon": HORIZON,
        "points": (3, 5),
        "lengths": (8, 16),
        "automata": 5,
        "steps": 4000,
        "words": 500,
    }


def check(options: dict[str, Any]) -> None:
    """Nothing to check: the experiment takes no task option."""


# -- (a) exact ---------------------------------------------------------------------------------------------------
def pair_distributions(a: Semiautomaton, b: Semiautomaton, horizon: int) -> np.ndarray:
    """The exact joint distribution of (state of ``a``, state of ``b``) after T = 0..``horizon`` uniform random
    symbols read by both, ``[horizon + 1, n_a, n_b]`` (the pair chain started at (q0_a, q0_b))."""
    if a.n_symbols != b.n_symbols:
        raise ValueError(f"a pair chain needs one alphabet size, got {a.n_symbols} and {b.n_symbols}")
    k = a.n_symbols
    p = np.zeros((a.n_states, b.n_states))
    p[a.initial, b.initial] = 1.0
    out = [p]
    for _ in range(horizon):
        nxt = np.zeros_like(p)
        for s in range(k):
            np.add.at(nxt, (a.delta[s][:, None], b.delta[s][None, :]), p / k)
        p = nxt
        out.append(p)
    return np.stack(out)


def dependence(joint: np.ndarray) -> np.ndarray:
    """Total-variation distance between each joint distribution ``[..., n_a, n_b]`` and the product of its own
    marginals (0 exactly when the two states are independent)."""
    product = joint.sum(-1, keepdims=True) * joint.sum(-2, keepdims=True)
    return 0.5 * np.abs(joint - product).sum(axis=(-2, -1))


def length_determined(joint: np.ndarray) -> bool:
    """Whether either automaton's state is a function of T alone (a point mass at every T: its symbols all act
    alike on the states it reaches) — such a state is trivially independent of anything, so the pair says
    nothing about decorrelation."""
    tol = 1e-12
    return bool((joint.sum(-1).max(-1) > 1 - tol).all() or (joint.sum(-2).max(-1) > 1 - tol).all())


def decorrelation_length(curve: np.ndarray, eps: float = DECORRELATED) -> int | None:
    """The first T from which the dependence stays at or below ``eps`` to the end of ``curve`` (None: never)."""
    above = np.nonzero(curve > eps)[0]
    if len(above) == 0:
        return 0
    first = int(above[-1]) + 1
    return first if first < len(curve) else None


def final_state_distribution(a: Semiautomaton, length: int) -> np.ndarray:
    """The exact distribution of the state after ``length`` uniform random symbols."""
    p = np.zeros(a.n_states)
    p[a.initial] = 1.0
    for _ in range(length):
        p = np.mean([np.bincount(a.delta[s], weights=p, minlength=a.n_states) for s in range(a.n_symbols)], axis=0)
    return p


def group_order(a: Semiautomaton, cap: int = 50_000) -> int | None:
    """The order of the permutation group the symbols generate (closure of the generators; None past ``cap``)."""
    gens = [tuple(int(x) for x in a.delta[s]) for s in range(a.n_symbols)]
    identity = tuple(range(a.n_states))
    seen, frontier = {identity}, [identity]
    while frontier:
        nxt = []
        for g in frontier:
            for h in gens:
                gh = tuple(h[i] for i in g)
                if gh not in seen:
                    seen.add(gh)
                    nxt.append(gh)
                    if len(seen) > cap:
                        return None
        frontier = nxt
    return len(seen)


def _pairs(ctx: Context, sc: dict[str, Any]) -> dict[str, Any]:
    """(a): every (n, k) cell's pairs, their dependence curves and decorrelation lengths."""
    cells = []
    for n in sc["pair_points"]:
        for k in sorted({2, n}):
            curves, lengths, determined = [], [], 0
            for i in range(sc["pairs"]):
                seed = PAIR_SEED_BASE + 2 * i
                a = get_automaton(f"random{n}-{k}-{seed}")
                b = get_automaton(f"random{n}-{k}-{seed + 1}")
                joint = pair_distributions(a, b, sc["horizon"])
                if length_determined(joint):
                    determined += 1
                    continue
                curve = dependence(joint)
                curves.append(curve)
                lengths.append(decorrelation_length(curve))
            cells.append(
                {
                    "points": n,
                    "symbols": k,
                    "curves": np.array(curves).tolist(),
                    "lengths": lengths,
                    "length_determined": determined,
                }
            )
    return {"cells": cells, "horizon": sc["horizon"]}


# -- (b) and (c) --------------------------------------------------------------------------------------------------
def instances(n: int, count: int) -> list[Semiautomaton]:
    """(b)'s automata on n points: ``random<n>-2-<i>`` for i = 0, 1, … , skipping those whose state after a word is
    fixed by its length alone (both symbols act alike on the states q0 reaches: nothing to learn), until ``count``.
    Chosen from the automata alone, before any training."""
    out, i = [], 0
    while len(out) < count:
        a = get_automaton(f"random{n}-2-{i}")
        if final_state_distribution(a, 2 * n).max() < 1 - 1e-12:
            out.append(a)
        i += 1
    return out


def final_accuracy(model: Any, a: Semiautomaton, words: np.ndarray) -> float:
    """Held-out accuracy on the state after the whole word."""
    return float((predict(model, words)[:, -1] == a.run(words)[:, -1]).mean())


def _twins(ctx: Context, sc: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    config = TrainConfig(steps=sc["steps"], batch=32, lr=1e-3, eval_every=100, target_accuracy=0.99)
    for n in sc["points"]:
        for a in instances(n, sc["automata"]):
            for T in sc["lengths"]:
                words = a.sample(sc["words"], T, ExperimentSeed.RANDOM_AUTOMATA_WORDS + 100 * n + T)
                chance = float(final_state_distribution(a, T).max())
                row: dict[str, Any] = {"automaton": a.name, "points": n, "length": T, "chance": chance}
                for supervision in ("every", "final"):
                    task = AutomatonTask(a, T, supervision)
                    label = f"{a.name}-T{T}-{supervision}"
                    ctx.sweep(label, task, default_shape(task), config)
                    accs = [final_accuracy(load_trained(d), a, words) for d in ctx.run_dirs(label).values()]
                    row[supervision] = float(np.mean(accs))
                rows.append(row)
    return rows


def _constructions(ctx: Context, sc: dict[str, Any]) -> list[dict[str, Any]]:
    T = max(sc["lengths"])
    out = []
    for n in sc["points"]:
        for a in instances(n, sc["automata"]):
            row: dict[str, Any] = {"automaton": a.name, "group order": group_order(a)}
            for name in ("prefix_scan", "krohn_rhodes"):
                try:
                    v = verify(build(name, a, T), samples=200, exhaustive_upto=min(T, 8))
                    row[name] = {"exact": v.exact, "layers": v.n_layers, "width": v.d_model, "checked": v.checked}
                except ConstructionError as e:
                    row[name] = {"refused": str(e).split(";")[0]}
            out.append(row)
    return out


def run(ctx: Context) -> None:
    """(a) the exact pair chains, (b) the twins (trained or reused), (c) the constructions; rule on each."""
    sc = _scale(ctx.quick)
    pairs = _pairs(ctx, sc)
    ctx.data("pairs", pairs)
    twins = _twins(ctx, sc)
    ctx.data("twins", twins)
    built = _constructions(ctx, sc)
    ctx.data("constructions", built)
    _report_pairs(ctx, pairs)
    _report_twins(ctx, twins, sc)
    _report_constructions(ctx, built, max(sc["lengths"]))
    _figure(ctx, pairs, twins)


def share_decorrelated(lengths: list[int | None]) -> Estimate:
    """The share of pairs that decorrelate within the horizon, with its Wilson interval over pairs."""
    return share([x is not None for x in lengths], "pairs", "share, Wilson interval over pairs")


def accuracy_gaps(rows: list[dict[str, Any]]) -> Estimate:
    """Every-prefix − final-state-only accuracy on the final state, one value per automaton at its longest length."""
    longest = max(r["length"] for r in rows)
    return estimate([r["every"] - r["final"] for r in rows if r["length"] == longest], unit="automata")


def _report_pairs(ctx: Context, pairs: dict[str, Any]) -> None:
    table, every = [], []
    for cell in pairs["cells"]:
        lengths = cell["lengths"]
        every += lengths
        done = [x for x in lengths if x is not None]
        table.append(
            [
                cell["points"],
                cell["symbols"],
                len(lengths),
                cell["length_determined"],
                f"{len(done)}/{len(lengths)}",
                f"{np.median(done):g}" if done else "—",
                f"{min(done)}–{max(done)}" if done else "—",
            ]
        )
    ctx.table(
        f"(a) Two random automata read one word: when do their final states become independent? (exact; T ≤ "
        f"{pairs['horizon']})",
        [
            "points n",
            "symbols k",
            "pairs",
            "left out: a state fixed by T alone",
            f"dependence ≤ {DECORRELATED:g} by the horizon",
            "median T",
            "range of T",
        ],
        table,
        note="dependence = total-variation distance between the pair chain's distribution and the product of its "
        "marginals; 'T' is the first length from which it stays below the threshold. A pair in which one "
        "automaton's state depends on the length alone (its symbols act alike) is left out: such a state is "
        "independent of anything.",
    )
    e = share_decorrelated(every)
    ctx.rule(
        "Random permutation automata decorrelate",
        "the final states of independent random automata become (nearly) independent as T grows, so final-state "
        "labels carry little shared signal (the issue's reading of arXiv 2510.04115)",
        RULES["decorrelate"],
        e,
        f"{sum(x is not None for x in every)} of {len(every)} pairs below {DECORRELATED:g} by T = {pairs['horizon']}",
    )


def _report_twins(ctx: Context, rows: list[dict[str, Any]], sc: dict[str, Any]) -> None:
    ctx.table(
        "(b) Final-state accuracy of twins trained with the loss on every prefix or on the final state only",
        ["automaton", "T", "every prefix", "final state only", "best constant guess"],
        [[r["automaton"], r["length"], f"{r['every']:.3f}", f"{r['final']:.3f}", f"{r['chance']:.3f}"] for r in rows],
        note=f"{sc['words']} held-out words per automaton and length; one twin each, {sc['steps']} steps at most "
        "(the every-prefix twins stop at 99% held-out accuracy).",
    )
    longest = max(r["length"] for r in rows)
    learned = [r["every"] for r in rows if r["length"] == longest]
    floor = None
    if np.mean(learned) < LEARNED:
        floor = (
            f"the every-prefix twins did not learn (mean final-state accuracy {np.mean(learned):.3f} < {LEARNED:g}): "
            "no comparison"
        )
    e = accuracy_gaps(rows)
    ctx.rule(
        "Final-state supervision is harder than every-prefix supervision",
        "twins trained on final states only learn random automata worse than twins trained on every prefix, more so "
        "as T grows",
        RULES["harder"],
        e,
        "per automaton " + ", ".join(f"{v:+.3f}" for v in e.values),
        floor=floor,
    )
    ctx.conclude(
        "Mean final-state accuracy by length — every prefix / final only / best constant: "
        + "; ".join(
            f"T = {T}: {np.mean([r['every'] for r in rows if r['length'] == T]):.3f} / "
            f"{np.mean([r['final'] for r in rows if r['length'] == T]):.3f} / "
            f"{np.mean([r['chance'] for r in rows if r['length'] == T]):.3f}"
            for T in sorted({r["length"] for r in rows})
        )
        + "."
    )
    ctx.caveat(
        "One twin per automaton (the automata are the units); one shape and learning rate; a final-state twin that "
        "would learn with far more steps is not ruled out."
    )


def _report_constructions(ctx: Context, built: list[dict[str, Any]], T: int) -> None:
    def cell(v: dict[str, Any]) -> str:
        if "refused" in v:
            return "refused: " + v["refused"]
        return f"{'exact' if v['exact'] else 'NOT exact'} ({v['layers']} blocks, width {v['width']})"

    ctx.table(
        f"(c) The constructions on every trained automaton, verified at T = {T}",
        ["automaton", "group order", "prefix scan (Thm 10)", "Krohn–Rhodes (Thm 11)"],
        [[b["automaton"], b["group order"], cell(b["prefix_scan"]), cell(b["krohn_rhodes"])] for b in built],
    )
    wrong = sum(not b["prefix_scan"].get("exact", False) for b in built)
    ctx.rule(
        "The prefix scan is exact on every random automaton",
        "Theorem 10 builds an exact log-depth transformer for any semiautomaton",
        RULES["scan exact"],
        count(wrong),
        f"{len(built) - wrong} of {len(built)} exact",
    )
    solvable = [b for b in built if "refused" not in b["krohn_rhodes"]]
    ctx.conclude(
        f"Krohn–Rhodes: {len(solvable)} of {len(built)} trained automata have a solvable group and get the "
        f"constant-depth cascade ({sum(b['krohn_rhodes']['exact'] for b in solvable)} exact); the rest are refused."
    )


def _figure(ctx: Context, pairs: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 3.6))
    left, right = fig.subplots(1, 2)
    for j, cell in enumerate(pairs["cells"]):
        curves = np.maximum(np.array(cell["curves"]), 1e-16)
        T = np.arange(curves.shape[1])
        left.semilogy(T, np.median(curves, axis=0), color=f"C{j}", label=f"n = {cell['points']}, k = {cell['symbols']}")
        left.fill_between(T, curves.min(axis=0), curves.max(axis=0), color=f"C{j}", alpha=0.15)
    left.axhline(DECORRELATED, color="grey", lw=0.8, ls=":")
    left.set(xlabel="T", ylabel="dependence (TV)", title="(a) two random automata, one word", ylim=(1e-16, 1.5))
    left.legend(fontsize=7)
    lengths = sorted({r["length"] for r in rows})
    for i, supervision in enumerate(("every", "final")):
        for x, T in enumerate(lengths):
            vals = [r[supervision] for r in rows if r["length"] == T]
            right.scatter(np.full(len(vals), x + (i - 0.5) * 0.3), vals, color=f"C{i}", s=14)
    right.scatter([], [], color="C0", label="every prefix")
    right.scatter([], [], color="C1", label="final state only")
    for x, T in enumerate(lengths):
        right.hlines(np.mean([r["chance"] for r in rows if r["length"] == T]), x - 0.4, x + 0.4, color="grey", ls=":")
    right.set_xticks(range(len(lengths)), [f"T = {T}" for T in lengths])
    right.set(ylabel="final-state accuracy", title="(b) twins, one dot an automaton")
    right.legend(fontsize=7)
    ctx.figure(
        "random-automata",
        fig,
        "Left: the median dependence of two random automata's final states (band: every pair) against T; dotted: "
        f"{DECORRELATED:g}. Right: final-state accuracy of the twins; dotted: the best constant guess.",
    )
