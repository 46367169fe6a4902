"""``depth-sweep`` — thesis §3.4.5.1, Figs. 3.15/3.16: how deep a twin must be to learn a group, for two pairs
the thesis contrasts, beside the depth of the proven constructions.

* **Q₈ against D₈** (same order 8): "Q₈ is harder than D₈ … D₈ is a semidirect product, while Q₈ needs the wreath
  product" — the thesis's best of 20 runs first reaches 99% at L = 3 for D₈ and L = 6 for Q₈ (T = 100, width 512).
* **A₄ against A₅**: A₄ needs more layers than A₅ (10 against 7), which footnote 32 puts down to supervision: "larger
  groups have richer supervision".

Twins of the default automaton shape (width 64) are trained at T = :data:`LENGTH` on each group acting on itself,
as the thesis's are (:data:`CATALOGUE`: D₈, A₄ and A₅ ``-regular`` with the thesis's generators, Q₈ by right
multiplication by i and j), at every depth in :data:`DEPTHS`, a few seeds each. A depth is
*sufficient* when some seed's held-out accuracy reaches :data:`REACH` (the thesis reads the best of 20). Each
contrast is ruled at the easier group's first sufficient depth d*: the easier group's seeds' mean held-out accuracy
there minus the harder group's (difference of means, t interval), above :data:`HARDER` — the harder group is not
yet learned where the easier one is. Where the easier group is never learned, the contrast is *not tested*.

Beside them, the constructions: the prefix scan's depth (it depends on T alone) and the Krohn–Rhodes cascade's,
which the toolkit builds for the solvable groups (D₈, Q₈, A₄; not A₅) — the thesis's wreath-product account says
Q₈'s cascade is deeper than D₈'s; the table says whether the toolkit's is.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from sandbox_lens.constructions import build
from sandbox_lens.interp.errors import SandboxError
from sandbox_lens.interp.experiments.base import Context
from sandbox_lens.interp.experiments.rules import Rule
from sandbox_lens.interp.stats import Estimate, difference
from sandbox_lens.interp.tasks.batches import AutomatonTask
from sandbox_lens.interp.tasks.catalogue import get_automaton
from sandbox_lens.interp.train import TrainConfig, default_shape

SEEDS, QUICK_SEEDS = (0, 1, 2, 3, 4), (0,)  # five: the least a "reproduced" rests on
LENGTH = 16
DEPTHS = (1, 2, 3, 4, 6)
REACH = 0.99
#: how far below the easier group the harder one must sit at the easier one's first sufficient depth
HARDER = 0.05
#: (easier, harder, the thesis's first sufficient depths (best of 20), why)
CONTRASTS = (
    ("D8", "Q8", (3, 6), "a semidirect product against one that needs the wreath product"),
    ("A5", "A4", (7, 10), "richer supervision of the larger group (footnote 32)"),
)
GROUPS = tuple(dict.fromkeys(g for c in CONTRASTS for g in c[:2]))
#: each group as the catalogue builds it, acting on itself (the thesis's states are the group's elements)
CATALOGUE = {"D8": "D8-regular", "Q8": "Q8", "A5": "A5-regular", "A4": "A4-regular"}

RULES = {
    "harder": Rule(
        "mean held-out accuracy at the easier group's first sufficient depth: easier − harder (difference of means)",
        "above",
        HARDER,
        null=0.0,
        min_n=3,
        unit="seeds",
    ),
}


def _scale(quick: bool) -> dict[str, Any]:
    if quick:
        return {"length": 6, "depths": (1, 2), "steps": 20}
    return {"length": LENGTH, "depths": DEPTHS, "steps": 1500}


def first_sufficient(accuracy: dict[int, list[float]], reach: float = REACH) -> int | None:
    """The smallest depth at which some seed reaches ``reach`` (depth → held-out accuracies), or None."""
    return next((d for d in sorted(accuracy) if accuracy[d] and max(accuracy[d]) >= reach), None)


def contrast(easier: dict[int, list[float]], harder: dict[int, list[float]]) -> tuple[int | None, Estimate | None]:
    """(the easier group's first sufficient depth d*, the difference of mean accuracies there, easier − harder);
    (None, None) when the easier group is never learned."""
    d = first_sufficient(easier)
    if d is None:
        return None, None
    return d, difference(easier[d], harder[d], labels=("easier", "harder"), unit="seeds")


def construction_depths(group: str, length: int) -> dict[str, Any]:
    """Blocks of the prefix scan (at ``length``: built on parity, its depth depends on T alone) and of the
    Krohn–Rhodes cascade the toolkit builds for ``group`` (None, with the builder's reason, where it refuses)."""
    out: dict[str, Any] = {"prefix_scan": build("prefix_scan", get_automaton("parity"), length).n_layers}
    try:
        out["krohn_rhodes"] = build("krohn_rhodes", get_automaton(CATALOGUE[group]), length).n_layers
    except SandboxError as e:
        out["krohn_rhodes"], out["krohn_rhodes_why"] = None, str(e)
    return out


def run(ctx: Context) -> None:
    """Train every group at every depth (or reuse finished runs), find each group's first sufficient depth, rule on
    both contrasts."""
    sc = _scale(ctx.quick)
    T = sc["length"]
    config = TrainConfig(steps=sc["steps"], batch=32, lr=1e-3, eval_every=100, target_accuracy=0.999)
    accuracy: dict[str, dict[int, list[float]]] = {}
    rows = []
    for group in GROUPS:
        task = AutomatonTask(get_automaton(CATALOGUE[group]), T)
        accuracy[group] = {}
        for depth in sc["depths"]:
            summary = ctx.sweep(f"{group}/L{depth}", task, replace(default_shape(task), n_layers=depth), config)
            accuracy[group][depth] = [r["final_accuracy"] for r in summary["runs"]]
            rows += [
                {"group": group, "depth": depth, "seed": r["seed"], "held_out": r["final_accuracy"]}
                for r in summary["runs"]
            ]
    built = {g: construction_depths(g, T) for g in GROUPS}
    ctx.data("runs", rows)
    ctx.data("constructions", built)
    _report(ctx, accuracy, built, sc)
    _figure(ctx, accuracy)


def _report(
    ctx: Context, accuracy: dict[str, dict[int, list[float]]], built: dict[str, Any], sc: dict[str, Any]
) -> None:
    depths = sc["depths"]
    ctx.table(
        f"Held-out accuracy by depth, T = {sc['length']}: best / median over seeds",
        ["group", *(f"L = {d}" for d in depths), f"first L with best ≥ {REACH}", "prefix scan", "Krohn–Rhodes"],
        [
            [
                g,
                *(f"{max(accuracy[g][d]):.3f} / {np.median(accuracy[g][d]):.3f}" for d in depths),
                first_sufficient(accuracy[g]) or f"> {max(depths)}",
                built[g]["prefix_scan"],
                built[g]["krohn_rhodes"] if built[g]["krohn_rhodes"] is not None else "— (not solvable)",
            ]
            for g in GROUPS
        ],
        note=f"Twins of width 64, up to {sc['steps']} steps, {len(ctx.seeds)} seeds per cell; the constructions' "
        "columns are their blocks at the same length.",
    )
    for easier, harder, thesis, why in CONTRASTS:
        d, e = contrast(accuracy[easier], accuracy[harder])
        ctx.rule(
            f"{harder} needs more depth than {easier}",
            f"{harder} is learned only deeper than {easier} ({why}; best of 20 first ≥ 99% at L = {thesis[1]} "
            f"against {thesis[0]}, Fig. 3.15)",
            RULES["harder"],
            e if e is not None else difference([], [], unit="seeds"),
            f"{easier} first learned at L = {d}: mean {np.mean(accuracy[easier][d]):.3f} against {harder} "
            f"{np.mean(accuracy[harder][d]):.3f}"
            if d is not None
            else f"{easier} never reaches {REACH} up to L = {max(depths)}",
            floor=None if d is not None else f"{easier} is never learned at these depths",
        )
    kr = {g: built[g]["krohn_rhodes"] for g in GROUPS}
    ctx.conclude(
        "First depth at which some seed reaches "
        + f"{REACH}: "
        + "; ".join(f"{g} {first_sufficient(accuracy[g]) or 'none'}" for g in GROUPS)
        + f". The toolkit's Krohn–Rhodes cascades: D8 {kr['D8']} blocks, Q8 {kr['Q8']}"
        + (
            " (the same depth: its cascade does not show the wreath product's extra depth)."
            if kr["D8"] == kr["Q8"]
            else "."
        )
    )
    ctx.caveat(
        f"T = {sc['length']} (the thesis: 100), width 64 (512), {len(ctx.seeds)} seeds per cell (20), depths "
        f"{', '.join(map(str, depths))} (1–16)."
    )


def _figure(ctx: Context, accuracy: dict[str, dict[int, list[float]]]) -> None:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 3.6), layout="constrained")
    ax = fig.subplots()
    for i, g in enumerate(GROUPS):
        depths = sorted(accuracy[g])
        ax.plot(depths, [max(accuracy[g][d]) for d in depths], color=f"C{i}", marker="o", label=f"{g} best")
        ax.plot(depths, [np.median(accuracy[g][d]) for d in depths], color=f"C{i}", ls="--", alpha=0.6)
    ax.axhline(REACH, color="k", lw=0.8)
    ax.set(xlabel="blocks", ylabel="held-out accuracy", title="Best (solid) and median (dashed) over seeds")
    ax.legend(fontsize=8)
    ctx.figure("depth-sweep", fig, "Held-out accuracy against depth per group; the line is the 0.99 bar.")
