"""Evaluation sets under shift: the task with one thing changed, and the inputs each draws.

A :class:`Shift` is one evaluation set (``label`` for the report, ``params`` for the record):

* automata — the symbol distribution (``probs``: one probability per symbol), the number of times
  a symbol occurs (``count``: words with exactly that many, e.g. parity words with 0, 2, 14 or 16
  ones), the length (``length``);
* the flip-flop language — the ignore probability p of FFL(p) (sparse 0.98, dense 0.1, …) and the
  length;
* Dyck — the length band of the prefixes, the open-bracket probability q, and a smaller maximum
  depth D' (the closing bracket is still the one that matches the stack top).

Which shifts a task kind offers, and how its inputs are scored, is the kind's
(:mod:`sandbox_lens.interp.tasks.kinds`); this module holds what is true of the shifts themselves (numpy only).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sandbox_lens.interp.errors import SandboxError
from sandbox_lens.interp.tasks import ffl

__all__ = [
    "Shift",
    "ShiftError",
    "automaton_shifts",
    "ffl_shifts",
    "dyck_shifts",
    "parse_probs",
    "automaton_words",
    "parse_bands",
]


class ShiftError(SandboxError, ValueError):
    """A shift that makes no sense for the task (probabilities of the wrong length, p outside [0, 1), ...)."""


@dataclass
class Shift:
    """One evaluation set: ``label`` for the report, ``params`` for the record, and what draws it."""

    label: str
    kind: str  # the task kind's name (sandbox_lens.interp.tasks.kinds)
    params: dict[str, Any] = field(default_factory=dict)

    def length(self) -> int:
        return int(self.params.get("length") or self.params.get("band", (0, 0))[1])


def parse_probs(text: str, n_symbols: int, flag: str = "--probs") -> list[float]:
    """``"0.95,0.05"`` → a distribution over the alphabet (it must have one entry per symbol); ``flag`` names the
    option it came from in the errors."""
    try:
        values = [float(x) for x in text.split(",")]
    except ValueError:
        raise ShiftError(f"{flag} takes comma-separated numbers, got {text!r}") from None
    if len(values) != n_symbols:
        raise ShiftError(f"{flag} {text!r} has {len(values)} entries; the alphabet has {n_symbols} symbols")
    if any(not np.isfinite(v) or v < 0 for v in values) or not np.isclose(sum(values), 1.0, atol=1e-6):
        raise ShiftError(f"{flag} {text!r} must be non-negative and sum to 1")
    return values


def parse_bands(texts: Sequence[str]) -> list[tuple[int, int]]:
    """``["2-28", "400-500"]`` → length bands."""
    bands = []
    for b in texts:
        lo, sep, hi = b.partition("-")
        if not (lo.isdigit() and hi.isdigit() and sep):
            raise ShiftError(f"--bands takes LO-HI, got {b!r}")
        bands.append((int(lo), int(hi)))
    return bands


def automaton_shifts(
    automaton: Any,
    length: int,
    probs: Sequence[Sequence[float]] = (),
    counts: Sequence[int] = (),
    count_symbol: int = 1,
) -> list[Shift]:
    """Uniform words at ``length``, then one shift per distribution in ``probs`` and per count in ``counts``."""
    if length < 1:
        raise ShiftError(f"the length must be ≥ 1, got {length}")
    shifts = [Shift(f"uniform, T={length}", "automaton", {"length": length})]
    for p in probs:
        p = [float(x) for x in p]
        if len(p) != automaton.n_symbols:
            raise ShiftError(
                f"a distribution over {automaton.name}'s {automaton.n_symbols} symbols needs "
                f"{automaton.n_symbols} probabilities, got {len(p)}"
            )
        label = "Pr = (" + ", ".join(f"{x:g}" for x in p) + f"), T={length}"
        shifts.append(Shift(label, "automaton", {"length": length, "probs": p}))
    if counts and getattr(automaton, "feasible", None) is not None:
        raise ShiftError(
            f"{automaton.name} has illegal inputs: count shifts need an automaton whose every word is legal"
        )
    if counts and not 0 <= count_symbol < automaton.n_symbols:
        raise ShiftError(f"--count-symbol must name one of {automaton.n_symbols} symbols")
    for c in counts:
        if not 0 <= c <= length:
            raise ShiftError(f"a count must lie in 0..{length}, got {c}")
        sym = automaton.alphabet[count_symbol]
        shifts.append(
            Shift(
                f"#{sym} = {c}, T={length}",
                "automaton",
                {"length": length, "count": int(c), "count_symbol": int(count_symbol)},
            )
        )
    return shifts


def ffl_shifts(length: int, ps: Sequence[float] = (0.8, 0.98, 0.1)) -> list[Shift]:
    """One flip-flop shift per ignore probability p: whole strings of FFL(``length``, p) (an even length ≥ 4,
    ending with the forced read and its answer)."""
    if length < 4 or length % 2:
        raise ShiftError(f"flip-flop strings have an even length ≥ 4 (pairs of instruction and bit), got {length}")
    out = []
    for p in ps:
        try:
            ffl.check_p(float(p))
        except SandboxError as e:
            raise ShiftError(str(e)) from None
        out.append(Shift(f"FFL({p:g}), {length} tokens", "ffl", {"length": length, "p": float(p)}))
    return out


def dyck_shifts(
    lang: Any, bands: Sequence[tuple[int, int]], qs: Sequence[float] = (), depths: Sequence[int] = ()
) -> list[Shift]:
    """Per length band: the training law, then each other open-bracket probability ``qs``, then each
    maximum depth in ``depths`` (prefixes of Dyck_{k,D'} with D' ≤ D: deeper words are not in the
    model's language)."""
    settings = [(lang.q, lang.D), *((float(q), lang.D) for q in qs), *((lang.q, int(d)) for d in depths)]
    out = []
    for q, D in settings:
        if not 0.0 < float(q) < 1.0:
            raise ShiftError(f"q must lie in (0, 1), got {q}")
        if not 1 <= D <= lang.D:
            raise ShiftError(
                f"a depth shift D' must lie in 1..{lang.D} (the model's language has depth ≤ {lang.D}), got {D}"
            )
        for lo, hi in bands:
            if not 2 <= lo <= hi:
                raise ShiftError(f"a length band needs 2 ≤ lo ≤ hi, got {lo}-{hi}")
            label = f"{lo}-{hi}, q={float(q):g}" + (f", D={D}" if D != lang.D else "")
            out.append(Shift(label, "dyck", {"band": (int(lo), int(hi)), "q": float(q), "D": int(D)}))
    return out


def automaton_words(a: Any, shift: Shift, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` words of ``shift``: uniform, from its symbol distribution, or with its count of one symbol."""
    T = shift.params["length"]
    if a.feasible is not None:  # some inputs are illegal: a walk over the legal ones (thesis footnote 26)
        if "count" in shift.params:
            raise ShiftError(f"{a.name} has illegal inputs: a word with a fixed count of one symbol may not exist")
        probs = shift.params.get("probs")
        return a.sample(n, T, rng, None if probs is None else np.asarray(probs) / sum(probs))
    if "probs" in shift.params:
        return rng.choice(a.n_symbols, size=(n, T), p=np.asarray(shift.params["probs"]) / sum(shift.params["probs"]))
    if "count" in shift.params:
        c, s = shift.params["count"], shift.params["count_symbol"]
        others = [x for x in range(a.n_symbols) if x != s]
        if not others and c != T:
            raise ShiftError(f"{a.name} has one symbol: every word of length {T} has {T} of it")
        words = rng.choice(others, size=(n, T)) if others else np.full((n, T), s)
        for row in words:  # exactly c occurrences of s at uniformly random positions
            row[rng.choice(T, size=c, replace=False)] = s
        return words
    return rng.integers(a.n_symbols, size=(n, T))
