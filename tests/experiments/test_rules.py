"""Verdict rules that can fail: every outcome of every experiment's rules is reached by synthetic numbers,
a zero effect is never "reproduced", and a family is Holm-adjusted."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sandbox_lens.interp.experiments import EXPERIMENTS
from sandbox_lens.interp.experiments.rules import MIN_REPRODUCED, VERDICTS, Rule, holm_family, rule_on
from sandbox_lens.interp.stats import Estimate


def _est(lo: float, hi: float, n: int = 5) -> Estimate:
    return Estimate((lo + hi) / 2, (lo, hi), n)


def _synthetic(rule: Rule) -> dict[str, Estimate]:
    """An estimate for each outcome of ``rule`` (mirrored for a rule whose thesis side is 'below')."""
    s = 1.0 if rule.side == "above" else -1.0
    t, z = rule.threshold, rule.null
    gap = max(abs(t - z), 1.0)
    n = 1 if rule.min_n == 1 else max(rule.min_n, MIN_REPRODUCED)
    at = lambda a, b: _est(min(a, b), max(a, b), n)  # noqa: E731
    out = {
        "reproduced": at(t + s * 0.1 * gap, t + s * 2 * gap),
        "not reproduced": at(t, t) if t == z else at(z + s * 0.1 * abs(t - z), t),
        "inconclusive": at(t - s * 0.5 * gap, t + s * 0.5 * gap),
    }
    if t != z:
        out["opposite direction"] = at(z - s * 2 * gap, z - s * 0.1 * gap)
    else:  # a size or an exactness check: far on the wrong side is "not reproduced", as its rule's text says
        out["not reproduced"] = at(z - s * 2 * gap, z - s * 0.1 * gap)
    few = Estimate(t + s * gap, None if rule.min_n > 1 else (t + s * gap, t + s * gap), rule.min_n - 1)
    out["not tested"] = few
    return out


def _rules() -> list[tuple[str, str, Rule]]:
    found = []
    for name, e in EXPERIMENTS.items():
        module = e.load()
        rules = getattr(module, "RULES", None)
        assert rules, f"{name} declares its verdict rules as data (RULES)"
        found += [(name, key, r) for key, r in rules.items()]
    return found


RULES = _rules()


@pytest.mark.parametrize("name,key,rule", RULES, ids=[f"{n}:{k}" for n, k, _ in RULES])
def test_every_outcome_of_every_rule_is_reachable(name, key, rule):
    for expected, estimate in _synthetic(rule).items():
        got = rule_on(rule, estimate)
        assert got["verdict"] == expected, (expected, got)
        assert got["rule"] == rule.text() and got["estimate"]["n"] == estimate.n
    assert rule_on(rule, _synthetic(rule)["reproduced"], floor="the twins did not learn")["verdict"] == "not tested"


@pytest.mark.parametrize("name,key,rule", RULES, ids=[f"{n}:{k}" for n, k, _ in RULES])
def test_a_reproduction_on_fewer_than_five_seeds_is_inconclusive(name, key, rule):
    """The same interval beyond the threshold: 'reproduced' on five units, 'inconclusive' on four (a deterministic
    check, one evaluation, is exempt)."""
    good = _synthetic(rule)["reproduced"]
    if rule.min_n == 1:
        assert rule_on(rule, good)["verdict"] == "reproduced"
        return
    few = Estimate(good.value, good.interval, MIN_REPRODUCED - 1)
    if few.n >= rule.min_n:
        got = rule_on(rule, few)
        assert got["verdict"] == "inconclusive" and f"needs ≥ {MIN_REPRODUCED}" in got["why"], got
    enough = max(MIN_REPRODUCED, rule.min_n)  # a rule may ask for more units than five (random-automata: 10 pairs)
    assert rule_on(rule, Estimate(good.value, good.interval, enough))["verdict"] == "reproduced"


@pytest.mark.parametrize("name,key,rule", RULES, ids=[f"{n}:{k}" for n, k, _ in RULES])
def test_no_effect_is_never_reproduced(name, key, rule):
    z = rule.null
    for width in (0.0, 0.01, 1.0):
        assert rule_on(rule, _est(z - width, z + width, max(rule.min_n, 2)))["verdict"] != "reproduced"


@given(st.floats(-10, 10), st.floats(0, 10), st.floats(0, 5), st.sampled_from(["above", "below"]))
@settings(max_examples=200, deadline=None)
def test_an_interval_containing_the_null_is_never_reproduced(centre, gap, width, side):
    null = centre
    rule = Rule("effect", side, threshold=null + (gap if side == "above" else -gap), null=null, min_n=2)
    assert rule_on(rule, _est(null - width, null + width))["verdict"] != "reproduced"


def test_a_threshold_on_the_thesis_side_of_the_null_is_refused():
    with pytest.raises(ValueError, match="no effect at all would pass"):
        Rule("drop", "above", threshold=-0.1)
    with pytest.raises(ValueError, match="no effect at all would pass"):
        Rule("ratio", "below", threshold=1.5, null=1.0)
    with pytest.raises(ValueError, match="'above' or 'below'"):
        Rule("x", "sideways")


def test_too_few_seeds_are_marked_never_given_a_silent_interval():
    rule = Rule("drop", "above", 0.1, min_n=3)
    got = rule_on(rule, Estimate(0.5, None, 1))
    assert got["verdict"] == "not tested" and "too few seeds" in got["why"] and "1" in got["why"]


def test_a_family_is_holm_adjusted():
    rule = Rule("drop", "above", 0.0, min_n=2)
    rulings = [{**rule_on(rule, _est(0.2, 0.4), p_value=p)} for p in (0.01, 0.02, 0.03)]
    adjusted = holm_family(rulings)
    assert [r["p_holm"] for r in adjusted] == [pytest.approx(0.03), pytest.approx(0.04), pytest.approx(0.04)]
    assert all(r["verdict"] == "reproduced" for r in adjusted)
    weak = holm_family([rule_on(rule, _est(0.2, 0.4), p_value=p) for p in (0.02, 0.03, 0.04)])
    assert [r["verdict"] for r in weak] == ["inconclusive"] * 3 and "Holm-adjusted" in weak[0]["why"]
    assert set(VERDICTS) >= {r["verdict"] for r in weak}


def test_a_verdict_that_one_seed_carries_is_fragile():
    """Leave-one-out on the per-unit values: five seeds well above a threshold stay reproduced without any one of
    them; a verdict one seed decides is fragile; a difference is redone
    leaving a unit out of either group; an estimate without per-unit values has no stability."""
    from sandbox_lens.interp.stats import difference, estimate

    rule = Rule("x", "above", 0.5)
    steady = rule_on(rule, estimate([0.90, 0.95, 1.00, 0.92, 0.97]))
    assert steady["verdict"] == "reproduced" and steady["stability"] == {
        "leave_one_out": 5,
        "verdicts": {"reproduced": 5},
        "fragile": False,
    }
    # one low seed keeps four steady ones from a reproduction: without it the verdict is another
    decided = rule_on(Rule("x", "above", 0.6), estimate([0.70, 0.71, 0.69, 0.70, 0.45]))
    assert decided["verdict"] == "inconclusive" and decided["stability"]["fragile"], decided
    assert decided["stability"]["verdicts"] == {"inconclusive": 4, "reproduced": 1}
    diff = rule_on(Rule("d", "above", 0.0), difference([2.0, 2.1, 1.9, 2.05, 1.95], [1.0, 1.1, 0.9, 1.05, 0.95]))
    assert diff["verdict"] == "reproduced" and diff["stability"]["leave_one_out"] == 10
    assert rule_on(rule, Estimate(0.9, (0.8, 1.0), 20))["stability"] is None


def test_leave_one_out_remakes_the_statistic_the_estimate_names():
    """An estimate names its statistic; a difference of medians whose method text is custom (``what=``) is remade
    as medians, not read as means off its words."""
    from sandbox_lens.interp.experiments.rules import stability
    from sandbox_lens.interp.stats import difference, estimate

    assert estimate([1.0, 2.0, 9.0], "median").statistic == "median"
    assert estimate([1.0, 2.0, 9.0]).to_dict()["statistic"] == "mean"
    a = [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 5.0, 5.0, 5.0, 5.0]
    b = [0.0] * 10
    e = difference(a, b, "median", ("a", "b"), what="the drop")
    assert e.statistic == "median" and not e.method.startswith("difference of median")
    rule = Rule("drop", "above", 1.0)
    verdict = rule_on(rule, e)["verdict"]

    def remade(statistic):
        got = {}
        for i in range(len(a)):
            v = rule_on(rule, difference(a[:i] + a[i + 1 :], b, statistic, ("a", "b")), None, None)["verdict"]
            got[v] = got.get(v, 0) + 1
        for i in range(len(b)):
            v = rule_on(rule, difference(a, b[:i] + b[i + 1 :], statistic, ("a", "b")), None, None)["verdict"]
            got[v] = got.get(v, 0) + 1
        return got

    assert remade("median") != remade("mean")  # the case tells the two apart
    assert stability(rule, e, verdict)["leave_one_out"] == 20
    assert set(stability(rule, e, verdict)["verdicts"]) == set(remade("median"))
    # a rate (no statistic, a Wilson interval) is not remade
    assert stability(rule, Estimate(0.5, (0.3, 0.7), 10, "twins", "share with a 95% Wilson interval"), verdict) is None
