"""The one HTML vocabulary of the reports (`interp compare`, `interp experiment`, the demo): a
self-contained page with the project's stylesheet, and tables. Floor 0: no project imports; nothing
on a page is fetched from the network (figures are data URIs, circuitsvis is inlined)."""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["CSS", "page", "table", "cell", "escape"]

escape = html.escape

#: one stylesheet for every report (its classes: note, warn, ok, bad, text; v-* for verdicts)
CSS = """
body{font-family:system-ui,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#222;line-height:1.4}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;text-align:right;vertical-align:top}
th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}td.text,th.text{text-align:left}img{max-width:100%}
code{background:#f5f5f5;padding:1px 3px}.note{color:#555;font-size:0.92em}
.warn{background:#fdf3d7;border-left:4px solid #d9a400;padding:6px 10px}
.ok{color:#186a1d;font-weight:bold}.bad{color:#b00;font-weight:bold}
.v-reproduced{background:#e3f4e3}.v-inconclusive{background:#fdf3d7}.v-not-reproduced{background:#f9dede}
.v-opposite-direction{background:#f3d0d0}
.v-not-tested{background:#eee}figure{margin:1.5em 0}figcaption{color:#444;font-size:0.92em}
"""


def cell(x: Any) -> str:
    """A table cell's text: ``—`` for a value not measured (None), 4 significant digits for a float."""
    if x is None:
        return "—"
    if isinstance(x, float):
        return f"{x:.4g}" if abs(x) < 1e4 else f"{x:.3e}"
    return escape(str(x))


def table(header: Sequence[str], rows: Sequence[Sequence[Any]], fmt: Callable[[Any], str] = cell) -> str:
    """``<table>`` with a header row; every cell through ``fmt`` (which escapes)."""
    head = "".join(f"<th>{escape(str(h))}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{fmt(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def page(title: str, body: str) -> str:
    """A whole self-contained document: ``title`` (escaped here), the stylesheet, ``body`` (HTML)."""
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>\n'
        f"<style>{CSS}</style></head><body>\n{body}\n</body></html>\n"
    )
