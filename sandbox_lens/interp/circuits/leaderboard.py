"""The circuit leaderboard: every method on every construction (with and without informative negatives),
under each corruption and ablation, scored against the ground-truth level that setting can see.

A cell is run once per pair seed; each number is the mean over seeds with Student's t interval over the seeds
(:func:`sandbox_lens.interp.stats.t_interval`), and the methods' order is decided with those intervals: two
methods whose intervals overlap are tied. Each cell also says *why* a score
is low: the spurious edges by the ground truth's reason for leaving them out, the misses by
:func:`~sandbox_lens.interp.circuits.analyse.analyse`'s reason. :func:`markdown` renders the committed JSON as the
table in the docs, so the table is never edited by hand.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sandbox_lens.interp.circuits.analyse import analyse
from sandbox_lens.interp.circuits.kinks import KINK_TOLERANCE
from sandbox_lens.interp.circuits.methods import method_of
from sandbox_lens.interp.circuits.truth import ground_truth
from sandbox_lens.interp.errors import SandboxError
from sandbox_lens.interp.model.hooked import to_hooked
from sandbox_lens.interp.progress import bar as progress_bar
from sandbox_lens.interp.stats import t_interval

__all__ = [
    "Family",
    "Setting",
    "run_leaderboard",
    "markdown",
    "method_orders",
    "tied",
    "METRICS",
    "BOUNDS",
    "NORMALISER_FLAG",
]

#: What each cell reports (higher is better except CMD and seconds).
METRICS = ("auroc", "average_precision", "cpr", "cmd", "precision", "recall", "seconds")
#: The range a metric cannot leave: its interval is clipped to it (a t interval of precisions near 1 overshoots).
BOUNDS: dict[str, tuple[float | None, float | None]] = {
    **{m: (0.0, 1.0) for m in ("auroc", "average_precision", "precision", "recall", "f1")},
    "cmd": (0.0, None),
    "seconds": (0.0, None),
}


@dataclass(frozen=True)
class Family:
    """A construction to score on: its name and how to build its spec. ``per_seed``: ``build(seed)`` builds a new
    construction for each pair seed (an unseen automaton drawn per seed), so a method's spread over seeds includes
    the automaton's. ``twin``: ``build(seed)`` gives (ground truth, model) itself — a trained twin of that seed and
    its imposed circuit (:func:`sandbox_lens.interp.circuits.imposed.imposed_truth`), so the spread is the twins'."""

    name: str
    build: Callable[..., Any]
    negatives: bool = False
    per_seed: bool = False
    twin: bool = False


@dataclass(frozen=True)
class Setting:
    """A corruption (None: the task's first) and an ablation."""

    corruption: str | None = None
    ablation: str = "resample"

    @property
    def name(self) -> str:
        return f"{self.corruption or 'default'}/{self.ablation}"


def run_leaderboard(
    families: Sequence[Family],
    methods: Sequence[str],
    settings: Sequence[Setting],
    seeds: Sequence[int],
    pairs: int = 32,
    threshold: float = 0.01,
    steps: int = 16,
    progress: bool = False,
) -> dict[str, Any]:
    """Every (family, setting, method) cell over ``seeds``: the board :func:`markdown` renders."""

    rows = []
    bar = progress_bar(
        total=len(families) * len(settings) * len(methods), disable=not progress, desc="leaderboard", unit="cell"
    )
    started = time.process_time()
    for family in families:
        built = _built(family, seeds)
        for setting in settings:
            for method in methods:
                runs = []
                try:
                    for seed in seeds:
                        truth, model = built(seed)
                        r = analyse(
                            model,
                            method,
                            truth,
                            pairs=pairs,
                            corruption=setting.corruption,
                            source=setting.ablation,
                            threshold=threshold,
                            seed=seed,
                            steps=steps if method_of(method).steps else None,
                        )
                        runs.append((r, r["cpu_seconds"]))  # the method's own CPU time
                    rows.append(_row(family, setting, method, runs))
                except SandboxError as e:  # a method that cannot run on this family (auto-circuit on FFL's words)
                    rows.append(
                        {
                            "construction": family.name,
                            "negatives": family.negatives,
                            "setting": setting.name,
                            "method": method,
                            "skipped": str(e),
                        }
                    )
                bar.update(1)
    bar.close()
    return {
        "settings": {
            "pairs": pairs,
            "threshold": threshold,
            "eap_ig_steps": steps,
            "seeds": list(seeds),
            "interval": f"95% t interval of the mean over {len(seeds)} pair seeds",
            "seconds": "CPU seconds of the method alone (not the pairs, the curve or the ground truth's levels)",
        },
        "cpu_seconds": time.process_time() - started,
        "rows": rows,
    }


def _built(family: Family, seeds: Sequence[int]) -> Callable[[int], tuple[Any, Any]]:
    """Seed → (ground truth, model): one construction for every seed, or one per seed (built once each)."""
    if not (family.per_seed or family.twin):
        spec = family.build()
        one = (ground_truth(spec), to_hooked(spec))
        return lambda seed: one
    cache: dict[int, tuple[Any, Any]] = {}

    def of(seed: int) -> tuple[Any, Any]:
        if seed not in cache:
            if family.twin:
                cache[seed] = family.build(seed)
            else:
                spec = family.build(seed)
                cache[seed] = (ground_truth(spec), to_hooked(spec))
        return cache[seed]

    return of


def _row(family: Family, setting: Setting, method: str, runs: list[tuple[dict, float]]) -> dict[str, Any]:
    values: dict[str, list[float | None]] = {m: [] for m in METRICS}
    for r, seconds in runs:
        values["auroc"].append(r["auroc"])
        values["average_precision"].append(r["average_precision"])
        values["cpr"].append(r["curve"]["cpr"])
        values["cmd"].append(r["curve"]["cmd"])
        values["precision"].append(r["edge_precision"])
        values["recall"].append(r["edge_recall"])
        values["seconds"].append(seconds)
    first = runs[0][0]
    row: dict[str, Any] = {
        "construction": family.name,
        "negatives": family.negatives,
        "setting": setting.name,
        "corruption": first["pairs"]["corruption"],
        "ablation": setting.ablation,
        "method": method,
        "level": first["ground_truth_level"],
        "truth_edges": len(first["ground_truth_edges"]),
        "graph_edges": len(first["graph"]["edges"]),
    }
    if family.per_seed or family.twin:  # the edge counts above are the first seed's automaton's (or twin's)
        row["per_seed"] = True
    if family.twin:
        row["twin"] = True
    for name, vs in values.items():
        xs = [v for v in vs if v is not None]
        row[name] = {
            "mean": float(np.mean(xs)) if xs else None,
            "interval": t_interval(xs, bounds=BOUNDS.get(name)),
            "values": vs,
        }
    positions = [r.get("position_scores", {}) for r, _ in runs]
    # a method that scores (edge, position) items, and one that also splits keys and values by their queries
    for name, items, key in (
        ("position_auroc", "edges", "auroc"),
        ("position_ap", "edges", "average_precision"),
        ("crossing_ap", "crossing", "average_precision"),
    ):
        if all(p.get("scored") and items in p for p in positions):
            xs = [p[items][key] for p in positions]
            row[name] = {"mean": float(np.mean(xs)), "interval": t_interval(xs, bounds=(0.0, 1.0)), "values": xs}
    if "position_ap" in row:
        row["position_items"] = {k: positions[0]["edges"][k] for k in ("positives", "candidates")}
    ratios = [x for r, _ in runs if (x := r["pairs"].get("normaliser_ratio", {}).get(r["metric"])) is not None]
    if ratios:  # zero and mean ablation: how much farther m(∅) is than the corrupted word (Pairs.normaliser_ratio)
        row["normaliser_ratio"] = max(ratios)
    kinks = [r["kinks"] for r, _ in runs if r.get("kinks")]
    if kinks:  # a gradient method: the read ReLU inputs at the kink, where rounding decides its derivative
        row["kinks"] = {"at_kink": [k["at_kink"] for k in kinks], "units": [k["units"] for k in kinks]}
    spurious = Counter(why for r, _ in runs for why in r["spurious"].values())
    missed = Counter(_short(m["reason"]) for r, _ in runs for m in r["missed"].values())
    row["why"] = {"spurious": dict(spurious), "missed": dict(missed)}
    return row


def _short(reason: str) -> str:
    return reason.split(":")[0].split(" (")[0]


def method_orders(
    board: dict[str, Any], metric: str = "average_precision", setting: str = "default/resample"
) -> dict[str, list[str]]:
    """Per construction (with negatives marked ``+neg``), the methods from best to worst on ``metric``."""
    out: dict[str, list[tuple[float, str]]] = {}
    for row in _scored(board):
        if row["setting"] != setting or row[metric]["mean"] is None:
            continue
        key = row["construction"] + (" +neg" if row["negatives"] else "")
        out.setdefault(key, []).append((row[metric]["mean"], row["method"]))
    return {k: [m for _, m in sorted(v, key=lambda x: -x[0])] for k, v in out.items()}


def _order_text(
    board: dict[str, Any], construction: str, metric: str = "average_precision", setting: str = "default/resample"
) -> str:
    """``a ≈ b > c``: methods from best to worst; ``≈`` where a method's interval overlaps the one before it (or,
    without intervals, their means agree to three decimals), ``>`` where it lies wholly below."""
    stats = {}
    for row in _scored(board):
        key = row["construction"] + (" +neg" if row["negatives"] else "")
        if key == construction and row["setting"] == setting and row[metric]["mean"] is not None:
            stats[row["method"]] = row[metric]
    text, last = "", None
    for method in method_orders(board, metric, setting)[construction]:
        if last is not None:
            text += " ≈ " if tied(stats[last], stats[method]) else " > "
        text += method
        last = method
    return text


def tied(better: dict[str, Any], worse: dict[str, Any]) -> bool:
    """Whether two cells cannot be told apart: their intervals overlap (without intervals: equal to 3 decimals)."""
    a, b = better.get("interval"), worse.get("interval")
    if a is None or b is None:
        return round(better["mean"], 3) == round(worse["mean"], 3)
    return b[1] >= a[0]


def _scored(board: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows with scores (not those of a method that could not run on the family)."""
    return [r for r in board["rows"] if "skipped" not in r]


def _cell(stat: dict[str, Any]) -> str:
    if stat["mean"] is None:
        return "—"
    lo_hi = stat["interval"]
    return f"{stat['mean']:.2f}" + (
        "" if lo_hi is None or lo_hi[1] - lo_hi[0] < 0.005 else f" [{lo_hi[0]:.2f}, {lo_hi[1]:.2f}]"
    )


#: A normalising run this many times farther from the clean run than the corrupted word is flagged in *why*.
NORMALISER_FLAG = 2.0


def _why(row: dict[str, Any]) -> str:
    parts = []
    ratio = row.get("normaliser_ratio")
    if ratio is not None and ratio > NORMALISER_FLAG:
        parts.append(f"m(∅) {ratio:.1f}× the corrupted word's distance: the threshold acts {ratio:.1f}× higher")
    at_kink = _at_kink(row)
    if at_kink:
        parts.append(f"rounding decides the gradient at {at_kink:.0f} ReLU inputs (mean over seeds)")
    parts += [f"{n} spurious: {k}" for k, n in sorted(row["why"]["spurious"].items(), key=lambda x: -x[1])[:2]]
    parts += [f"{n} missed: {k}" for k, n in sorted(row["why"]["missed"].items(), key=lambda x: -x[1])[:2]]
    return "; ".join(parts) or ""


def _at_kink(row: dict[str, Any]) -> float:
    """The mean over seeds of a gradient method's read ReLU inputs at the kink (0 for a row without them)."""
    return float(np.mean(row["kinks"]["at_kink"])) if row.get("kinks") else 0.0


def _kink_table(board: dict[str, Any]) -> list[str]:
    """Per family with ReLU inputs at the kink: how many, and the gradient methods' rows that stand on them."""
    families: dict[tuple[str, bool], list[dict[str, Any]]] = {}
    for r in _scored(board):
        if _at_kink(r):
            families.setdefault((r["construction"], r["negatives"]), []).append(r)
    if not families:
        return []
    lines = [
        "### Where rounding decides the gradient methods",
        "",
        f"Read ReLU inputs within 2^{math.log2(KINK_TOLERANCE):g} of their block's largest |input| of 0 on the "
        "clean words (`circuits/kinks.py`): there the derivative is a rounding decision, and an engine or a device that rounds "
        "otherwise can score an edge that patching finds decisive near 0. Per pair seed, summed over positions.",
        "",
        "| construction | at the kink / read ReLU inputs | gradient methods' AP (default/resample) |",
        "|---|---|---|",
    ]
    for (name, negatives), rows in families.items():
        first = rows[0]["kinks"]
        aps = ", ".join(
            f"{r['method']} {_cell(r['average_precision'])}" for r in rows if r["setting"] == "default/resample"
        )
        lines.append(
            f"| {name}{' + negatives' if negatives else ''} | {_at_kink(rows[0]):.0f} / "
            f"{float(np.mean(first['units'])):.0f} | {aps or '—'} |"
        )
    return [*lines, ""]


def markdown(board: dict[str, Any]) -> str:
    """The leaderboard as Markdown: one table per setting, rows construction × method, and the methods'
    order per construction."""
    s = board["settings"]
    seconds = "method CPU s" if "seconds" in s else "s (wall, whole analysis)"
    lines = [
        f"Pairs {s['pairs']}, threshold {s['threshold']}, EAP-IG with {s['eap_ig_steps']} steps; each number is "
        f"the mean over pair seeds {s['seeds']} with its {s['interval']} (omitted where the seeds agree). "
        "Counts in *why* are summed over the seeds." + (f" **{s['note']}**" if s.get("note") else ""),
        "",
    ]
    for setting in dict.fromkeys(r["setting"] for r in board["rows"]):
        rows = [r for r in _scored(board) if r["setting"] == setting]
        lines += [
            f"### Corruption {setting.split('/')[0]}, ablation {setting.split('/')[1]}",
            "",
            f"| construction | method | level (edges) | AUROC | AP | CPR | CMD | precision | recall | {seconds} | why |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in rows:
            name = r["construction"] + (" + negatives" if r["negatives"] else "")
            lines.append(
                f"| {name} | {r['method']} | {r['level']} ({r['truth_edges']}/{r['graph_edges']}) | "
                + " | ".join(_cell(r[m]) for m in ("auroc", "average_precision", "cpr", "cmd", "precision", "recall"))
                + f" | {r['seconds']['mean']:.2f} | {_why(r)} |"
            )
        lines.append("")
    by_position = [r for r in _scored(board) if "position_ap" in r]
    if by_position:
        crossing = any("crossing_ap" in r for r in by_position)  # (edge, query, key) items: keys and values split
        lines += [
            "### Per position: (edge, position) items against the per-position truth",
            "",
            "| construction | setting | method | positives / candidates | AUROC | AP | edge-level AP |"
            + (" (edge, query, key) AP |" if crossing else ""),
            "|---|---|---|---|---|---|---|" + ("---|" if crossing else ""),
        ]
        lines += [
            f"| {r['construction']}{' + negatives' if r['negatives'] else ''} | {r['setting']} | {r['method']} | "
            f"{r['position_items']['positives']} / {r['position_items']['candidates']} | {_cell(r['position_auroc'])} | "
            f"{_cell(r['position_ap'])} | {_cell(r['average_precision'])} |"
            + (f" {_cell(r['crossing_ap']) if 'crossing_ap' in r else '—'} |" if crossing else "")
            for r in by_position
        ]
        lines.append("")
    lines += _kink_table(board)
    skipped = [r for r in board["rows"] if "skipped" in r]
    if skipped:
        lines += ["Not run (the method cannot take the family's words):", ""]
        lines += [
            f"- {r['construction']}{' + negatives' if r['negatives'] else ''}, {r['method']}: {r['skipped']}"
            for r in skipped
        ]
        lines.append("")
    lines += [
        "### The methods' order (average precision, default corruption, resample ablation)",
        "",
        "| construction | best → worst (≈ : the intervals overlap, a tie) |",
        "|---|---|",
    ]
    lines += [f"| {k} | {_order_text(board, k)} |" for k in method_orders(board)]
    return "\n".join(lines) + "\n"
