"""The figures of `interp compare`'s report, drawn from ``metrics.json`` and ``patterns.npz`` alone:
every model's attention side by side, probe accuracy by hook, head ablation, the twin's learning curve
(PNG bytes, embedded in the page as data URIs)."""

from __future__ import annotations

from typing import Any

import numpy as np

from sandbox_lens.interp.viz import figure_png, token_ticks

__all__ = ["side_by_side_png", "probe_png", "ablation_png", "learning_curve_png"]


def side_by_side_png(patterns: dict[str, dict], tokens: list[str]) -> bytes:
    """One column per model (its heads down the column), all on the same token axes."""
    from matplotlib.figure import Figure  # no pyplot: a notebook keeps its own backend

    rows, cols = max(len(p) for p in patterns.values()), len(patterns)
    size = 1.6 + 0.09 * len(tokens)
    fig = Figure(figsize=(cols * size + 1.2, rows * size))
    axes = fig.subplots(rows, cols, squeeze=False)
    for ax in axes.flat:
        ax.axis("off")
    image = None
    for c, (name, pats) in enumerate(patterns.items()):
        for r, ((layer, head), p) in enumerate(pats.items()):
            ax = axes[r][c]
            ax.axis("on")
            image = ax.imshow(p, vmin=0, vmax=1, cmap="Blues")
            ax.set_title(f"{name}: L{layer}H{head}", fontsize=8)
            token_ticks(ax, tokens, fontsize=6, most=24)
    if image is not None:
        fig.colorbar(image, ax=axes.ravel().tolist(), shrink=0.5, label="attention weight (query row → key column)")
    return figure_png(fig)


def probe_png(probes: dict[str, dict[str, dict[str, Any]]], latents: list[str]) -> bytes:
    """One panel per latent, one line per model over its residual hooks on a common x-axis (the fraction of
    the way from the embeddings to the last block's output), and the chance line."""
    from matplotlib.figure import Figure  # no pyplot: a notebook keeps its own backend

    fig = Figure(figsize=(max(4.5, 4.6 * len(latents)), 3.6), layout="constrained")
    axes = fig.subplots(1, len(latents), squeeze=False, sharey=True)[0]
    for ax, latent in zip(axes, latents):
        chance = None
        for i, (model, per) in enumerate(probes.items()):
            acc = per[latent]["accuracy"]
            xs = np.linspace(0, 1, len(acc)) if len(acc) > 1 else np.zeros(1)
            # constructions often read identically: earlier lines wider and hollow, so none hides another
            ax.plot(
                xs,
                list(acc.values()),
                marker="os^Dv"[i % 5],
                ms=7 - 1.2 * min(i, 4),
                mfc="none",
                lw=max(0.8, 3.2 - 0.8 * i),
                ls=("-", "--", "-.", ":")[i % 4],
                label=model,
            )
            chance = per[latent].get("chance", chance)
        if chance is not None:
            ax.axhline(chance, ls="--", lw=0.9, color="grey")
            ax.text(1.0, chance, "chance (commonest value)", fontsize=7, color="grey", ha="right", va="bottom")
        ax.set_title(latent, fontsize=9)
        ax.set_xticks([0, 0.5, 1], ["embeddings", "middle", "last block"], fontsize=7)
        ax.set_xlabel("depth through the model (each model's residual hooks, evenly spaced)", fontsize=7)
        ax.set_ylim(-0.02, 1.05)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("held-out probe accuracy")
    axes[-1].legend(fontsize=7, loc="lower right")
    fig.suptitle("where each latent is linearly readable", fontsize=10)
    return figure_png(fig)


def ablation_png(ablation: dict[str, dict[str, Any]]) -> bytes:
    """One panel per model: a pair of bars per head (zero- and mean-ablated), the intact and chance lines."""
    from matplotlib.figure import Figure  # no pyplot: a notebook keeps its own backend

    models = list(ablation)
    fig = Figure(figsize=(max(4.5, 3.4 * len(models)), 3.4))
    axes = fig.subplots(1, len(models), squeeze=False, sharey=True)[0]
    for ax, model in zip(axes, models):
        a = ablation[model]
        heads = list(a["zero"])
        xs = np.arange(len(heads))
        ax.bar(xs - 0.2, [a["zero"][h] for h in heads], width=0.4, label="zero-ablated", color="#4c72b0")
        ax.bar(xs + 0.2, [a["mean"][h] for h in heads], width=0.4, label="mean-ablated", color="#dd8452")
        ax.axhline(a["baseline"], ls="-", lw=0.9, color="black")
        ax.axhline(a["chance"], ls="--", lw=0.9, color="grey")
        ax.text(len(heads) - 0.5, a["baseline"], "intact", fontsize=7, ha="right", va="bottom")
        ax.text(len(heads) - 0.5, a["chance"], "chance", fontsize=7, ha="right", va="bottom", color="grey")
        ax.set_xticks(xs, heads, rotation=60 if len(heads) > 6 else 0, fontsize=7)
        ax.set_title(model, fontsize=9)
        ax.set_ylim(0, 1.08)
    axes[0].set_ylabel("task accuracy")
    axes[0].legend(fontsize=7, loc="lower left")
    fig.suptitle("accuracy with one head ablated (others fixed)", fontsize=10)
    return figure_png(fig)


def learning_curve_png(t: dict[str, Any]) -> bytes | None:
    """The twin's held-out accuracy and loss by step, with its target."""
    from matplotlib.figure import Figure  # no pyplot: a notebook keeps its own backend

    history = t.get("history") or []
    if not history:
        return None
    steps = [h["step"] for h in history]
    fig = Figure(figsize=(7.5, 3.0), layout="constrained")
    acc_ax, loss_ax = fig.subplots(1, 2)
    acc_ax.plot(steps, [h["accuracy"] for h in history], marker="o", ms=3)
    if t.get("target_accuracy") is not None:
        acc_ax.axhline(t["target_accuracy"], ls="--", lw=0.9, color="grey")
        acc_ax.text(steps[0], t["target_accuracy"], " target", fontsize=7, color="grey", va="bottom")
    acc_ax.set_ylim(min(0.0, min(h["accuracy"] for h in history)), 1.02)
    acc_ax.set_xlabel("step", fontsize=8)
    acc_ax.set_ylabel("held-out accuracy", fontsize=8)
    loss_ax.plot(steps, [h["loss"] for h in history], marker="o", ms=3, color="#dd8452")
    loss_ax.set_ylim(bottom=0)
    loss_ax.set_xlabel("step", fontsize=8)
    loss_ax.set_ylabel("held-out loss (nats per scored position)", fontsize=8)
    for ax in (acc_ax, loss_ax):
        ax.grid(alpha=0.3)
    fig.suptitle("the trained twin's learning curve", fontsize=10)
    return figure_png(fig)
