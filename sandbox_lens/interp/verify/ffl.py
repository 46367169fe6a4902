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

import numpy as np

from sandbox_lens.interp.errors import ConstructionError, LengthError
from sandbox_lens.interp.model.checked import CheckedForward
from sandbox_lens.interp.model.run import predict
from sandbox_lens.interp.tasks.ffl import BANDS, VOCAB, all_ffl_prefixes, hard_cases, read_targets, sample_ffl
from sandbox_lens.interp.tasks.kinds import FFL
from sandbox_lens.interp.verify.result import Mismatch, Verification, model_shape

__all__ = ["verify_ffl"]

#: Every valid prefix of this many tokens is checked unless the caller says otherwise (31,250 strings).
DEFAULT_EXHAUSTIVE = 14


def verify_ffl(
    model,
    dtype: str,
    *,
    samples: int = 200,
    exhaustive_upto: int | None = None,
    seed: int = 0,
    max_mismatches: int = 5,
    checker: CheckedForward | None = None,
) -> Verification:
    """Prove a flip-flop-language model exact (see the module docstring); ``samples`` strings per band."""
    card = model.card
    if card.task_kind is not FFL:
        raise ConstructionError(f"{card.construction} is not a flip-flop-language model")
    if samples < 0:
        raise ConstructionError("samples must be non-negative")
    M = card.max_length
    K = min(M, DEFAULT_EXHAUSTIVE) if exhaustive_upto is None else int(exhaustive_upto)
    if not 0 <= K <= M:
        raise LengthError(f"exhaustive_upto must be between 0 and {M}, got {K}")
    rng = np.random.default_rng(seed)
    checks: list[tuple[str, np.ndarray]] = []
    if K >= 2:
        checks.append((f"all prefixes of length {K}", all_ffl_prefixes(K)))
    if samples:
        checks += [(name, sample_ffl(p, samples, M, rng)) for name, p in BANDS.items()]
    if M >= 5:
        checks.append(("one early write; overridden late", hard_cases(M, rng)))
    if not checks:
        raise ConstructionError("nothing to check: no exhaustive length and no samples")

    names = VOCAB
    bands: dict[str, dict[str, float]] = {}
    mismatches: list[Mismatch] = []
    ok_total = reads_total = strings = 0
    for label, tokens in checks:
        written, reads = read_targets(tokens)
        if checker is not None:
            checker.cross_check(tokens)
        # the model's symbols are its tokens (no prefix)
        pred = predict(model, tokens, forward=checker.forward if checker is not None else None)
        ok = (pred == written) & reads
        bad = np.argwhere(reads & ~ok)
        for b, t in bad[: max(0, max_mismatches - len(mismatches))]:
            mismatches.append(
                Mismatch(
                    position=int(t) + 1,
                    inputs=[names[x] for x in tokens[b, : t + 1]],
                    expected=names[written[b, t]],
                    predicted=names[pred[b, t]],
                )
            )
        n = int(reads.sum())
        entry = bands.setdefault(label, {"accuracy": 0.0, "reads": 0, "strings": 0})
        entry["accuracy"] = (entry["accuracy"] * entry["reads"] + int(ok.sum())) / max(entry["reads"] + n, 1)
        entry["reads"] += n
        entry["strings"] += len(tokens)
        ok_total += int(ok.sum())
        reads_total += n
        strings += len(tokens)
    return Verification(
        construction=card.construction,
        kind="ffl",
        task="flip-flop language",
        length=M,
        dtype=dtype,
        accuracy=ok_total / max(reads_total, 1),
        checked=reads_total,
        checked_unit="reads",
        sequences=strings,
        exhaustive_upto=K,
        samples=samples,
        seed=seed,
        **model_shape(model),
        mismatches=mismatches,
        details={"bands": bands},
    )
