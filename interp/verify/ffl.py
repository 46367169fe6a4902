"""Check a flip-flop-language model: at every ``r``, the argmax must be the bit of the latest ``w``.

Thesis §3.5 scores a model only after reads (the "deterministic" mode) and counts any error as a
reasoning error; the argmax runs over the whole vocabulary (flipflop.md §2.1, the stricter rule).
Strings come from

* **every** valid flip-flop prefix of K tokens (first instruction ``w``, reads consistent),
  which by causality covers every shorter prefix too;
* random strings at the model's full length from FFL(0.8) (the thesis's training law), the sparse
  FFL(0.98) and the dense FFL(0.1) (its out-of-distribution tests);
* Proposition 5's hard cases at full length: one write followed only by ignores, and a write at
  the start overridden by one just before the final read.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from interp.errors import ConstructionError, LengthError
from interp.verify import predict_states, resolve_model

__all__ = ["verify_ffl", "FFLVerification", "all_ffl_prefixes", "read_targets", "sample_ffl", "FFL_BANDS"]

W, R, I, ZERO, ONE = range(5)
FFL_BANDS = {"FFL(0.8)": 0.8, "FFL(0.98) sparse": 0.98, "FFL(0.1) dense": 0.1}
MAX_EXHAUSTIVE = 1 << 16


@dataclass
class FFLVerification:
    construction: str
    length: int
    dtype: str
    accuracy: float
    reads_checked: int
    strings_checked: int
    exhaustive_upto: int
    samples: int
    seed: int
    bands: dict[str, dict[str, float]] = field(default_factory=dict)
    mismatches: list[dict[str, Any]] = field(default_factory=list)
    shape: dict[str, int] = field(default_factory=dict)

    @property
    def exact(self) -> bool:
        return self.accuracy == 1.0 and self.reads_checked > 0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(d.pop("shape"))
        return d


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
    from interp.tasks.batches import FlipflopTask

    T = max(4, length + 1 + (length + 1) % 2)
    return FlipflopTask(p, T).sequences(rng, n)[:, :length]


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


def _hard_cases(length: int, rng: np.random.Generator) -> np.ndarray:
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


def verify_ffl(model_or_spec: Any, *, samples: int = 200, exhaustive_upto: int | None = None, seed: int = 0,
               dtype: str = "float32", max_mismatches: int = 5) -> FFLVerification:
    """Prove a flip-flop-language model exact (see the module docstring); ``samples`` strings per band."""
    model, dtype = resolve_model(model_or_spec, dtype)
    card = model.card
    if card.task.get("kind") != "flipflop":
        raise ConstructionError(f"{card.construction} is not a flip-flop-language model")
    if samples < 0:
        raise ConstructionError("samples must be non-negative")
    M = card.max_length
    K = min(M, 14) if exhaustive_upto is None else int(exhaustive_upto)
    if not 0 <= K <= M:
        raise LengthError(f"exhaustive_upto must be between 0 and {M}, got {K}")
    rng = np.random.default_rng(seed)
    checks: list[tuple[str, np.ndarray]] = []
    if K >= 2:
        checks.append((f"all prefixes of length {K}", all_ffl_prefixes(K)))
    if samples:
        checks += [(name, sample_ffl(p, samples, M, rng)) for name, p in FFL_BANDS.items()]
    if M >= 5:
        checks.append(("one early write; overridden late", _hard_cases(M, rng)))
    if not checks:
        raise ConstructionError("nothing to check: no exhaustive length and no samples")

    names = ["w", "r", "i", "0", "1"]
    bands: dict[str, dict[str, float]] = {}
    mismatches: list[dict[str, Any]] = []
    ok_total = reads_total = strings = 0
    for label, tokens in checks:
        written, reads = read_targets(tokens)
        pred = predict_states(model, tokens)  # the model's symbols are its tokens (no prefix)
        ok = (pred == written) & reads
        bad = np.argwhere(reads & ~ok)
        for b, t in bad[: max(0, max_mismatches - len(mismatches))]:
            mismatches.append({"prefix": " ".join(names[x] for x in tokens[b, max(0, t - 23): t + 1]),
                               "position": int(t), "expected": names[written[b, t]], "predicted": names[pred[b, t]]})
        n = int(reads.sum())
        entry = bands.setdefault(label, {"accuracy": 0.0, "reads": 0, "strings": 0})
        entry["accuracy"] = (entry["accuracy"] * entry["reads"] + int(ok.sum())) / max(entry["reads"] + n, 1)
        entry["reads"] += n
        entry["strings"] += len(tokens)
        ok_total += int(ok.sum())
        reads_total += n
        strings += len(tokens)
    cfg = model.cfg
    return FFLVerification(
        construction=card.construction, length=M, dtype=dtype, accuracy=ok_total / max(reads_total, 1),
        reads_checked=reads_total, strings_checked=strings, exhaustive_upto=K, samples=samples, seed=seed,
        bands=bands, mismatches=mismatches,
        shape={"n_layers": cfg.n_layers, "attention_layers": card.attention_layers, "d_model": cfg.d_model,
               "n_heads": cfg.n_heads, "d_mlp": cfg.d_mlp},
    )
