"""Verify an automaton model: every word of length K, and random words at the full length.

Models are causal, so the prediction at position t only sees σ_1..σ_t: checking every word of
length K also checks every shorter word, at every position. Accuracy is the fraction of (word,
position) pairs whose argmax logit is the exact state q_t.
"""

from __future__ import annotations

import numpy as np

from sandbox_lens.interp.budget import progress as progress_bar
from sandbox_lens.interp.errors import ConstructionError, LengthError, VocabularyError
from sandbox_lens.interp.model.checked import CheckedForward
from sandbox_lens.interp.model.run import predict
from sandbox_lens.interp.tasks.automata import Semiautomaton
from sandbox_lens.interp.verify.result import Mismatch, Verification, model_shape

__all__ = ["verify_automaton", "default_exhaustive_length"]

#: Exhaustive checks enumerate |Σ|^K words; refuse beyond this many.
MAX_EXHAUSTIVE_WORDS = 1 << 20
#: Default exhaustive budget when the caller does not choose K: at most this many words, and
#: at most this many attention entries per layer (words × (prefix + K)²), because long-T
#: prefix-scan models carry hundreds of padding positions even for short words.
DEFAULT_EXHAUSTIVE_WORDS = 4096
DEFAULT_EXHAUSTIVE_ENTRIES = 1 << 26


def default_exhaustive_length(n_symbols: int, length: int, prefix: int = 0) -> int:
    """The largest K ≤ length within the default budget (at least 1)."""

    def affordable(k: int) -> bool:
        words = n_symbols**k
        return words <= DEFAULT_EXHAUSTIVE_WORDS and words * (prefix + k) ** 2 <= DEFAULT_EXHAUSTIVE_ENTRIES

    k = 1
    while k < length and affordable(k + 1):
        k += 1
    return min(k, length)


#: sampled words are drawn and checked in chunks of at most this many positions
CHUNK_POSITIONS = 1 << 21


def verify_automaton(
    model,
    dtype: str,
    automaton: Semiautomaton | None = None,
    length: int | None = None,
    *,
    samples: int = 1000,
    exhaustive_upto: int | None = None,
    seed: int = 0,
    batch_size: int | None = None,
    progress: bool = False,
    max_mismatches: int = 5,
    checker: CheckedForward | None = None,
) -> Verification:
    """Check an automaton model against exact simulation (see :func:`sandbox_lens.interp.verify.verify`)."""
    card = model.card
    automaton = automaton or card.source  # the automaton the card says the model simulates
    if automaton.n_symbols != card.io.n_symbols:
        raise VocabularyError(
            f"automaton {automaton.name!r} has {automaton.n_symbols} symbols, the model knows {card.io.n_symbols}"
        )
    if automaton.n_states != len(card.output_names):
        raise VocabularyError(
            f"automaton {automaton.name!r} has {automaton.n_states} states, the model predicts {len(card.output_names)}"
        )
    length = card.max_length if length is None else int(length)
    if not 1 <= length <= card.max_length:
        raise LengthError(
            f"{card.construction} for {automaton.name} was built for lengths 1..{card.max_length}; got {length} "
            f"(rebuild with --length {length})"
        )
    if samples < 0:
        raise ConstructionError("samples must be non-negative")
    if samples == 0 and exhaustive_upto == 0:
        raise ConstructionError("nothing to check: samples = 0 and exhaustive_upto = 0")
    m = automaton.n_symbols
    K = default_exhaustive_length(m, length, len(card.io.prefix)) if exhaustive_upto is None else int(exhaustive_upto)
    if not 0 <= K <= length:
        raise LengthError(f"exhaustive_upto must be between 0 and the length {length}, got {K}")
    if m**K > MAX_EXHAUSTIVE_WORDS:
        raise LengthError(f"exhaustive check up to {K} needs {m}^{K} words, more than {MAX_EXHAUSTIVE_WORDS}")

    # Sampled words come in chunks of at most CHUNK_POSITIONS positions, so that --samples is
    # limited by time, not memory; one chunk (the usual case) draws exactly the words of `seed`.
    per_chunk = max(1, CHUNK_POSITIONS // length)

    def word_sets():
        if K > 0:
            yield automaton.all_words(K)
        for i, start in enumerate(range(0, samples, per_chunk)):
            chunk_seed = seed if i == 0 else int(np.random.SeedSequence([seed, i]).generate_state(1)[0])
            yield automaton.sample(min(per_chunk, samples - start), length, seed=chunk_seed)

    correct = checked = sequences = 0
    mismatches: list[Mismatch] = []
    chunks = (K > 0) + -(-samples // per_chunk)
    for words in progress_bar(
        word_sets(), total=chunks, desc=f"verify {card.construction}", unit="chunk", show=progress
    ):
        if checker is not None:
            checker.cross_check(card.io.encode(words))
        pred = predict(
            model,
            words,
            batch_size=batch_size,
            progress=progress,
            forward=checker.forward if checker is not None else None,
        )
        truth = automaton.run(words)
        ok = pred == truth
        correct += int(ok.sum())
        checked += ok.size
        sequences += len(words)
        for b, t in zip(*np.nonzero(~ok)):
            if len(mismatches) >= max_mismatches:
                break
            mismatches.append(
                Mismatch(
                    position=int(t) + 1,
                    inputs=[automaton.alphabet[s] for s in words[b, : t + 1]],
                    expected=automaton.states[truth[b, t]],
                    predicted=automaton.states[pred[b, t]],
                )
            )
    return Verification(
        construction=card.construction,
        kind="automaton",
        task=automaton.name,
        length=length,
        dtype=dtype,
        accuracy=correct / checked,
        checked=checked,
        checked_unit="positions",
        sequences=sequences,
        exhaustive_upto=K,
        samples=samples,
        seed=seed,
        **model_shape(model),
        mismatches=mismatches,
    )
