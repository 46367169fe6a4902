"""The flip-flop language FFL(T, p) (thesis §3.5, flipflop.md §1): its one vocabulary and ground truth.

Strings are T tokens of (instruction, data) pairs over ``w r i 0 1`` (token ids 0..4): the
instruction is ``w`` (write) with probability (1 − p)/2, ``r`` (read) with (1 − p)/2 and ``i``
(ignore) with p; the first is ``w`` and the last ``r``; the data after ``w`` or ``i`` is a fair
bit, the data after ``r`` repeats the latest written bit. A model is scored at the reads: the token
after ``r`` must be the bit of the latest ``w``.
"""

from __future__ import annotations

import numpy as np

from sandbox_lens.interp.errors import AutomatonError, LengthError

__all__ = [
    "VOCAB",
    "W",
    "R",
    "I",
    "ZERO",
    "ONE",
    "sample_strings",
    "sample_ffl",
    "read_targets",
    "all_ffl_prefixes",
    "hard_cases",
    "check_p",
    "BANDS",
    "corrupt_ffl",
]

VOCAB = ("w", "r", "i", "0", "1")
W, R, I, ZERO, ONE = range(5)
#: The thesis's training law and its two out-of-distribution tests (sparse and dense strings).
BANDS = {"FFL(0.8)": 0.8, "FFL(0.98) sparse": 0.98, "FFL(0.1) dense": 0.1}
MAX_EXHAUSTIVE = 1 << 16


def check_p(p: float) -> float:
    """A flip-flop instruction probability p_i, checked to lie in [0, 1)."""
    if not 0.0 <= p < 1.0:
        raise AutomatonError(f"flip-flop p_i must be in [0, 1), got {p}")
    return float(p)


def sample_strings(p: float, n: int, length: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` strings of FFL(``length``, p), one per row (``length`` even, ≥ 4)."""
    check_p(p)
    if length < 4 or length % 2:
        raise AutomatonError(f"flip-flop strings have an even length ≥ 4, got {length}")
    pairs = length // 2
    pw = pr = (1.0 - p) / 2
    instr = rng.choice(3, size=(n, pairs), p=[pw, pr, p])
    instr[:, 0], instr[:, -1] = W, R  # starts with w, ends with r
    data = rng.integers(2, size=(n, pairs)) + ZERO
    for b in range(n):  # a read repeats the most recent write
        last = data[b, 0]
        for j in range(pairs):
            if instr[b, j] == W:
                last = data[b, j]
            elif instr[b, j] == R:
                data[b, j] = last
    seq = np.empty((n, length), dtype=np.int64)
    seq[:, 0::2], seq[:, 1::2] = instr, data
    return seq


def read_targets(tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For ``[B, n]`` FFL tokens: (the latest written bit token at each position, the read positions).

    The latest written bit at t is the latest data token at a position ≤ t that follows a ``w``
    (3 = "0", 4 = "1"); positions before the first written bit get −1. A read at t is answered
    by ``written[t]``.
    """
    tokens = np.atleast_2d(np.asarray(tokens, dtype=np.int64))
    written = np.full(len(tokens), -1, dtype=np.int64)
    out = np.full(tokens.shape, -1, dtype=np.int64)
    for t in range(tokens.shape[1]):
        if t >= 1:
            after_w = tokens[:, t - 1] == W
            written = np.where(after_w, tokens[:, t], written)
        out[:, t] = written
    return out, tokens == R


def sample_ffl(p: float, n: int, length: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` FFL(p) prefixes of ``length`` tokens (strings of the next even length ≥ length + 1, truncated)."""
    T = max(4, length + 1 + (length + 1) % 2)
    return sample_strings(p, n, T, rng)[:, :length]


def all_ffl_prefixes(K: int) -> np.ndarray:
    """Every valid flip-flop prefix of K ≥ 1 tokens (first instruction w, reads consistent), one per row."""
    full = np.array([[W, ZERO], [W, ONE], [I, ZERO], [I, ONE], [R, -1]])
    # the first pair is a write; a pair cut after its instruction (odd K) has only 3 distinct prefixes
    options = [full[:2]] + [full] * (K // 2 - 1 + K % 2)
    if K % 2:
        options[-1] = full[[0, 2, 4]] if len(options) > 1 else full[:1]
    n = int(np.prod([len(o) for o in options]))
    if n > MAX_EXHAUSTIVE:
        raise LengthError(f"{n} flip-flop prefixes of length {K}: more than {MAX_EXHAUSTIVE}")
    seq = np.empty((n, 2 * len(options)), dtype=np.int64)
    rest = np.arange(n)
    for j, o in enumerate(options):
        c = o[rest % len(o)]
        rest //= len(o)
        seq[:, 2 * j], seq[:, 2 * j + 1] = c[:, 0], c[:, 1]
    written, _ = read_targets(seq)
    reads = seq == -1
    seq[reads] = written[reads]  # a read repeats the latest write
    return seq[:, :K]


def hard_cases(length: int, rng: np.random.Generator) -> np.ndarray:
    """Prop. 5's families at full length: [w b, i x, …, r] and [w b, i x, …, w b′, i x, r] (r as late as fits)."""
    n = length + length % 2  # an even string; truncated to ``length`` below
    read = (length - 1) - (length - 1) % 2  # the last instruction slot inside the first ``length`` tokens
    rows = []
    for b, b2 in ((0, 1), (1, 0), (0, 0), (1, 1)):
        seq = np.empty(n, dtype=np.int64)
        seq[0::2], seq[1::2] = I, ZERO + rng.integers(2, size=n // 2)
        seq[0], seq[1] = W, ZERO + b
        seq[read] = R
        rows.append(seq.copy())  # one early write, read at the end
        seq[read - 2], seq[read - 1] = W, ZERO + b2
        rows.append(seq)  # overridden just before the read
    out = np.stack(rows)
    written, _ = read_targets(out)
    if read + 1 < n:
        out[:, read + 1] = written[:, read]
    return out[:, :length]


def corrupt_ffl(tokens: np.ndarray, corruption: str, rng: np.random.Generator) -> np.ndarray:
    """``corruption`` (``bit``, ``instruction`` or ``resample``) of each string; reads stay where they are and
    repeat the latest written bit, so every string stays in the language."""
    out = tokens.copy()
    for s in out:
        instr = list(range(0, len(s) - 1, 2))  # instruction positions that have their data bit
        if corruption == "bit":
            writes = [t for t in instr if s[t] == W]
            t = int(rng.choice(writes))
            s[t + 1] = ZERO + ONE - s[t + 1]
        elif corruption == "instruction":
            movable = [t for t in instr[1:] if s[t] in (W, I)]  # the first instruction is always w
            if movable:
                t = int(rng.choice(movable))
                s[t] = W + I - s[t]
        else:
            for t in instr:
                if t and s[t] != R:
                    s[t] = W if rng.random() < 0.5 else I
                if s[t] != R:
                    s[t + 1] = ZERO + int(rng.integers(2))
        last = None
        for u in instr:  # reads repeat the latest written bit
            if s[u] == W:
                last = s[u + 1]
            elif s[u] == R and last is not None:
                s[u + 1] = last
    return out
