"""The verdict of a causal alignment, by a stated rule that can fail.

Inputs: per position, the best IIA (on changed outputs) a full swap reaches anywhere in the twin, the
twin's first site reaching :data:`IMPLEMENTS` and the construction's (the same threshold); the random-init
null's best.

* the null reaches :data:`IMPLEMENTS` at some position → "cannot tell: the random-init null reaches it too";
* the twin reaches it at fewer than :data:`COVERAGE` of the positions → "does not implement the variable";
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
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from sandbox_lens.interp.causal.das import DORMANT

import numpy as np

__all__ = ["verdict", "IMPLEMENTS", "COVERAGE", "MIN_OUTPUTS", "block_order", "das_verdict"]

#: IIA (changed outputs, held out) at which a site is said to carry the variable.
IMPLEMENTS = 0.95
#: The share of positions (with changed outputs) at which the twin must carry it somewhere.
COVERAGE = 0.9
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


def verdict(twin_best: Mapping[int, float | None], twin_first: Mapping[int, str | None],
            construction_first: Mapping[int, str | None], null_best: Mapping[int, float | None],
            variable: str = "state", trivial_from: float | None = None, ceiling: float | None = 1.0) -> dict[str, Any]:
    """The verdict on ``variable`` and the numbers it was computed from (see the module docstring);
    ``trivial_from``: the :func:`block_order` of the twin's first trivial site (its last attention layer's
    ``resid_mid``), None when the variable is not read out directly; ``ceiling``: the twin's own accuracy — a
    site carries the variable at IIA ≥ :data:`IMPLEMENTS` × ceiling (no intervention can make a model more
    right than it is)."""
    bar = IMPLEMENTS * (1.0 if ceiling is None else min(1.0, ceiling))
    what = "the state" if variable == "state" else f"{variable!r}"
    positions = [p for p, v in twin_best.items() if v is not None]
    # where the twin's variable is its own token's function, a full swap of the token carries it in any model whose
    # output there separates the tokens — a random one included, by luck: not evidence for or against
    null_hits = [p for p, v in null_best.items()
                 if v is not None and v >= IMPLEMENTS and twin_first.get(p) != TOKEN_SITE]
    carried = [p for p in positions if twin_best[p] >= bar]
    out: dict[str, Any] = {"rule": f"IIA ≥ {IMPLEMENTS} × the model's accuracy (here {bar:.3f}) on changed held-out "
                                   f"outputs at ≥ {COVERAGE:.0%} of the positions; the null must stay below {IMPLEMENTS}",
                           "positions": len(positions), "carried": len(carried), "null_positions": len(null_hits)}
    if null_hits:
        return {**out, "verdict": "cannot tell: the random-init null reaches it too", "implements": None}
    if construction_first and all(construction_first.get(p) is None for p in positions):
        return {**out, "verdict": f"cannot tell from full swaps: no full swap isolates {what} in the construction "
                                  "either (it shares its sites with other variables); see DAS", "implements": None}
    if not positions or len(carried) < COVERAGE * len(positions):
        return {**out, "verdict": f"does not implement {what}", "implements": False}
    computed = [p for p in carried if twin_first.get(p) != TOKEN_SITE]  # not a function of the token alone
    trivial = trivial_from is not None and bool(computed) and (
        sum(block_order(twin_first.get(p)) >= trivial_from for p in computed) >= COVERAGE * len(computed))
    out["trivial"] = trivial
    caveat = (" — only after its last attention layer, where a full swap sets the output itself: no earlier site "
              "holds it" if trivial else "")
    same = all(twin_first.get(p) == construction_first.get(p) for p in carried)
    if same:
        return {**out, "verdict": f"implements {what} at the construction's sites{caveat}", "implements": True}
    shift = float(np.nanmedian([block_order(twin_first.get(p)) - block_order(construction_first.get(p)) for p in carried]))
    where = "later than" if shift > 0 else ("earlier than" if shift < 0 else "as deep as")
    return {**out, "verdict": f"implements {what} elsewhere: it completes it {where} the construction "
                              f"(median {shift:+.2f} blocks){caveat}", "implements": True, "median_block_shift": shift}


def das_verdict(model_das: Mapping[str, Any], null_das: Mapping[str, Any] | None,
                construction_das: Mapping[str, Any] | None, named: Sequence[Mapping[str, Any]],
                variable: str = "state", ceiling: float | None = 1.0) -> dict[str, Any]:
    """Whether a linear subspace carries ``variable``, from a DAS sweep (:func:`sandbox_lens.interp.causal.align.das_sweep`),
    at IIA ≥ :data:`IMPLEMENTS` × ``ceiling`` (the model's own accuracy; the null and the construction: 1):

    * the best hook's held-out IIA is undefined → "cannot tell: no changed outputs";
    * the null's DAS at the same hook and k reaches :data:`IMPLEMENTS` → "cannot tell: the null reaches it too";
    * the best hook reaches it, but less than :data:`~sandbox_lens.interp.causal.das.DORMANT` of its subspace lies in the
      directions the activations move in (``live_fraction``) → "cannot tell": a dormant subspace (Makelov et al.);
    * the best hook reaches it → "implements it linearly", with the smallest k that does;
    * else, if a construction's named ``carries`` site reaches it but DAS on that construction (``construction_das``,
      or ``model_das`` when the model is the construction) does not → "not found by DAS, which misses the
      construction's own variable too": a negative DAS result is no evidence of absence here;
    * else "no linear subspace found" (up to the largest k tried).
    """
    what = "the state" if variable == "state" else f"{variable!r}"
    bar = IMPLEMENTS * (1.0 if ceiling is None else min(1.0, ceiling))
    best = max(model_das["by_hook"], key=lambda r: -1.0 if r["iia"] is None else r["iia"])
    out: dict[str, Any] = {"rule": f"position-shared DAS, held-out IIA ≥ {IMPLEMENTS} × the model's accuracy (here "
                                   f"{bar:.3f}) on changed outputs at some hook (k ≤ the largest tried); the null's DAS "
                                   f"at that hook and k must stay below {IMPLEMENTS}",
                           "hook": best["hook"], "iia": best["iia"], "k_max": best["k"],
                           "null_iia": None if null_das is None else null_das["iia"]}
    if best["iia"] is None:
        return {**out, "verdict": f"cannot tell: {what} changes no output on these pairs", "implements": None}
    if null_das is not None and null_das["iia"] is not None and null_das["iia"] >= IMPLEMENTS:
        return {**out, "verdict": "cannot tell: the random-init null's DAS reaches it too", "implements": None}
    if best["iia"] >= bar:
        reaching = [r for r in model_das["k"] if r["iia"] is not None and r["iia"] >= bar]
        smallest = min(reaching, key=lambda r: r["k"]) if reaching else best
        k, live = smallest["k"], smallest.get("live_fraction")  # the extra dimensions of a larger k may lie anywhere
        if live is not None and live < DORMANT:
            return {**out, "verdict": f"cannot tell: DAS reaches it at {best['hook']} with k = {k}, but {1 - live:.0%} of "
                                      "its subspace "
                                      "lies where the activations never move (a dormant direction can switch on a "
                                      "pathway real inputs never use)", "implements": None, "dormant": True,
                    "live_fraction": live}
        return {**out, "verdict": f"implements {what} linearly: {k} dimension(s) at {best['hook']}",
                "implements": True, "k": k, "live_fraction": live}
    carried = [s for s in named if s["role"] == "carries" and s["iia"] is not None and s["iia"] >= IMPLEMENTS]
    own = construction_das if construction_das is not None else model_das
    own_best = max((r["iia"] or 0.0) for r in own["by_hook"])
    if carried and own_best < IMPLEMENTS:
        return {**out, "verdict": f"not found by DAS (best {best['iia']:.2f}), but DAS misses the construction's own "
                                  f"{what} too (its named site {carried[0]['site']}: IIA {carried[0]['iia']:.2f}; DAS "
                                  f"there at most {own_best:.2f}): no evidence of absence", "implements": None,
                "das_blind": True}
    return {**out, "verdict": f"no linear subspace found that carries {what} (best {best['iia']:.2f} at "
                              f"{best['hook']}, k = {best['k']})", "implements": False}
