"""Causal numbers a referee accepts: disjoint pair splits, counts kept per base word, intervals by a bootstrap
over the base words, the untrained readout baseline, and the stability of a verdict under resampling.

* **Three disjoint splits** (:func:`split_pairs`): DAS is *fitted* on one, the hook, position and k are
  *selected* on a second, and only the third is *reported* (a number chosen on the pairs it is reported on is
  biased upwards by the choice).
* **Counts per base word** (:class:`Counts`, :func:`site_counts`): the changed outputs an interchange scores and
  how many of them follow the high-level model, summed over the positions of one base word. The outputs of
  one word are not independent, so intervals resample *words* (:func:`rate_interval`), not outputs — a
  Wilson interval over pooled outputs is too narrow.
* **The readout baseline** (:func:`readout_basis`): the span of the unembedding's columns for the task's
  readout classes, untrained. Any subspace that contains it moves the answer wherever the residual is read
  out linearly, so a learned subspace counts as finding a variable only where it beats this one.
* **Stability** (:func:`stability`): the share of bootstrap resamples of the test words under which a rule
  gives the verdict it gives on all of them (below :data:`STABLE` the verdict is "inconclusive").
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sandbox_lens.interp.causal.highlevel import HighLevel, HighLevelError
from sandbox_lens.interp.causal.interchange import Site, changed_hits, source_activations
from sandbox_lens.interp.causal.sweep import changed_counts, is_residual
from sandbox_lens.interp.model.device import to_numpy
from sandbox_lens.interp.stats import CONFIDENCE
from sandbox_lens.interp.streams import Stream, rng

__all__ = [
    "PairSplits",
    "split_pairs",
    "Counts",
    "site_counts",
    "rate_interval",
    "summary",
    "readout_basis",
    "stability",
    "summarised",
    "summaries",
    "MIN_SPLIT",
    "BOOTSTRAP",
    "RESAMPLES",
    "STABLE",
]

#: The fewest pairs a split may have.
MIN_SPLIT = 16
#: Bootstrap resamples of the base words for an interval.
BOOTSTRAP = 1000
#: Resamples of the test words for a verdict's stability (each with :data:`INNER` for its own intervals).
RESAMPLES = 100
INNER = 200
#: Changed outputs a position needs for its own IIA to be read (as the full-swap verdict's MIN_OUTPUTS).
MIN_POSITION_OUTPUTS = 20
#: The share of resamples that must give a verdict for it to stand (else "inconclusive").
STABLE = 0.8


@dataclass(frozen=True)
class PairSplits:
    """(base, source) word pairs in three disjoint parts: ``fit`` (DAS trains on it), ``select`` (the hook,
    position and k are chosen on it) and ``test`` (the only part reported)."""

    fit: tuple[np.ndarray, np.ndarray]
    select: tuple[np.ndarray, np.ndarray]
    test: tuple[np.ndarray, np.ndarray]

    def sizes(self) -> dict[str, int]:
        """Pairs per split."""
        return {"fit": len(self.fit[0]), "select": len(self.select[0]), "test": len(self.test[0])}


def split_pairs(base: np.ndarray, source: np.ndarray) -> PairSplits:
    """Thirds of the ``n`` pairs (the test split takes the remainder); refused below :data:`MIN_SPLIT` a split."""
    n = len(base)
    if n < 3 * MIN_SPLIT:
        raise HighLevelError(
            f"{n} pairs are too few for three disjoint splits (fit, select, test) of at least "
            f"{MIN_SPLIT} pairs each: use --pairs {3 * MIN_SPLIT} or more"
        )
    a, b = n // 3, 2 * n // 3
    return PairSplits((base[:a], source[:a]), (base[a:b], source[a:b]), (base[b:], source[b:]))


@dataclass(frozen=True)
class Counts:
    """Per base word (and, for a site swapped at every position in turn, per position ``[words, positions]``): the
    changed outputs an interchange scored (``outputs``) and those that followed the high-level model (``hits``)."""

    hits: np.ndarray
    outputs: np.ndarray

    @property
    def rate(self) -> float | None:
        """Pooled IIA on changed outputs; None without any."""
        n = int(self.outputs.sum())
        return float(self.hits.sum()) / n if n else None

    def per_position(self, min_outputs: int = 1) -> list[float | None]:
        """IIA at each position (None below ``min_outputs`` changed outputs there); [] for counts per word only."""
        if self.hits.ndim < 2:
            return []
        k, n = self.hits.sum(axis=0), self.outputs.sum(axis=0)
        return [float(a) / b if b >= min_outputs and b else None for a, b in zip(k, n)]

    def take(self, index: np.ndarray) -> Counts:
        """The counts of the words at ``index`` (a resample)."""
        return Counts(self.hits[index], self.outputs[index])


def site_counts(
    model: Any,
    high: HighLevel,
    site: Site,
    base: np.ndarray,
    source: np.ndarray,
    variable: str | None = None,
    activations: dict[str, Any] | None = None,
    positions: Sequence[int] | None = None,
) -> Counts:
    """:class:`Counts` ``[words, positions]`` of ``site``'s subspace swapped at each of ``positions`` in turn
    (default: every position, as for a position-shared DAS subspace or a named site). In the residual stream the
    swaps at every position run as one batched sweep (:func:`~sandbox_lens.interp.causal.sweep.changed_counts`:
    the same answers, on the bare forward from the hook); elsewhere one interchange per position."""
    import dataclasses

    positions = list(range(base.shape[1]) if positions is None else positions)
    hits = np.zeros((len(base), len(positions)), dtype=np.int64)
    outputs = np.zeros_like(hits)
    if is_residual(site.hook, model.cfg.n_layers) and positions == list(range(base.shape[1])):
        k, n = changed_counts(model, high, [(site.hook, site.basis)], base, source, variable, activations)
        return Counts(k[0].T.copy(), n[0].T.copy())
    activations = activations or source_activations(model, source, [site.hook])
    for j, p in enumerate(positions):
        hit, _, changed = changed_hits(
            model, high, dataclasses.replace(site, position=int(p)), base, source, activations, variable
        )
        hits[:, j] = (hit & changed).sum(axis=1)
        outputs[:, j] = changed.sum(axis=1)
    return Counts(hits, outputs)


def _rates(counts: Counts, draws: np.ndarray) -> np.ndarray:
    """The pooled rate of each resample, given as how often it drew each word (``[B, n]``; NaN where a resample
    has no outputs). Integer products: the same sums as indexing the words, in any order."""
    hits, outputs = counts.hits, counts.outputs
    if hits.ndim > 1:
        hits, outputs = hits.sum(axis=tuple(range(1, hits.ndim))), outputs.sum(axis=tuple(range(1, hits.ndim)))
    k = draws @ np.asarray(hits, dtype=np.result_type(hits, np.int64))
    n = draws @ np.asarray(outputs, dtype=np.result_type(outputs, np.int64))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, k / np.maximum(n, 1), np.nan)


@functools.lru_cache(maxsize=16)
def _draws(seed: int, n: int, resamples: int) -> np.ndarray:
    """How often each of ``resamples`` bootstrap resamples draws each of ``n`` words (``[resamples, n]``, read-only):
    one stream per seed, so every interval of one seed and size resamples the same words (computed once)."""
    index = rng(seed, Stream.CAUSAL_BOOTSTRAP).integers(0, n, size=(resamples, n))
    out = np.zeros((resamples, n), dtype=np.int64)
    np.add.at(out, (np.repeat(np.arange(resamples), n), index.ravel()), 1)
    out.flags.writeable = False
    return out


def rate_interval(
    counts: Counts, seed: int = 0, resamples: int = BOOTSTRAP, confidence: float = CONFIDENCE
) -> tuple[float, float] | None:
    """Percentile-bootstrap interval of the pooled rate, resampling base words; None without outputs."""
    if counts.rate is None:
        return None
    rates = _rates(counts, _draws(int(seed), len(counts.hits), int(resamples)))
    rates = rates[~np.isnan(rates)]
    alpha = (1 - confidence) / 2
    low, high = np.quantile(rates, [alpha, 1 - alpha])  # one sort for both ends
    return float(low), float(high)


def summary(counts: Counts, seed: int = 0, resamples: int = BOOTSTRAP) -> dict[str, Any]:
    """``{"iia", "interval", "outputs", "words", "per_position"}`` of ``counts`` (interval: :func:`rate_interval`;
    None with no ``resamples``; per position: IIA where at least :data:`MIN_POSITION_OUTPUTS` outputs changed)."""
    return {
        "iia": counts.rate,
        "interval": rate_interval(counts, seed, resamples) if resamples else None,
        "per_position": counts.per_position(MIN_POSITION_OUTPUTS),
        "outputs": int(counts.outputs.sum()),
        "words": int(len(counts.hits)),
    }


def readout_basis(model: Any, high: HighLevel) -> np.ndarray:
    """An orthonormal basis ``[d, r]`` of what the unembedding reads among the readout classes: the span of their
    columns of ``W_U`` less their mean (the logits' differences decide the answer), each column less its own
    mean over the residual when a final LayerNorm centres the stream. Untrained: the baseline DAS must beat."""

    w = to_numpy(model.W_U.detach()).astype(np.float64)
    if high.readout is not None:
        w = w[:, list(high.readout)]
    if str(getattr(model.cfg, "normalization_type", None) or "").startswith("LN"):
        w = w - w.mean(axis=0, keepdims=True)
    w = w - w.mean(axis=1, keepdims=True)
    u, s, _ = np.linalg.svd(w, full_matrices=False)
    if not len(s) or s[0] <= 0:
        return u[:, :0]
    return u[:, s > 1e-6 * float(s[0])]


def _leaves(structure: Any) -> list[Counts]:
    if isinstance(structure, Counts):
        return [structure]
    if isinstance(structure, Mapping):
        return [c for v in structure.values() for c in _leaves(v)]
    if isinstance(structure, (list, tuple)):
        return [c for v in structure for c in _leaves(v)]
    return []


def summarised(structure: Any, index: np.ndarray | None, seed: int, inner: int) -> Any:
    """``structure`` with every :class:`Counts` replaced by the :func:`summary` of its (resampled) words."""
    if isinstance(structure, Counts):
        return summary(structure if index is None else structure.take(index), seed, inner)
    if isinstance(structure, Mapping):
        return {k: summarised(v, index, seed, inner) for k, v in structure.items()}
    if isinstance(structure, (list, tuple)):
        return [summarised(v, index, seed, inner) for v in structure]
    return structure


def stability(
    groups: Mapping[str, Any],
    rule: Callable[[Mapping[str, Any]], Hashable],
    seed: int = 0,
    resamples: int = RESAMPLES,
    intervals: Sequence[str] = ("test",),
) -> float:
    """The share of bootstrap resamples under which ``rule`` gives what it gives on all the words. ``groups``: a
    name per set of words (the select split, the test split) mapping to dicts and lists of :class:`Counts` over
    those words — resampled together within a group, independently across groups; ``rule`` receives the same
    structure with every :class:`Counts` replaced by its :func:`summary` (with an interval only in the groups
    named in ``intervals``: a split used to choose needs rates alone)."""
    sizes = {}
    for name, structure in groups.items():
        found = {len(c.hits) for c in _leaves(structure)}
        if len(found) > 1:
            raise ValueError(f"stability: the counts of group {name!r} are over different words ({sorted(found)})")
        sizes[name] = found.pop() if found else 0
    full = rule({name: summarised(s, None, seed, BOOTSTRAP if name in intervals else 0) for name, s in groups.items()})
    draws = rng(seed, Stream.CAUSAL_BOOTSTRAP, step=1)
    same = 0
    for _ in range(resamples):
        resampled = {
            name: summarised(
                s,
                draws.integers(0, sizes[name], size=sizes[name]) if sizes[name] else None,
                seed,
                INNER if name in intervals else 0,
            )
            for name, s in groups.items()
        }
        same += rule(resampled) == full
    return same / resamples


def summaries(structure: Any, seed: int = 0, intervals: bool = True) -> Any:
    """:func:`summarised` of all the words (intervals only when ``intervals``)."""
    return summarised(structure, None, seed, BOOTSTRAP if intervals else 0)
