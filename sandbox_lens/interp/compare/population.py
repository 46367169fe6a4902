"""Populations of twins: how much the seeds of one setting agree (thesis §3.6: attention differs
from seed to seed, and reading it alone misleads).

For every cell of a sweep (``interp train --seeds … [--grid …]``), over its transformer twins:

* **attention variation** — ‖A_s − A_s'‖²_F between every pair of seeds, head by head (same layer,
  same head index), on one probe input, beside the exact expectation for random causal patterns
  (:func:`sandbox_lens.probes.dyck.random_attention_baseline`); a ratio near 1 means the seeds agree no more than
  random attention would;
* **reference scores** — for each head of each seed, its closest reference pattern (the
  comparison's: stack top, look-back k, latest write, …) and the TV distance to it; the population
  shows how often each reference wins;
* **probes** — the best held-out probe accuracy of each task latent per seed (median, min, max);
* **causal** (``causal_pairs`` > 0) — every twin aligned to its task's high-level model
  (:func:`sandbox_lens.interp.causal.align.align`) beside its own random-init null (seeded like it) and the kind's exact
  skyline construction; per variable, the seeds' DAS IIA, their nulls', the depth of their first
  full-swap sites beside the construction's, the DAS hooks and dimensions, with bootstrap intervals over
  seeds and a Wilson interval on the share of seeds whose DAS verdict is "implements", and a population
  verdict by :func:`population_verdict`'s stated rule.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from sandbox_lens.interp.compare.analyse import attention_scores, comparison_of_task
from sandbox_lens.interp.compare.names import head_name
from sandbox_lens.interp.compare.sweeps import (
    SHARE,
    causal_population,
    causal_population_seconds,
    population_verdict,
    run_directories,
)
from sandbox_lens.interp.files import atomic_write
from sandbox_lens.interp.model.run import attention_patterns, live_heads
from sandbox_lens.interp.train import load_trained
from sandbox_lens.probes.dyck import attention_variation, random_attention_baseline
from sandbox_lens.probes.linear import probe_accuracy

__all__ = ["population", "run_directories", "causal_population", "population_verdict", "SHARE"]


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
        values = [
            attention_variation(patterns[a][head][0], patterns[b][head][0])
            for a, b in itertools.combinations(sorted(models), 2)
        ]
        if values:
            variation[head_name(head)] = {
                "mean": float(np.mean(values)),
                "min": float(np.min(values)),
                "max": float(np.max(values)),
                "pairs": len(values),
                "ratio_to_random": float(np.mean(values) / baseline) if baseline else None,
            }
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
        per_seed.append(
            {
                "seed": s,
                "best_reference": {h: sc["best_reference"] for h, sc in scores.items()},
                "probe_best": best_probe,
            }
        )
    return {
        "runs": [str(r) for r in runs],
        "seeds": sorted(models),
        "probe_tokens": probe[0].tolist(),
        "probe_text": " ".join(comparison.display_tokens(first, word)),
        "attention_variation": variation,
        "random_baseline": baseline,
        "positions": n,
        "best_reference": {
            h: {ref: {"heads": len(tv), "mean_tv": float(np.mean(tv))} for ref, tv in refs.items()}
            for h, refs in references.items()
        },
        "probes": {
            lat: {
                "median": float(np.median(v["best"])),
                "min": float(np.min(v["best"])),
                "max": float(np.max(v["best"])),
                "per_seed": v["best"],
            }
            for lat, v in probes.items()
        },
        "per_seed": per_seed,
    }


def population(
    directory: str | Path,
    samples: int = 64,
    seed: int = 0,
    out: str | Path | None = None,
    causal_pairs: int = 0,
    das_steps: int = 150,
    ks: Sequence[int] = (1, 2, 4, 8),
    progress: bool = False,
) -> dict[str, Any]:
    """The population analyses of every cell of a sweep directory (see the module docstring)."""
    cells = run_directories(directory)
    if causal_pairs:  # estimated before any work
        from sandbox_lens.interp.budget import require

        require(
            f"aligning the population's twins ({causal_pairs} pairs per split, {das_steps} DAS steps)",
            seconds=causal_population_seconds(cells, causal_pairs, das_steps, ks),
            lower="--das-steps or --causal-pairs",
        )
    result = {
        "directory": str(directory),
        "samples": samples,
        "seed": seed,
        "cells": {name or "(all)": _cell(runs, samples, seed) for name, runs in cells.items()},
    }
    if causal_pairs:
        for name, runs in cells.items():
            cell = result["cells"][name or "(all)"]
            if "skipped" not in cell:
                cell["causal"] = causal_population(runs, causal_pairs, das_steps, ks, seed, progress)
    if out is not None:
        atomic_write(Path(out), (json.dumps(result, indent=1) + "\n").encode())
    return result
