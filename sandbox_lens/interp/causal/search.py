"""DAS searched the way a referee accepts: fitted on one split of the pairs, chosen on a second, reported on
the third — and every random-init null searched exactly the same way (same hooks, same k grid, same choice).

The search has two stages, as before: every candidate hook at the largest k (*where*), then every k at the
hook the select split prefers (*how many dimensions*: the smallest k within :data:`K_TOLERANCE` of the best
there). Each fitted subspace keeps its counts per base word on the select and the test split
(:class:`~sandbox_lens.interp.causal.evidence.Counts`), so that the choice itself can be redone on resampled
pairs (:func:`choose`, :func:`~sandbox_lens.interp.causal.evidence.stability`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sandbox_lens.interp.causal.das import das, live_fraction
from sandbox_lens.interp.causal.evidence import Counts, PairSplits, site_counts, summary
from sandbox_lens.interp.causal.highlevel import HighLevel
from sandbox_lens.interp.causal.interchange import Site, random_basis, source_activations
from sandbox_lens.interp.progress import bar as progress_bar

__all__ = ["Fit", "das_search", "choose", "chosen", "fit_json", "K_TOLERANCE"]

#: The smallest k whose select IIA is within this of the best k at the chosen hook is chosen.
K_TOLERANCE = 0.02


@dataclass(frozen=True)
class Fit:
    """One fitted DAS subspace: where, how wide, and its counts on the select and test splits."""

    hook: str
    k: int
    basis: np.ndarray
    select: Counts
    test: Counts
    random_test: Counts
    live_fraction: float | None
    final_loss: float | None


def _fit(
    model: Any,
    high: HighLevel,
    hook: str,
    k: int,
    splits: PairSplits,
    steps: int,
    seed: int,
    variable: str,
    activations: dict[str, dict[str, Any]],
    tick: Callable[[int], Any] | None = None,
) -> Fit:
    basis, trace = das(model, high, hook, None, k, *splits.fit, steps=steps, seed=seed, variable=variable, tick=tick)
    counts = {
        name: site_counts(model, high, Site(hook, 0, basis), *getattr(splits, name), variable, activations[name])
        for name in ("select", "test")
    }
    control = site_counts(
        model,
        high,
        Site(hook, 0, random_basis(model.cfg.d_model, k, seed)),
        *splits.test,
        variable,
        activations["test"],
    )
    return Fit(
        hook,
        k,
        basis,
        counts["select"],
        counts["test"],
        control,
        live_fraction(model, hook, basis, splits.test[0]),
        trace[-1]["loss"] if trace else None,
    )


def das_search(
    model: Any,
    high: HighLevel,
    splits: PairSplits,
    hooks: Sequence[str],
    ks: Sequence[int],
    steps: int,
    seed: int,
    variable: str,
    progress: bool = False,
    desc: str = "DAS",
) -> list[Fit]:
    """Every subspace the two-stage search fits (see the module docstring), in the order fitted."""

    ks = sorted(k for k in set(ks) if k <= model.cfg.d_model) or [model.cfg.d_model]
    k_max = ks[-1]
    activations = {
        name: source_activations(model, getattr(splits, name)[1], list(hooks)) for name in ("select", "test")
    }
    # counted in optimiser steps, so that a long fit shows its rate and ETA from its first seconds
    bar = progress_bar(
        total=(len(hooks) + len(ks) - 1) * steps, disable=not progress, desc=f"{desc} ({variable})", unit="step"
    )
    fits = []
    for hook in hooks:
        fits.append(_fit(model, high, hook, k_max, splits, steps, seed, variable, activations, bar.update))
    best = fits[choose([(f.hook, f.k, f.select.rate) for f in fits], k_max)].hook
    for k in ks[:-1]:
        fits.append(_fit(model, high, best, k, splits, steps, seed, variable, activations, bar.update))
    bar.close()
    return fits


def choose(candidates: Sequence[tuple[str, int, float | None]], k_max: int) -> int:
    """The index of the chosen (hook, k, select IIA): the hook with the best IIA at ``k_max`` (the first on ties),
    then there the smallest k within :data:`K_TOLERANCE` of the best k."""

    def score(rate: float | None) -> float:
        return -1.0 if rate is None else rate

    wide = [i for i, (_, k, _) in enumerate(candidates) if k == k_max]
    hook = candidates[max(wide, key=lambda i: (score(candidates[i][2]), -i))][0]
    here = [i for i, (h, _, _) in enumerate(candidates) if h == hook]
    top = max(score(candidates[i][2]) for i in here)
    return min((i for i in here if score(candidates[i][2]) >= top - K_TOLERANCE), key=lambda i: candidates[i][1])


def chosen(fits: Sequence[Fit], select_rates: Sequence[float | None] | None = None) -> Fit:
    """The fit :func:`choose` picks (on ``select_rates`` when given — a resample's —, else the fits' own)."""
    rates = [f.select.rate for f in fits] if select_rates is None else select_rates
    return fits[choose([(f.hook, f.k, r) for f, r in zip(fits, rates)], max(f.k for f in fits))]


def fit_json(fit: Fit, seed: int = 0) -> dict[str, Any]:
    """A fit as align.json holds it: ``iia`` on the select split (what chose it), the test split's summary."""
    return {
        "hook": fit.hook,
        "k": fit.k,
        "iia": fit.select.rate,
        "split": "select",
        "test": summary(fit.test, seed),
        "random_subspace": summary(fit.random_test, seed),
        "live_fraction": fit.live_fraction,
        "final_loss": fit.final_loss,
    }
