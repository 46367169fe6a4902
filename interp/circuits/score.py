"""Scores of a method's ranking against a ground truth: AUROC, precision and recall."""

from __future__ import annotations

from typing import Sequence

import numpy as np

__all__ = ["auroc", "precision_recall", "spearman"]


def auroc(scores: Sequence[float], labels: Sequence[bool]) -> float | None:
    """Area under the ROC curve of ``scores`` ranking the positive ``labels`` first (ties count one half);
    None when one class is empty. Equals the Mann–Whitney U statistic over n₊·n₋."""
    from scipy.stats import rankdata

    s, y = np.asarray(scores, dtype=np.float64), np.asarray(labels, dtype=bool)
    n_pos, n_neg = int(y.sum()), int((~y).sum())
    if not n_pos or not n_neg:
        return None
    ranks = rankdata(s)
    return float((ranks[y].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def precision_recall(chosen: Sequence[bool], labels: Sequence[bool]) -> tuple[float | None, float | None]:
    """(precision, recall) of a chosen set against the labels; None where undefined (nothing chosen / no positives)."""
    c, y = np.asarray(chosen, dtype=bool), np.asarray(labels, dtype=bool)
    tp = int((c & y).sum())
    return (tp / int(c.sum()) if c.any() else None, tp / int(y.sum()) if y.any() else None)


def spearman(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Spearman's rank correlation, None when either side is constant."""
    from scipy.stats import spearmanr

    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if len(a) < 2 or np.all(a == a[0]) or np.all(b == b[0]):
        return None
    return float(spearmanr(a, b)[0])
