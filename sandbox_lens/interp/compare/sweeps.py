"""The runs of a sweep directory, and their causal alignment summarised over seeds (the causal part of
:mod:`sandbox_lens.interp.compare.population`, kept apart so that :func:`sandbox_lens.interp.compare.analyse.compare` can show a
population's summary without importing the attention analyses that import it)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from sandbox_lens.interp.errors import CheckpointError
from sandbox_lens.interp.train import load_trained

__all__ = [
    "causal_population_seconds",
    "run_directories",
    "population_runs",
    "causal_population",
    "population_verdict",
    "SHARE",
]

#: The share of seeds that must implement a variable (the Wilson interval's lower bound must exceed it).
SHARE = 0.5


def run_directories(directory: str | Path) -> dict[str, list[Path]]:
    """The runs of a sweep directory, by cell (``""`` for a sweep without a grid)."""
    root = Path(directory)
    if (root / "checkpoint.safetensors").exists():
        raise CheckpointError(
            f"{root} is one training run; a population is a sweep's directory (the one holding seed_*/"
            + (f": {root.parent}" if root.name.startswith("seed_") else "")
            + ")"
        )
    runs = sorted(p.parent for p in root.glob("**/checkpoint.safetensors") if p.parent.name.startswith("seed_"))
    if not runs:
        raise CheckpointError(f"no training runs under {root} (expected <cell>/seed_<s>/checkpoint.safetensors)")
    cells: dict[str, list[Path]] = {}
    for run in runs:
        rel = run.parent.relative_to(root)
        cells.setdefault("" if rel == Path(".") else str(rel), []).append(run)
    return cells


def population_runs(task: Any, directory: str | Path) -> dict[str, list[Path]]:
    """:func:`run_directories` of a sweep whose twins were trained on ``task`` (a training task), else a one-line
    :class:`CheckpointError` naming the task they were trained on."""
    from sandbox_lens.interp.train.checkpoint import read_checkpoint, task_label

    cells = run_directories(directory)
    for runs in cells.values():
        got = read_checkpoint(runs[0])[0].get("task")
        if got != task.to_dict():
            raise CheckpointError(
                f"--population {directory}: its twins were trained on {task_label(got)}, not on the "
                f"requested task ({task.name})"
            )
    return cells


def causal_population_seconds(cells: dict[Any, Sequence[Path]], pairs: int, das_steps: int, ks: Sequence[int]) -> float:
    """Estimated seconds of :func:`causal_population` over every cell: each transformer twin (and the exact
    construction beside it) aligned as :func:`~sandbox_lens.interp.causal.align.align_seconds` estimates, the
    nulls searched once per cell (they are shared), timed on the cell's first twin."""
    from sandbox_lens.interp.causal.align import NULLS, align_seconds, high_level_of
    from sandbox_lens.interp.causal.interchange import pair_length

    seconds = 0.0
    for runs in cells.values():
        twins = [m for m in map(load_trained, runs) if m.card.options.get("arch", "transformer") == "transformer"]
        if twins:
            first, variables = twins[0], len(high_level_of(twins[0]).variables)
            models = 2 * len(twins) + NULLS
            seconds += align_seconds(first, pairs, pair_length(first), variables, models, len(ks), das_steps)
    return seconds


def causal_population(
    runs: Sequence[Path], pairs: int, das_steps: int, ks: Sequence[int], seed: int, progress: bool = False
) -> dict[str, Any]:
    """Every transformer twin of a cell aligned beside its seeded null and the exact skyline (see the module
    docstring); per variable, the per-seed numbers and their summaries."""
    from sandbox_lens.interp.causal.align import align, nulls_of
    from sandbox_lens.interp.causal.verdict import block_order
    from sandbox_lens.interp.evaluate import skyline
    from sandbox_lens.interp.progress import bar as progress_bar
    from sandbox_lens.interp.stats import estimate, wilson_interval
    from sandbox_lens.interp.tasks.kinds import task_from_dict

    loaded = {int(r.name.split("_", 1)[1]): load_trained(r) for r in runs}
    twins = {s: m for s, m in loaded.items() if m.card.options.get("arch", "transformer") == "transformer"}
    first = next(iter(twins.values()))
    _, length = first.card.task_kind.construction_input(task_from_dict(first.card.task))
    construction = skyline(first, length)
    constructions = {construction.card.construction: construction} if construction is not None else {}
    per_seed: dict[str, list[dict[str, Any]]] = {}
    built: dict[str, dict[str, Any]] = {}  # the construction's own alignment, per variable (the same for every twin)
    started = time.perf_counter()
    nulls = nulls_of(first, seed)  # one shape, one task, the same pairs: every twin beside the same nulls
    for s, twin in progress_bar(twins.items(), disable=not progress, desc="aligning twins", unit="twin"):
        r = align(twin, constructions=constructions, null=nulls, pairs=pairs, ks=ks, das_steps=das_steps, seed=seed)
        for variable, v in r["variables"].items():
            best = v["model"]["das"]["chosen"] or {"hook": None, "test": {"iia": None}}
            firsts = [block_order(h) for h in v["model"]["first_sites"].values() if h is not None]
            c = next(iter(v["constructions"].values()), None)
            das_v = c["das_verdict"] if c else v["das_verdict"]
            per_seed.setdefault(variable, []).append(
                {
                    "seed": s,
                    "ceiling": v["model"]["ceiling"],
                    "das_iia": best["test"]["iia"],
                    "das_hook": best["hook"],
                    "das_k": das_v.get("k"),
                    "null_das_iia": v["null"]["das"]["iia"],
                    "null_best_full_swap": max((b for b in v["null"]["best"].values() if b is not None), default=None),
                    "median_first_block": float(np.median(firsts)) if firsts else None,
                    "verdict": c["verdict"]["verdict"] if c else None,
                    "das_verdict": das_v["verdict"],
                    "implements": das_v["implements"],
                }
            )
        if not built:
            built = {variable: v["constructions"] for variable, v in r["variables"].items()}
    out: dict[str, Any] = {
        "pairs": pairs,
        "das_steps": das_steps,
        "ks": list(ks),
        "seeds": sorted(twins),
        "construction": next(iter(constructions), None),
        "variables": {},
        "seconds": round(time.perf_counter() - started, 1),
    }
    for variable, rows in per_seed.items():
        yes = sum(1 for r in rows if r["implements"] is True)
        c = next(iter(built.get(variable, {}).values()), None)
        c_firsts = [block_order(h) for h in (c["first_sites"].values() if c else []) if h is not None]
        summary = {
            "das_iia": estimate([r["das_iia"] for r in rows], seed=seed).to_dict(),
            "null_das_iia": estimate([r["null_das_iia"] for r in rows], seed=seed).to_dict(),
            "median_first_block": estimate([r["median_first_block"] for r in rows], "median", seed=seed).to_dict(),
            "construction_median_first_block": float(np.median(c_firsts)) if c_firsts else None,
            "construction_named_sites": [
                {k: s[k] for k in ("site", "role", "iia", "interval")} for s in (c["named_sites"] if c else [])
            ],
            "das_hooks": {
                h: sum(r["das_hook"] == h for r in rows) for h in sorted({r["das_hook"] for r in rows}, key=str)
            },
            "das_k": [r["das_k"] for r in rows],
            "implements": {"seeds": yes, "of": len(rows), "interval": wilson_interval(yes, len(rows))},
            "blind": sum(1 for r in rows if "no evidence of absence" in r["das_verdict"]),
        }
        summary["verdict"] = population_verdict(summary, variable)
        out["variables"][variable] = {"per_seed": rows, "summary": summary}
    return out


def population_verdict(summary: dict[str, Any], variable: str = "state") -> dict[str, Any]:
    """The population's verdict on ``variable``, by a stated rule that can fail:

    * the nulls' mean DAS IIA reaches :data:`~sandbox_lens.interp.causal.verdict.IMPLEMENTS` → "cannot tell";
    * the Wilson interval of the share of seeds whose DAS verdict is "implements" lies above :data:`SHARE` →
      "the population implements it";
    * it lies below → "the population does not implement it" — unless most seeds' negative results are
      ones DAS cannot settle (it misses the construction's own variable) → "cannot tell";
    * else (the interval straddles :data:`SHARE`) → "seeds differ".
    """
    from sandbox_lens.interp.causal.verdict import IMPLEMENTS

    what = "the state" if variable == "state" else f"{variable!r}"
    imp = summary["implements"]
    lo, hi = imp["interval"] or (0.0, 1.0)
    out = {
        "rule": f"Wilson 95 % interval of the share of seeds whose DAS verdict is 'implements' above {SHARE} "
        f"(below: does not); the nulls' mean DAS IIA must stay below {IMPLEMENTS}",
        "share": f"{imp['seeds']} of {imp['of']}",
        "interval": imp["interval"],
    }
    null = summary["null_das_iia"]["value"]
    if null is not None and null >= IMPLEMENTS:
        return {**out, "verdict": "cannot tell: the random-init nulls' DAS reaches it too", "implements": None}
    if lo > SHARE:
        return {**out, "verdict": f"the population implements {what}", "implements": True}
    if hi < SHARE:
        if summary["blind"] * 2 > imp["of"]:
            return {
                **out,
                "verdict": f"cannot tell: DAS does not find {what} in most seeds, but it misses the "
                "construction's own too",
                "implements": None,
            }
        return {**out, "verdict": f"the population does not implement {what}", "implements": False}
    return {**out, "verdict": f"seeds differ: {imp['seeds']} of {imp['of']} implement {what}", "implements": None}
