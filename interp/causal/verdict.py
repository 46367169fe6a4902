"""The verdict of a causal alignment, by a stated rule that can fail.

Inputs: per position, the best IIA (on changed outputs) a full swap reaches anywhere in the twin, the
twin's first site reaching :data:`IMPLEMENTS` and the construction's (the same threshold); the random-init
null's best.

* the null reaches :data:`IMPLEMENTS` at some position → "cannot tell: the random-init null reaches it too";
* the twin reaches it at fewer than :data:`COVERAGE` of the positions → "does not implement the state";
* otherwise it implements it, "at the construction's sites" when every position's first site is the
  construction's, else "elsewhere", saying whether it completes the state *later* (a deeper block, on
  the median position) or *earlier* than the construction.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

__all__ = ["verdict", "IMPLEMENTS", "COVERAGE"]

#: IIA (changed outputs, held out) at which a site is said to carry the variable.
IMPLEMENTS = 0.95
#: The share of positions (with changed outputs) at which the twin must carry it somewhere.
COVERAGE = 0.9


def _block(hook: str | None) -> float:
    """Residual order of a hook: block + 0 (pre), 1/3 (mid), 2/3 (post); NaN for none."""
    if hook is None:
        return float("nan")
    layer, _, where = hook.removeprefix("blocks.").partition(".hook_resid_")
    return int(layer) + {"pre": 0.0, "mid": 1 / 3, "post": 2 / 3}[where]


def verdict(twin_best: Mapping[int, float | None], twin_first: Mapping[int, str | None],
            construction_first: Mapping[int, str | None], null_best: Mapping[int, float | None]) -> dict[str, Any]:
    """The verdict and the numbers it was computed from (see the module docstring)."""
    positions = [p for p, v in twin_best.items() if v is not None]
    null_hits = [p for p, v in null_best.items() if v is not None and v >= IMPLEMENTS]
    carried = [p for p in positions if twin_best[p] >= IMPLEMENTS]
    out: dict[str, Any] = {"rule": f"IIA ≥ {IMPLEMENTS} on changed held-out outputs at ≥ {COVERAGE:.0%} of the positions; "
                                   "the null must stay below it",
                           "positions": len(positions), "carried": len(carried), "null_positions": len(null_hits)}
    if null_hits:
        return {**out, "verdict": "cannot tell: the random-init null reaches it too", "implements": None}
    if not positions or len(carried) < COVERAGE * len(positions):
        return {**out, "verdict": "does not implement the state", "implements": False}
    same = all(twin_first.get(p) == construction_first.get(p) for p in carried)
    if same:
        return {**out, "verdict": "implements the state at the construction's sites", "implements": True}
    shift = float(np.nanmedian([_block(twin_first.get(p)) - _block(construction_first.get(p)) for p in carried]))
    where = "later than" if shift > 0 else ("earlier than" if shift < 0 else "as deep as")
    return {**out, "verdict": f"implements the state elsewhere: it completes it {where} the construction "
                              f"(median {shift:+.2f} blocks)", "implements": True, "median_block_shift": shift}
