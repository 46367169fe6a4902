"""``grid-boundary`` — thesis §3.4.4.4 / §3.4.5, Figs. 3.6 and 3.17: trained gridworld models
contain nearest-boundary detectors.

Twins of two shapes (2 layers × 2 heads, and a deeper 4 × 4) are trained on the 1-D gridworld
(``grid9``: 9 states, S = 8, as the thesis's Grid_9). For every head, on the same sampled words:
its *boundary score* — the fraction of queries whose largest attention weight sits on the last
position where the walk was at a wall (state 0 or S; the start counts, at BOS) — and its mean mass
there, beside three trivial heads that score for free: always attending to BOS (right whenever the walk
has not hit a wall since the start; a uniform head's argmax ties onto BOS too), always to itself (right
whenever the walk is at a wall now) and always to the previous position. A twin's best last-layer head
must beat both the random-init twins' best (searched the same way) and the best trivial head. Theorem 12's construction (2 attention layers) is scored the same way; per query, its
winning window's endpoint head attends to that position exactly, so its "any head" score is 1.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sandbox_lens.interp.compare.automaton import AutomatonComparison
from sandbox_lens.interp.evaluate import skyline
from sandbox_lens.interp.experiments.base import Context, ExperimentError
from sandbox_lens.interp.experiments.rules import Rule, count, exactness_rule
from sandbox_lens.interp.stats import estimate, null_exceedance
from sandbox_lens.interp.streams import ExperimentSeed
from sandbox_lens.interp.tasks.batches import AutomatonTask
from sandbox_lens.interp.tasks.catalogue import get_automaton
from sandbox_lens.interp.tasks.gridworld import is_line_grid, last_boundary_positions
from sandbox_lens.interp.train import ModelShape, TrainConfig, load_trained, random_init
from sandbox_lens.probes.boundary import boundary_detector_scores

SEEDS, QUICK_SEEDS = tuple(range(5)), (0,)
LEARNED = 0.95
NULL_MODELS = 20  # random-init twins of each shape: the null of a maximum over last-layer heads
NULL_SEED = 10_000  # their initialisation seeds start here (no trained seed comes near)

#: Each verdict's rule. The thesis's claim is about *last-layer* heads, and a best head is a maximum, so
#: each twin's best last-layer score is set against the same maximum in random-init twins of its shape.
RULES = {
    "detector": Rule(
        "best last-layer boundary score − the larger of the 95% quantile of the same maximum in random-init twins "
        "and the best trivial head (always BOS, self or previous), per learned twin",
        "above",
        0.0,
    ),
    "exact": exactness_rule(
        "queries on which no head of the construction's detecting block puts its argmax on the last wall"
    ),
}


def _scale(quick: bool) -> dict[str, Any]:
    if quick:
        return {"length": 16, "steps": 100, "words": 24, "shapes": {"2x2": (2, 2)}}
    return {"length": 64, "steps": 3000, "words": 200, "shapes": {"2x2": (2, 2), "4x4": (4, 4)}}


def check(options: dict[str, Any]) -> None:
    """Refuse a task option this experiment cannot take, in one line, before ``--out`` is claimed."""

    a = get_automaton(options["automaton"])
    if not is_line_grid(a):
        raise ExperimentError(f"grid-boundary needs a 1-D gridworld (e.g. grid9), not {a.name}")


def boundary_scores(model, automaton, words: np.ndarray) -> dict[str, Any]:
    """Per head the boundary-detector score (:func:`sandbox_lens.probes.boundary.boundary_detector_scores`), the best
    block's "any head" score, and the three trivial heads' scores on the same words."""

    scores = boundary_detector_scores(model, words, automaton)
    # baselines in word coordinates: position 0 is BOS (the start, a wall), t is the t-th symbol
    states = np.concatenate([np.full((len(words), 1), automaton.initial), automaton.run(words)], axis=1)
    target = np.stack([last_boundary_positions(row, automaton.n_states)[1:] for row in states])
    T = target.shape[1]
    return {
        "heads": {f"L{b}H{h}": v for (b, h), v in scores.heads.items()},
        "any_head": max(scores.blocks.values(), default=0.0),
        "always_bos": float((target == 0).mean()),
        "always_self": float((target == np.arange(1, T + 1)).mean()),
        "always_previous": float((target == np.arange(0, T)).mean()),
    }


def run(ctx: Context) -> None:
    """Train this experiment's populations (or reuse finished runs), evaluate them and rule on every claim into
    ``ctx`` (the module docstring says what and how)."""

    sc = _scale(ctx.quick)
    a = get_automaton(ctx.options["automaton"])
    T = sc["length"]
    task = AutomatonTask(a, T)
    words = AutomatonComparison(a, T).words(sc["words"], seed=ExperimentSeed.GRID_BOUNDARY_WORDS)
    config = TrainConfig(steps=sc["steps"], batch=32, lr=1e-3, eval_every=100, target_accuracy=0.99)

    results: dict[str, Any] = {}
    null: dict[str, list[float]] = {}
    for label, (layers, heads) in sc["shapes"].items():
        summary = ctx.sweep(label, task, ModelShape(n_layers=layers, n_heads=heads), config)
        acc = {r["seed"]: r["final_accuracy"] for r in summary["runs"]}
        per_seed = {}
        for s, d in ctx.run_dirs(label).items():
            per_seed[s] = {"accuracy": acc[s], **boundary_scores(load_trained(d), a, words)}
        results[label] = per_seed
        null[label] = [
            _best_last(
                boundary_scores(random_init(task, ModelShape(n_layers=layers, n_heads=heads), NULL_SEED + i), a, words)[
                    "heads"
                ],
                layers,
            )
            for i in range(NULL_MODELS)
        ]
    first_run = next(iter(ctx.run_dirs(next(iter(sc["shapes"]))).values()))
    exact = skyline(load_trained(first_run), T)
    built = boundary_scores(exact, a, words)
    ctx.data("twins", {k: {str(s): v for s, v in per.items()} for k, per in results.items()})
    ctx.data("null_best_last_layer", {"models": NULL_MODELS, "seeds_from": NULL_SEED, "per_shape": null})
    ctx.data("construction", {"name": exact.card.construction, **built})
    any_seed = next(iter(next(iter(results.values())).values()))
    bos, self_, prev = any_seed["always_bos"], any_seed["always_self"], any_seed["always_previous"]

    rows = []
    for label, per in results.items():
        for s, r in per.items():
            best = max(r["heads"], key=r["heads"].get)
            rows.append(
                [f"{label} seed {s}", r["accuracy"], best, r["heads"][best], int(best[1:].split("H")[0]), r["any_head"]]
            )
    best_c = max(built["heads"], key=built["heads"].get)
    rows.append(
        [
            f"construction ({exact.card.construction})",
            1.0,
            best_c,
            built["heads"][best_c],
            int(best_c[1:].split("H")[0]),
            built["any_head"],
        ]
    )
    ctx.table(
        "Boundary-detector scores (fraction of queries whose argmax is the last wall position)",
        ["model", "held-out accuracy", "best head", "its score", "its layer", "any head of one layer"],
        rows,
        note=f"{len(words)} words of length {T}; trivial heads: always-BOS {bos:.3f}, always-self {self_:.3f}, "
        f"always-previous {prev:.3f}. "
        f"Layers count TransformerLens blocks from 0.",
    )
    _figure(ctx, results, built, (bos, self_, prev), exact.card.construction)
    _claims(ctx, results, built, (bos, self_, prev), a.name, T, null, sc["shapes"], len(words))


def _figure(ctx: Context, results: dict, built: dict, trivial: tuple[float, float, float], name: str) -> None:
    from matplotlib.figure import Figure

    bos, self_, prev = trivial
    fig = Figure(figsize=(11, 3.6))
    ax = fig.subplots()
    x, labels = 0, []
    for i, (label, per) in enumerate(results.items()):
        for s, r in per.items():
            names = list(r["heads"])
            ax.scatter(
                [x + j * 0.8 / max(1, len(names)) for j in range(len(names))],
                [r["heads"][h] for h in names],
                color=f"C{i}",
                s=14,
            )
            labels.append((x + 0.4, f"{label}\nseed {s}"))
            x += 1
    names = list(built["heads"])
    ax.scatter(
        [x + j * 0.8 / len(names) for j in range(len(names))], [built["heads"][h] for h in names], color="k", s=14
    )
    labels.append((x + 0.4, "construction"))
    ax.axhline(bos, color="C3", ls="--", lw=1, label=f"always BOS ({bos:.2f})")
    ax.axhline(self_, color="C4", ls=":", lw=1, label=f"always self ({self_:.2f})")
    ax.axhline(prev, color="C5", ls="-.", lw=1, label=f"always previous ({prev:.2f})")
    ax.set_xticks([p for p, _ in labels], [t for _, t in labels], fontsize=7)
    ax.set_ylabel("boundary score of each head")
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=8, loc="upper left")
    fig.suptitle(f"Nearest-boundary detection: every head of every model ({name} beside the twins)", fontsize=10)
    ctx.figure(
        "boundary_scores",
        fig,
        "Each dot is one head (left to right: layer by layer); the lines are what a "
        "head scores by always attending to BOS, to itself or to the previous position.",
    )


def _best_last(heads: dict[str, float], layers: int) -> float:
    """The best boundary score among the last block's heads."""
    return max(v for h, v in heads.items() if int(h[1:].split("H")[0]) == layers - 1)


def _claims(
    ctx: Context,
    results: dict,
    built: dict,
    trivial: tuple[float, float, float],
    name: str,
    T: int,
    null: dict[str, list[float]],
    shapes: dict,
    n_words: int,
) -> None:
    bos, self_, prev = trivial
    for label, per in results.items():
        layers = shapes[label][0]
        learned = {s: r for s, r in per.items() if r["accuracy"] >= LEARNED or ctx.quick}
        best = {s: _best_last(r["heads"], layers) for s, r in learned.items()}
        q = float(np.quantile(null[label], 0.95))
        bar = max(q, *trivial)
        ex = null_exceedance(float(np.median(list(best.values()))) if best else float("nan"), null[label])
        ctx.rule(
            f"Trained {label} twins contain a nearest-boundary detector in their last layer",
            "last-layer heads act as nearest-boundary detectors (Fig. 3.6, 3.17: 4-layer, 8-head GPT-2 on Grid_9, "
            "T = 128)",
            RULES["detector"],
            estimate([b - bar for b in best.values()]),
            f"best last-layer score per learned twin {', '.join(f'{b:.2f}' for b in best.values())} "
            f"({len(learned)} of {len(per)} learned); random-init twins' best: mean {np.mean(null[label]):.2f}, "
            f"95% quantile {q:.2f} ({NULL_MODELS} models); trivial heads: always-BOS {bos:.2f}, always-self "
            f"{self_:.2f}, always-previous {prev:.2f}; the bar is {bar:.2f}",
            floor=None if learned else f"no {label} twin reached {LEARNED} held-out accuracy",
            null=ex,
        )
    missed = int(round((1 - built["any_head"]) * n_words * T))
    ctx.rule(
        "Theorem 12's construction detects the nearest boundary exactly",
        "a 2-layer construction whose layer-2 heads attend to the last boundary (Theorem 12)",
        RULES["exact"],
        count(missed),
        f"for {built['any_head']:.3f} of {n_words * T} queries some head's argmax is the last wall position",
    )
    ctx.conclude(
        f"Trivial heads on these words: always on BOS scores {bos:.3f}, always on itself {self_:.3f}, always on the "
        f"previous position {prev:.3f}; a boundary score above all three means the head tracks the walls, not a "
        f"fixed position."
    )
    twin_best = max(max(r["heads"].values()) for per in results.values() for r in per.values())
    best_layer = max(built["heads"], key=built["heads"].get).split("H")[0]
    n_layer = sum(h.startswith(best_layer + "H") for h in built["heads"])
    ctx.conclude(
        f"The construction spreads detection over the {n_layer} heads of its block {best_layer[1:]}, indexed by "
        f"offset: its best "
        f"single head scores {max(built['heads'].values()):.3f}, yet for {built['any_head']:.3f} of queries one "
        f"head of its second layer is exactly on the wall. The twins concentrate it instead (best single "
        f"head {twin_best:.3f}) — a per-head score alone would rank the exact circuit below the learned ones."
    )
    ctx.caveat(
        "Only last-layer heads are ruled on, as the thesis states the claim; the table and figure show every "
        "head. The first full runs took the best head of any layer with no null (docs/deviations.md)."
    )
    if not ctx.quick:
        ctx.caveat(
            f"Scale: T = {T} and width 64 (the thesis: T = 100 for training, length-128 probes, width 512, 8 heads); "
            f"{len(ctx.seeds)} seeds per shape."
        )
