"""The failure dials swept: every method on constructions whose informative negatives are built at each value of
each dial (:data:`sandbox_lens.constructions.negatives.DIALS`), so a ranking is a curve over the dial, never one
hand-set constant.

:func:`run_dial_sweep` runs the leaderboard's cells (:func:`~sandbox_lens.interp.circuits.leaderboard.run_leaderboard`,
the same pairs, seeds, levels and *why*) on each (family, dial, value). From its rows:

* :func:`failure_matrix` — method × (dial, value): the circuit's edge F1 over the pair seeds and the reason that
  cost it the most edges (the ground truth's reason for a spurious edge, the analysis's for a missed one). A cell
  *fails* where precision or recall is below 1 on some seed;
* :func:`reversals` — the ranking's stability: a pair of methods whose order (by average precision, a tie where
  the t intervals overlap) flips between two values of one dial, with the reason the one that fell lost edges;
* :func:`failure_matrix_png` and :func:`robustness_png` — the matrix as a figure and each dial's curves.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from itertools import combinations
from typing import Any

import numpy as np

from sandbox_lens.constructions.negatives import SWITCHES, dial_options
from sandbox_lens.interp.circuits.leaderboard import BOUNDS, NORMALISER_FLAG, Family, Setting, run_leaderboard, tied
from sandbox_lens.interp.stats import t_interval
from sandbox_lens.interp.viz import figure_png

__all__ = [
    "run_dial_sweep",
    "failure_matrix",
    "reversals",
    "failure_matrix_png",
    "robustness_png",
    "dial_markdown",
]

#: The reasons of :mod:`~sandbox_lens.interp.circuits.truth` and :mod:`~sandbox_lens.interp.circuits.analyse`, shortened
#: for a matrix cell.
SHORT = {
    "cancelled": "cancel",
    "invariant": "invariant",
    "not-connected": "dead",
    "an effect alone at or above the threshold that the method's score did not reflect": "score",
    "no effect alone": "no effect alone",
}


def run_dial_sweep(
    bases: Sequence[tuple[str, Callable[..., Any]]],
    dials: Mapping[str, Sequence[float]],
    methods: Sequence[str],
    settings: Sequence[Setting],
    seeds: Sequence[int],
    negatives: str,
    pairs: int = 32,
    progress: bool = False,
) -> dict[str, Any]:
    """Each base family (``name``, ``build(**options)``) with ``negatives`` at every value of every dial (option name
    → values, or a switched gadget of :data:`~sandbox_lens.constructions.negatives.SWITCHES` → 0, 1; the others at
    their defaults): the leaderboard's rows, each with its ``dial`` and ``value``. The construction with every dial
    at its default is run once and its rows stand at each dial's default value."""
    rows: list[dict[str, Any]] = []
    cpu, board_settings = 0.0, {}
    for name, make in bases:
        done: dict[tuple[str, float] | None, list[dict[str, Any]]] = {}
        for dial, values in dials.items():
            for value in values:
                key, options = dial_options(negatives, dial, float(value))
                if key not in done:
                    family = Family(name, lambda make=make, options=options: make(**options))
                    board = run_leaderboard([family], methods, settings, seeds, pairs=pairs, progress=progress)
                    cpu += board["cpu_seconds"]
                    board_settings = board["settings"]
                    done[key] = board["rows"]
                rows += [{**r, "dial": dial, "value": float(value)} for r in done[key]]
    return {
        "settings": {
            **board_settings,
            "negatives": negatives,
            "dials": {k: list(map(float, v)) for k, v in dials.items()},
        },
        "cpu_seconds": cpu,
        "rows": rows,
    }


def _f1(row: Mapping[str, Any]) -> dict[str, Any]:
    """The circuit's edge F1 per seed (0 where it found nothing right), its mean and t interval."""
    values = []
    for p, r in zip(row["precision"]["values"], row["recall"]["values"]):
        values.append(0.0 if p is None or r is None or p + r == 0 else 2 * p * r / (p + r))
    return {"mean": float(np.mean(values)), "interval": t_interval(values, bounds=BOUNDS["f1"]), "values": values}


def _cause(row: Mapping[str, Any]) -> str:
    """The reasons that cost the row the most edges over its seeds: the costliest spurious one (``+``) and the
    costliest missed one (``−``), e.g. ``+cancel −score`` ('' where it lost none)."""
    parts = []
    for sign, kind in (("+", "spurious"), ("−", "missed")):
        counts = Counter({SHORT.get(k, k): n for k, n in row["why"][kind].items() if n})
        if counts:
            parts.append(sign + counts.most_common(1)[0][0])
    return " ".join(parts)


def failure_matrix(sweep: Mapping[str, Any], setting: str = "default/resample") -> dict[str, Any]:
    """Method × column (``family · dial=value``): F1 (mean and interval), whether it *fails* (precision or recall
    below 1 on some seed) and the costliest reason. ``columns`` keep the sweep's order."""
    columns: list[str] = []
    cells: dict[str, dict[str, Any]] = {}
    for row in sweep["rows"]:
        if "skipped" in row or row["setting"] != setting:
            continue
        column = f"{row['construction']} · {row['dial'].removeprefix('negative_')}={row['value']:g}"
        if column not in columns:
            columns.append(column)
        fails = any(v is not None and v < 1 for v in row["precision"]["values"] + row["recall"]["values"])
        cells.setdefault(row["method"], {})[column] = {
            "f1": _f1(row),
            "fails": fails,
            "cause": _cause(row),
            "normaliser": row.get("normaliser_ratio"),
        }
    return {"setting": setting, "columns": columns, "cells": cells}


def reversals(sweep: Mapping[str, Any], metric: str = "average_precision") -> list[dict[str, Any]]:
    """Every pair of methods whose order flips along one dial (the intervals disjoint both ways), with each side's
    values and the costliest reason of the method that fell."""
    groups: dict[tuple[str, str, str], dict[float, dict[str, Mapping[str, Any]]]] = {}
    for row in sweep["rows"]:
        if "skipped" in row or row[metric]["mean"] is None:
            continue
        key = (row["construction"], row["setting"], row["dial"])
        groups.setdefault(key, {}).setdefault(row["value"], {})[row["method"]] = row
    out = []
    for (family, setting, dial), by_value in groups.items():
        for v1, v2 in combinations(sorted(by_value), 2):
            at1, at2 = by_value[v1], by_value[v2]
            for a, b in combinations(sorted(set(at1) & set(at2)), 2):
                up1, up2 = _above(at1[a][metric], at1[b][metric]), _above(at2[a][metric], at2[b][metric])
                if up1 is not None and up2 is not None and up1 != up2:
                    first, second = (a, b) if up1 else (b, a)  # first leads at v1, second at v2
                    out.append(
                        {
                            "family": family,
                            "setting": setting,
                            "dial": dial,
                            "values": [v1, v2],
                            "leads": [first, second],
                            metric: {m: [at1[m][metric]["mean"], at2[m][metric]["mean"]] for m in (first, second)},
                            "cause": _cause(at2[first]),
                        }
                    )
    return out


def _above(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool | None:
    """True: a wholly above b; False: b wholly above a; None: a tie (the intervals overlap)."""
    if tied(a, b) if a["mean"] >= b["mean"] else tied(b, a):
        return None
    return a["mean"] > b["mean"]


def failure_matrix_png(matrix: Mapping[str, Any]) -> bytes:
    """The failure matrix as a heatmap: F1 by colour, each failing cell labelled with its costliest reason."""
    from matplotlib.figure import Figure

    methods, columns = list(matrix["cells"]), matrix["columns"]
    f1 = np.array(
        [[matrix["cells"][m].get(c, {"f1": {"mean": np.nan}})["f1"]["mean"] for c in columns] for m in methods]
    )
    fig = Figure(figsize=(1.5 + 1.25 * len(columns), 1.2 + 0.5 * len(methods)))
    ax = fig.subplots()
    image = ax.imshow(f1, vmin=0, vmax=1, cmap="RdYlGn", aspect="auto")
    for i, m in enumerate(methods):
        for j, c in enumerate(columns):
            cell = matrix["cells"][m].get(c)
            if cell is None:
                continue
            text = f"{cell['f1']['mean']:.2f}" + (
                "\n" + cell["cause"].replace(" −", "\n−").replace(" +", "\n+") if cell["fails"] else ""
            )
            ax.text(j, i, text, ha="center", va="center", fontsize=6.5)
    ax.set_xticks(range(len(columns)), [c.replace(" · ", "\n") for c in columns], fontsize=6, rotation=30, ha="right")
    ax.set_yticks(range(len(methods)), methods, fontsize=7.5)
    fig.colorbar(image, ax=ax, shrink=0.7, label="edge F1 (mean over pair seeds)")
    ax.set_title(
        f"Failure matrix ({matrix['setting']}): edge F1, and where a method fails the costliest reasons\n"
        "(+ spurious, − missed; cancel: the cancelling pair, dead: not connected, score: an effect its score missed)",
        fontsize=8,
    )
    return figure_png(fig)


def robustness_png(
    sweep: Mapping[str, Any], metric: str = "average_precision", setting: str = "default/resample"
) -> bytes:
    """One panel per (family, dial): each method's ``metric`` (mean, t interval clipped to [0, 1] as a bar) against
    the dial's value."""
    from matplotlib.figure import Figure

    rows = [r for r in sweep["rows"] if "skipped" not in r and r["setting"] == setting]
    panels = list(dict.fromkeys((r["construction"], r["dial"]) for r in rows))
    methods = list(dict.fromkeys(r["method"] for r in rows))
    fig = Figure(figsize=(4.2 * len(panels), 3.4))
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, (family, dial) in zip(axes, panels):
        for method in methods:
            mine = sorted(
                (r for r in rows if (r["construction"], r["dial"], r["method"]) == (family, dial, method)),
                key=lambda r: r["value"],
            )
            xs = [r["value"] for r in mine]
            ys = [r[metric]["mean"] for r in mine]
            lo = [max(0.0, (r[metric]["interval"] or [y, y])[0]) for y, r in zip(ys, mine)]
            hi = [min(1.0, (r[metric]["interval"] or [y, y])[1]) for y, r in zip(ys, mine)]
            err = [[max(0.0, y - a) for y, a in zip(ys, lo)], [max(0.0, b - y) for y, b in zip(ys, hi)]]
            ax.errorbar(xs, ys, yerr=err, marker="o", markersize=3, capsize=2, linewidth=1, label=method)
        ax.set_xscale("linear" if dial in SWITCHES else "log")
        ax.set_ylim(0, 1.05)
        ax.set_xlabel(dial.replace("_", " "), fontsize=8)
        ax.set_ylabel(metric.replace("_", " "), fontsize=8)
        ax.set_title(family, fontsize=9)
    axes[-1].legend(fontsize=6, loc="lower left", bbox_to_anchor=(1.02, 0))
    return figure_png(fig)


def dial_markdown(sweep: Mapping[str, Any]) -> str:
    """The sweep as Markdown: the failure matrix per setting (F1 and, where it fails, why) and the order reversals."""
    s = sweep["settings"]
    dials = ", ".join(f"`{k}` ∈ {{" + ", ".join(f"{v:g}" for v in vs) + "}" for k, vs in s["dials"].items())
    lines = [
        f"Negatives `{s['negatives']}`; pairs {s['pairs']}, threshold {s['threshold']}, pair seeds {s['seeds']} "
        f"({s['interval']}); the dials {dials}, "
        "the others at their defaults (backup=1: two redundant input routes). A cell is the circuit's edge F1; where precision or recall is below 1 on some seed, "
        "the reason that cost the most edges follows it. [m(∅) ×N]: the run with every edge ablated, which zero and "
        f"mean ablation normalise against, is N times the corrupted word's distance from the clean run (shown above "
        f"{NORMALISER_FLAG:g}): every effect is divided by N, so the threshold acts N times higher.",
        "",
    ]
    for setting in dict.fromkeys(r["setting"] for r in sweep["rows"]):
        m = failure_matrix(sweep, setting)
        lines += [f"### Failure matrix: corruption {setting.split('/')[0]}, ablation {setting.split('/')[1]}", ""]
        lines += ["| method | " + " | ".join(m["columns"]) + " |", "|---|" + "---|" * len(m["columns"])]
        for method, cells in m["cells"].items():
            parts = []
            for c in m["columns"]:
                cell = cells.get(c)
                far = cell is not None and (cell.get("normaliser") or 0.0) > NORMALISER_FLAG
                parts.append(
                    "—"
                    if cell is None
                    else f"{cell['f1']['mean']:.2f}"
                    + (f" ({cell['cause']})" if cell["fails"] else "")
                    + (f" [m(∅) ×{cell['normaliser']:.1f}]" if far else "")
                )
            lines.append(f"| {method} | " + " | ".join(parts) + " |")
        lines.append("")
    flips = reversals(sweep)
    lines += ["### Order reversals along a dial (average precision; intervals disjoint both ways)", ""]
    if not flips:
        lines += ["None: wherever two methods' order is decided at two values of one dial, it is the same.", ""]
    for f in flips:
        a, b = f["leads"]
        lines.append(
            f"- {f['family']} ({f['setting']}), {f['dial']} {f['values'][0]:g} → {f['values'][1]:g}: {a} above {b}, then "
            f"below ({a}: {f['average_precision'][a][0]:.2f} → {f['average_precision'][a][1]:.2f}; {b}: "
            f"{f['average_precision'][b][0]:.2f} → {f['average_precision'][b][1]:.2f}); {a} at {f['values'][1]:g}: {f['cause'] or '—'}"
        )
    return "\n".join(lines) + "\n"
