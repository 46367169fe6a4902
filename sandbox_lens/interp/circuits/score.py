"""Scores of a method's ranking against a ground truth: AUROC and average precision of the ranking,
precision and recall of the chosen set, and MIB's faithfulness areas (CPR, CMD).

A ranking is a score per edge; higher ranks first. An edge a method never scored (ACDC's edges into
a part already cut off; NaN here) ranks *last*, tied with the other unscored edges, and is counted
(:func:`ranking_scores` reports how many). Ties count one half in AUROC (the Mann–Whitney
statistic) and form one threshold in average precision (as scikit-learn's
``average_precision_score``), so neither depends on the order of tied edges.

Scores equal up to float32 rounding are ties (:func:`tied`): two edges whose scores agree to
:data:`TIE_TOLERANCE` of their size are ranked together, so a ranking does not depend on which of two
equal effects rounding put first (node patching's average precision on the cancelling counter moved between
0.375 and 0.569 with the pair seed that way). The tolerance is relative: a score near 0 ties only with 0, since
a small gradient attribution (a saturated softmax's) is small, not rounded.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

__all__ = [
    "auroc",
    "average_precision",
    "average_ranks",
    "precision_recall",
    "spearman",
    "ranking_scores",
    "areas",
    "MIB_PERCENTAGES",
    "TIE_TOLERANCE",
    "tied",
]

#: Circuit sizes at which MIB's circuit track measures faithfulness, as fractions of the edges.
MIB_PERCENTAGES = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)


#: Scores within this fraction of their size of one another are one tie: float32's ε is 2⁻²³, so 2⁻¹⁶ leaves room
#: for rounding accumulated over 128 operations of the size of the effects, far below any circuit threshold (0.01).
TIE_TOLERANCE = 2.0**-16


def tied(scores: ArrayLike, tolerance: float = TIE_TOLERANCE) -> np.ndarray:
    """``scores`` with the values equal up to rounding made equal: from the highest down, a score within
    ``tolerance`` × the larger magnitude of it and the first of its group joins that group and takes its value
    (anchored, so a run of small steps does not chain into one tie; relative, so only 0 ties with 0). NaN
    (unscored) stays NaN."""
    s = np.asarray(scores, dtype=np.float64).copy()
    scored = np.flatnonzero(~np.isnan(s))
    anchor: float | None = None
    for i in scored[np.argsort(-s[scored], kind="stable")]:
        x = float(s[i])  # Python floats: inf − inf is nan without a warning
        gap = math.inf if anchor is None else anchor - x
        if not math.isfinite(gap) or gap > tolerance * max(abs(anchor or 0.0), abs(x)):  # infinities tie nothing
            anchor = x
        s[i] = anchor
    return s


def _unscored_last(scores: ArrayLike) -> np.ndarray:
    s = tied(scores)
    missing = np.isnan(s)
    if missing.any():
        low = np.min(s[~missing]) if (~missing).any() else 0.0
        s[missing] = low - max(1.0, abs(low))  # below every scored edge, beyond any tie
    return s


def average_ranks(values: ArrayLike) -> np.ndarray:
    """Ranks 1..n of ``values``, ties sharing the mean of their ranks (``scipy.stats.rankdata``'s default, without
    importing ``scipy.stats``: about a second of a circuit command's start-up)."""
    v = np.asarray(values, dtype=np.float64)
    _, inverse, counts = np.unique(v, return_inverse=True, return_counts=True)
    last = np.cumsum(counts)  # the highest rank of each distinct value
    return (last - (counts - 1) / 2.0)[inverse.reshape(-1)]


def auroc(scores: ArrayLike, labels: ArrayLike) -> float | None:
    """Area under the ROC curve of ``scores`` ranking the positive ``labels`` first (ties count one half);
    None when one class is empty. Equals the Mann–Whitney U statistic over n₊·n₋."""
    s, y = _unscored_last(scores), np.asarray(labels, dtype=bool)
    n_pos, n_neg = int(y.sum()), int((~y).sum())
    if not n_pos or not n_neg:
        return None
    ranks = average_ranks(s)
    return float((ranks[y].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def average_precision(scores: ArrayLike, labels: ArrayLike) -> float | None:
    """Average precision of ``scores`` ranking the positive ``labels`` first: Σ (Rₙ − Rₙ₋₁)·Pₙ over the
    distinct score values from the highest down (tied edges enter together); None without positives."""
    s, y = _unscored_last(scores), np.asarray(labels, dtype=bool)
    if not y.any():
        return None
    order = np.argsort(-s, kind="stable")
    s, y = s[order], y[order]
    last_of_tie = np.r_[np.flatnonzero(np.diff(s)), len(s) - 1]  # the last index of each group of equal scores
    tp = np.cumsum(y)[last_of_tie]
    precision, recall = tp / (last_of_tie + 1), tp / y.sum()
    return float(np.sum(np.diff(np.r_[0.0, recall]) * precision))


def ranking_scores(scores: ArrayLike, labels: ArrayLike, candidates: ArrayLike | None = None) -> dict:
    """AUROC and average precision of a ranking over every edge and, given ``candidates`` (the edges that
    can interact at all: the structural ones), over those only; with the count of unscored edges."""
    s, y = np.asarray(scores, dtype=np.float64), np.asarray(labels, dtype=bool)
    out = {
        "auroc": auroc(s, y),
        "average_precision": average_precision(s, y),
        "unscored": int(np.isnan(s).sum()),
        "edges": int(len(s)),
        "positives": int(y.sum()),
    }
    if candidates is not None:
        c = np.asarray(candidates, dtype=bool)
        out.update(
            {
                "auroc_candidates": auroc(s[c], y[c]),
                "average_precision_candidates": average_precision(s[c], y[c]),
                "candidates": int(c.sum()),
                "positives_outside_candidates": int((y & ~c).sum()),
            }
        )
    return out


def areas(percentages: ArrayLike, faithfulness: ArrayLike) -> dict[str, float]:
    """MIB's areas over a faithfulness curve f(k) (trapezoids on a linear axis of circuit sizes):
    **CPR**, the area under f (higher is better), and **CMD**, the area between f and 1 (lower is better)."""
    x, f = np.asarray(percentages, dtype=np.float64), np.asarray(faithfulness, dtype=np.float64)
    if len(x) != len(f) or len(x) < 2 or np.any(np.diff(x) <= 0):
        raise ValueError("a faithfulness curve needs two or more strictly increasing circuit sizes, one value each")
    dx = np.diff(x)
    return {
        "cpr": float(np.sum(dx * (f[:-1] + f[1:]) / 2)),
        "cmd": float(np.sum(dx * (np.abs(1 - f[:-1]) + np.abs(1 - f[1:])) / 2)),
    }


def precision_recall(chosen: ArrayLike, labels: ArrayLike) -> tuple[float | None, float | None]:
    """(precision, recall) of a chosen set against the labels; None where undefined (nothing chosen / no positives)."""
    c, y = np.asarray(chosen, dtype=bool), np.asarray(labels, dtype=bool)
    tp = int((c & y).sum())
    return (tp / int(c.sum()) if c.any() else None, tp / int(y.sum()) if y.any() else None)


def spearman(a: ArrayLike, b: ArrayLike) -> float | None:
    """Spearman's rank correlation, None when either side is constant."""
    from scipy.stats import spearmanr

    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if len(a) < 2 or np.all(a == a[0]) or np.all(b == b[0]):
        return None
    return float(spearmanr(a, b)[0])
