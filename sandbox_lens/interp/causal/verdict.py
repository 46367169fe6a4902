"""The verdicts of a causal alignment, by stated rules that can fail (each tested on synthetic numbers).

**Full swaps** (:func:`verdict`). Inputs: per position, the test split's IIA (on changed outputs) at the hook the
select split rates best; the twin's first site reaching the bar on the select split and the construction's; the
largest of the random-init nulls' best, each chosen the same way. The bar is :data:`IMPLEMENTS` × the model's own
accuracy, and never below chance + :data:`FLOOR`.

* a null reaches :data:`IMPLEMENTS` at some position → "cannot tell: the random-init null reaches it too";
* the twin reaches the bar at fewer than :data:`COVERAGE` of the positions → "does not implement the variable";
* otherwise it implements it, "at the construction's sites" when every position's first site is the
  construction's, else "elsewhere", saying whether it completes the state *later* (a deeper block, on
  the median position) or *earlier* than the construction.

Sites after a model's last attention layer are **trivial** for a variable the outputs simply read out
(an automaton's state, the Dyck stack top, the flip-flop bit): from there on nothing mixes positions,
so a full swap at p sets output p itself and reaches the model's accuracy whatever it computes. When
at least :data:`COVERAGE` of the twin's first sites are trivial the verdict says so (``trivial``: the
twin is accurate, but no earlier site carries the variable). Positions with fewer than
:data:`MIN_OUTPUTS` changed outputs are left out (with two answers, a random model scores 5 of 5 at
one of 27 positions more often than not), and so are positions whose variable is a function of their
own token (first site ``blocks.0.hook_resid_pre``) when deciding triviality and when reading the null
(a random model whose output separates the tokens there passes by luck). When no full swap
isolates the variable in the construction either (its sites hold other variables too, e.g. the Dyck
depth beside the bracket's type), full swaps cannot tell, and the DAS verdict (:func:`das_verdict`) speaks.

**DAS** (:func:`das_verdict`): lower bounds against chance, the nulls and the untrained readout basis.

**Stability** (:func:`with_stability`): a verdict that fewer than
:data:`~sandbox_lens.interp.causal.evidence.STABLE` of the resamples of the pairs give is "inconclusive".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from sandbox_lens.interp.causal.das import DORMANT
from sandbox_lens.interp.causal.evidence import STABLE

__all__ = [
    "verdict",
    "IMPLEMENTS",
    "COVERAGE",
    "MIN_OUTPUTS",
    "FLOOR",
    "block_order",
    "das_verdict",
    "outcome",
    "with_stability",
]

#: IIA (changed outputs, held out) at which a site is said to carry the variable.
IMPLEMENTS = 0.95
#: The share of positions (with changed outputs) at which the twin must carry it somewhere.
COVERAGE = 0.9
#: How far above chance a passing IIA's lower bound must lie (absolute).
FLOOR = 0.25
#: Changed outputs a position needs to count.
MIN_OUTPUTS = 20
#: The site where a variable that is a function of the position's own token is already complete.
TOKEN_SITE = "blocks.0.hook_resid_pre"


def block_order(hook: str | None) -> float:
    """Residual order of a hook: block + 0 (pre), 1/3 (mid), 2/3 (post); NaN for none."""
    if hook is None:
        return float("nan")
    layer, _, where = hook.removeprefix("blocks.").partition(".hook_resid_")
    return int(layer) + {"pre": 0.0, "mid": 1 / 3, "post": 2 / 3}[where]


def verdict(
    twin_best: Mapping[int, float | None],
    twin_first: Mapping[int, str | None],
    construction_first: Mapping[int, str | None],
    null_best: Mapping[int, float | None],
    variable: str = "state",
    trivial_from: float | None = None,
    ceiling: float | None = 1.0,
    chance: float = 0.0,
) -> dict[str, Any]:
    """The verdict on ``variable`` and the numbers it was computed from (see the module docstring);
    ``trivial_from``: the :func:`block_order` of the twin's first trivial site (its last attention layer's
    ``resid_mid``), None when the variable is not read out directly; ``ceiling``: the twin's own accuracy — a
    site carries the variable at IIA ≥ :data:`IMPLEMENTS` × ceiling (no intervention can make a model more
    right than it is) and ≥ ``chance`` + :data:`FLOOR` (a model right only as often as a guess carries nothing)."""
    bar = max(IMPLEMENTS * (1.0 if ceiling is None else min(1.0, ceiling)), chance + FLOOR)
    what = "the state" if variable == "state" else f"{variable!r}"
    positions = [p for p, v in twin_best.items() if v is not None]
    # where the twin's variable is its own token's function, a full swap of the token carries it in any model whose
    # output there separates the tokens — a random one included, by luck: not evidence for or against
    null_hits = [
        p for p, v in null_best.items() if v is not None and v >= IMPLEMENTS and twin_first.get(p) != TOKEN_SITE
    ]
    carried = [p for p in positions if twin_best[p] >= bar]
    out: dict[str, Any] = {
        "rule": f"sites chosen on the select pairs; IIA on the test pairs ≥ {IMPLEMENTS} × the model's "
        f"accuracy and ≥ chance + {FLOOR} (here {bar:.3f}) on changed outputs at ≥ "
        f"{COVERAGE:.0%} of the positions; every random-init null, chosen the same way, must "
        f"stay below {IMPLEMENTS}",
        "positions": len(positions),
        "carried": len(carried),
        "null_positions": len(null_hits),
    }
    if null_hits:
        return {**out, "verdict": "cannot tell: the random-init null reaches it too", "implements": None}
    if construction_first and all(construction_first.get(p) is None for p in positions):
        return {
            **out,
            "verdict": f"cannot tell from full swaps: no full swap isolates {what} in the construction "
            "either (it shares its sites with other variables); see DAS",
            "implements": None,
        }
    if not positions or len(carried) < COVERAGE * len(positions):
        return {**out, "verdict": f"does not implement {what}", "implements": False}
    computed = [p for p in carried if twin_first.get(p) != TOKEN_SITE]  # not a function of the token alone
    trivial = (
        trivial_from is not None
        and bool(computed)
        and (sum(block_order(twin_first.get(p)) >= trivial_from for p in computed) >= COVERAGE * len(computed))
    )
    out["trivial"] = trivial
    caveat = (
        " — only after its last attention layer, where a full swap sets the output itself: no earlier site holds it"
        if trivial
        else ""
    )
    same = all(twin_first.get(p) == construction_first.get(p) for p in carried)
    if same:
        return {**out, "verdict": f"implements {what} at the construction's sites{caveat}", "implements": True}
    shift = float(
        np.nanmedian([block_order(twin_first.get(p)) - block_order(construction_first.get(p)) for p in carried])
    )
    where = "later than" if shift > 0 else ("earlier than" if shift < 0 else "as deep as")
    return {
        **out,
        "verdict": f"implements {what} elsewhere: it completes it {where} the construction "
        f"(median {shift:+.2f} blocks){caveat}",
        "implements": True,
        "median_block_shift": shift,
    }


def das_verdict(
    model: Mapping[str, Any],
    nulls: Sequence[Mapping[str, Any]],
    readout: Mapping[str, Any] | None,
    *,
    chance: float,
    ceiling: float | None = 1.0,
    variable: str = "state",
    readout_only: bool = False,
    construction: Mapping[str, Any] | None = None,
    named: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """Whether a linear subspace carries ``variable``, from test-split numbers only (each ``{"iia", "interval"}``,
    the interval a bootstrap over base words): ``model`` — the DAS subspace chosen on the select split (with its
    ``hook``, ``k``, ``live_fraction``); ``nulls`` — each random-init model's subspace, searched and chosen the same
    way; ``readout`` — the untrained unembedding basis at the model's hook; ``chance`` — IIA of a uniform guess
    among the readout classes. In order:

    * ``readout_only`` (every hook DAS may search lies at or after the last attention layer, for a read-out
      variable) → "readout": a swap there sets the output itself, whatever the model computes;
    * no changed outputs → "cannot tell";
    * the lower bound is not :data:`FLOOR` above chance, the IIA is below :data:`IMPLEMENTS` × ``ceiling``, or the
      subspace reaches that at fewer than :data:`COVERAGE` of the positions with enough changed outputs (its
      ``per_position`` IIA, as the full swaps are judged) →
      "no linear subspace found" — unless a construction's named ``carries`` site reaches :data:`IMPLEMENTS`
      where DAS on that construction (``construction``, or ``model`` when the model is the construction) does
      not: then "no evidence of absence" (DAS's blind spot);
    * the lower bound is not above every null's upper bound → "cannot tell: the nulls reach it too";
    * the lower bound is not above the readout baseline's upper bound → "readout";
    * less than :data:`~sandbox_lens.interp.causal.das.DORMANT` of the subspace is live → "cannot tell" (dormant);
    * else "implements it linearly".
    """
    what = "the state" if variable == "state" else f"{variable!r}"
    bar = IMPLEMENTS * (1.0 if ceiling is None else min(1.0, ceiling))
    floor = chance + FLOOR
    uppers = [n["interval"][1] for n in nulls if n.get("interval")]
    null_upper = max(uppers) if uppers else None
    out: dict[str, Any] = {
        "rule": f"DAS fitted, chosen and tested on disjoint pairs; on the test pairs the IIA must reach {IMPLEMENTS} × "
        f"the model's accuracy (here {bar:.3f}), its 95% lower bound must be {FLOOR} above chance ({chance:.3f}) "
        f"and above the upper bounds of {len(nulls)} random-init models searched the same way and of the "
        "untrained readout basis at the same hook; at or after the last attention layer a read-out variable "
        "is 'readout'",
        "hook": model.get("hook"),
        "k": model.get("k"),
        "iia": model.get("iia"),
        "interval": model.get("interval"),
        "chance": chance,
        "floor": floor,
        "bar": bar,
        "null_upper": null_upper,
        "readout_iia": None if readout is None else readout.get("iia"),
        "readout_upper": None if readout is None or not readout.get("interval") else readout["interval"][1],
    }
    if readout_only:
        return {
            **out,
            "verdict": f"readout: every site DAS may search for {what} lies at or after the last attention "
            "layer, where a swap sets the output itself",
            "implements": None,
            "readout": True,
        }
    iia, interval = model.get("iia"), model.get("interval")
    if iia is None or not interval:
        return {**out, "verdict": f"cannot tell: {what} changes no output on these pairs", "implements": None}
    lower = interval[0]
    positions = [r for r in (model.get("per_position") or []) if r is not None]
    covered = sum(r >= bar for r in positions)
    out.update(positions=len(positions), covered=covered)
    if lower < floor or iia < bar or covered < COVERAGE * len(positions):
        why = (
            f"lower bound {lower:.2f} not {FLOOR} above chance {chance:.2f}"
            if lower < floor
            else f"IIA {iia:.2f} below {bar:.2f}"
            if iia < bar
            else f"IIA reaches {bar:.2f} at {covered} of {len(positions)} positions, not {COVERAGE:.0%}"
        )
        carried = [s for s in named if s["role"] == "carries" and s["iia"] is not None and s["iia"] >= IMPLEMENTS]
        own = construction if construction is not None else model
        own_iia = own.get("iia") or 0.0
        if carried and own_iia < IMPLEMENTS:
            return {
                **out,
                "verdict": f"not found by DAS ({why}), but DAS misses the construction's own {what} too "
                f"(its named site {carried[0]['site']}: IIA {carried[0]['iia']:.2f}; DAS there "
                f"{own_iia:.2f}): no evidence of absence",
                "implements": None,
                "das_blind": True,
            }
        return {
            **out,
            "verdict": f"no linear subspace found that carries {what} ({why}; best at {model.get('hook')}, "
            f"k = {model.get('k')})",
            "implements": False,
        }
    if null_upper is not None and lower <= null_upper:
        return {
            **out,
            "verdict": f"cannot tell: random-init models searched the same way reach up to {null_upper:.2f} "
            f"(the model's lower bound {lower:.2f})",
            "implements": None,
        }
    if out["readout_upper"] is not None and lower <= out["readout_upper"]:
        return {
            **out,
            "verdict": f"readout: the unembedding's untrained basis at {model.get('hook')} does as well "
            f"({out['readout_iia']:.2f}, upper bound {out['readout_upper']:.2f})",
            "implements": None,
            "readout": True,
        }
    live = model.get("live_fraction")
    if live is not None and live < DORMANT:
        return {
            **out,
            "verdict": f"cannot tell: DAS reaches it at {model.get('hook')} with k = {model.get('k')}, but "
            f"{1 - live:.0%} of its subspace lies where the activations never move (a dormant "
            "direction can switch on a pathway real inputs never use)",
            "implements": None,
            "dormant": True,
            "live_fraction": live,
        }
    return {
        **out,
        "verdict": f"implements {what} linearly: {model.get('k')} dimension(s) at {model.get('hook')}",
        "implements": True,
        "live_fraction": live,
    }


def outcome(decision: Mapping[str, Any]) -> tuple:
    """What a verdict decides, without its numbers: the key :func:`~sandbox_lens.interp.causal.evidence.stability`
    compares across resamples."""
    import re

    return (
        decision.get("implements"),
        bool(decision.get("readout")),
        bool(decision.get("das_blind")),
        re.sub(r"[-+]?\d[\d.,]*", "#", decision.get("verdict", "")),
    )


def with_stability(decision: Mapping[str, Any], share: float) -> dict[str, Any]:
    """``decision`` with its stability (the share of resamples that give it); "inconclusive" below :data:`STABLE`."""

    out = {**decision, "stability": share}
    if share < STABLE:
        return {
            **out,
            "verdict": f"inconclusive: '{decision['verdict']}' in only {share:.0%} of resamples of the pairs "
            f"(a verdict needs {STABLE:.0%})",
            "implements": None,
            "inconclusive": True,
            "readout": False,
        }
    return out
