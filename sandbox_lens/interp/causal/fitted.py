"""DAS sites for the algorithm identification (``identify(..., das=True)``, ``interp align --candidates … --das``):
a learned subspace per candidate variable at every residual site, searched the same way in the model and in
every null, and admitted only where it beats the untrained readout.

Whole-site swaps (:mod:`sandbox_lens.interp.causal.sweep`) find a variable only where it sits *alone* at a
site: a residual stream that also holds the token, or another variable the later outputs read, is swapped
with it, and the outputs then follow neither. DAS (:func:`~sandbox_lens.interp.causal.das.das`) learns the
k-dimensional subspace whose swap sets the variable and nothing else.

* **Where**: every residual site but the last block's output (only the readout reads that), one subspace shared
  by every position, as ``interp align`` fits it.
* **How wide**: k is the variable's distinct values on the fit words less one (a categorical variable with m
  values spans at most m − 1 dimensions as a simplex), at most :data:`MAX_K` and the residual width. One k per
  variable keeps the search small: the question here is whether the variable is there linearly, not its
  smallest width (``interp align --variable`` searches k).
* **Fit, select, report**: the subspace is fitted on the *fit* split — the one the full swaps leave unused —
  and becomes one more site of the variable: chosen on the *select* split like any other, reported on *test*.
* **The readout baseline**: the unembedding's basis (:func:`~sandbox_lens.interp.causal.evidence.readout_basis`)
  is swept at the same hooks. A DAS site may be chosen only where its pooled select IIA is above the readout's
  there (:func:`admitted`); the readout site itself is never chosen.
* **The nulls** get their own subspaces, fitted on the same words with the same steps and seed, the same gate;
  a null's fits are remembered, so a population's twins share them.
"""

from __future__ import annotations

import hashlib
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from sandbox_lens.interp.causal.algorithms import Variable
from sandbox_lens.interp.causal.das import das
from sandbox_lens.interp.causal.defaults import SITE_DAS_STEPS
from sandbox_lens.interp.causal.evidence import readout_basis
from sandbox_lens.interp.causal.highlevel import HighLevel
from sandbox_lens.interp.causal.sweep import residual_sites

__all__ = [
    "MAX_K",
    "STEPS",
    "das_hooks",
    "das_k",
    "fitted_sites",
    "readout_sites",
    "is_fitted",
    "is_readout",
    "admitted",
    "das_table",
]

#: The widest subspace fitted for a variable.
MAX_K = 8
#: Optimiser steps of each fit (``interp align --das-steps``): half of ``interp align``'s per-variable DAS, which
#: fits a few hooks, where this fits one subspace per variable at every residual site.
STEPS = SITE_DAS_STEPS
_READOUT = "readout @ "
_FITTED = ": DAS k="

Site = tuple[str, str, Any]  # (label, hook, basis [d, k])


def das_hooks(n_layers: int) -> list[str]:
    """The residual sites a subspace is fitted at: all of :func:`~sandbox_lens.interp.causal.sweep.residual_sites`
    but the last block's output."""
    return residual_sites(n_layers)[:-1]


def das_k(high: HighLevel, words: np.ndarray, variable: str, d_model: int) -> int:
    """The subspace width for ``variable``: its distinct values on ``words`` less one, within 1 … min(MAX_K, d)."""
    values, defined, _ = high.values(words, variable)
    seen = len(np.unique(values[defined])) if defined.any() else 2
    return int(min(max(seen - 1, 1), MAX_K, d_model))


def is_fitted(label: str) -> bool:
    """Whether a site label names a DAS subspace."""
    return _FITTED in label


def is_readout(label: str) -> bool:
    """Whether a site label names the readout baseline."""
    return label.startswith(_READOUT)


def _hook_of(label: str) -> str:
    return label.rsplit(" @ ", 1)[-1]


#: A null's fits per (words, variable, hook, k, steps, seed): a population's twins share their nulls and pairs.
_NULL_FITS: weakref.WeakKeyDictionary[Any, dict] = weakref.WeakKeyDictionary()


def fitted_sites(
    model: Any,
    variables: Sequence[Variable],
    highs: dict[str, HighLevel],
    fit: tuple[np.ndarray, np.ndarray],
    hooks: Sequence[str],
    steps: int,
    seed: int,
    remember: bool = False,
    tick: Callable[[int], Any] | None = None,
) -> dict[Variable, list[Site]]:
    """Per variable, one DAS subspace at each of ``hooks`` fitted on the ``fit`` pairs, as (label, hook, basis);
    ``remember``: keep a null's fits for the next twin of its population. ``tick(n)``: steps done."""
    memo = _NULL_FITS.setdefault(model, {}) if remember else {}
    words = hashlib.sha256(fit[0].tobytes() + fit[1].tobytes() + str(fit[0].shape).encode()).hexdigest()
    out: dict[Variable, list[Site]] = {}
    for v in variables:
        high = highs[v.mode]
        k = das_k(high, fit[0], v.name, model.cfg.d_model)
        out[v] = []
        for hook in hooks:
            key = (words, v.mode, v.name, hook, k, steps, seed)
            if key not in memo:
                memo[key] = das(model, high, hook, None, k, *fit, steps=steps, seed=seed, variable=v.name, tick=tick)[0]
            elif tick is not None:
                tick(steps)
            out[v].append((f"{v.key}{_FITTED}{k} @ {hook}", hook, memo[key]))
    return out


def readout_sites(model: Any, high: HighLevel, hooks: Sequence[str]) -> list[Site]:
    """The readout baseline at each of ``hooks``: the untrained unembedding basis, as (label, hook, basis)."""
    basis = readout_basis(model, high)
    return [(f"{_READOUT}{hook}", hook, basis) for hook in hooks] if basis.shape[1] else []


def _rate(hits: np.ndarray, outputs: np.ndarray, i: int) -> float:
    n = outputs[i].sum()
    return float(hits[i].sum() / n) if n else -1.0


def admitted(labels: Sequence[str], hits: np.ndarray, outputs: np.ndarray, allowed: Sequence[int]) -> list[int]:
    """``allowed`` less the readout sites and the DAS sites whose pooled select IIA (``hits``/``outputs`` ``[site,
    P]``, summed over words) is not above the readout's at the same hook."""
    readout = {_hook_of(label): i for i, label in enumerate(labels) if is_readout(label)}
    out = []
    for i in allowed:
        label = labels[i]
        if is_readout(label):
            continue
        if is_fitted(label) and _hook_of(label) in readout:
            if _rate(hits, outputs, i) <= _rate(hits, outputs, readout[_hook_of(label)]):
                continue
        out.append(i)
    return out


def das_table(data: Sequence[dict[str, Any]], variables: Sequence[Variable]) -> dict[str, list[dict[str, Any]]]:
    """Per variable (by key), each DAS site of the model: its pooled select and test IIA, the readout's select IIA
    at the same hook, whether it is admitted, and the nulls' best select and test IIA at the same site."""

    def pooled(entry: dict[str, Any], v: Variable, split: str) -> tuple[np.ndarray, np.ndarray]:
        """(hits, outputs) ``[site, P]`` of ``v`` on ``split``, summed over the words."""
        hits, outputs = entry[split]["counts"][v]
        return hits[0].sum(-1), outputs[0].sum(-1)

    def rate(entry: dict[str, Any], v: Variable, counts: dict[str, Any], label: str, split: str) -> float | None:
        labels = entry["labels"][v]
        if label not in labels:
            return None
        r = _rate(*counts[split], labels.index(label))
        return None if r < 0 else r

    table: dict[str, list[dict[str, Any]]] = {}
    for v in variables:
        counts = [{split: pooled(e, v, split) for split in ("select", "test")} for e in data]
        labels = data[0]["labels"][v]
        rows = []
        for label in (x for x in labels if is_fitted(x)):
            hook = _hook_of(label)
            nulls = [
                (rate(e, v, c, label, "select"), rate(e, v, c, label, "test")) for e, c in zip(data[1:], counts[1:])
            ]
            rows.append(
                {
                    "site": label,
                    "hook": hook,
                    "k": int(label.split(_FITTED)[1].split(" ")[0]),
                    "select_iia": rate(data[0], v, counts[0], label, "select"),
                    "test_iia": rate(data[0], v, counts[0], label, "test"),
                    "readout_select_iia": rate(data[0], v, counts[0], f"{_READOUT}{hook}", "select"),
                    "admitted": bool(admitted(labels, *counts[0]["select"], [labels.index(label)])),
                    "null_select_iia": max((s for s, _ in nulls if s is not None), default=None),
                    "null_test_iia": max((t for _, t in nulls if t is not None), default=None),
                }
            )
        table[v.key] = rows
    return table
