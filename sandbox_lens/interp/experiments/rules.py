"""Verdict rules that can fail: an effect, its interval and a threshold decide a claim.

A :class:`Rule` names the effect it measures (``median OOD read errors, mixture − FFL(0.8)``), the
side of a threshold the thesis puts it on, the effect's *null* value (what it reads when nothing
happens, usually 0) and the fewest units (seeds, words) it will rule on. :func:`rule_on` reads an
:class:`~sandbox_lens.interp.stats.Estimate` against it:

=================== ==============================================================================
verdict             when (thesis side "above"; "below" mirrors it)
=================== ==============================================================================
reproduced          the whole interval lies above the threshold, on at least :data:`MIN_REPRODUCED` units
not reproduced      the whole interval lies at or below the threshold, and not below the null
opposite direction  the whole interval lies below the null: a real effect the other way (not for a
                    rule whose null is its threshold: there it is "not reproduced")
inconclusive        the interval contains the threshold, or it lies above it on fewer than five units
not tested          fewer units than the rule needs, no interval, or a *floor*: the setting could
                    not test the claim (the models did not learn the task, accuracy at chance)
=================== ==============================================================================

A rule's threshold may not lie on the thesis's side of its null, and the comparison is strict, so
an effect of exactly zero can never be "reproduced" (tested on synthetic numbers). A deterministic
check (an exact construction's error count) is an estimate with a zero-width interval and
``min_n = 1``.

Several rulings that test one claim form a *family*: :func:`holm_family` adjusts their p-values
(Holm) and turns a "reproduced" whose adjusted p-value is not below α into "inconclusive".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sandbox_lens.interp.stats import CONFIDENCE, Estimate, difference, holm
from sandbox_lens.interp.stats import estimate as remake

__all__ = [
    "VERDICTS",
    "MIN_REPRODUCED",
    "Rule",
    "rule_on",
    "holm_family",
    "ALPHA",
    "exactness_rule",
    "count",
    "effect_text",
]

VERDICTS = ("reproduced", "not reproduced", "opposite direction", "inconclusive", "not tested")
ALPHA = 1 - CONFIDENCE
#: The fewest units (seeds, twins) a "reproduced" rests on: below it an interval above the threshold is
#: "inconclusive" (a deterministic check, ``min_n`` 1, is exempt).
MIN_REPRODUCED = 5


@dataclass(frozen=True)
class Rule:
    """``effect`` must lie ``side`` ("above" / "below") ``threshold`` for the thesis's claim to hold."""

    effect: str
    side: str = "above"
    threshold: float = 0.0
    null: float = 0.0
    min_n: int = 3
    unit: str = "seeds"

    def __post_init__(self) -> None:
        if self.side not in ("above", "below"):
            raise ValueError(f"a rule's side is 'above' or 'below', got {self.side!r}")
        if (self.side == "above" and self.threshold < self.null) or (
            self.side == "below" and self.threshold > self.null
        ):
            raise ValueError(
                f"rule on {self.effect!r}: threshold {self.threshold} lies on the thesis's side of the null "
                f"{self.null}, so no effect at all would pass it"
            )
        if self.min_n < 1:
            raise ValueError(f"a rule needs at least one unit, got min_n = {self.min_n}")

    def text(self) -> str:
        other = "below" if self.side == "above" else "above"
        null = "" if self.null == self.threshold else f"; opposite direction if entirely {other} {self.null:g}"
        return (
            f"{self.effect}: reproduced if its {CONFIDENCE:.0%} interval lies entirely {self.side} {self.threshold:g}; "
            f"not reproduced if entirely at or {other} it{null}; inconclusive if it contains {self.threshold:g}; "
            f"needs ≥ {self.min_n} {self.unit}" + (f", ≥ {MIN_REPRODUCED} to be reproduced" if self.min_n > 1 else "")
        )


def exactness_rule(effect: str) -> Rule:
    """The rule of a deterministic check: ``effect`` counts errors, and none may occur."""
    return Rule(effect, "below", 0.5, null=0.5, min_n=1, unit="evaluations")


def count(n: int | float) -> Estimate:
    """A deterministic count as an estimate (a zero-width interval, one evaluation)."""
    return Estimate(float(n), (float(n), float(n)), 1, "evaluations", "a count (deterministic)")


def effect_text(row: dict[str, Any]) -> str:
    """One line for a claim row: the effect, its value, interval, units and threshold, the p-values and the
    null of a maximum where there are any ("" without an estimate)."""
    e = row.get("estimate")
    if not e:
        return ""
    if e["value"] is None:
        text = f"{row['effect']}: not measured ({e['n']} {e['unit']})"
    else:
        ci = "no interval" if e["interval"] is None else f"[{e['interval'][0]:.3g}, {e['interval'][1]:.3g}]"
        text = f"{row['effect']} = {e['value']:.3g} {ci}, {e['n']} {e['unit']}; threshold {row['threshold']:g} ({row['side']})"
    if row.get("p_holm") is not None:
        text += f"; p = {row['p_value']:.3g}, Holm-adjusted {row['p_holm']:.3g} ({row['family']} tests)"
    elif row.get("p_value") is not None:
        text += f"; p = {row['p_value']:.3g}"
    null = row.get("null")
    if null and null.get("null_quantile") is not None:
        text += (
            f"; null of the maximum ({null['null_n']} draws): mean {null['null_mean']:.3g}, 95% quantile "
            f"{null['null_quantile']:.3g}, p = {null['p_value']:.3g}"
        )
    return text


def rule_on(rule: Rule, estimate: Estimate, floor: str | None = None, p_value: float | None = None) -> dict[str, Any]:
    """The verdict of ``rule`` on ``estimate`` (``floor``: why the setting could not test the claim), with
    the effect, its interval, the threshold and the rule's text: what a claim row in ``results.json`` holds —
    and, where the estimate keeps its per-unit values, the verdict's :func:`stability` when one unit is left out."""
    row = _ruled(rule, estimate, floor, p_value)
    if not floor and row["verdict"] != "not tested":
        row["stability"] = stability(rule, estimate, row["verdict"])
    return row


def stability(rule: Rule, estimate: Estimate, verdict: str) -> dict[str, Any] | None:
    """The verdict again with each unit (seed, twin) left out in turn, the interval remade the way ``estimate``
    made it (:func:`~sandbox_lens.interp.stats.estimate` or :func:`~sandbox_lens.interp.stats.difference`, read off
    its ``statistic``, the count a reproduction needs lowered by the one left out): ``fragile`` when any one unit's
    absence changes it, with the verdicts reached and how often. None where the estimate keeps no per-unit values
    or is not a mean or a median (a rate, a pairwise statistic) and so cannot be redone."""

    statistic = estimate.statistic
    if not statistic:  # an estimate made by hand names no statistic: read it off the method's words
        median = estimate.method.startswith("median") or "difference of median" in estimate.method
        statistic = "median" if median else "mean"
        remakeable = estimate.method.startswith(("mean", "median"))
    else:
        remakeable = statistic in ("mean", "median")
    redone: list[Estimate] = []
    if estimate.groups and len(estimate.groups) == 2 and statistic in ("mean", "median"):
        (la, a), (lb, b) = estimate.groups.items()
        for i in range(len(a)):
            redone.append(difference(a[:i] + a[i + 1 :], b, statistic, (la, lb), estimate.unit))
        for i in range(len(b)):
            redone.append(difference(a, b[:i] + b[i + 1 :], statistic, (la, lb), estimate.unit))
    elif estimate.values and remakeable:
        v = list(estimate.values)
        redone = [remake(v[:i] + v[i + 1 :], statistic, estimate.unit) for i in range(len(v))]
    if not redone:
        return None
    seen: dict[str, int] = {}
    for e in redone:
        got = _ruled(rule, e, None, None, fewest=MIN_REPRODUCED - 1)["verdict"]  # one unit fewer by design
        seen[got] = seen.get(got, 0) + 1
    return {"leave_one_out": len(redone), "verdicts": seen, "fragile": set(seen) != {verdict}}


def _ruled(
    rule: Rule, estimate: Estimate, floor: str | None, p_value: float | None, fewest: int = MIN_REPRODUCED
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "rule": rule.text(),
        "effect": rule.effect,
        "estimate": estimate.to_dict(),
        "threshold": rule.threshold,
        "no_effect": rule.null,
        "side": rule.side,
        "p_value": p_value,
    }
    if floor:
        return {**out, "verdict": "not tested", "why": floor}
    if estimate.value is None or estimate.n < rule.min_n or estimate.interval is None:
        return {
            **out,
            "verdict": "not tested",
            "why": f"too few {rule.unit} for an interval: {estimate.n} (the rule needs ≥ {rule.min_n})"
            if estimate.n < rule.min_n or estimate.value is None
            else f"no interval at {estimate.n} {rule.unit}: {estimate.method}",
        }
    lo, hi = estimate.interval
    t, z = rule.threshold, rule.null
    if rule.side == "below":  # mirror: the thesis says the effect lies below the threshold
        lo, hi, t, z = -hi, -lo, -t, -z
    if lo > t and rule.min_n > 1 and estimate.n < fewest:
        verdict = "inconclusive"
        why = f"the interval lies beyond the threshold, but on {estimate.n} {rule.unit}: a reproduction needs ≥ {MIN_REPRODUCED}"
    elif lo > t:
        verdict, why = "reproduced", ""
    elif hi < z and z != t:  # a rule whose null is its threshold (a size, an exactness check) has no such region
        verdict, why = "opposite direction", "the whole interval lies on the other side of no effect"
    elif hi <= t:
        verdict, why = "not reproduced", "the whole interval lies at or short of the threshold"
    else:
        verdict, why = "inconclusive", "the interval contains the threshold"
    return {**out, "verdict": verdict, "why": why}


def holm_family(rulings: Sequence[dict[str, Any]], alpha: float = ALPHA) -> list[dict[str, Any]]:
    """Rulings that test one claim, with Holm-adjusted p-values: a "reproduced" whose adjusted p-value is
    not below ``alpha`` becomes "inconclusive". Rulings without a p-value are left as they are."""
    adjusted = holm([r.get("p_value") for r in rulings])
    out = []
    for r, p in zip(rulings, adjusted):
        r = {**r, "p_holm": p, "family": len([q for q in adjusted if q is not None])}
        if p is not None and r["verdict"] == "reproduced" and p >= alpha:
            r["verdict"], r["why"] = (
                "inconclusive",
                f"Holm-adjusted p = {p:.3g} over {r['family']} tests (α = {alpha:g})",
            )
        out.append(r)
    return out


def stability_text(row: dict[str, Any]) -> str:
    """ "" for a steady verdict (or one without per-unit values); else what leaving one unit out gives, e.g.
    "fragile: leaving one seed out gives reproduced 1 of 5, inconclusive 4 of 5"."""
    st = row.get("stability")
    if not st or not st.get("fragile"):
        return ""
    unit = (row.get("estimate") or {}).get("unit", "unit").rstrip("s") or "unit"
    parts = ", ".join(f"{v} {k} of {st['leave_one_out']}" for v, k in sorted(st["verdicts"].items()))
    return f"fragile: leaving one {unit} out gives {parts}"
