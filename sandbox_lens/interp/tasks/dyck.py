"""Bounded Dyck languages Dyck_{k,D}: the sampler, exact next-token distributions, accuracy.

Thesis §3.6 (dyck.md §1). k bracket types, depth never above D. Brackets are indexed
``open_i = 2i``, ``close_i = 2i + 1`` (i = 0..k−1); models put a BOS token in front.

The distribution D_{q,k,D,N} (Definition 12) is the pushdown process: at depth 0 open a
uniformly random type; at depth D close the top; otherwise open a random type with
probability q, else close the top. Its next-token distribution after any valid prefix is
therefore exact and simple: 1/k on each open at depth 0; 1 on close(top) at depth D; q/k on each
open and 1 − q on close(top) in between.

Accuracy (the thesis's): over prefixes that **end in a closing bracket**, predict that bracket
from the rest (the closing bracket is the only valid one of its kind, so the argmax is well posed
when 1 − q > q/k).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from sandbox_lens.interp.errors import AutomatonError, VocabularyError

__all__ = ["Dyck", "parse_dyck_spec", "IN_DISTRIBUTION", "OOD_BANDS", "default_bands"]

#: The thesis trains on lengths < 28 and tests length generalisation at 400–500.
IN_DISTRIBUTION = (2, 28)
OOD_BANDS = ((400, 500), (900, 1000))
_PAIRS = ["()", "[]", "{}", "<>"]


def parse_dyck_spec(text: str) -> tuple[int, int]:
    """ "K,D" -> (k, D)."""
    m = re.fullmatch(r"\s*(\d+)\s*,\s*(\d+)\s*", str(text))
    if not m:
        raise AutomatonError(f"--dyck expects K,D (bracket types, maximum depth), e.g. 2,4; got {text!r}")
    return int(m.group(1)), int(m.group(2))


@dataclass(frozen=True)
class Dyck:
    """Dyck_{k,D} with open-bracket probability q (Definition 12).

    Args:
        k: bracket types.
        D: the depth bound.
        q: the probability of an open bracket where both are legal."""

    k: int
    D: int
    q: float = 0.5

    def __post_init__(self) -> None:
        if not 1 <= self.k <= 64:
            raise AutomatonError(f"Dyck: the number of bracket types k must be in 1..64, got {self.k}")
        if not 1 <= self.D <= 64:
            raise AutomatonError(f"Dyck: the depth bound D must be in 1..64, got {self.D}")
        if not 0.0 < self.q < 1.0:
            raise AutomatonError(f"Dyck: q must be strictly between 0 and 1, got {self.q}")

    @property
    def name(self) -> str:
        return f"Dyck_{{{self.k},{self.D}}}"

    @property
    def n_brackets(self) -> int:
        return 2 * self.k

    @property
    def bracket_names(self) -> list[str]:
        if self.k <= len(_PAIRS):
            return [ch for pair in _PAIRS[: self.k] for ch in pair]
        return [f"{s}{i}" for i in range(self.k) for s in "()"]

    def to_dict(self) -> dict:
        return {"kind": "dyck", "k": self.k, "D": self.D, "q": self.q}

    def token_depth_pairs(self) -> list[tuple[int, int]]:
        """The (token, depth) pairs that occur, depth after the token: BOS at 0, open_i at 1..D,
        close_i at 0..D−1 (token 0 = BOS, 1 + b = bracket b)."""
        pairs = [(0, 0)]
        for b in range(self.n_brackets):
            depths = range(1, self.D + 1) if b % 2 == 0 else range(0, self.D)
            pairs += [(1 + b, d) for d in depths]
        return pairs

    # -- words ------------------------------------------------------------------------------
    def encode(self, text: str | Sequence[str]) -> np.ndarray:
        """Bracket names (a string for k ≤ 4, e.g. "([])", or a list) -> indices."""
        names = self.bracket_names
        items = list(text) if isinstance(text, str) else list(text)
        try:
            return np.array([names.index(x) for x in items], dtype=np.int64)
        except ValueError:
            bad = next(x for x in items if x not in names)
            raise VocabularyError(f"{bad!r} is not a bracket of {self.name} ({' '.join(names)})") from None

    def decode(self, word: Sequence[int]) -> str:
        names = self.bracket_names
        return ("" if self.k <= len(_PAIRS) else " ").join(names[int(x)] for x in word)

    def depths(self, word: Sequence[int]) -> np.ndarray:
        """Depth after each bracket; raises if the word is not a valid Dyck_{k,D} prefix."""
        self.check(word)
        w = np.asarray(word)
        return np.cumsum(np.where(w % 2 == 0, 1, -1))

    def check(self, word: Sequence[int]) -> None:
        stack: list[int] = []
        for i, x in enumerate(np.asarray(word, dtype=np.int64)):
            if not 0 <= x < self.n_brackets:
                raise VocabularyError(f"bracket index {x} out of range 0..{self.n_brackets - 1}")
            if x % 2 == 0:
                stack.append(x // 2)
                if len(stack) > self.D:
                    raise AutomatonError(f"not a {self.name} prefix: depth exceeds {self.D} at position {i + 1}")
            elif not stack or stack.pop() != x // 2:
                raise AutomatonError(f"not a {self.name} prefix: unmatched closing bracket at position {i + 1}")

    def stack_top_positions(self, word: Sequence[int]) -> np.ndarray:
        """For each t (1-based position of the token in BOS + word), the position of the last
        unmatched open bracket after w_1..w_t, or 0 (BOS) when the stack is empty. Index 0 is BOS."""
        stack: list[int] = []
        out = [0]
        for t, x in enumerate(np.asarray(word, dtype=np.int64), start=1):
            if x % 2 == 0:
                stack.append(t)
            else:
                stack.pop()
            out.append(stack[-1] if stack else 0)
        return np.array(out)

    # -- the distribution --------------------------------------------------------------------
    def next_token_distribution(self, prefix: Sequence[int]) -> np.ndarray:
        """Exact P(w_{n+1} = · | w_1..w_n) over the 2k brackets."""
        stack: list[int] = []
        for x in np.asarray(prefix, dtype=np.int64):
            stack.append(x // 2) if x % 2 == 0 else stack.pop()
        return self._distribution(stack)

    def _distribution(self, stack: Sequence[int]) -> np.ndarray:
        p = np.zeros(self.n_brackets)
        depth = len(stack)
        if depth == 0:
            p[0::2] = 1.0 / self.k
        elif depth == self.D:
            p[2 * stack[-1] + 1] = 1.0
        else:
            p[0::2] = self.q / self.k
            p[2 * stack[-1] + 1] = 1.0 - self.q
        return p

    def distributions(self, word: Sequence[int]) -> np.ndarray:
        """Exact next-token distributions after BOS, w_1, …, w_n: shape (n + 1, 2k)."""
        stack: list[int] = []
        out = [self._distribution(stack)]
        for x in np.asarray(word, dtype=np.int64):
            stack.append(x // 2) if x % 2 == 0 else stack.pop()
            out.append(self._distribution(stack))
        return np.array(out)

    def sample(self, n: int, length: int, seed: int | None = 0) -> np.ndarray:
        """``n`` prefixes of D_{q,k,D,length}, shape (n, length), reproducible with ``seed``."""
        if length < 0 or n < 0:
            raise AutomatonError("Dyck.sample: n and length must be ≥ 0")
        rng = np.random.default_rng(seed)
        out = np.empty((n, length), dtype=np.int64)
        for r in range(n):
            stack: list[int] = []
            u, types = rng.random(length), rng.integers(self.k, size=length)
            for t in range(length):
                if not stack or (len(stack) < self.D and u[t] < self.q):
                    stack.append(int(types[t]))
                    out[r, t] = 2 * stack[-1]
                else:
                    out[r, t] = 2 * stack.pop() + 1
        return out

    def closing_prefixes(self, n: int, lengths: tuple[int, int], seed: int | None = 0) -> list[np.ndarray]:
        """``n`` prefixes with lengths uniform in [lo, hi] that end in a closing bracket (rejection)."""
        lo, hi = lengths
        if not 2 <= lo <= hi:
            raise AutomatonError(f"closing-bracket prefixes need lengths ≥ 2, got {lengths}")
        rng = np.random.default_rng(seed)
        out: list[np.ndarray] = []
        while len(out) < n:
            N = int(rng.integers(lo, hi + 1))
            w = self.sample(1, N, seed=int(rng.integers(2**63)))[0]
            if w[-1] % 2 == 1:
                out.append(w)
        return out

    def all_prefixes(self, length: int) -> Iterator[np.ndarray]:
        """Every valid prefix of exactly ``length`` brackets (depth-first; there are ≤ (2k)^length)."""

        def rec(prefix: list[int], stack: list[int]) -> Iterator[np.ndarray]:
            if len(prefix) == length:
                yield np.array(prefix, dtype=np.int64)
                return
            if len(stack) < self.D:
                for i in range(self.k):
                    yield from rec(prefix + [2 * i], stack + [i])
            if stack:
                yield from rec(prefix + [2 * stack[-1] + 1], stack[:-1])

        yield from rec([], [])


def default_bands(max_length: int) -> list[tuple[int, int]]:
    """In distribution, then every standard OOD band that fits, then the top of the model's range."""
    bands = [(IN_DISTRIBUTION[0], min(IN_DISTRIBUTION[1], max_length))] if max_length >= 2 else []
    bands += [b for b in OOD_BANDS if b[1] <= max_length]
    if max_length > IN_DISTRIBUTION[1] and all(hi < max_length for _, hi in bands):
        bands.append((max(IN_DISTRIBUTION[1] + 1, max_length - 9), max_length))
    return bands
