"""sandbox_lens.interp.stats: intervals cover what they should, tests reject what they should, on synthetic numbers
whose truth is known (and hypothesis where a property holds for any input)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sandbox_lens.interp.stats import (
    Estimate,
    bootstrap_interval,
    cohens_d,
    difference_interval,
    estimate,
    holm,
    null_exceedance,
    paired_interval,
    paired_test,
    permutation_test,
    poisson_interval,
    share,
    wilson_interval,
)


def test_bootstrap_intervals_cover_the_mean_at_about_their_confidence():
    rng = np.random.default_rng(1)
    hits = 0
    for i in range(200):
        x = rng.normal(3.0, 1.0, size=40)
        lo, hi = bootstrap_interval(x, resamples=1000, seed=i)
        hits += lo <= 3.0 <= hi
    assert 0.88 <= hits / 200 <= 0.99, hits


def test_too_few_values_give_no_interval_never_a_fake_one():
    assert bootstrap_interval([0.7]) is None and bootstrap_interval([]) is None
    assert bootstrap_interval([0.7, None, float("nan")]) is None
    assert difference_interval([1, 2], [3]) is None and paired_interval([1], [2]) is None
    e = estimate([0.5])
    assert e.interval is None and e.n == 1 and "(1 seeds)" in e.text()


@given(st.lists(st.floats(-1e3, 1e3, allow_nan=False), min_size=2, max_size=12), st.integers(0, 5))
@settings(max_examples=60, deadline=None)
def test_an_interval_is_ordered_and_inside_the_data(values, seed):
    lo, hi = bootstrap_interval(values, resamples=200, seed=seed)
    assert min(values) - 1e-9 <= lo <= hi <= max(values) + 1e-9


def test_paired_intervals_see_a_shift_that_unpaired_noise_hides():
    rng = np.random.default_rng(0)
    seeds = rng.normal(0, 5, size=12)  # a large per-seed effect shared by both measurements
    a, b = seeds + 1.0 + rng.normal(0, 0.1, 12), seeds + rng.normal(0, 0.1, 12)
    lo, hi = paired_interval(a, b)
    assert 0.8 < lo < 1.0 < hi < 1.2
    lo_u, hi_u = difference_interval(a, b)
    assert lo_u < 0 < hi_u  # unpaired, the shift drowns in the seeds' spread
    assert paired_test(a, b, "greater") < 0.01 and paired_test(a, a) == 1.0
    with pytest.raises(ValueError, match="equal lengths"):
        paired_interval([1, 2], [1])


def test_a_share_is_its_wilson_interval_over_the_flags():
    e = share([True, False, False, True, False], unit="runs")
    assert e.value == pytest.approx(0.4) and e.interval == wilson_interval(2, 5) and e.n == 5 and e.unit == "runs"
    assert e.values == [1.0, 0.0, 0.0, 1.0, 0.0] and "Wilson" in e.method
    empty = share([])
    assert empty.value is None and empty.interval is None and empty.n == 0


def test_rates_wilson_and_poisson():
    lo, hi = wilson_interval(0, 100)
    assert lo < 1e-12 and 0.03 < hi < 0.04
    assert wilson_interval(5, 0) is None
    lo, hi = poisson_interval(0, 1000)  # no error in 1000 reads still bounds the rate
    assert lo == 0 and hi == pytest.approx(3.689 / 1000, rel=1e-3)
    lo, hi = poisson_interval(10, 1.0)
    assert lo == pytest.approx(4.795, rel=1e-3) and hi == pytest.approx(18.39, rel=1e-3)
    with pytest.raises(ValueError):
        poisson_interval(-1)


def test_permutation_tests_reject_a_real_difference_and_not_a_null_one():
    rng = np.random.default_rng(3)
    a, b = rng.normal(1.5, 1, 30), rng.normal(0.0, 1, 30)
    assert permutation_test(a, b, alternative="greater", resamples=2000) < 0.01
    assert permutation_test(a, b, alternative="less", resamples=2000) > 0.9
    c = rng.normal(0, 1, 30)
    assert permutation_test(b, c, resamples=2000) > 0.05
    assert permutation_test(a, b, paired=True, alternative="greater", resamples=2000) < 0.01


def test_a_maximum_is_judged_against_the_null_of_maxima():
    null = np.random.default_rng(0).normal(0.3, 0.02, size=99)
    hi = null_exceedance(0.9, null)
    assert hi["exceeds"] and hi["p_value"] == pytest.approx(0.01)
    lo = null_exceedance(0.3, null)
    assert not lo["exceeds"] and lo["p_value"] > 0.2
    assert null_exceedance(0.5, [])["p_value"] is None


def test_holm_adjusts_a_family_and_keeps_the_order():
    adjusted = holm([0.01, 0.04, 0.03, None])
    assert adjusted == [pytest.approx(0.03), pytest.approx(0.06), pytest.approx(0.06), None]
    assert holm([]) == []


def test_effect_sizes():
    assert cohens_d([1, 2, 3], [1, 2, 3]) == 0.0
    assert cohens_d([2, 3, 4], [1, 2, 3]) == pytest.approx(1.0)
    assert cohens_d([1, 1], [2, 2]) is None  # no spread: no standardised size
    assert cohens_d([3, 4, 5], [1, 2, 3], paired=True) is None  # every difference 2: SD 0


def test_an_estimate_says_what_it_is():
    e = estimate([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], "median", unit="seeds")
    assert isinstance(e, Estimate) and e.value == 3.5 and e.n == 6
    d = e.to_dict()
    assert d["values"] == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0] and d["interval"] == [1.0, 6.0]
    assert d["method"] == "median, 95% order-statistic interval over seeds" and e.text().startswith("3.5 [")
    # four values cannot bound a median at 95% (the range covers 1 − 2/16 = 87.5%): no interval, said so
    few = estimate([1.0, 2.0, 3.0, 4.0], "median")
    assert few.interval is None and few.text() == "2.5 (4 seeds)"


def test_small_samples_get_intervals_honest_at_their_size():
    """Below SMALL_N units: Student's t for a mean (not the bootstrap's range), Welch's t for a difference of means,
    no interval for a difference of medians; from SMALL_N on, the bootstrap as before."""
    from scipy import stats as sps

    from sandbox_lens.interp.stats import SMALL_N, difference_interval, welch_interval

    x = [0.61, 0.74, 0.70]
    assert estimate(x).interval == pytest.approx(sps.t.interval(0.95, 2, loc=np.mean(x), scale=sps.sem(x)))
    assert "t interval" in estimate(x).method and "bootstrap" in estimate(range(SMALL_N)).method
    a, b = [3.0, 4.0, 5.0], [1.0, 1.5, 2.0, 2.5]
    lo, hi = welch_interval(a, b)
    ref = sps.ttest_ind(a, b, equal_var=False).confidence_interval(0.95)
    assert (lo, hi) == pytest.approx((ref.low, ref.high), rel=1e-9)
    assert difference_interval(a, b) == (lo, hi) and difference_interval(a, b, np.median) is None
    assert welch_interval([1.0, 1.0], [0.0, 0.0]) == (1.0, 1.0)  # nothing varies: a point


@pytest.mark.parametrize("n", [3, 5, 6, 8, 12])
def test_small_sample_intervals_cover_at_least_their_level(n):
    """Simulated coverage on skewed (exponential) and normal draws: the t and order-statistic intervals keep at
    least ~95% where the percentile bootstrap at 3 seeds covers about 70% (it is their range)."""
    from sandbox_lens.interp.stats import median_interval, t_interval

    rng = np.random.default_rng(n)
    normal = rng.normal(1.0, 2.0, size=(2000, n))
    covered = [iv is not None and iv[0] <= 1.0 <= iv[1] for iv in map(t_interval, normal)]
    assert np.mean(covered) >= 0.93
    skewed = rng.exponential(1.0, size=(2000, n))
    medians = [median_interval(x) for x in skewed]
    if n < 6:
        assert all(m is None for m in medians)
    else:
        assert np.mean([m[0] <= np.log(2) <= m[1] for m in medians]) >= 0.94


def test_the_t_interval_is_students_and_wider_than_the_bootstrap_at_three_seeds():
    from scipy import stats as sps

    from sandbox_lens.interp.stats import bootstrap_interval, t_interval

    x = [0.61, 0.74, 0.70]
    lo, hi = t_interval(x)
    expected = sps.t.interval(0.95, 2, loc=np.mean(x), scale=sps.sem(x))
    assert (lo, hi) == pytest.approx(expected, rel=1e-12)
    b = bootstrap_interval(x)
    assert lo < b[0] and hi > b[1] and min(x) <= b[0] and b[1] <= max(x)  # the bootstrap: within the range
    assert t_interval([0.5]) is None and t_interval([0.4, 0.4, 0.4]) == pytest.approx((0.4, 0.4), abs=1e-15)


def test_a_bounded_quantitys_t_interval_is_clipped_to_its_range():
    """Precisions of 1, 1, 0.8 at three seeds: the t interval overshoots 1; clipped, it stays inside [0, 1] and keeps
    its lower end; one-sided bounds clip one side; an interval wholly outside collapses onto the bound."""
    from sandbox_lens.interp.stats import clip_interval, t_interval

    raw = t_interval([1.0, 1.0, 0.8])
    assert raw is not None and raw[1] > 1
    lo, hi = t_interval([1.0, 1.0, 0.8], bounds=(0.0, 1.0))
    assert (lo, hi) == (raw[0], 1.0)
    assert clip_interval((-0.2, 0.3), (0.0, None)) == (0.0, 0.3)
    assert clip_interval((1.2, 1.5), (0.0, 1.0)) == (1.0, 1.0)
    assert clip_interval(None, (0.0, 1.0)) is None and clip_interval((-1.0, 2.0), None) == (-1.0, 2.0)
