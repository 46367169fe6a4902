"""Prove a model exact: compare its predictions with exact simulation.

:func:`verify` checks (a) **every** input word of length K (``exhaustive_upto``) and (b)
random words at the full length. Models are causal, so the prediction at position t only
sees σ_1..σ_t: checking every word of length K also checks every shorter word, at every
position. Accuracy is the fraction of (word, position) pairs whose argmax logit is the
exact state q_t.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from interp.tasks.automata import Semiautomaton, parse_automaton_json
from interp.errors import ConstructionError, LengthError, VocabularyError
from interp.model.spec import ConstructionSpec, ModelCard

__all__ = ["verify", "resolve_model", "predict_states", "VerificationResult", "Mismatch", "default_exhaustive_length"]

#: Exhaustive checks enumerate |Σ|^K words; refuse beyond this many.
MAX_EXHAUSTIVE_WORDS = 1 << 20
#: Default exhaustive budget when the caller does not choose K: at most this many words, and
#: at most this many attention entries per layer (words × (prefix + K)²), because long-T
#: prefix-scan models carry hundreds of padding positions even for short words.
DEFAULT_EXHAUSTIVE_WORDS = 4096
DEFAULT_EXHAUSTIVE_ENTRIES = 1 << 26
#: Rough per-batch memory budget for the forward pass.
BATCH_BYTES = 256 * 2**20


@dataclass
class Mismatch:
    word: list[str]
    position: int  # 1-based t
    expected: str
    predicted: str


@dataclass
class VerificationResult:
    construction: str
    automaton: str
    length: int
    dtype: str
    accuracy: float
    positions_checked: int
    sequences_checked: int
    exhaustive_upto: int
    samples: int
    seed: int
    mismatches: list[Mismatch] = field(default_factory=list)
    shape: dict[str, int] = field(default_factory=dict)

    @property
    def exact(self) -> bool:
        return self.accuracy == 1.0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        shape = d.pop("shape")
        d.update({k: shape.get(k) for k in ("n_layers", "attention_layers", "d_model", "n_heads", "d_mlp")})
        return d


def default_exhaustive_length(n_symbols: int, length: int, prefix: int = 0) -> int:
    """The largest K ≤ length within the default budget (at least 1)."""

    def affordable(k: int) -> bool:
        words = n_symbols**k
        return words <= DEFAULT_EXHAUSTIVE_WORDS and words * (prefix + k) ** 2 <= DEFAULT_EXHAUSTIVE_ENTRIES

    k = 1
    while k < length and affordable(k + 1):
        k += 1
    return min(k, length)


def _card_automaton(card: ModelCard) -> Semiautomaton:
    return parse_automaton_json(json.dumps(card.automaton), f"<{card.construction} model>")


def _batch_size(model, n_positions: int) -> int:
    cfg = model.cfg
    per_seq = 4 * n_positions * (3 * cfg.n_heads * n_positions + 3 * cfg.d_mlp + 8 * cfg.d_model)
    return int(max(1, min(4096, BATCH_BYTES // max(per_seq, 1))))


def predict_states(model, words: np.ndarray, batch_size: int | None = None, progress: bool = False) -> np.ndarray:
    """Argmax-logit state predictions of ``model`` on symbol-index words ``(batch, T)``."""
    import torch
    from tqdm import tqdm

    card: ModelCard = model.card
    io = card.io
    words = np.atleast_2d(np.asarray(words, dtype=np.int64))
    if words.size and (words.min() < 0 or words.max() >= len(io.symbol_tokens)):
        raise VocabularyError(
            f"input symbol index out of range: the model knows {len(io.symbol_tokens)} symbols"
        )
    P, T = len(io.prefix), words.shape[1]
    if P + T > model.cfg.n_ctx:
        raise LengthError(f"inputs of length {T} do not fit the model's context ({model.cfg.n_ctx - P} symbols)")
    table = np.asarray(io.symbol_tokens, dtype=np.int64)
    tokens = np.concatenate([np.broadcast_to(np.asarray(io.prefix, dtype=np.int64), (len(words), P)), table[words]], axis=1)
    bs = batch_size or _batch_size(model, P + T)
    out = np.empty((len(words), T), dtype=np.int64)
    prev = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")  # TF32 would break the look-back margins
    # Attention weights like e^-40 are subnormal floats, which are very slow on CPUs; flushing
    # them to zero changes nothing that matters (they are far below float32 resolution of 1).
    torch.set_flush_denormal(True)
    try:
        with torch.inference_mode():
            for start in tqdm(range(0, len(words), bs), disable=not progress, desc="verifying", unit="batch", leave=False):
                batch = torch.from_numpy(np.ascontiguousarray(tokens[start : start + bs]))
                logits = model(batch, return_type="logits")
                out[start : start + bs] = logits[:, P:, :].argmax(-1).numpy()
    finally:
        torch.set_float32_matmul_precision(prev)
        torch.set_flush_denormal(False)
    return out


def resolve_model(model_or_spec: Any, dtype: str = "float32") -> tuple[Any, str]:
    """A model to check: build a spec in ``dtype``, or take a sandbox-lens model as it is.

    Refuses a dtype the construction is not verified in, so no unverified number is reported.
    """
    if isinstance(model_or_spec, ConstructionSpec):
        spec = model_or_spec
        if dtype not in spec.verified_dtypes:
            raise ConstructionError(
                f"{spec.name} at length {spec.max_length} is not exact in {dtype} "
                f"(supported: {', '.join(spec.verified_dtypes)}); {spec.notes}"
            )
        return spec.to_hooked(dtype=dtype), dtype
    model = model_or_spec
    if not isinstance(getattr(model, "card", None), ModelCard):
        raise ConstructionError("verify needs a ConstructionSpec or a model built by sandbox-lens (with a .card)")
    dtype = str(next(model.parameters()).dtype).replace("torch.", "")
    if dtype not in model.card.verified_dtypes:
        raise ConstructionError(
            f"{model.card.construction} at length {model.card.max_length} is not exact in {dtype} "
            f"(supported: {', '.join(model.card.verified_dtypes)})"
        )
    return model, dtype


def verify(
    model_or_spec: Any,
    automaton: Semiautomaton | None = None,
    length: int | None = None,
    *,
    samples: int = 1000,
    exhaustive_upto: int | None = None,
    seed: int = 0,
    dtype: str = "float32",
    batch_size: int | None = None,
    progress: bool = False,
    max_mismatches: int = 5,
) -> VerificationResult:
    """Check a model (or a spec, built here in ``dtype``) against exact simulation.

    Args:
        model_or_spec: a :class:`ConstructionSpec`, or a ``HookedTransformer`` built by
            sandbox-lens (it carries a ``card`` that says how to feed it).
        automaton: the automaton to check against; defaults to the model's own.
        length: the full length of the random words; defaults to the model's maximum.
        samples: number of random words at ``length``.
        exhaustive_upto: K; every word of length K is checked (so every shorter word too).
            Defaults to the largest K with |Σ|^K ≤ 4096.
        seed: seed of the random words.
        dtype: dtype to build a spec in (ignored for a model).
    """
    model, dtype = resolve_model(model_or_spec, dtype)
    card: ModelCard = model.card
    if card.task:
        raise ConstructionError(f"{card.construction} models a language task ({card.task.get('kind')}); "
                                f"use interp.verify.dyck.verify_dyck or interp.verify.ffl.verify_ffl")
    automaton = automaton or _card_automaton(card)
    if automaton.n_symbols != len(card.io.symbol_tokens):
        raise VocabularyError(
            f"automaton {automaton.name!r} has {automaton.n_symbols} symbols, the model knows {len(card.io.symbol_tokens)}"
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

    word_sets = []
    if K > 0:
        word_sets.append(automaton.all_words(K))
    if samples > 0:
        word_sets.append(automaton.sample(samples, length, seed=seed))
    correct = checked = sequences = 0
    mismatches: list[Mismatch] = []
    for words in word_sets:
        pred = predict_states(model, words, batch_size=batch_size, progress=progress)
        truth = automaton.run(words)
        ok = pred == truth
        correct += int(ok.sum())
        checked += ok.size
        sequences += len(words)
        for b, t in zip(*np.nonzero(~ok)):
            if len(mismatches) >= max_mismatches:
                break
            mismatches.append(Mismatch(
                word=[automaton.alphabet[s] for s in words[b, : t + 1]],
                position=int(t) + 1,
                expected=automaton.states[truth[b, t]],
                predicted=automaton.states[pred[b, t]],
            ))
    cfg = model.cfg
    shape = {
        "n_layers": cfg.n_layers,
        "attention_layers": card.attention_layers,
        "d_model": cfg.d_model,
        "n_heads": cfg.n_heads,
        "d_mlp": cfg.d_mlp,
    }
    return VerificationResult(
        construction=card.construction,
        automaton=automaton.name,
        length=length,
        dtype=dtype,
        accuracy=correct / checked,
        positions_checked=checked,
        sequences_checked=sequences,
        exhaustive_upto=K,
        samples=samples,
        seed=seed,
        mismatches=mismatches,
        shape=shape,
    )
