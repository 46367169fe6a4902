"""Pictures of attention: PNG heatmaps and circuitsvis HTML (patterns come from :mod:`sandbox_lens.interp.model.run`).

circuitsvis's ``local_src`` inlines its JavaScript, so the HTML works offline (``str()`` of
a circuitsvis object would load it from a CDN, which these machines cannot reach).
"""

from __future__ import annotations

import base64
import io
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from sandbox_lens.interp.files import atomic_write

__all__ = ["heatmap_png", "circuitsvis_heads", "png_data_uri", "figure_png", "token_ticks", "interchange_scans_png"]


def figure_png(fig) -> bytes:
    """A matplotlib ``Figure`` as PNG bytes (110 dpi, tight bounding box)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    return buf.getvalue()


def token_ticks(ax, tokens: Sequence[str], fontsize: float = 7, most: int = 32) -> None:
    """Token labels on both axes of an attention heatmap, every k-th one past ``most`` tokens (readable)."""
    n = len(tokens)
    step = max(1, -(-n // most))
    where = list(range(0, n, step))
    ax.set_xticks(where, [tokens[i] for i in where], rotation=90, fontsize=fontsize)
    ax.set_yticks(where, [tokens[i] for i in where], fontsize=fontsize)


def heatmap_png(
    patterns: dict[tuple[int, int], np.ndarray],
    tokens: Sequence[str],
    title: str,
    path: Path | None = None,
    head_labels: dict[int, str] | None = None,
    titles: dict[tuple[int, int], str] | None = None,
) -> bytes:
    """One heatmap per (block, head); returns the PNG bytes and writes ``path`` if given.

    ``head_labels`` maps a block index to a caption (e.g. the block's label); ``titles`` replaces a
    panel's whole title (e.g. heads of different models side by side).
    """
    from matplotlib.figure import Figure  # no pyplot: a notebook keeps its own backend

    panels = list(patterns)
    cols = min(4, max(1, len(panels)))
    rows = -(-len(panels) // cols)
    n = len(tokens)
    size = 2.2 + 0.12 * n
    fig = Figure(figsize=(cols * size, rows * size))
    axes = fig.subplots(rows, cols, squeeze=False)
    for ax in axes.flat:
        ax.axis("off")
    image = None
    for ax, (b, h) in zip(axes.flat, panels):
        ax.axis("on")
        image = ax.imshow(patterns[(b, h)], vmin=0, vmax=1, cmap="Blues")
        label = (head_labels or {}).get(b, "")
        ax.set_title((titles or {}).get((b, h), f"block {b} head {h}\n{label}"), fontsize=8)
        token_ticks(ax, tokens)
        ax.set_xlabel("key (source)", fontsize=7)
        ax.set_ylabel("query (destination)", fontsize=7)
    if image is not None:
        fig.colorbar(image, ax=axes.ravel().tolist(), shrink=0.6, label="attention weight")
    fig.suptitle(title, fontsize=10)
    data = figure_png(fig)
    if path is not None:
        atomic_write(Path(path), data)
    return data


def interchange_scans_png(result: dict) -> bytes:
    """The interchange scans of an alignment (``sandbox_lens.interp.causal.align.align``'s result, or its JSON): one row per
    variable, one heatmap per model (the aligned model, each construction, the null) — residual hooks down,
    positions across, IIA on changed outputs as colour; grey where the variable changes no output."""
    from matplotlib.figure import Figure

    variables = result["variables"]
    rows = []
    for name, v in variables.items():
        panels = [("model", v["model"])] + [("construction", r) for r in v.get("constructions", {}).values()]
        rows.append((name, panels + ([("null", v["null"])] if "null" in v else [])))
    n_cols = max(len(p) for _, p in rows)
    n_hooks = len(next(iter(variables.values()))["model"]["scan"]["hooks"])
    fig = Figure(figsize=(4.2 * n_cols, (0.32 * n_hooks + 1.8) * len(rows)))
    axes = fig.subplots(len(rows), n_cols, squeeze=False, gridspec_kw={"hspace": 0.55})
    im = None
    for (variable, panels), line in zip(rows, axes):
        for ax in line[len(panels) :]:
            ax.set_axis_off()
        for ax, (kind, r) in zip(line, panels):
            grid = np.array([[np.nan if v is None else v for v in row] for row in r["scan"]["iia"]], dtype=float)
            im = ax.imshow(grid, vmin=0, vmax=1, cmap=matplotlib_cmap("viridis"), aspect="auto")
            hooks = [h.replace("blocks.", "").replace(".hook_resid_", " ") for h in r["scan"]["hooks"]]
            ax.set_yticks(range(len(hooks)), hooks, fontsize=6)
            ax.set_xticks(range(len(r["scan"]["positions"])), r["scan"]["positions"], fontsize=6)
            ax.set_xlabel(f"position p ({variable} at p is swapped there)", fontsize=7)
            ax.set_title(f"{variable} — {kind}: {r['title']}", fontsize=8)
    fig.colorbar(im, ax=fig.axes, shrink=0.8, label="IIA on changed outputs")
    return figure_png(fig)


def candidates_png(result: dict) -> bytes:
    """Which algorithm (:func:`sandbox_lens.interp.causal.identify.identify`'s result): per candidate, its
    abstraction score (test IIA of all its variables' interventions) with its interval, beside the nulls' largest,
    and each variable's test IIA as a dot (filled: passes); the identification in the title."""
    from matplotlib.figure import Figure

    rows = result["candidates"]
    colour = {"passes": "#2a9d8f", "fails": "#b0b0b0", "untestable": "#e9c46a"}
    fig = Figure(figsize=(8.0, 0.55 * max(len(rows), 1) + 1.6))
    ax = fig.subplots()
    for y, r in enumerate(rows):
        score = r["score"]["iia"] or 0.0
        lo, hi = r["score"]["interval"] or (score, score)
        ax.barh(y, score, color=colour[r["status"]], height=0.6)
        ax.plot([lo, hi], [y, y], color="black", lw=1)
        if r["null_score"] is not None:
            ax.plot([r["null_score"]] * 2, [y - 0.35, y + 0.35], color="#e76f51", lw=2)
        for v in r["variables"]:
            if v["iia"] is not None:
                ax.plot(
                    v["iia"],
                    y + 0.18,
                    "o",
                    ms=4,
                    color="black",
                    fillstyle="full" if v["status"] == "passes" else "none",
                )
    ax.set_yticks(range(len(rows)), [f"{r['algorithm']} ({r['status']})" for r in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, 1.02)
    ax.axvline(result["chance"], color="#888888", ls=":", lw=1)
    ax.set_xlabel(
        "test IIA: bar = all the candidate's variables (abstraction score); dots = each variable; "
        "red tick = nulls' largest; dotted = chance",
        fontsize=7,
    )
    ax.set_title(f"which algorithm: {result['identified']} (stability {result['stability']:.0%})", fontsize=9)
    return figure_png(fig)


def over_training_png(result: dict) -> bytes:
    """Each candidate's abstraction score at every kept step (:func:`sandbox_lens.interp.causal.identify.over_training`),
    filled where it passes, beside the run's held-out loss; the identification at each step along the top."""
    from matplotlib.figure import Figure

    rows = result["steps"]
    steps = [r["step"] for r in rows]
    names = list(dict.fromkeys(n for r in rows for n in r["candidates"]))
    fig = Figure(figsize=(8.5, 4.2))
    ax = fig.subplots()
    for i, name in enumerate(names):
        scores = [r["candidates"].get(name, {}).get("score") for r in rows]
        ax.plot(steps, [np.nan if v is None else v for v in scores], "-", color=f"C{i}", label=name, lw=1.2)
        for x, r in zip(steps, rows):
            c = r["candidates"].get(name)
            if c and c["score"] is not None:
                ax.plot(
                    x, c["score"], "o", color=f"C{i}", ms=5, fillstyle="full" if c["status"] == "passes" else "none"
                )
    ax.set_xscale("log")
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("training step (log)")
    ax.set_ylabel("abstraction score (filled: the candidate passes)")
    ax.axhline(result["chance"], color="#888888", ls=":", lw=1)
    history = [h for h in result["history"] if h.get("loss") is not None]
    if history:
        loss = ax.twinx()
        loss.plot(
            [h["step"] for h in history],
            [h["loss"] for h in history],
            color="black",
            lw=1,
            ls="--",
            label="held-out loss",
        )
        loss.set_yscale("log")
        loss.set_ylabel("held-out loss (dashed)")
    for x, r in zip(steps, rows):
        ax.annotate(r["identified"], (x, 1.02), fontsize=6, rotation=30, ha="left")
    ax.legend(fontsize=7, loc="lower right")
    fig.suptitle("Which algorithm, over training", fontsize=10)
    return figure_png(fig)


def matplotlib_cmap(name: str) -> Any:
    """A copy of a matplotlib colour map that draws NaN (no changed output) in light grey."""
    import matplotlib

    return matplotlib.colormaps[name].with_extremes(bad="#dddddd")


def png_data_uri(data: bytes) -> str:
    """PNG bytes as a ``data:`` URI, to inline a picture in a self-contained HTML page."""
    return "data:image/png;base64," + base64.b64encode(data).decode()


def circuitsvis_heads(patterns: dict, tokens: Sequence[str], names: Sequence[str] | None = None) -> str:
    """Self-contained circuitsvis ``attention_heads`` HTML for the given (block, head) patterns.

    ``names`` labels the tiles (default ``block b head h`` from the keys).
    """
    import circuitsvis.attention as cva

    names = list(names) if names is not None else [f"block {b} head {h}" for b, h in patterns]
    stacked = np.stack(list(patterns.values()))
    html = cva.attention_heads(attention=stacked, tokens=list(tokens), attention_head_names=names).local_src
    # circuitsvis writes `<div id=… />`; a self-closing div is not valid HTML and would swallow
    # the rest of the page, so close it explicitly.
    html = re.sub(r"(<div id=\"[^\"]+\"[^>]*?)\s*/>", r"\1></div>", html, count=1)
    return _script_safe_props(html)


def _script_safe_props(html: str) -> str:
    """circuitsvis puts the tokens and names as raw JSON inside an inline ``<script>``: a token ``</script>`` would
    end the script there and run what follows. In the render call's arguments every ``<`` is written ``\\u003c``,
    which JavaScript reads back as ``<`` (the page shows the token as it is) but HTML's parser never sees."""
    start, end = html.rfind("CircuitsVis.render("), html.rfind("</script>")
    if start < 0 or end < start:
        raise ValueError("circuitsvis's page has changed shape: no render call before its closing script tag")
    return html[:start] + html[start:end].replace("<", "\\u003c") + html[end:]
