"""The picture of a circuit analysis: nodes by layer, edges weighted by effect, the ground truth marked.

Columns follow the residual stream (embeddings, then each block's heads and its MLP, then the
logits); a head's query, key and value inputs from one writer are three arcs of different curvature. An edge's width grows with its effect (or, for node methods, both ends' effects); blue
edges are in the task-relevant ground truth, orange ones are not; a dashed thin blue edge is a
ground-truth edge the method gave (almost) no effect — a miss to explain. Grey outlines mark the
recovered circuit's nodes.
"""

from __future__ import annotations

from typing import Any

__all__ = ["circuit_png"]

#: The arc of an edge by the reader's channel, so that a head's q, k and v inputs from one writer stay apart.
RAD = {"q": 0.35, "k": 0.2, "v": 0.05, "in": 0.15}


def _positions(nodes: list[str]) -> dict[str, tuple[float, float]]:
    cols: dict[str, int] = {}
    for n in nodes:
        if n in ("embed", "pos"):
            cols[n] = 0
        elif n == "logits":
            cols[n] = -1
        elif n.startswith("a"):
            cols[n] = 1 + 2 * int(n[1:].split(".")[0])
        else:
            cols[n] = 2 + 2 * int(n[1:])
    last = max([c for c in cols.values() if c >= 0], default=0) + 1
    cols = {n: (last if c == -1 else c) for n, c in cols.items()}
    by_col: dict[int, list[str]] = {}
    for n in nodes:
        by_col.setdefault(cols[n], []).append(n)
    pos: dict[str, tuple[float, float]] = {}
    for c, members in by_col.items():
        for i, n in enumerate(members):
            pos[n] = (float(c), (len(members) - 1) / 2 - i)
    return pos


def _ends(edge: str, pos: dict[str, Any]) -> tuple[str, str]:
    """(sender, receiver) of an edge name such as ``a0.1->a2.0.q`` or ``m1->logits``."""
    s, rest = edge.split("->")
    return s, rest if rest in pos else rest.rsplit(".", 1)[0]


def circuit_png(result: dict[str, Any], title: str) -> bytes:
    """PNG bytes of ``result`` (what :func:`interp.circuits.analyse.analyse` returns)."""
    from matplotlib.figure import Figure  # no pyplot: a notebook keeps its own backend
    from matplotlib.patches import Circle

    from interp.viz import figure_png

    nodes: list[str] = result["graph"]["nodes"]
    pos = _positions(nodes)
    truth = set(result.get("ground_truth_edges", []))
    if "edges" in result:
        weight = {k: abs(v or 0.0) for k, v in result["edges"].items()}  # None: never scored
    else:
        fx = {n: abs(v) for n, v in result.get("nodes", {}).items()}
        weight = {}
        for e in result["graph"]["edges"]:
            s, r = _ends(e, pos)
            weight[e] = min(fx.get(s, 0.0), fx.get(r, 1.0))
    top = max(weight.values(), default=0.0) or 1.0
    width = max(6.0, 1.1 * (max(x for x, _ in pos.values()) + 1))
    height = max(3.5, 0.9 * (max(abs(y) for _, y in pos.values()) * 2 + 2))
    fig = Figure(figsize=(min(width, 22), min(height, 12)))
    ax = fig.subplots()
    for e in result["graph"]["edges"]:
        s, r = _ends(e, pos)
        w = weight.get(e, 0.0) / top
        in_truth = e in truth
        if w < 0.01 and not in_truth:
            continue
        (x0, y0), (x1, y1) = pos[s], pos[r]
        style = dict(color="#1f5fbf" if in_truth else "#e07b00", alpha=0.25 + 0.7 * w,
                     lw=0.4 + 4.0 * w, ls="--" if in_truth and w < 0.01 else "-")
        rad = RAD.get(e.rsplit(".", 1)[-1] if e.split("->")[1] != r else "in", 0.15)  # q, k, v: three arcs
        ax.annotate("", xy=(x1 - 0.12, y1), xytext=(x0 + 0.12, y0),
                    arrowprops=dict(arrowstyle="-|>", connectionstyle=f"arc3,rad={rad}", shrinkA=0, shrinkB=0,
                                    mutation_scale=6 + 6 * w, **style))
    chosen = set(result.get("circuit", {}).get("nodes", []))
    for n, (x, y) in pos.items():
        ax.add_patch(Circle((x, y), 0.2, facecolor="#f4f4f4" if n not in chosen else "#d7e6f7",
                                edgecolor="#555" if n in chosen else "#bbb", lw=1.2, zorder=3))
        ax.text(x, y, n, ha="center", va="center", fontsize=7, zorder=4)
    ax.set_xlim(-0.7, max(x for x, _ in pos.values()) + 0.7)
    ys = [y for _, y in pos.values()]
    ax.set_ylim(min(ys) - 0.8, max(ys) + 0.8)
    ax.set_aspect("equal")
    ax.axis("off")
    sub = (f"{len(result.get('circuit', {}).get('edges', []))} edges kept; faithfulness (accuracy) "
           f"{result.get('faithfulness', float('nan')):.3f}")
    if result.get("auroc") is not None:
        sub += f"; AUROC vs ground truth {result['auroc']:.3f}"
    ax.set_title(f"{title}\n{sub}", fontsize=9)
    if truth:
        from matplotlib.lines import Line2D

        ax.legend(handles=[Line2D([], [], color="#1f5fbf", lw=2, label="ground-truth edge"),
                           Line2D([], [], color="#1f5fbf", lw=0.8, ls="--", label="ground truth, no effect found"),
                           Line2D([], [], color="#e07b00", lw=2, label="not in the ground truth")],
                  loc="lower center", bbox_to_anchor=(0.5, -0.12), ncol=3, fontsize=7, frameon=False)
    return figure_png(fig)
