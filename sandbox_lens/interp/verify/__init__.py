"""Prove a model exact: compare its outputs with the task's exact answers.

:func:`verify` takes a construction's spec or a sandbox-lens model and runs the verifier that the
task kind its card names has in the registry (:mod:`sandbox_lens.interp.tasks.kinds`) — ``automaton``
(:mod:`sandbox_lens.interp.verify.automaton`), ``dyck`` (:mod:`sandbox_lens.interp.verify.dyck`), ``ffl``
(:mod:`sandbox_lens.interp.verify.ffl`), or for a kind that names none the generic check on the kind's training
batches (:mod:`sandbox_lens.interp.verify.batches`) — and returns one :class:`Verification`, whatever the task.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sandbox_lens.interp.budget import require
from sandbox_lens.interp.errors import ConstructionError, LengthError
from sandbox_lens.interp.model.checked import FORWARDS, CheckedForward
from sandbox_lens.interp.tasks.kinds import resolve
from sandbox_lens.interp.verify.result import Mismatch, Verification, resolve_model

__all__ = ["verify", "Verification", "Mismatch", "resolve_model"]

GENERIC_VERIFIER = "sandbox_lens.interp.verify.batches:verify_batches"


def verify(
    model_or_spec: Any,
    automaton: Any = None,
    length: int | None = None,
    *,
    samples: int | None = None,
    exhaustive_upto: int | None = None,
    seed: int = 0,
    dtype: str = "float32",
    bands: Sequence[tuple[int, int]] | None = None,
    batch_size: int | None = None,
    progress: bool = False,
    max_mismatches: int = 5,
    forward: str = "bare",
) -> Verification:
    """Check a model (or a spec, built here in ``dtype``) against the exact task.

    Args:
        model_or_spec: a :class:`~sandbox_lens.interp.model.spec.ConstructionSpec`, or a model built by
            sandbox-lens (it carries a ``card`` that says what it models and how to feed it).
        automaton: automata only — the automaton to check against; defaults to the model's own.
        length: automata — the length of the random words (default: the model's maximum);
            Dyck and FFL are checked at the length they were built for (another one is refused).
        samples: random inputs (automata: words at ``length``, default 1000; Dyck: prefixes per
            length band, FFL: strings per band, default 200).
        exhaustive_upto: K; every input of length K is checked, so (by causality) every shorter
            one too. Defaults to the largest affordable K.
        seed: seed of the random inputs.
        dtype: dtype to build a spec in (a model is checked in its own).
        bands: Dyck only — length bands of the random prefixes (default: in distribution and the
            out-of-distribution bands that fit).
        batch_size: inputs per forward pass (default: chosen from the model's size).
        progress: show a progress bar.
        max_mismatches: how many disagreeing inputs the result keeps as examples.
        forward: ``"bare"`` (default) runs :mod:`sandbox_lens.interp.model.bare`'s forward on the model's weights,
            cross-checked against the model on a sample of every input set (falling back to the model
            on any disagreement); ``"model"`` runs the model itself throughout. ``details["forward"]``
            says what ran.
    """
    model, dtype = resolve_model(model_or_spec, dtype)
    card = model.card
    kind = card.task_kind
    accepts = kind.verify_accepts
    if automaton is not None and "automaton" not in accepts:
        raise ConstructionError(f"{card.construction} models the {kind.name} task, not an automaton")
    if length is not None and "length" not in accepts and int(length) != card.max_length:
        raise LengthError(
            f"this {kind.name} model was built for length {card.max_length}; the length must match (or be left out)"
        )
    if bands is not None and "bands" not in accepts:
        raise ConstructionError("length bands apply to Dyck models")
    n = kind.verify_samples if samples is None else int(samples)

    L, cfg = int(length or card.max_length), model.cfg
    # seconds per (input × position × layer × (T + d_model)), measured on a 2-core machine: modular_counter
    # C3 at T = 64 and prefix_scan S5 at T = 256 both within 2× of it
    require(
        f"verifying {n} sampled inputs of {L} tokens",
        lower="--samples",
        seconds=2.5e-8 * n * L * cfg.n_layers * (L + cfg.d_model),
    )
    if forward not in FORWARDS:
        raise ConstructionError(f"forward must be one of {', '.join(FORWARDS)}; got {forward!r}")
    checker = CheckedForward(model, forward)
    optional = {
        "automaton": automaton,
        "length": length,
        "bands": bands,
        "batch_size": batch_size,
        "progress": progress,
    }
    verifier = resolve(kind.verifier or GENERIC_VERIFIER)
    result = verifier(
        model,
        dtype,
        samples=n,
        exhaustive_upto=exhaustive_upto,
        seed=seed,
        max_mismatches=max_mismatches,
        checker=checker,
        **{k: v for k, v in optional.items() if k in accepts},
    )
    result.details["forward"] = checker.details()
    return result
