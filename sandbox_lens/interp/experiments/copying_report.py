"""The tables and figures of ``copying`` (:mod:`sandbox_lens.interp.experiments.copying`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from sandbox_lens.interp.experiments.base import Context
from sandbox_lens.interp.experiments.copying import BARELY, DEPTHS, looks_interpretable
from sandbox_lens.interp.stats import estimate
from sandbox_lens.interp.tasks.dyck import Dyck

__all__ = ["tables", "figures", "group_of"]

GROUPS = ("current position", "bracket class", "BOS", "diffuse")


def group_of(label: str) -> str:
    """A head's label folded into the four groups the figure shows."""
    return "bracket class" if looks_interpretable(label) else label


def _mean(values: list[float]) -> str:
    return estimate(values).text("{:.4f}") if values else "—"


def tables(ctx: Context, per: dict[int, dict[int, Any]], lang: Dyck) -> None:
    """The twins' accuracies and ablations by depth, the heads by pattern, and every 4-layer twin's heads."""
    rows = []
    for n in DEPTHS:
        t = list(per[n].values())
        rows.append(
            [
                n,
                len(t),
                _mean([x["accuracy"] for x in t]),
                _mean([x["all_heads_ablated"] for x in t]),
                _mean([x["looking_ablated"] for x in t]),
                f"{np.mean([len(x['kept']) for x in t]):.1f} of {n}",
                _mean([x["masked_accuracy"] for x in t]),
            ]
        )
    ctx.table(
        f"Copying {lang.name}: accuracy, ablation (others fixed) and learned masks (others adapt)",
        [
            "layers",
            "twins",
            "accuracy [95% interval]",
            "every head mean-ablated",
            "interpretable-looking heads mean-ablated",
            "heads the masks keep (mean)",
            "accuracy with the masks",
        ],
        rows,
        note="accuracies on the same held-out words; one head per layer",
    )
    rows = []
    for n in DEPTHS:
        heads = [h for t in per[n].values() for h in t["heads"].values()]
        for label in sorted({h["label"] for h in heads}):
            drops = [h["drop"] for h in heads if h["label"] == label]
            kept = sum(
                name in t["kept"] for t in per[n].values() for name, h in t["heads"].items() if h["label"] == label
            )
            rows.append([n, label, len(drops), f"{np.mean(drops):+.4f}", f"{max(drops):+.4f}", kept])
    ctx.table(
        "Heads by the class their pattern attends to",
        ["layers", "pattern", "heads", "mean accuracy drop when ablated", "largest drop", "kept by the masks"],
        rows,
        note="a pattern attends to a class when ≥ 0.8 of its mass lies there (the most specific such class)",
    )
    ctx.table(
        "Every 4-layer twin's heads: pattern (mass) and accuracy drop when mean-ablated",
        ["seed", "accuracy", *[f"L{layer}H0" for layer in range(4)], "kept by the masks"],
        [
            [s, f"{t['accuracy']:.4f}"]
            + [f"{h['label']} ({h['mass']:.2f}) {h['drop']:+.3f}" for h in t["heads"].values()]
            + [" ".join(t["kept"]) or "none"]
            for s, t in per[4].items()
        ],
    )


def figures(ctx: Context, per: dict[int, dict[int, Any]], lang: Dyck) -> None:
    """Every head's accuracy drop by pattern group, a panel per depth."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 3.4))
    axes = fig.subplots(1, len(DEPTHS), sharey=True)
    for ax, n in zip(axes, DEPTHS):
        heads = [h for t in per[n].values() for h in t["heads"].values()]
        for i, g in enumerate(GROUPS):
            drops = [h["drop"] for h in heads if group_of(h["label"]) == g]
            jitter = np.linspace(-0.15, 0.15, len(drops)) if len(drops) > 1 else np.zeros(len(drops))
            ax.scatter(i + jitter, drops, s=14, color="C1" if g == "bracket class" else "C0")
        ax.axhline(BARELY, color="grey", lw=0.8, ls=":")
        ax.set_xticks(range(len(GROUPS)), GROUPS, rotation=20, ha="right")
        ax.set_title(f"{n} layer{'s' if n > 1 else ''}")
    axes[0].set_ylabel("copying-accuracy drop (head mean-ablated)")
    fig.tight_layout()
    ctx.figure(
        "copying-ablation",
        fig,
        f"Every head of every twin copying {lang.name}: the accuracy lost when it is mean-ablated alone, by what its "
        f"pattern attends to (orange: a bracket class, the interpretable-looking heads). Dotted: {BARELY}.",
    )


def example(ctx: Context, per: dict[int, dict[int, Any]], lang: Dyck, word: np.ndarray) -> None:
    """The attention pattern of the sharpest interpretable-looking head of a 4-layer twin on one held-out word."""
    from matplotlib.figure import Figure

    from sandbox_lens.interp.model.run import attention_patterns
    from sandbox_lens.interp.train import load_trained

    found = [(h["mass"], s, name) for s, t in per[4].items() for name, h in t["heads"].items()]
    if not found:
        return
    _, seed, name = max(found)  # the sharpest head, whatever its class
    layer = int(name[1 : name.index("H")])
    model = load_trained(ctx.run_dirs("4 layers")[seed])
    pattern = attention_patterns(model, word[None], [(layer, 0)])[(layer, 0)][0]
    names = ["BOS", *(lang.bracket_names[int(x) - 1] for x in word[1:])]
    fig = Figure(figsize=(5.4, 4.8))
    ax = fig.subplots()
    ax.imshow(pattern, cmap="Blues", vmin=0, vmax=1)
    ax.set_xticks(range(len(names)), names, fontsize=7)
    ax.set_yticks(range(len(names)), names, fontsize=7)
    ax.set(xlabel="key", ylabel="query", title=f"seed {seed}, {name}: {per[4][seed]['heads'][name]['label']}")
    fig.tight_layout()
    ctx.figure(
        "copying-pattern",
        fig,
        f"The sharpest head of the 4-layer twins (seed {seed}, {name}) on one held-out word; ablating it "
        f"alone changes the copying accuracy by {-per[4][seed]['heads'][name]['drop']:+.4f}.",
    )
