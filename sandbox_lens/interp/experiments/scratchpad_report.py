"""The table, figure and conclusions of ``scratchpad`` (:mod:`sandbox_lens.interp.experiments.scratchpad`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from sandbox_lens.interp.experiments.base import Context, mean_se
from sandbox_lens.interp.experiments.scratchpad import ARMS, KEEPS, LEARNED, learned

__all__ = ["table", "figure", "conclude"]


def table(ctx: Context, per: dict[str, Any], sc: dict[str, Any]) -> None:
    """Mean ± s.e. accuracy of every population at every multiple of N, over its learned twins."""
    rows = []
    for name, arms in per.items():
        for label, twins in arms.items():
            ok = learned(twins)
            cells = ["—"] * len(sc["multiples"])
            if ok:
                cells = ["{:.3f} ± {:.3f}".format(*mean_se([t[str(m)] for t in ok])) for m in sc["multiples"]]
            rows.append([name, label, f"{len(ok)} of {len(twins)}", *cells])
    ctx.table(
        f"Accuracy at 1 … {max(sc['multiples'])} × N (N = {sc['length']}), learned twins",
        ["task", "population", f"learned (≥ {LEARNED} at N)", *[f"{m} × N" for m in sc["multiples"]]],
        rows,
        note="scratchpad twins decode their own states one at a time; mean ± standard error over the learned twins",
    )


def figure(ctx: Context, per: dict[str, Any], sc: dict[str, Any]) -> None:
    """Accuracy against the test length, a line per population (a dot per learned twin), a panel per task."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 3.4))
    axes = fig.subplots(1, len(per), sharey=True, squeeze=False)[0]
    xs = [m * sc["length"] for m in sc["multiples"]]
    for ax, (name, arms) in zip(axes, per.items()):
        for i, (label, _, _) in enumerate(ARMS):
            ok = learned(arms[label])
            if not ok:
                continue
            values = np.array([[t[str(m)] for m in sc["multiples"]] for t in ok])
            ax.plot(xs, values.mean(0), marker="o", color=f"C{i}", label=label)
            for row in values:
                ax.scatter(xs, row, s=6, color=f"C{i}", alpha=0.4)
        ax.axhline(KEEPS, color="grey", lw=0.8, ls=":")
        ax.set_xscale("log", base=2)
        ax.set_xticks(xs, [str(x) for x in xs])
        ax.set(title=name, xlabel="test length")
    axes[0].set_ylabel("state accuracy")
    if axes[-1].get_legend_handles_labels()[0]:
        axes[-1].legend(fontsize=7)
    fig.tight_layout()
    ctx.figure(
        "scratchpad",
        fig,
        f"State accuracy of the learned twins trained at N = {sc['length']} against the test length (line: mean; "
        f"dots: twins). Dotted: {KEEPS}.",
    )


def conclude(ctx: Context, per: dict[str, Any], horizon: str) -> None:
    """What the four populations say at the longest length, and the caveats."""
    for name, arms in per.items():
        means = {
            label: (np.mean([t[horizon] for t in learned(arms[label])]) if learned(arms[label]) else float("nan"))
            for label, _, _ in ARMS
        }
        ctx.conclude(
            f"{name} at {horizon} × N: "
            + "; ".join(f"{label} {v:.3f}" for label, v in means.items())
            + " (mean over learned twins)."
        )
    ctx.caveat(
        "The recency bias is ALiBi's, with its own slopes (2^(−8h/8), steepest 1/2) and no position embedding; the "
        "thesis gives no slopes and may have kept its positions. Twins are trained at N = 16 (the thesis: 40) and "
        "tested to 4 × N; the plain twins' positions past N are untrained, as in the thesis."
    )
