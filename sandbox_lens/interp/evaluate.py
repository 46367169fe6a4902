"""Evaluation under shift: the same model on inputs the training distribution never showed it.

A :class:`Shift` is one evaluation set, drawn from the task with one thing changed:

* automata — the symbol distribution (``probs``: one probability per symbol), the number of times
  a symbol occurs (``count``: words with exactly that many, e.g. parity words with 0, 2, 14 or 16
  ones), the length (``length``: beyond the training length needs a twin with fixed positions);
* the flip-flop language — the ignore probability p of FFL(p) (sparse 0.98, dense 0.1, …) and the
  length; errors are counted per read and per string (the thesis's "any glitch" criterion);
* Dyck — the length band of the prefixes (2–28, 400–500, 900–1000 as `verify dyck` uses), the
  open-bracket probability q, and a smaller maximum depth D' (the closing bracket is still the
  one that matches the stack top).

:func:`evaluate` runs every model on the *same* words of every shift and reports, per model and
shift, ``accuracy`` (over the scored outputs), ``final_accuracy`` (the last scored output of each
input), ``any_error_rate`` (the ℓ∞ view: inputs with any wrong output), accuracy per position
(automata), and the error counts (FFL). :func:`skyline` picks the
exact construction of a twin's task, evaluated beside it on the same words.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from sandbox_lens.constructions import build_model
from sandbox_lens.interp.budget import require
from sandbox_lens.interp.errors import ConstructionError, LengthError
from sandbox_lens.interp.model.run import logits, predict
from sandbox_lens.interp.progress import bar as progress_bar
from sandbox_lens.interp.tasks import ffl
from sandbox_lens.interp.tasks.batches import observed
from sandbox_lens.interp.tasks.dyck import Dyck
from sandbox_lens.interp.tasks.kinds import resolve, task_kind
from sandbox_lens.interp.tasks.shifts import Shift, ShiftError, automaton_shifts, dyck_shifts, ffl_shifts, parse_probs  # noqa: F401
from sandbox_lens.interp.verify.dyck import closing_only, next_token_probabilities, predicted_bracket

__all__ = [
    "Shift",
    "ShiftError",
    "evaluate",
    "automaton_shifts",
    "ffl_shifts",
    "dyck_shifts",
    "skyline",
    "parse_probs",
    "DEFAULT_SAMPLES",
    "score_automaton",
    "score_ffl",
    "score_dyck",
    "score_batch",
]

DEFAULT_SAMPLES = 500


def _check_length(model, length: int) -> None:
    card = model.card
    if length <= card.max_length:
        return
    if card.construction == "trained" and card.options.get("positional") == "learned":
        raise LengthError(
            f"this twin has learned positions trained up to length {card.max_length}; positions past it "
            f"were never trained (train with --pos sinusoidal|linear|none, or --pos-shift, and --n-ctx "
            f"to evaluate longer inputs)"
        )
    if card.construction == "trained":
        raise LengthError(
            f"length {length} does not fit this twin's context ({card.max_length}; train with a larger --n-ctx)"
        )
    raise LengthError(
        f"{card.construction} was built for inputs of up to {card.max_length}; got {length} "
        f"(rebuild it with --length {length})"
    )


# -- scoring: one row per (model, shift) ------------------------------------------------------
def _row(label: str, params: dict, correct: np.ndarray, scored: np.ndarray, final_ok: np.ndarray) -> dict[str, Any]:
    n_scored = int(scored.sum())
    return {
        "shift": label,
        **{k: list(v) if isinstance(v, tuple) else v for k, v in params.items()},
        "accuracy": float(correct[scored].mean()) if n_scored else float("nan"),
        "final_accuracy": float(final_ok.mean()) if final_ok.size else float("nan"),
        "scored": n_scored,
        "inputs": int(len(correct)),
    }


def score_automaton(model, task: dict[str, Any], shift: Shift, words: np.ndarray) -> dict[str, Any]:
    """Automata: every position's state; per-position accuracy and the share of words with any wrong state."""
    a = task_kind(task).source(task)
    pred = predict(model, words)
    truth = a.run(words)
    observe = observed(task)
    ok = pred == (truth if observe is None else np.asarray(observe)[truth])  # a twin of an observation: its labels
    row = _row(shift.label, shift.params, ok, np.ones_like(ok, dtype=bool), ok[:, -1])
    row["per_position"] = [round(float(x), 6) for x in ok.mean(axis=0)]
    row["any_error_rate"] = float((~ok).any(axis=1).mean())  # the ℓ∞ view: words with any wrong state
    return row


def score_ffl(model, task: dict[str, Any], shift: Shift, strings: np.ndarray) -> dict[str, Any]:
    """The flip-flop language: every read; read errors and strings with any wrong read (the thesis's glitches)."""
    # the last token is the final read's answer: nothing is predicted after it, and a twin's context
    # (T − 1 tokens, as it was trained) does not hold it
    written, reads = ffl.read_targets(strings)
    written, reads = written[:, :-1], reads[:, :-1]
    pred = predict(model, strings[:, :-1])
    ok = (pred == written) & reads
    wrong = reads & ~ok
    last_read = np.where(reads.any(axis=1), reads.shape[1] - 1 - np.argmax(reads[:, ::-1], axis=1), -1)
    has_read = last_read >= 0
    final_ok = ok[np.arange(len(ok))[has_read], last_read[has_read]]
    row = _row(shift.label, shift.params, ok, reads, final_ok)
    row.update(
        read_errors=int(wrong.sum()),
        strings_with_error=int(wrong.any(axis=1).sum()),
        string_error_rate=float(wrong.any(axis=1).mean()),
        any_error_rate=float(wrong.any(axis=1).mean()),
    )
    return row


def score_dyck(model, task: dict[str, Any], shift: Shift, prefixes: list[np.ndarray]) -> dict[str, Any]:
    """Dyck: the closing bracket that ends each prefix, predicted after the rest (the thesis's accuracy)."""

    source = task_kind(task).source(task)
    lang = Dyck(source.k, shift.params.get("D", source.D), shift.params["q"])
    lenient = closing_only(lang)
    # the thesis's accuracy: the last (closing) bracket of each prefix, predicted after the rest
    # (the last bracket is only a target: the model reads BOS and the n − 1 brackets before it)
    ok = [
        predicted_bracket(p[-1], lenient) == int(w[-1])
        for w, p in zip(prefixes, next_token_probabilities(model, [w[:-1] for w in prefixes]))
    ]
    ok_arr = np.asarray(ok)
    row = _row(shift.label, shift.params, ok_arr[:, None], np.ones((len(ok_arr), 1), dtype=bool), ok_arr)
    row["any_error_rate"] = float(1 - ok_arr.mean())  # one scored bracket per prefix
    return row


def score_batch(model, task: dict[str, Any], shift: Shift, batch: Any) -> dict[str, Any]:
    """Any kind: argmax against the targets at the batch's scored positions (a training task's batch)."""
    correct = np.zeros(batch.targets.shape, dtype=bool)
    for start, lg in logits(model, batch.tokens):
        correct[start : start + len(lg)] = lg.argmax(-1).cpu().numpy() == batch.targets[start : start + len(lg)]
    scored = batch.score_mask
    last = np.where(scored.any(axis=1), scored.shape[1] - 1 - np.argmax(scored[:, ::-1], axis=1), -1)
    rows = np.flatnonzero(last >= 0)
    row = _row(shift.label, shift.params, correct, scored, correct[rows, last[rows]])
    row["any_error_rate"] = float((scored & ~correct).any(axis=1).mean())
    return row


def evaluate(
    models: dict[str, Any],
    shifts: Sequence[Shift],
    samples: int = DEFAULT_SAMPLES,
    seed: int = 0,
    progress: bool = False,
) -> list[dict[str, Any]]:
    """Every model on the same inputs of every shift; one row per (model, shift)."""

    if samples < 1:
        raise ShiftError("--samples must be ≥ 1")
    if not models:
        raise ShiftError("nothing to evaluate")
    card = next(iter(models.values())).card
    kind, task = card.task_kind, card.task
    for name, model in models.items():
        if model.card.task_kind is not kind:
            raise ShiftError(f"{name} models another task ({model.card.kind}, not {kind.name})")
        for shift in shifts:
            if shift.kind != kind.name:
                raise ShiftError(f"a {shift.kind} shift ({shift.label}) does not apply to a {kind.name} model")
            _check_length(model, shift.length())

    longest = max((s.length() for s in shifts), default=0)
    out_dim = max(m.cfg.d_vocab_out for m in models.values())
    require(
        f"{samples} inputs of up to {longest} tokens per shift",
        memory=samples * longest * (64.0 + 8 * out_dim),
        lower="--samples",
    )
    score = resolve(kind.evaluator or "sandbox_lens.interp.evaluate:score_batch")
    rows = []
    for i, shift in enumerate(progress_bar(shifts, disable=not progress, desc="shifts", unit="shift", leave=False)):
        inputs = kind.draw(task, shift, samples, seed + i)
        for name, model in models.items():
            rows.append({"model": name, **score(model, task, shift, inputs)})
    return rows


# -- the exact skyline ---------------------------------------------------------------------------
def skyline(model, length: int):
    """The exact construction of the model's task, built for inputs of up to ``length`` (or None
    when the model is itself a construction, or none applies at that length): the first of the kind's
    constructions (the registry's order) that accepts the task; None for a twin of an observation of the state,
    which no construction outputs)."""

    if model.card.construction != "trained" or observed(model.card.task) is not None:
        return None
    kind = model.card.task_kind
    source = kind.source(model.card.task)
    for name in kind.constructions:
        try:
            return build_model(name, source, max(kind.min_length, length), **kind.skyline_options)
        except ConstructionError:
            continue
    return None
