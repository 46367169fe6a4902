"""Uncertainty for the numbers this project reports, in one place: every experiment, comparison and
benchmark table takes its intervals, nulls and tests from here.

* intervals — :func:`bootstrap_interval` (a statistic over seeds or words, percentile bootstrap),
  :func:`t_interval` (a mean over a handful of seeds),
  :func:`grouped_bootstrap_interval` (units resampled within their groups),
  :func:`difference_interval` (two independent groups), :func:`paired_interval` (two measurements of
  the same seeds or inputs), :func:`wilson_interval` (a binomial rate), :func:`poisson_interval` (a
  count of rare events, exact);
* tests — :func:`paired_test` (Wilcoxon signed-rank), :func:`permutation_test` (two groups, or paired
  by sign flips), :func:`null_exceedance` (an observed maximum against a null distribution of
  maxima: random-init models or a permutation), :func:`holm` (a family of p-values);
* effect sizes — :func:`cohens_d`.

:class:`Estimate` carries a number with its per-unit values, its interval and how the interval was
made; ``to_dict`` is what ``results.json`` stores. Every resampling takes a seed (default 0), so a
rerun prints the same interval.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import numpy as np

__all__ = [
    "Estimate",
    "bootstrap_interval",
    "t_interval",
    "grouped_bootstrap_interval",
    "difference_interval",
    "paired_interval",
    "wilson_interval",
    "poisson_interval",
    "paired_test",
    "permutation_test",
    "null_exceedance",
    "holm",
    "cohens_d",
    "estimate",
    "share",
    "difference",
    "median_interval",
    "interval_method",
    "welch_interval",
    "CONFIDENCE",
    "SMALL_N",
]

#: Per-unit values: a sequence (None or NaN where a unit has none) or an array.
Values: TypeAlias = Sequence[float | None] | np.ndarray

#: The confidence of every interval unless a caller asks for another.
CONFIDENCE = 0.95
RESAMPLES = 4000
#: Below this many units a percentile bootstrap undercovers (with 3 seeds its "95%" is their range): means get
#: Student's t (Welch's for a difference), medians the distribution-free order-statistic interval (none below 6
#: units at 95%), any other statistic no interval.
SMALL_N = 10


def _clean(values: Values) -> np.ndarray:
    return np.asarray([v for v in values if v is not None and not np.isnan(v)], dtype=np.float64)


def _percentiles(stats: np.ndarray, confidence: float) -> tuple[float, float]:
    alpha = (1 - confidence) / 2
    return float(np.quantile(stats, alpha)), float(np.quantile(stats, 1 - alpha))


def bootstrap_interval(
    values: Values,
    statistic: Callable[[np.ndarray], float] = np.mean,
    confidence: float = CONFIDENCE,
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> tuple[float, float] | None:
    """Percentile bootstrap interval of ``statistic`` over ``values`` (one per seed, or per word); None for
    fewer than two values. With a handful of seeds the interval is narrow and undercovers: report the
    number of seeds beside it."""
    x = _clean(values)
    if len(x) < 2:
        return None
    rng = np.random.default_rng(seed)
    idx = rng.integers(len(x), size=(resamples, len(x)))
    stats = np.array([statistic(x[i]) for i in idx])
    return _percentiles(stats, confidence)


def t_interval(
    values: Values, confidence: float = CONFIDENCE, bounds: tuple[float | None, float | None] | None = None
) -> tuple[float, float] | None:
    """Student's t interval of the mean of ``values`` (one per seed); None for fewer than two values. Honest at
    the handful of seeds a percentile bootstrap is not (with 3 values the bootstrap's 95% is their range).
    ``bounds``: the range the quantity cannot leave (a precision's [0, 1]); the interval is clipped to it."""
    from scipy.stats import t

    x = _clean(values)
    if len(x) < 2:
        return None
    half = float(t.ppf(0.5 + confidence / 2, len(x) - 1) * x.std(ddof=1) / np.sqrt(len(x)))
    return clip_interval((float(x.mean()) - half, float(x.mean()) + half), bounds)


def clip_interval(
    interval: tuple[float, float] | None, bounds: tuple[float | None, float | None] | None
) -> tuple[float, float] | None:
    """``interval`` clipped to ``bounds`` (lower, upper; None: unbounded on that side)."""
    if interval is None or bounds is None:
        return interval
    lo, hi = interval
    if bounds[0] is not None:
        lo, hi = max(lo, bounds[0]), max(hi, bounds[0])
    if bounds[1] is not None:
        lo, hi = min(lo, bounds[1]), min(hi, bounds[1])
    return lo, hi


def welch_interval(a: Values, b: Values, confidence: float = CONFIDENCE) -> tuple[float, float] | None:
    """Welch's t interval of mean(a) − mean(b) for two independent groups of a few seeds each (unequal variances,
    Welch–Satterthwaite degrees of freedom); a point where neither group varies; None when either has fewer
    than two values."""
    from scipy.stats import t

    x, y = _clean(a), _clean(b)
    if len(x) < 2 or len(y) < 2:
        return None
    vx, vy = x.var(ddof=1) / len(x), y.var(ddof=1) / len(y)
    d = float(x.mean() - y.mean())
    if vx + vy == 0:
        return d, d
    df = (vx + vy) ** 2 / (vx**2 / (len(x) - 1) + vy**2 / (len(y) - 1))
    half = float(t.ppf(0.5 + confidence / 2, df) * np.sqrt(vx + vy))
    return d - half, d + half


def median_interval(values: Values, confidence: float = CONFIDENCE) -> tuple[float, float] | None:
    """The distribution-free interval of a median: the order statistics (x₍ₖ₎, x₍ₙ₋ₖ₊₁₎) with the largest k whose
    binomial coverage 1 − 2·P(Bin(n, ½) < k) is at least ``confidence``. Exact for any continuous distribution;
    None where no k reaches it (fewer than 6 values at 95%)."""
    from scipy.stats import binom

    x = np.sort(_clean(values))
    n = len(x)
    best = None
    for k in range(1, n // 2 + 1):
        if 1 - 2 * float(binom.cdf(k - 1, n, 0.5)) >= confidence:
            best = k
    return None if best is None else (float(x[best - 1]), float(x[n - best]))


def grouped_bootstrap_interval(
    groups: Sequence[Sequence[Any]],
    statistic: Callable[[list[list[Any]]], float | None],
    confidence: float = CONFIDENCE,
    resamples: int = 2000,
    seed: int = 0,
) -> tuple[float, float] | None:
    """Bootstrap interval of ``statistic(groups)`` where each group's units (seeds, twins) are resampled within
    the group (a stratified bootstrap: learning rates or populations are never mixed). Resamples on which the
    statistic is undefined (None) are dropped; None when fewer than half are defined."""
    rng = np.random.default_rng(seed)
    stats = []
    for _ in range(resamples):
        drawn = [[g[i] for i in rng.integers(len(g), size=len(g))] if len(g) else [] for g in groups]
        v = statistic(drawn)
        if v is not None and not np.isnan(v):
            stats.append(float(v))
    if len(stats) < resamples / 2:
        return None
    return _percentiles(np.asarray(stats), confidence)


def difference_interval(
    a: Values,
    b: Values,
    statistic: Callable[[np.ndarray], float] = np.mean,
    confidence: float = CONFIDENCE,
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> tuple[float, float] | None:
    """Interval of ``statistic(a) − statistic(b)`` for two independent groups: a bootstrap (each group resampled
    within itself) from :data:`SMALL_N` values per group; below that Welch's t for means
    (:func:`welch_interval`) and none for any other statistic (:func:`interval_method` says which). None when
    either group has fewer than two values."""
    x, y = _clean(a), _clean(b)
    if len(x) < 2 or len(y) < 2:
        return None
    if min(len(x), len(y)) < SMALL_N:
        return welch_interval(x, y, confidence) if statistic is np.mean else None
    rng = np.random.default_rng(seed)
    stats = np.array(
        [
            statistic(x[rng.integers(len(x), size=len(x))]) - statistic(y[rng.integers(len(y), size=len(y))])
            for _ in range(resamples)
        ]
    )
    return _percentiles(stats, confidence)


def paired_interval(
    a: Values,
    b: Values,
    statistic: Callable[[np.ndarray], float] = np.mean,
    confidence: float = CONFIDENCE,
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> tuple[float, float] | None:
    """Bootstrap interval of ``statistic(a − b)`` where ``a[i]`` and ``b[i]`` share a seed or an input (the
    pairs are resampled together); None for fewer than two complete pairs."""
    if len(a) != len(b):
        raise ValueError(f"paired values need equal lengths, got {len(a)} and {len(b)}")
    d = [x - y for x, y in zip(a, b) if x is not None and y is not None and not (np.isnan(x) or np.isnan(y))]
    return _interval(d, statistic, confidence, seed)


def wilson_interval(successes: int, trials: int, confidence: float = CONFIDENCE) -> tuple[float, float] | None:
    """Wilson score interval of a binomial rate (``scipy.stats.binomtest``'s, without continuity correction);
    None without trials."""
    from scipy.stats import binomtest

    if trials <= 0:
        return None
    if not 0 <= successes <= trials or successes != int(successes):
        raise ValueError(f"successes must be a whole number in 0..{trials}, got {successes}")
    ci = binomtest(int(successes), int(trials)).proportion_ci(confidence_level=confidence, method="wilson")
    return float(max(0.0, ci.low)), float(min(1.0, ci.high))


def poisson_interval(count: int, exposure: float = 1.0, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Exact (Garwood) interval of a Poisson rate: ``count`` events in ``exposure`` units (reads, strings).
    Zero events still bound the rate from above (about 3.7 / exposure at 95%)."""
    from scipy.stats import chi2

    if count < 0 or exposure <= 0:
        raise ValueError(f"need count ≥ 0 and exposure > 0, got {count} and {exposure}")
    alpha = 1 - confidence
    lo = 0.0 if count == 0 else float(chi2.ppf(alpha / 2, 2 * count)) / 2
    hi = float(chi2.ppf(1 - alpha / 2, 2 * count + 2)) / 2
    return lo / exposure, hi / exposure


def paired_test(a: Values, b: Values, alternative: str = "two-sided") -> float | None:
    """Wilcoxon signed-rank p-value for paired ``a`` and ``b`` (``alternative``: two-sided, greater: a > b,
    less); 1.0 when every difference is 0, None for fewer than two pairs."""
    from scipy.stats import wilcoxon

    if len(a) != len(b):
        raise ValueError(f"paired values need equal lengths, got {len(a)} and {len(b)}")
    d = np.asarray([x - y for x, y in zip(a, b)], dtype=np.float64)
    d = d[~np.isnan(d)]
    if len(d) < 2:
        return None
    if np.all(d == 0):
        return 1.0
    return float(wilcoxon(d, alternative=alternative, zero_method="zsplit").pvalue)


def permutation_test(
    a: Values,
    b: Values,
    statistic: Callable[[np.ndarray], float] = np.mean,
    paired: bool = False,
    alternative: str = "two-sided",
    resamples: int = 10000,
    seed: int = 0,
) -> float | None:
    """Permutation p-value of ``statistic(a) − statistic(b)`` (``paired``: of ``statistic(a − b)``, by random
    sign flips); ``alternative`` two-sided, greater (a above b) or less. None for fewer than two values."""
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    rng = np.random.default_rng(seed)
    if paired:
        if len(x) != len(y):
            raise ValueError(f"paired values need equal lengths, got {len(x)} and {len(y)}")
        d = x - y
        if len(d) < 2:
            return None
        observed = statistic(d)
        null = np.array([statistic(d * rng.choice((-1.0, 1.0), size=len(d))) for _ in range(resamples)])
    else:
        if len(x) < 1 or len(y) < 1 or len(x) + len(y) < 3:
            return None
        pooled = np.concatenate([x, y])
        observed = statistic(x) - statistic(y)
        null = np.empty(resamples)
        for i in range(resamples):
            p = rng.permutation(pooled)
            null[i] = statistic(p[: len(x)]) - statistic(p[len(x) :])
    if alternative == "greater":
        hits = np.sum(null >= observed - 1e-12)
    elif alternative == "less":
        hits = np.sum(null <= observed + 1e-12)
    else:
        hits = np.sum(np.abs(null) >= abs(observed) - 1e-12)
    return float((1 + hits) / (1 + resamples))


def null_exceedance(observed: float, null: Values, confidence: float = CONFIDENCE) -> dict[str, Any]:
    """An observed maximum (over heads, sites, shifts) against the same maximum in a null (random-init
    models, permuted labels): the null's mean and ``confidence`` quantile, and the p-value
    (1 + #{null ≥ observed}) / (1 + n)."""
    z = _clean(null)
    if len(z) == 0:
        return {
            "observed": float(observed),
            "null_n": 0,
            "null_mean": None,
            "null_quantile": None,
            "p_value": None,
            "exceeds": None,
        }
    q = float(np.quantile(z, confidence))
    return {
        "observed": float(observed),
        "null_n": int(len(z)),
        "null_mean": float(z.mean()),
        "null_quantile": q,
        "p_value": float((1 + np.sum(z >= observed)) / (1 + len(z))),
        "exceeds": bool(observed > q),
    }


def holm(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm–Bonferroni adjusted p-values of a family (None stays None and does not count)."""
    given = {i: float(p) for i, p in enumerate(p_values) if p is not None}
    m = len(given)
    out: list[float | None] = [None] * len(p_values)
    running = 0.0
    for rank, i in enumerate(sorted(given, key=given.__getitem__)):
        running = max(running, min(1.0, (m - rank) * given[i]))
        out[i] = running
    return out


def cohens_d(a: Values, b: Values | None = None, paired: bool = False) -> float | None:
    """Standardised effect size: (mean a − mean b) / pooled SD; ``paired``: mean(a − b) / SD(a − b); one group:
    mean / SD. None where the SD is 0 or there are too few values."""
    x = _clean(a)
    if b is None:
        return None if len(x) < 2 or x.std(ddof=1) == 0 else float(x.mean() / x.std(ddof=1))
    y = _clean(b)
    if paired:
        return cohens_d(np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64))
    if len(x) < 2 or len(y) < 2:
        return None
    pooled = np.sqrt(((len(x) - 1) * x.var(ddof=1) + (len(y) - 1) * y.var(ddof=1)) / (len(x) + len(y) - 2))
    return None if pooled == 0 else float((x.mean() - y.mean()) / pooled)


@dataclass
class Estimate:
    """A number with its uncertainty: ``value`` (the statistic of ``values``), ``interval`` (None: too few
    units), ``n`` units of ``unit`` (seeds, words, reads) and how the interval was made."""

    value: float | None
    interval: tuple[float, float] | None
    n: int
    unit: str = "seeds"
    method: str = ""
    values: list[float] = field(default_factory=list)
    #: a difference's per-unit values, by group (``values`` then stays empty)
    groups: dict[str, list[float]] = field(default_factory=dict)
    #: the statistic ``value`` is: "mean" or "median" (of the values, or of each group for a difference); "" for
    #: any other (a rate, a count, a pairwise statistic), which leave-one-out cannot remake
    statistic: str = ""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "value": self.value,
            "interval": None if self.interval is None else list(self.interval),
            "n": self.n,
            "unit": self.unit,
            "method": self.method,
            "values": list(self.values),
        }
        if self.groups:
            out["groups"] = {k: list(v) for k, v in self.groups.items()}
        if self.statistic:
            out["statistic"] = self.statistic
        return out

    def text(self, fmt: str = "{:.3g}") -> str:
        """``0.42 [0.31, 0.55] (5 seeds)``; ``— (0 seeds)`` when nothing was measured."""
        if self.value is None:
            return f"— ({self.n} {self.unit})"
        ci = "" if self.interval is None else f" [{fmt.format(self.interval[0])}, {fmt.format(self.interval[1])}]"
        return f"{fmt.format(self.value)}{ci} ({self.n} {self.unit})"


def estimate(
    values: Values,
    statistic: str = "mean",
    unit: str = "seeds",
    confidence: float = CONFIDENCE,
    seed: int = 0,
) -> Estimate:
    """``statistic`` (mean or median) of ``values`` with its interval: a percentile bootstrap from :data:`SMALL_N`
    units, below that Student's t (mean) or the order-statistic interval (median; none below 6 units)."""
    fn: Callable[[np.ndarray], float] = {"mean": np.mean, "median": np.median}[statistic]  # type: ignore[assignment]
    x = _clean(values)
    value = float(fn(x)) if len(x) else None
    return Estimate(
        value,
        _interval(x, fn, confidence, seed),
        int(len(x)),
        unit,
        f"{statistic}, {_with_confidence(interval_method(len(x), fn, confidence=confidence), confidence)} over {unit}",
        [float(v) for v in x],
        statistic=statistic,
    )


def share(hits: Sequence[bool], unit: str = "seeds", method: str = "share with a 95% Wilson interval") -> Estimate:
    """The share of ``hits`` that are true, with its Wilson interval over the ``unit``; no value without units.

    Args:
        hits: one flag per unit (a seed that reached a bar, a pair that decorrelated).
        unit: what a flag counts, for the results file.
        method: how the interval is described there."""
    k, n = int(sum(bool(h) for h in hits)), len(hits)
    return Estimate(k / n if n else None, wilson_interval(k, n), n, unit, method, [float(bool(h)) for h in hits])


def interval_method(
    n: int, statistic: Callable[[np.ndarray], float] = np.mean, groups: int = 1, confidence: float = CONFIDENCE
) -> str:
    """How :func:`estimate` (``groups`` 1) or :func:`difference_interval` (2) makes its interval at ``n`` units (the
    smallest group's), in words for a results file."""
    if n >= SMALL_N:
        return "percentile bootstrap" + (" within each group" if groups > 1 else "")
    if statistic is np.mean:
        return "Welch t interval" if groups > 1 else "t interval"
    if statistic is np.median and groups == 1:
        fewest = _fewest_for_median(confidence)
        return "order-statistic interval" if n >= fewest else f"no interval below {fewest} units"
    return f"no interval below {SMALL_N} units"


def _fewest_for_median(confidence: float) -> int:
    """The fewest values :func:`median_interval` bounds a median with at ``confidence`` (6 at 95%)."""
    n = 2
    while median_interval(np.arange(n, dtype=np.float64), confidence) is None:
        n += 1
    return n


def _with_confidence(method: str, confidence: float) -> str:
    """``95% t interval``, or the method as it is where it makes no interval."""
    return method if method.startswith("no interval") else f"{confidence:.0%} {method}"


def _interval(
    x: Values, statistic: Callable[[np.ndarray], float], confidence: float, seed: int
) -> tuple[float, float] | None:
    """The interval :func:`interval_method` names."""
    x = _clean(x)
    if len(x) >= SMALL_N:
        return bootstrap_interval(x, statistic, confidence, seed=seed)
    if statistic is np.mean:
        return t_interval(x, confidence)
    if statistic is np.median:
        return median_interval(x, confidence)
    return None


def difference(
    a: Values,
    b: Values,
    statistic: str = "mean",
    labels: tuple[str, str] = ("a", "b"),
    unit: str = "seeds",
    what: str | None = None,
    confidence: float = CONFIDENCE,
    seed: int = 0,
) -> Estimate:
    """``statistic(a) − statistic(b)`` (mean or median) of two independent groups, with the interval
    :func:`difference_interval` makes at their size, ``n`` the smaller group, and both groups' per-unit values
    kept under ``labels``; ``what`` names it (default "difference of means" / "…medians")."""
    fn: Callable[[np.ndarray], float] = {"mean": np.mean, "median": np.median}[statistic]  # type: ignore[assignment]
    x, y = _clean(a), _clean(b)
    n = int(min(len(x), len(y)))
    return Estimate(
        float(fn(x) - fn(y)) if len(x) and len(y) else None,
        difference_interval(x, y, fn, confidence, seed=seed),
        n,
        unit,
        f"{what or f'difference of {statistic}s'} ({labels[0]} − {labels[1]}), "
        f"{_with_confidence(interval_method(n, fn, groups=2, confidence=confidence), confidence)}",
        groups={labels[0]: [float(v) for v in x], labels[1]: [float(v) for v in y]},
        statistic=statistic,
    )
