"""Check a Dyck model: the thesis's accuracy and the exact next-token distributions.

* **accuracy** (thesis §3.6.3): over prefixes that end in a closing bracket, the argmax of the
  model's bracket logits after the rest of the prefix must be that bracket. When
  1 − q ≤ q/k (e.g. k = 1, q = 0.5) even the exact distribution ties an open bracket with the
  close, so the argmax runs over the k closing brackets only (the notes' "lenient" variant);
  ``accuracy_rule`` says which was used;
* **max TV**: the largest total-variation distance between the model's softmax and the exact
  next-token distribution, over every position of every checked prefix.

Prefixes come from (a) every valid prefix of length K (``exhaustive_upto``; by causality this
covers every shorter prefix too) and (b) random closing-bracket prefixes in length bands: in
distribution (2–28, the thesis's training lengths) and the out-of-distribution bands 400–500
and 900–1000 when the model's maximum length allows them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from sandbox_lens.interp.errors import ConstructionError, LengthError
from sandbox_lens.interp.model.checked import CheckedForward
from sandbox_lens.interp.model.run import logits
from sandbox_lens.interp.tasks.dyck import Dyck, default_bands
from sandbox_lens.interp.tasks.kinds import DYCK
from sandbox_lens.interp.verify.result import Mismatch, Verification, model_shape

#: band b of a check draws its prefixes with seed + BAND_SEED_STRIDE·b (distinct bands, distinct words)
BAND_SEED_STRIDE = 1000

__all__ = ["verify_dyck", "default_bands", "next_token_probabilities", "closing_only", "predicted_bracket"]

#: Exhaustive checks enumerate every valid prefix of length K; refuse beyond this many.
MAX_EXHAUSTIVE_PREFIXES = 1 << 18


def closing_only(lang: Dyck) -> bool:
    """True when the thesis's argmax must run over the closing brackets only: when 1 − q ≤ q/k the
    exact distribution ties an open bracket with the close."""
    return 1.0 - lang.q <= lang.q / lang.k


def predicted_bracket(probs: np.ndarray, lenient: bool) -> int:
    """The bracket a next-token distribution predicts (over the closes only when ``lenient``)."""
    return 2 * int(np.argmax(probs[1::2])) + 1 if lenient else int(np.argmax(probs))


def next_token_probabilities(
    model, words: Sequence[np.ndarray], checker: CheckedForward | None = None
) -> list[np.ndarray]:
    """The model's next-token distribution over the brackets after BOS, w_1, …, w_n, per word
    (through ``checker``'s forward when given, cross-checked on each length's first words)."""
    import torch

    io = model.card.io
    results: dict[int, np.ndarray] = {}
    by_len: dict[int, list[int]] = {}
    for i, w in enumerate(words):
        by_len.setdefault(len(w), []).append(i)
    for n, idx in sorted(by_len.items()):
        if n + len(io.prefix) > model.cfg.n_ctx:
            raise LengthError(f"a prefix of length {n} does not fit the model ({model.cfg.n_ctx - 1} brackets)")
        tokens = io.encode(np.stack([np.asarray(words[i], dtype=np.int64) for i in idx]))
        batch_size = max(1, (1 << 22) // max(1, (n + 1) ** 2 * model.cfg.n_heads))
        if checker is not None:
            checker.cross_check(tokens)
        forward = checker.forward if checker is not None else None
        for start, lg in logits(model, tokens, batch_size=batch_size, forward=forward):
            probs = torch.softmax(lg.double(), dim=-1).cpu().numpy()
            for row, i in enumerate(idx[start : start + len(lg)]):
                results[i] = probs[row, len(io.prefix) - 1 :]
    return [results[i] for i in range(len(words))]


def verify_dyck(
    model,
    dtype: str,
    *,
    samples: int = 200,
    bands: Sequence[tuple[int, int]] | None = None,
    exhaustive_upto: int | None = None,
    seed: int = 0,
    max_mismatches: int = 5,
    checker: CheckedForward | None = None,
) -> Verification:
    """Prove a Dyck model exact (see the module docstring and :func:`sandbox_lens.interp.verify.verify`)."""
    card = model.card
    if card.task_kind is not DYCK:
        raise ConstructionError(f"{card.construction} is not a Dyck model")
    lang = card.source
    M = card.max_length
    bands = default_bands(M) if bands is None else [tuple(b) for b in bands]
    for lo, hi in bands:
        if not 2 <= lo <= hi <= M:
            raise LengthError(f"length band {lo}-{hi} is outside the model's range 2..{M}")
    K = min(M, _default_exhaustive(lang)) if exhaustive_upto is None else int(exhaustive_upto)
    if not 0 <= K <= M:
        raise LengthError(f"exhaustive_upto must be between 0 and {M}, got {K}")

    checks: list[tuple[str, list[np.ndarray], bool]] = []  # (label, words, score only the last bracket)
    if K:
        words = list(lang.all_prefixes(K))
        if len(words) > MAX_EXHAUSTIVE_PREFIXES:
            raise LengthError(f"{len(words)} prefixes of length {K}: more than {MAX_EXHAUSTIVE_PREFIXES}")
        checks.append((f"all prefixes of length {K}", words, False))
    for b, (lo, hi) in enumerate(bands):
        checks.append((f"{lo}-{hi}", lang.closing_prefixes(samples, (lo, hi), seed=seed + BAND_SEED_STRIDE * b), True))
    if not checks:
        raise ConstructionError("nothing to check: no exhaustive length and no length band")

    lenient = closing_only(lang)
    rule = "argmax over the closing brackets" if lenient else "argmax over all brackets"
    total_ok = total = prefixes = 0
    max_tv = 0.0
    report: dict[str, dict[str, float]] = {}
    mismatches: list[Mismatch] = []
    for label, words, last_only in checks:
        ok_band = n_band = 0
        tv_band = 0.0
        for w, probs in zip(words, next_token_probabilities(model, words, checker)):
            exact = lang.distributions(w)
            tv_band = max(tv_band, float(0.5 * np.abs(probs - exact).sum(axis=1).max()))
            positions = [len(w)] if last_only else [t for t in range(1, len(w) + 1) if w[t - 1] % 2 == 1]
            for t in positions:  # predict w_t from the model's output after w_{t−1}
                pred = predicted_bracket(probs[t - 1], lenient)
                ok = pred == int(w[t - 1])
                ok_band += ok
                n_band += 1
                if not ok and len(mismatches) < max_mismatches:
                    mismatches.append(
                        Mismatch(
                            position=t,
                            inputs=[lang.bracket_names[b] for b in w[: t - 1]],
                            expected=lang.bracket_names[w[t - 1]],
                            predicted=lang.bracket_names[pred],
                        )
                    )
        report[label] = {"accuracy": ok_band / max(n_band, 1), "prefixes": n_band, "max_tv": tv_band}
        total_ok += ok_band
        total += n_band
        prefixes += len(words)
        max_tv = max(max_tv, tv_band)
    return Verification(
        construction=card.construction,
        kind="dyck",
        task=lang.name,
        length=M,
        dtype=dtype,
        accuracy=total_ok / max(total, 1),
        checked=total,
        checked_unit="closing brackets",
        sequences=prefixes,
        exhaustive_upto=K,
        samples=samples,
        seed=seed,
        **model_shape(model),
        mismatches=mismatches,
        details={"max_tv": max_tv, "accuracy_rule": rule, "bands": report},
    )


def _default_exhaustive(lang: Dyck) -> int:
    """The largest K with at most ~4096 valid prefixes of length K."""
    K = 0
    while K < 16 and sum(1 for _ in zip(range(4097), lang.all_prefixes(K + 1))) <= 4096:
        K += 1
    return K
