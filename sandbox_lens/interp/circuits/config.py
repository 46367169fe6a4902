"""The settings of one circuit analysis, in one record (:class:`CircuitConfig`), checked before any model is built.

What a *method* can take (a metric, integration steps, an ACDC mode, positions) is the method's record's business
(:mod:`sandbox_lens.interp.circuits.methods`); this module checks only what every method shares.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import Any

from sandbox_lens.interp.circuits.levels import LEVEL_NAMES
from sandbox_lens.interp.circuits.pairs import METRICS
from sandbox_lens.interp.circuits.patching import ABLATIONS, NORMALISERS
from sandbox_lens.interp.errors import SandboxError

__all__ = ["CircuitConfig", "MethodError", "DEFAULT_THRESHOLD", "ENGINES"]

DEFAULT_THRESHOLD = 0.01
ENGINES = ("auto", "bare", "hooks")


class MethodError(SandboxError, ValueError):
    """An unknown method or a setting it cannot take."""


@dataclass(frozen=True)
class CircuitConfig:
    """How one circuit analysis runs and is scored.

    Attributes:
        pairs: counterfactual pairs drawn (:func:`~sandbox_lens.interp.circuits.pairs.make_pairs`).
        corruption: the counterfactual kind (None: the task's first).
        length: the pairs' word length (None: the model's).
        threshold: the effect below which an edge or node is left out of a method's circuit.
        metric: what a method measures (None: the method's default; see its record).
        source: the ablation a patched edge or node delivers: ``resample``, ``zero`` or ``mean``.
        acdc_mode: ACDC's variant (``normalised`` or ``reference``); only ACDC takes another than the default.
        steps: integration steps for a method that integrates gradients (EAP-IG; None: its default, 16).
        per_position: node patching also patches each node at each position.
        curve: measure the faithfulness curve over circuit sizes (CPR, CMD).
        seed: the seed of the pairs (and of a method's own randomness).
        level: the ground-truth level scored against (None: the ablation's).
        engine: the patching engine (``auto``, ``bare`` or ``hooks``).
        agreement: a gradient method's scores also compared with real patching (path and node patching rerun).
        normaliser: what effects are normalised against: ``ablated`` (MIB's m(∅), the run with every edge ablated)
            or ``word`` (the corrupted word's run, under every ablation).
        why_missed: how many of the ground-truth edges a circuit left out are patched alone to say why (None: all;
            one path-patching pass each, which can cost many times a gradient method itself).
        progress: progress bars.
    """

    pairs: int = 64
    corruption: str | None = None
    length: int | None = None
    threshold: float = DEFAULT_THRESHOLD
    metric: str | None = None
    source: str = "resample"
    acdc_mode: str = "normalised"
    steps: int | None = None
    per_position: bool = False
    curve: bool = True
    seed: int = 0
    level: str | None = None
    engine: str = "auto"
    agreement: bool = False
    normaliser: str = "ablated"
    why_missed: int | None = None
    progress: bool = False

    def with_(self, **changes: Any) -> CircuitConfig:
        """A copy with ``changes``; an unknown setting is refused in one line."""
        known = {f.name for f in fields(self)}
        unknown = sorted(set(changes) - known)
        if unknown:
            raise TypeError(f"unknown circuit setting(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})")
        return replace(self, **changes)

    @property
    def resolved_metric(self) -> str:
        """The metric, once a method's record has resolved it (:meth:`CircuitMethod.check`)."""
        if self.metric is None:
            raise ValueError("the metric is resolved by the method's record before the method runs")
        return self.metric

    def check(self) -> None:
        """Refuse a setting no method can take (one line, before any model is built)."""
        if not (isinstance(self.threshold, (int, float)) and math.isfinite(self.threshold) and self.threshold > 0):
            raise MethodError(f"the threshold must be positive and finite, got {self.threshold}")
        if self.pairs < 1:  # an upper bound is the pairs' budget's (make_pairs estimates the work first)
            raise MethodError(f"pairs must be ≥ 1, got {self.pairs}")
        if self.length is not None and self.length < 1:
            raise MethodError(f"the pairs' length must be ≥ 1, got {self.length}")
        if self.seed < 0:
            raise MethodError(f"the seed must be ≥ 0, got {self.seed}")
        if self.metric is not None and self.metric not in METRICS:
            raise MethodError(f"unknown metric {self.metric!r} (choose from {', '.join(METRICS)})")
        if self.source not in ABLATIONS:
            raise MethodError(f"unknown ablation {self.source!r} (choose from {', '.join(ABLATIONS)})")
        if self.normaliser not in NORMALISERS:
            raise MethodError(f"unknown normaliser {self.normaliser!r} (choose from {', '.join(NORMALISERS)})")
        if self.why_missed is not None and self.why_missed < 0:
            raise MethodError(
                f"why_missed (missed edges patched alone) must be ≥ 0 or None (all), got {self.why_missed}"
            )
        if self.steps is not None and not 1 <= self.steps <= 1024:
            raise MethodError(f"EAP-IG takes 1 to 1024 steps, got {self.steps}")
        if self.engine not in ENGINES:
            raise MethodError(f"unknown engine {self.engine!r} (choose from {', '.join(ENGINES)})")
        if self.level is not None and self.level not in LEVEL_NAMES:
            raise MethodError(f"unknown ground-truth level {self.level!r} (choose from {', '.join(LEVEL_NAMES)})")
