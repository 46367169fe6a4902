"""Populations of twins: how much the seeds of one setting agree (thesis §3.6: attention differs
from seed to seed, and reading it alone misleads).

For every cell of a sweep (``interp train --seeds … [--grid …]``), over its transformer twins:

* **attention variation** — ‖A_s − A_s'‖²_F between every pair of seeds, head by head (same layer,
  same head index), on one probe input, beside the exact expectation for random causal patterns
  (:func:`probes.dyck.random_attention_baseline`); a ratio near 1 means the seeds agree no more than
  random attention would;
* **reference scores** — for each head of each seed, its closest reference pattern (the
  comparison's: stack top, look-back k, latest write, …) and the TV distance to it; the population
  shows how often each reference wins;
* **probes** — the best held-out probe accuracy of each task latent per seed (median, min, max);
* **causal** (``causal_pairs`` > 0) — every twin aligned to its task's high-level model
  (:func:`interp.causal.align.align`) beside its own random-init null (seeded like it) and the kind's exact
  skyline construction; per variable, the seeds' DAS IIA, their nulls', the depth of their first
  full-swap sites beside the construction's, the DAS hooks and dimensions, with bootstrap intervals over
  seeds and a Wilson interval on the share of seeds whose DAS verdict is "implements", and a population
  verdict by :func:`population_verdict`'s stated rule.
"""

from __future__ import annotations

import itertools
import json
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from interp.compare.analyse import attention_scores, comparison_of_task
from interp.compare.names import head_name
from interp.errors import CheckpointError
from interp.files import atomic_write
from interp.model.run import attention_patterns, live_heads
from interp.train import load_trained
from probes.dyck import attention_variation, random_attention_baseline
from probes.linear import probe_accuracy

__all__ = ["population", "run_directories", "causal_population", "population_verdict", "SHARE"]

#: The share of seeds that must implement a variable (the Wilson interval's lower bound must exceed it).
SHARE = 0.5


def run_directories(directory: str | Path) -> dict[str, list[Path]]:
    """The runs of a sweep directory, by cell (``""`` for a sweep without a grid)."""
    root = Path(directory)
    runs = sorted(p.parent for p in root.glob("**/checkpoint.safetensors") if p.parent.name.startswith("seed_"))
    if not runs:
        raise CheckpointError(f"no training runs under {root} (expected <cell>/seed_<s>/checkpoint.safetensors)")
    cells: dict[str, list[Path]] = {}
    for run in runs:
        rel = run.parent.relative_to(root)
        cells.setdefault("" if rel == Path(".") else str(rel), []).append(run)
    return cells


def _cell(runs: list[Path], samples: int, seed: int) -> dict[str, Any]:
    loaded = {int(r.name.split("_", 1)[1]): load_trained(r) for r in runs}
    models = {s: m for s, m in loaded.items() if m.card.options.get("arch", "transformer") == "transformer"}
    if not models:
        return {"runs": [str(r) for r in runs], "skipped": "no transformer runs (an LSTM has no attention)"}
    first = next(iter(models.values()))
    comparison = comparison_of_task(first.card.task)
    word = comparison.example_word(seed)
    probe = comparison.inputs(first, np.asarray(word)[None], with_latents=False).tokens
    heads = sorted(set.intersection(*(set(live_heads(m)) for m in models.values())))
    patterns = {s: attention_patterns(m, probe, heads) for s, m in models.items()}
    n = probe.shape[1]
    baseline = random_attention_baseline(n)
    variation = {}
    for head in heads:
        values = [attention_variation(patterns[a][head][0], patterns[b][head][0])
                  for a, b in itertools.combinations(sorted(models), 2)]
        if values:
            variation[head_name(head)] = {"mean": float(np.mean(values)), "min": float(np.min(values)),
                                          "max": float(np.max(values)), "pairs": len(values),
                                          "ratio_to_random": float(np.mean(values) / baseline) if baseline else None}
    words = comparison.words(samples, seed)
    references: dict[str, dict[str, Any]] = {}
    probes: dict[str, dict[str, list[float]]] = {}
    per_seed = []
    for s, model in models.items():
        scores, _ = attention_scores(comparison, model, heads, words[: min(len(words), 20)])
        data = comparison.inputs(model, words)
        best_probe = {}
        for latent, (labels, mask) in data.latents.items():
            acc = probe_accuracy(model, data.tokens, labels, mask, seed=seed)
            best_probe[latent] = max(acc.values())
            probes.setdefault(latent, {"best": []})["best"].append(best_probe[latent])
        for head, sc in scores.items():
            ref = sc["best_reference"]
            entry = references.setdefault(head, {})
            entry.setdefault(ref, []).append(sc["references"][ref]["tv_distance"])
        per_seed.append({"seed": s, "best_reference": {h: sc["best_reference"] for h, sc in scores.items()},
                         "probe_best": best_probe})
    return {
        "runs": [str(r) for r in runs], "seeds": sorted(models), "probe_tokens": probe[0].tolist(),
        "probe_text": " ".join(comparison.display_tokens(first, word)),
        "attention_variation": variation, "random_baseline": baseline, "positions": n,
        "best_reference": {h: {ref: {"heads": len(tv), "mean_tv": float(np.mean(tv))} for ref, tv in refs.items()}
                           for h, refs in references.items()},
        "probes": {lat: {"median": float(np.median(v["best"])), "min": float(np.min(v["best"])),
                         "max": float(np.max(v["best"])), "per_seed": v["best"]} for lat, v in probes.items()},
        "per_seed": per_seed,
    }


def population(directory: str | Path, samples: int = 64, seed: int = 0, out: str | Path | None = None,
               causal_pairs: int = 0, das_steps: int = 150, ks: Sequence[int] = (1, 2, 4, 8),
               progress: bool = False) -> dict[str, Any]:
    """The population analyses of every cell of a sweep directory (see the module docstring)."""
    cells = run_directories(directory)
    result = {"directory": str(directory), "samples": samples, "seed": seed,
              "cells": {name or "(all)": _cell(runs, samples, seed) for name, runs in cells.items()}}
    if causal_pairs:
        for name, runs in cells.items():
            cell = result["cells"][name or "(all)"]
            if "skipped" not in cell:
                cell["causal"] = causal_population(runs, causal_pairs, das_steps, ks, seed, progress)
    if out is not None:
        atomic_write(Path(out), (json.dumps(result, indent=1) + "\n").encode())
    return result


def causal_population(runs: Sequence[Path], pairs: int, das_steps: int, ks: Sequence[int], seed: int,
                      progress: bool = False) -> dict[str, Any]:
    """Every transformer twin of a cell aligned beside its seeded null and the exact skyline (see the module
    docstring); per variable, the per-seed numbers and their summaries."""
    from tqdm import tqdm

    from interp.causal.align import align, null_of
    from interp.causal.verdict import block_order
    from interp.evaluate import skyline
    from interp.stats import estimate, wilson_interval
    from interp.tasks.kinds import task_from_dict

    loaded = {int(r.name.split("_", 1)[1]): load_trained(r) for r in runs}
    twins = {s: m for s, m in loaded.items() if m.card.options.get("arch", "transformer") == "transformer"}
    first = next(iter(twins.values()))
    _, length = first.card.task_kind.construction_input(task_from_dict(first.card.task))
    construction = skyline(first, length)
    constructions = {construction.card.construction: construction} if construction is not None else {}
    per_seed: dict[str, list[dict[str, Any]]] = {}
    built: dict[str, dict[str, Any]] = {}  # the construction's own alignment, per variable (the same for every twin)
    started = time.perf_counter()
    for s, twin in tqdm(twins.items(), disable=not progress, desc="aligning twins", unit="twin", leave=False):
        r = align(twin, constructions=constructions, null=null_of(twin, s), pairs=pairs, ks=ks, das_steps=das_steps,
                  seed=seed)
        for variable, v in r["variables"].items():
            best = max(v["model"]["das"]["by_hook"], key=lambda d: -1.0 if d["iia"] is None else d["iia"])
            firsts = [block_order(h) for h in v["model"]["first_sites"].values() if h is not None]
            c = next(iter(v["constructions"].values()), None)
            das_v = c["das_verdict"] if c else v["das_verdict"]
            per_seed.setdefault(variable, []).append({
                "seed": s, "ceiling": v["model"]["ceiling"], "das_iia": best["iia"], "das_hook": best["hook"],
                "das_k": das_v.get("k"), "null_das_iia": v["null"]["das"]["iia"],
                "null_best_full_swap": max((b for b in v["null"]["best"].values() if b is not None), default=None),
                "median_first_block": float(np.median(firsts)) if firsts else None,
                "verdict": c["verdict"]["verdict"] if c else None, "das_verdict": das_v["verdict"],
                "implements": das_v["implements"]})
        if not built:
            built = {variable: v["constructions"] for variable, v in r["variables"].items()}
    out: dict[str, Any] = {"pairs": pairs, "das_steps": das_steps, "ks": list(ks), "seeds": sorted(twins),
                           "construction": next(iter(constructions), None), "variables": {},
                           "seconds": round(time.perf_counter() - started, 1)}
    for variable, rows in per_seed.items():
        yes = sum(1 for r in rows if r["implements"] is True)
        c = next(iter(built.get(variable, {}).values()), None)
        c_firsts = [block_order(h) for h in (c["first_sites"].values() if c else []) if h is not None]
        summary = {
            "das_iia": estimate([r["das_iia"] for r in rows], seed=seed).to_dict(),
            "null_das_iia": estimate([r["null_das_iia"] for r in rows], seed=seed).to_dict(),
            "median_first_block": estimate([r["median_first_block"] for r in rows], "median", seed=seed).to_dict(),
            "construction_median_first_block": float(np.median(c_firsts)) if c_firsts else None,
            "construction_named_sites": [{k: s[k] for k in ("site", "role", "iia", "interval")}
                                         for s in (c["named_sites"] if c else [])],
            "das_hooks": {h: sum(r["das_hook"] == h for r in rows) for h in sorted({r["das_hook"] for r in rows})},
            "das_k": [r["das_k"] for r in rows],
            "implements": {"seeds": yes, "of": len(rows), "interval": wilson_interval(yes, len(rows))},
            "blind": sum(1 for r in rows if "no evidence of absence" in r["das_verdict"]),
        }
        summary["verdict"] = population_verdict(summary, variable)
        out["variables"][variable] = {"per_seed": rows, "summary": summary}
    return out


def population_verdict(summary: dict[str, Any], variable: str = "state") -> dict[str, Any]:
    """The population's verdict on ``variable``, by a stated rule that can fail:

    * the nulls' mean DAS IIA reaches :data:`~interp.causal.verdict.IMPLEMENTS` → "cannot tell";
    * the Wilson interval of the share of seeds whose DAS verdict is "implements" lies above :data:`SHARE` →
      "the population implements it";
    * it lies below → "the population does not implement it" — unless most seeds' negative results are
      ones DAS cannot settle (it misses the construction's own variable) → "cannot tell";
    * else (the interval straddles :data:`SHARE`) → "seeds differ".
    """
    from interp.causal.verdict import IMPLEMENTS

    what = "the state" if variable == "state" else f"{variable!r}"
    imp = summary["implements"]
    lo, hi = imp["interval"] or (0.0, 1.0)
    out = {"rule": f"Wilson 95 % interval of the share of seeds whose DAS verdict is 'implements' above {SHARE} "
                   f"(below: does not); the nulls' mean DAS IIA must stay below {IMPLEMENTS}",
           "share": f"{imp['seeds']} of {imp['of']}", "interval": imp["interval"]}
    null = summary["null_das_iia"]["value"]
    if null is not None and null >= IMPLEMENTS:
        return {**out, "verdict": "cannot tell: the random-init nulls' DAS reaches it too", "implements": None}
    if lo > SHARE:
        return {**out, "verdict": f"the population implements {what}", "implements": True}
    if hi < SHARE:
        if summary["blind"] * 2 > imp["of"]:
            return {**out, "verdict": f"cannot tell: DAS does not find {what} in most seeds, but it misses the "
                                      "construction's own too", "implements": None}
        return {**out, "verdict": f"the population does not implement {what}", "implements": False}
    return {**out, "verdict": f"seeds differ: {imp['seeds']} of {imp['of']} implement {what}", "implements": None}
