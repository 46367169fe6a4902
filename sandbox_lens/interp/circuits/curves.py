"""Faithfulness over circuit sizes, as MIB's circuit track measures it.

For each size k (a fraction of the graph's edges, :data:`~sandbox_lens.interp.circuits.score.MIB_PERCENTAGES`),
the circuit is the method's top ⌊k·|E|⌋ edges by score (unscored edges last, ties in graph order);
every edge outside it is patched with the method's own ablation, and

    f(k) = (m(C_k) − m(∅)) / (m(full) − m(∅)),

where m is the task's metric on the affected outputs, m(full) the unpatched clean run and m(∅) the
run with every edge patched. :func:`~sandbox_lens.interp.circuits.score.areas` turns the curve into CPR (area
under f) and CMD (area between f and 1).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from sandbox_lens.interp.circuits.patching import Patcher, _chunk
from sandbox_lens.interp.circuits.score import MIB_PERCENTAGES, areas

__all__ = ["ranking", "faithfulness_curve"]


def ranking(scores: Sequence[float]) -> np.ndarray:
    """Edge indices from the highest score down; NaN (never scored) last; ties keep graph order."""
    s = np.asarray(scores, dtype=np.float64)
    key = np.where(np.isnan(s), -np.inf, s)
    return np.argsort(-key, kind="stable")


def faithfulness_curve(patcher: Patcher, pairs: Any, scores: Sequence[float], source: dict[str, Any],
                       metric: str = "logit_diff", percentages: Sequence[float] = MIB_PERCENTAGES) -> dict[str, Any]:
    """f(k) at each size in ``percentages`` for the ranking ``scores`` (one per graph edge, higher first),
    with ``source`` what patched edges deliver; returns sizes, edge counts, f, CPR and CMD."""
    edges = patcher.graph.edges
    if len(scores) != len(edges):
        raise ValueError(f"{len(scores)} scores for a graph of {len(edges)} edges")
    order = [edges[i] for i in ranking(scores)]
    counts = [int(p * len(edges)) for p in percentages]
    settings = [(order[k:], None) for k in counts] + [([], None), (list(edges), None)]
    values = []
    step = _chunk(len(settings), patcher.model, pairs.clean)
    for start in range(0, len(settings), step):
        logits = patcher.run_many(pairs.clean, settings[start: start + step], source)
        values.extend(pairs.value(logits[j], metric) for j in range(len(logits)))
    *curve, full, empty = values
    span = full - empty
    f = [float((v - empty) / span) if span else 1.0 for v in curve]
    return {"percentages": list(percentages), "edges": counts, "faithfulness": f, "metric": metric,
            "full": float(full), "empty": float(empty), **areas(percentages, f)}
