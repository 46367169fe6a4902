"""Attention-pattern comparison: reference patterns, per-head scores, head matching.

Reference patterns are ``[query, key]`` row-stochastic matrices for one token sequence:

* :func:`uniform_reference` — uniform over the prefix (a counting head);
* :func:`lookback_reference` — one-hot k positions back (a prefix-scan or previous-token head);
* :func:`target_reference` — one-hot on given key positions per query: the last unmatched open
  bracket (``Dyck.stack_top_positions``), the most recent gridworld boundary
  (``sandbox_lens.interp.tasks.gridworld.last_boundary_positions``), the most recent write, ...

:func:`score_head` measures a head against a reference: the mean attention mass on the
reference's support, the fraction of queries whose argmax agrees with the reference's, and the
mean total-variation distance. :func:`match_heads` pairs trained heads with constructed heads one
to one (Hungarian algorithm on pattern similarity, ``scipy.optimize.linear_sum_assignment``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from sandbox_lens.interp.errors import VocabularyError

__all__ = ["uniform_reference", "lookback_reference", "target_reference", "score_head", "score_heads", "match_heads"]


def uniform_reference(n: int) -> np.ndarray:
    """The uniform causal attention pattern over ``n`` positions: row i spreads evenly over positions 0..i."""
    a = np.tril(np.ones((n, n)))
    return a / a.sum(1, keepdims=True)


def lookback_reference(n: int, k: int) -> np.ndarray:
    """One-hot on position i − k (on position 0 while i < k)."""
    a = np.zeros((n, n))
    a[np.arange(n), np.maximum(np.arange(n) - k, 0)] = 1.0
    return a


def target_reference(targets: Sequence[int]) -> np.ndarray:
    """One-hot on ``targets[i]`` (≤ i) for every query i."""
    t = np.asarray(targets, dtype=np.int64)
    n = len(t)
    if np.any(t > np.arange(n)) or np.any(t < 0):
        raise VocabularyError("a reference target must be a key at or before its query")
    a = np.zeros((n, n))
    a[np.arange(n), t] = 1.0
    return a


def score_head(
    pattern: np.ndarray, reference: np.ndarray, queries: Sequence[int] | np.ndarray | None = None
) -> dict[str, float]:
    """Mean mass on the reference's support, argmax agreement and mean total-variation distance."""
    pattern, reference = np.asarray(pattern, float), np.asarray(reference, float)
    if pattern.shape != reference.shape:
        raise VocabularyError(f"pattern {pattern.shape} and reference {reference.shape} differ in shape")
    rows = np.arange(len(pattern)) if queries is None else np.asarray(queries)
    p, r = pattern[rows], reference[rows]
    return {
        "mass": float((p * (r > 0)).sum(1).mean()),
        "argmax_agreement": float((p.argmax(1) == r.argmax(1)).mean()),
        "tv_distance": float(0.5 * np.abs(p - r).sum(1).mean()),
    }


def score_heads(
    patterns: Mapping[tuple[int, int], np.ndarray],
    references: Mapping[str, np.ndarray],
    queries: Sequence[int] | None = None,
) -> dict[tuple[int, int], dict[str, dict[str, float]]]:
    """Every head against every reference: ``{head: {reference: scores}}``."""
    return {
        head: {name: score_head(p, ref, queries) for name, ref in references.items()} for head, p in patterns.items()
    }


def match_heads(
    trained: Mapping[tuple[int, int], np.ndarray],
    constructed: Mapping[tuple[int, int], np.ndarray],
    queries: Sequence[int] | None = None,
) -> list[dict]:
    """One-to-one matching minimising the total mean TV distance between patterns (same input).

    Returns one entry per matched pair, best first; unmatched heads (when the counts differ) are
    left out.
    """
    from scipy.optimize import linear_sum_assignment

    t_keys, c_keys = list(trained), list(constructed)
    if not t_keys or not c_keys:
        return []
    cost = np.array([[score_head(trained[t], constructed[c], queries)["tv_distance"] for c in c_keys] for t in t_keys])
    rows, cols = linear_sum_assignment(cost)
    pairs = [
        {"trained": t_keys[i], "constructed": c_keys[j], "tv_distance": float(cost[i, j])} for i, j in zip(rows, cols)
    ]
    return sorted(pairs, key=lambda d: d["tv_distance"])
