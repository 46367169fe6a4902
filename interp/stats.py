"""Uncertainty for the numbers this project reports: bootstrap intervals over seeds, binomial intervals
for rates."""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

__all__ = ["bootstrap_interval", "wilson_interval"]


def bootstrap_interval(values: Sequence[float], statistic: Callable[[np.ndarray], float] = np.mean,
                       confidence: float = 0.95, resamples: int = 4000, seed: int = 0) -> tuple[float, float] | None:
    """Percentile bootstrap interval of ``statistic`` over ``values`` (one per seed); None for fewer than two
    values. With a handful of seeds the interval is narrow and undercovers: report the number of seeds."""
    x = np.asarray([v for v in values if v is not None and not np.isnan(v)], dtype=np.float64)
    if len(x) < 2:
        return None
    rng = np.random.default_rng(seed)
    stats = np.array([statistic(x[rng.integers(len(x), size=len(x))]) for _ in range(resamples)])
    alpha = (1 - confidence) / 2
    return float(np.quantile(stats, alpha)), float(np.quantile(stats, 1 - alpha))


def wilson_interval(successes: int, trials: int, confidence: float = 0.95) -> tuple[float, float] | None:
    """Wilson score interval of a binomial rate; None without trials."""
    from scipy.stats import norm

    if trials <= 0:
        return None
    z = float(norm.ppf(1 - (1 - confidence) / 2))
    p = successes / trials
    centre = (p + z * z / (2 * trials)) / (1 + z * z / trials)
    half = z * np.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / (1 + z * z / trials)
    return float(max(0.0, centre - half)), float(min(1.0, centre + half))
