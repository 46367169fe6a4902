"""instability: negative progress, the converged runs' share and the paired changes, fed curves and per-seed numbers
with a known answer."""

from __future__ import annotations

import pytest

from sandbox_lens.interp.experiments import instability as ins
from sandbox_lens.interp.experiments.rules import rule_on
from sandbox_lens.interp.stats import estimate


def test_a_curve_goes_backwards_only_by_a_drop_from_an_earlier_best():
    assert not ins.went_backwards([0.5, 0.6, 0.58, 0.9, 1.0])  # a dip of 0.02 is noise
    assert ins.went_backwards([0.5, 0.8, 0.7, 1.0])  # 0.8 → 0.7
    assert ins.went_backwards([0.9, 0.95, 0.92, 0.89, 1.0])  # from the best, not the step before
    assert not ins.went_backwards([]) and not ins.went_backwards([1.0])


def test_the_backwards_share_counts_converged_runs_only():
    curves = [[0.5, 0.9, 0.8, 1.0]] + [[0.5, 0.8, 0.995]] * 5 + [[0.9, 0.5, 0.6]] * 4  # the last four never converge
    e = ins.backwards_share(curves)
    assert e.n == 6 and e.value == pytest.approx(1 / 6) and e.interval[0] < 1 / 6 < e.interval[1]
    assert rule_on(ins.RULES["backwards"], e)["verdict"] == "inconclusive"  # 1 of 6: the interval reaches below 0.1
    many = ins.backwards_share([[0.5, 0.9, 0.8, 1.0]] * 20)
    assert rule_on(ins.RULES["backwards"], many)["verdict"] == "reproduced"
    none = ins.backwards_share([[0.5, 0.8, 1.0]] * 40)
    assert rule_on(ins.RULES["backwards"], none)["verdict"] == "not reproduced"


def test_changes_are_paired_by_seed():
    final = {"a/plain": {0: 0.5, 1: 0.6, 2: 0.7}, "a/ema": {0: 0.6, 1: 0.8, 3: 0.9}}
    assert ins.paired_change(final, "a/ema", "a/plain") == pytest.approx([0.1, 0.2])  # seed 3 has no plain twin
    helps = [0.05, 0.06, 0.04, 0.07, 0.05]
    assert rule_on(ins.RULES["ema"], estimate(helps))["verdict"] == "reproduced"
    assert rule_on(ins.RULES["dropout grid9"], estimate([-x for x in helps]))["verdict"] == "reproduced"
    assert rule_on(ins.RULES["dropout grid9"], estimate(helps))["verdict"] == "opposite direction"


def test_the_spread_is_the_share_of_seeds_far_below_the_best():
    spread = [0.5, 0.55, 0.6, 0.62, 0.58, 0.995, 0.57, 0.61, 0.93, 0.59]
    e = ins.spread_share(spread)
    assert e.n == 9 and e.value == pytest.approx(8 / 9)  # 0.93 lies within 0.1 of the best
    assert rule_on(ins.RULES["spread"], e)["verdict"] == "reproduced"
    tight = [0.99, 0.995, 0.98, 0.99, 1.0, 0.985, 0.99, 0.99, 0.6, 0.97]
    assert rule_on(ins.RULES["spread"], ins.spread_share(tight))["verdict"] == "not reproduced"
