"""The picture of a circuit analysis, drawn as a circuit: layers from the bottom (embeddings) to the top
(logits), each layer's heads side by side with its MLP beside them, and every head's three inputs as
three ports (q, k, v from left to right) that edges land on.

Edge styles, against the ground truth when there is one:

* **found** — in the recovered circuit and in the ground truth: solid blue, width by score;
* **missed** — in the ground truth, not in the circuit: dashed blue;
* **spurious** — in the circuit, not in the ground truth: solid orange;
* without a ground truth (a trained twin), the circuit's edges in dark grey.

Nodes in the circuit are shaded. The picture stays readable at the 16-block prefix scan (one row per
block).
"""

from __future__ import annotations

from typing import Any

from sandbox_lens.interp.viz import figure_png

__all__ = ["circuit_png", "positions_png", "layout"]

FOUND, MISSED, SPURIOUS, PLAIN = "#1f5fbf", "#1f5fbf", "#e07b00", "#444444"
PORT = {"q": -0.22, "k": 0.0, "v": 0.22, "in": 0.0}
BOX_W, BOX_H = 0.62, 0.36


def _parse(node: str) -> tuple[str, int, int]:
    """(kind, layer, index) of a node name: embed/pos (-1), a<l>.<h>, m<l>, logits."""
    if node in ("embed", "pos"):
        return node, -1, 0 if node == "embed" else 1
    if node == "logits":
        return "logits", 10**6, 0
    if node.startswith("a"):
        layer, head = node[1:].split(".")
        return "head", int(layer), int(head)
    return "mlp", int(node[1:]), 0


def layout(nodes: list[str]) -> dict[str, tuple[float, float]]:
    """Centre (x, y) of every node: row y = the block (embeddings −1, logits one above the last block),
    heads at x = 0, 1, …, the block's MLP right of its heads."""
    parsed = {n: _parse(n) for n in nodes}
    layers = sorted({lay for k, lay, _ in parsed.values() if k in ("head", "mlp")})
    row = {lay: i for i, lay in enumerate(layers)}
    width = max([i for k, _, i in parsed.values() if k == "head"], default=-1) + 1
    pos: dict[str, tuple[float, float]] = {}
    for n, (kind, lay, i) in parsed.items():
        if kind in ("embed", "pos"):
            pos[n] = (float(i), -1.0)
        elif kind == "logits":
            pos[n] = ((width - 1 + 1.4) / 2, float(len(layers)))
        elif kind == "head":
            pos[n] = (float(i), float(row[lay]))
        else:
            pos[n] = (width + 0.4, float(row[lay]))
    return pos


def _ends(edge: str) -> tuple[str, str, str]:
    """(sender, receiver, channel) of an edge name such as ``a0.1->a2.0.q`` or ``m1->logits``."""
    s, rest = edge.split("->")
    if rest.startswith("a") and rest.count(".") == 2:
        r, c = rest.rsplit(".", 1)
        return s, r, c
    return s, rest, "in"


def circuit_png(result: dict[str, Any], title: str) -> bytes:
    """PNG bytes of ``result`` (what :func:`sandbox_lens.interp.circuits.analyse.analyse` returns)."""
    from matplotlib.figure import Figure  # no pyplot: a notebook keeps its own backend
    from matplotlib.lines import Line2D
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

    nodes: list[str] = result["graph"]["nodes"]
    pos = layout(nodes)
    truth = set(result.get("ground_truth_edges", []))
    scored = truth or "ground_truth_edges" in result
    circuit = set(result.get("circuit", {}).get("edges", []))
    ranking = dict(zip(result["graph"]["edges"], result.get("ranking") or []))
    ranking_only = "faithfulness" in result and result["faithfulness"] is None  # a method with no circuit of its own
    if ranking_only:  # draw its top k, k the ground truth's size (or 10% of the graph without one)
        k = len(truth) or max(1, len(ranking) // 10)
        circuit = set(
            sorted((e for e, v in ranking.items() if v is not None and v == v), key=lambda e: -abs(ranking[e]))[:k]
        )
    top = (
        max((abs(v) for v in ranking.values() if v is not None and v == v and abs(v) != float("inf")), default=1.0)
        or 1.0
    )
    xs, ys = [x for x, _ in pos.values()], [y for _, y in pos.values()]
    fig = Figure(figsize=(min(3 + 1.25 * (max(xs) - min(xs) + 1), 16), min(2.5 + 0.62 * (max(ys) - min(ys) + 1), 22)))
    ax = fig.subplots()
    counts = {"found": 0, "missed": 0, "spurious": 0}
    for e in result["graph"]["edges"]:
        s, r, c = _ends(e)
        in_truth, kept = e in truth, e in circuit
        if not (in_truth or kept):
            continue
        v = ranking.get(e)
        w = 0.0 if v is None or v != v else min(abs(v) / top, 1.0)
        if not scored:
            style = dict(color=PLAIN, lw=0.6 + 2.4 * w, ls="-", alpha=0.8)
        elif in_truth and kept:
            style, counts["found"] = dict(color=FOUND, lw=0.8 + 2.6 * w, ls="-", alpha=0.85), counts["found"] + 1
        elif in_truth:
            style, counts["missed"] = dict(color=MISSED, lw=0.9, ls=(0, (3, 2)), alpha=0.9), counts["missed"] + 1
        else:
            style, counts["spurious"] = (
                dict(color=SPURIOUS, lw=0.8 + 2.6 * w, ls="-", alpha=0.85),
                counts["spurious"] + 1,
            )
        (x0, y0), (x1, y1) = pos[s], pos[r]
        start, end = (x0, y0 + BOX_H / 2), (x1 + PORT[c], y1 - BOX_H / 2)
        rad = 0.0 if abs(end[0] - start[0]) < 1e-9 else (0.25 if end[0] > start[0] else -0.25)
        # a bare arrow patch, not an annotation: no text artist per edge (hundreds at the 16-block scan)
        ax.add_patch(
            FancyArrowPatch(
                start,
                end,
                arrowstyle="-|>",
                connectionstyle=f"arc3,rad={rad}",
                shrinkA=0,
                shrinkB=0,
                mutation_scale=7,
                zorder=2,
                **style,
            )
        )
    kept_nodes = set(result.get("circuit", {}).get("nodes", []))
    for n, (x, y) in pos.items():
        kind = _parse(n)[0]
        ax.add_patch(
            FancyBboxPatch(
                (x - BOX_W / 2, y - BOX_H / 2),
                BOX_W,
                BOX_H,
                boxstyle="round,pad=0.02",
                facecolor="#d7e6f7" if n in kept_nodes else "#f4f4f4",
                edgecolor="#555" if n in kept_nodes else "#bbb",
                lw=1.0,
                zorder=3,
            )
        )
        ax.text(x, y + 0.02, n, ha="center", va="center", fontsize=6.5, zorder=4)
        if kind == "head":
            for ch, dx in PORT.items():
                if ch != "in":
                    ax.text(
                        x + dx, y - BOX_H / 2 + 0.05, ch, ha="center", va="bottom", fontsize=4.5, color="#777", zorder=4
                    )
    ax.set_xlim(min(xs) - 0.8, max(xs) + 0.8)
    ax.set_ylim(min(ys) - 0.7, max(ys) + 0.7)
    ax.axis("off")
    if ranking_only:
        sub = f"a ranking with no circuit of its own: its top {len(circuit)} of {len(result['graph']['edges'])} edges drawn"
    else:
        sub = (
            f"{len(circuit)} of {len(result['graph']['edges'])} edges kept; "
            f"faithfulness (accuracy) {result.get('faithfulness', float('nan')):.3f}"
        )
    if result.get("auroc") is not None:
        sub += (
            f"; vs the '{result.get('ground_truth_level')}' ground truth: {counts['found']} found, {counts['missed']} "
            f"missed, {counts['spurious']} spurious, AUROC {result['auroc']:.3f}"
        )
    ax.set_title(f"{title}\n{sub}", fontsize=8.5)
    handles = (
        [
            Line2D([], [], color=FOUND, lw=2, label="found (in the ground truth)"),
            Line2D([], [], color=MISSED, lw=1, ls=(0, (3, 2)), label="missed"),
            Line2D([], [], color=SPURIOUS, lw=2, label="spurious"),
        ]
        if scored
        else [Line2D([], [], color=PLAIN, lw=2, label="recovered circuit (no ground truth)")]
    )
    ax.legend(
        handles=handles,
        loc="upper left",
        fontsize=6.5,
        frameon=False,
        title="heads: inputs q, k, v from left to right",
        title_fontsize=6,
    )
    return figure_png(fig)


def positions_png(result: dict[str, Any], title: str) -> bytes | None:
    """A method's per-position scores beside the per-position truth (``result["position_scores"]``): one row per edge
    (PEAP) or node (patching per position) that the truth or the scores touch, one column per position; colour the
    score's size on a log scale (white: exactly 0), a dot where the item is in the truth. None without such scores."""
    import numpy as np
    from matplotlib.colors import LogNorm
    from matplotlib.figure import Figure

    pos = result.get("position_scores") or {}
    if not pos.get("scored"):
        return None
    if "edge_positions" in result:
        raw, kind, scored = result["edge_positions"], "edge", pos["edges"]
        truth = {k: set(v) for k, v in pos["truth"]["edges"].items()}
    else:
        raw, kind, scored = result["per_position"], "node", pos["nodes"]
        truth = {}
        for name, ps in pos["truth"]["edges"].items():
            truth.setdefault(name.split("->")[0], set()).update(ps)
    rows = [n for n, v in raw.items() if truth.get(n) or np.abs(np.asarray(v, dtype=np.float64)).max() > 0][:80]
    if not rows:
        return None
    size = np.abs(np.array([raw[n] for n in rows], dtype=np.float64))
    T = size.shape[1]
    fig = Figure(figsize=(2.5 + 0.28 * T, 1.2 + 0.16 * len(rows)))
    ax = fig.subplots()
    floor = max(float(size[size > 0].min()) if (size > 0).any() else 1e-6, float(size.max()) * 1e-6)
    shown = np.where(size > 0, np.maximum(size, floor), np.nan)
    image = ax.imshow(
        shown, aspect="auto", cmap="viridis", norm=LogNorm(vmin=floor, vmax=max(float(size.max()), floor * 10))
    )
    ys, xs = zip(*[(i, p) for i, n in enumerate(rows) for p in sorted(truth.get(n, ()))]) or ((), ())
    ax.scatter(xs, ys, s=10, c="#e07b00", marker="o", label="in the per-position truth")
    ax.set_yticks(range(len(rows)), rows, fontsize=6)
    ax.set_xticks(range(T), [str(p) for p in range(T)], fontsize=6)
    ax.set_xlabel("position")
    ax.legend(loc="upper right", fontsize=6)
    fig.colorbar(image, ax=ax, label=f"|{result['method']} score| (white: 0)")
    auroc, ap = scored["auroc"], scored["average_precision"]
    fmt = lambda x: "—" if x is None else f"{x:.2f}"  # noqa: E731
    ax.set_title(f"{title}: ({kind}, position) items, AUROC {fmt(auroc)}, AP {fmt(ap)}", fontsize=8)
    return figure_png(fig)
