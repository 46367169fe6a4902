"""Prove a model exact: compare its outputs with the task's exact answers.

:func:`verify` takes a construction's spec or a sandbox-lens model and dispatches on the task kind
its card names — ``automaton`` (:mod:`interp.verify.automaton`), ``dyck``
(:mod:`interp.verify.dyck`), ``ffl`` (:mod:`interp.verify.ffl`) — and returns one
:class:`Verification`, whatever the task.
"""

from __future__ import annotations

from typing import Any, Sequence

from interp.errors import ConstructionError, LengthError
from interp.verify.forward import FORWARDS, CheckedForward
from interp.verify.result import Mismatch, Verification, resolve_model

__all__ = ["verify", "Verification", "Mismatch", "resolve_model"]

#: Random inputs per check when the caller does not say: automaton words at the full length;
#: Dyck prefixes and FFL strings per length band.
DEFAULT_SAMPLES = {"automaton": 1000, "dyck": 200, "ffl": 200}


def verify(model_or_spec: Any, automaton: Any = None, length: int | None = None, *, samples: int | None = None,
           exhaustive_upto: int | None = None, seed: int = 0, dtype: str = "float32",
           bands: Sequence[tuple[int, int]] | None = None, batch_size: int | None = None, progress: bool = False,
           max_mismatches: int = 5, forward: str = "bare") -> Verification:
    """Check a model (or a spec, built here in ``dtype``) against the exact task.

    Args:
        model_or_spec: a :class:`~interp.model.spec.ConstructionSpec`, or a model built by
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
        forward: ``"bare"`` (default) runs :mod:`interp.model.bare`'s forward on the model's weights,
            cross-checked against the model on a sample of every input set (falling back to the model
            on any disagreement); ``"model"`` runs the model itself throughout. ``details["forward"]``
            says what ran.
    """
    model, dtype = resolve_model(model_or_spec, dtype)
    card = model.card
    kind = card.kind
    if kind != "automaton":
        if automaton is not None:
            raise ConstructionError(f"{card.construction} models the {kind} task, not an automaton")
        if length is not None and int(length) != card.max_length:
            raise LengthError(f"this {kind} model was built for length {card.max_length}; the length must match "
                              f"(or be left out)")
    if bands is not None and kind != "dyck":
        raise ConstructionError("length bands apply to Dyck models")
    n = DEFAULT_SAMPLES.get(kind, 0) if samples is None else int(samples)
    if forward not in FORWARDS:
        raise ConstructionError(f"forward must be one of {', '.join(FORWARDS)}; got {forward!r}")
    checker = CheckedForward(model, forward)
    common = dict(samples=n, exhaustive_upto=exhaustive_upto, seed=seed, max_mismatches=max_mismatches,
                  checker=checker)
    if kind == "automaton":
        from interp.verify.automaton import verify_automaton

        result = verify_automaton(model, dtype, automaton, length, batch_size=batch_size, progress=progress, **common)
    elif kind == "dyck":
        from interp.verify.dyck import verify_dyck

        result = verify_dyck(model, dtype, bands=bands, **common)
    elif kind == "ffl":
        from interp.verify.ffl import verify_ffl

        result = verify_ffl(model, dtype, **common)
    else:
        raise ConstructionError(f"{card.construction}: unknown task kind {kind!r}")
    result.details["forward"] = checker.details()
    return result
