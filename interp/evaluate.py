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

import json
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from interp.errors import ConstructionError, LengthError, SandboxError
from interp.model.run import predict
from interp.tasks import ffl
from interp.tasks.automata import Semiautomaton, parse_automaton_json
from interp.tasks.batches import step_rng
from interp.tasks.dyck import Dyck

__all__ = ["Shift", "evaluate", "automaton_shifts", "ffl_shifts", "dyck_shifts", "skyline", "task_of",
           "parse_probs", "DEFAULT_SAMPLES"]

DEFAULT_SAMPLES = 500


class ShiftError(SandboxError, ValueError):
    """A shift that makes no sense for the task (probabilities of the wrong length, p outside [0, 1), ...)."""


@dataclass
class Shift:
    """One evaluation set: ``label`` for the report, ``params`` for the record, and what draws it."""

    label: str
    kind: str  # automaton | ffl | dyck
    params: dict[str, Any] = field(default_factory=dict)

    def length(self) -> int:
        return int(self.params.get("length") or self.params.get("band", (0, 0))[1])


# -- the task a model is about -------------------------------------------------------------------
def task_of(model) -> tuple[str, Any]:
    """(kind, the automaton / Dyck language / None) that a sandbox-lens model's card names."""
    task = model.card.task
    kind = task.get("kind")
    if kind == "automaton":
        return kind, parse_automaton_json(json.dumps(task["automaton"]), "<model card>")
    if kind == "dyck":
        return kind, Dyck(task["k"], task["D"], task["q"])
    if kind == "ffl":
        return kind, None
    raise ConstructionError(f"cannot evaluate a model of task kind {kind!r}")


def _check_length(model, length: int) -> None:
    card = model.card
    if length <= card.max_length:
        return
    if card.construction == "trained" and card.options.get("positional") == "learned":
        raise LengthError(f"this twin has learned positions trained up to length {card.max_length}; positions past it "
                          f"were never trained (train with --pos sinusoidal|linear|none, or --pos-shift, and --n-ctx "
                          f"to evaluate longer inputs)")
    if card.construction == "trained":
        raise LengthError(f"length {length} does not fit this twin's context ({card.max_length}; train with a larger --n-ctx)")
    raise LengthError(f"{card.construction} was built for inputs of up to {card.max_length}; got {length} "
                      f"(rebuild it with --length {length})")


# -- shifts ------------------------------------------------------------------------------------
def parse_probs(text: str, n_symbols: int) -> list[float]:
    """``"0.95,0.05"`` → a distribution over the alphabet (it must have one entry per symbol)."""
    try:
        values = [float(x) for x in text.split(",")]
    except ValueError:
        raise ShiftError(f"--probs takes comma-separated numbers, got {text!r}") from None
    if len(values) != n_symbols:
        raise ShiftError(f"--probs {text!r} has {len(values)} entries; the alphabet has {n_symbols} symbols")
    if any(not np.isfinite(v) or v < 0 for v in values) or not np.isclose(sum(values), 1.0, atol=1e-6):
        raise ShiftError(f"--probs {text!r} must be non-negative and sum to 1")
    return values


def automaton_shifts(automaton: Semiautomaton, length: int, probs: Sequence[Sequence[float]] = (),
                     counts: Sequence[int] = (), count_symbol: int = 1) -> list[Shift]:
    """Uniform words at ``length``, then one shift per distribution in ``probs`` and per count in ``counts``."""
    if length < 1:
        raise ShiftError(f"the length must be ≥ 1, got {length}")
    shifts = [Shift(f"uniform, T={length}", "automaton", {"length": length})]
    for p in probs:
        p = [float(x) for x in p]
        if len(p) != automaton.n_symbols:
            raise ShiftError(f"a distribution over {automaton.name}'s {automaton.n_symbols} symbols needs "
                             f"{automaton.n_symbols} probabilities, got {len(p)}")
        label = "Pr = (" + ", ".join(f"{x:g}" for x in p) + f"), T={length}"
        shifts.append(Shift(label, "automaton", {"length": length, "probs": p}))
    if counts and not 0 <= count_symbol < automaton.n_symbols:
        raise ShiftError(f"--count-symbol must name one of {automaton.n_symbols} symbols")
    for c in counts:
        if not 0 <= c <= length:
            raise ShiftError(f"a count must lie in 0..{length}, got {c}")
        sym = automaton.alphabet[count_symbol]
        shifts.append(Shift(f"#{sym} = {c}, T={length}", "automaton",
                            {"length": length, "count": int(c), "count_symbol": int(count_symbol)}))
    return shifts


def ffl_shifts(length: int, ps: Sequence[float] = (0.8, 0.98, 0.1)) -> list[Shift]:
    if length < 2:
        raise ShiftError(f"flip-flop inputs have at least 2 tokens, got {length}")
    out = []
    for p in ps:
        try:
            ffl.check_p(float(p))
        except SandboxError as e:
            raise ShiftError(str(e)) from None
        out.append(Shift(f"FFL({p:g}), {length} tokens", "ffl", {"length": length, "p": float(p)}))
    return out


def dyck_shifts(lang: Dyck, bands: Sequence[tuple[int, int]], qs: Sequence[float] = (),
                depths: Sequence[int] = ()) -> list[Shift]:
    """Per length band: the training law, then each other open-bracket probability ``qs``, then each
    maximum depth in ``depths`` (prefixes of Dyck_{k,D'} with D' ≤ D: deeper words are not in the
    model's language)."""
    settings = [(lang.q, lang.D), *((float(q), lang.D) for q in qs), *((lang.q, int(d)) for d in depths)]
    out = []
    for q, D in settings:
        if not 0.0 < float(q) < 1.0:
            raise ShiftError(f"q must lie in (0, 1), got {q}")
        if not 1 <= D <= lang.D:
            raise ShiftError(f"a depth shift D' must lie in 1..{lang.D} (the model's language has depth ≤ {lang.D}), got {D}")
        for lo, hi in bands:
            if not 2 <= lo <= hi:
                raise ShiftError(f"a length band needs 2 ≤ lo ≤ hi, got {lo}-{hi}")
            label = f"{lo}-{hi}, q={float(q):g}" + (f", D={D}" if D != lang.D else "")
            out.append(Shift(label, "dyck", {"band": (int(lo), int(hi)), "q": float(q), "D": int(D)}))
    return out


# -- drawing the words ---------------------------------------------------------------------------
def _automaton_words(a: Semiautomaton, shift: Shift, n: int, seed: int) -> np.ndarray:
    rng = step_rng(seed, 0, stream=5)
    T = shift.params["length"]
    if "probs" in shift.params:
        return rng.choice(a.n_symbols, size=(n, T), p=np.asarray(shift.params["probs"]) / sum(shift.params["probs"]))
    if "count" in shift.params:
        c, s = shift.params["count"], shift.params["count_symbol"]
        others = [x for x in range(a.n_symbols) if x != s]
        if not others and c != T:
            raise ShiftError(f"{a.name} has one symbol: every word of length {T} has {T} of it")
        words = rng.choice(others, size=(n, T)) if others else np.full((n, T), s)
        for row in words:  # exactly c occurrences of s at uniformly random positions
            row[rng.choice(T, size=c, replace=False)] = s
        return words
    return rng.integers(a.n_symbols, size=(n, T))


def _row(label: str, params: dict, correct: np.ndarray, scored: np.ndarray, final_ok: np.ndarray) -> dict[str, Any]:
    n_scored = int(scored.sum())
    return {"shift": label, **{k: list(v) if isinstance(v, tuple) else v for k, v in params.items()},
            "accuracy": float(correct[scored].mean()) if n_scored else float("nan"),
            "final_accuracy": float(final_ok.mean()) if final_ok.size else float("nan"),
            "scored": n_scored, "inputs": int(len(correct))}


def _evaluate_automaton(model, a: Semiautomaton, shift: Shift, words: np.ndarray) -> dict[str, Any]:
    pred = predict(model, words)
    ok = pred == a.run(words)
    row = _row(shift.label, shift.params, ok, np.ones_like(ok, dtype=bool), ok[:, -1])
    row["per_position"] = [round(float(x), 6) for x in ok.mean(axis=0)]
    row["any_error_rate"] = float((~ok).any(axis=1).mean())  # the ℓ∞ view: words with any wrong state
    return row


def _evaluate_ffl(model, shift: Shift, strings: np.ndarray) -> dict[str, Any]:
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
    row.update(read_errors=int(wrong.sum()), strings_with_error=int(wrong.any(axis=1).sum()),
               string_error_rate=float(wrong.any(axis=1).mean()), any_error_rate=float(wrong.any(axis=1).mean()))
    return row


def _evaluate_dyck(model, lang: Dyck, shift: Shift, prefixes: list[np.ndarray]) -> dict[str, Any]:
    from interp.verify.dyck import closing_only, next_token_probabilities, predicted_bracket

    lenient = closing_only(lang)
    # the thesis's accuracy: the last (closing) bracket of each prefix, predicted after the rest
    # (the last bracket is only a target: the model reads BOS and the n − 1 brackets before it)
    ok = [predicted_bracket(p[-1], lenient) == int(w[-1])
          for w, p in zip(prefixes, next_token_probabilities(model, [w[:-1] for w in prefixes]))]
    ok_arr = np.asarray(ok)
    row = _row(shift.label, shift.params, ok_arr[:, None], np.ones((len(ok_arr), 1), dtype=bool), ok_arr)
    row["any_error_rate"] = float(1 - ok_arr.mean())  # one scored bracket per prefix
    return row


def evaluate(models: dict[str, Any], shifts: Sequence[Shift], samples: int = DEFAULT_SAMPLES,
             seed: int = 0, progress: bool = False) -> list[dict[str, Any]]:
    """Every model on the same inputs of every shift; one row per (model, shift)."""
    from tqdm import tqdm

    if samples < 1:
        raise ShiftError("--samples must be ≥ 1")
    if not models:
        raise ShiftError("nothing to evaluate")
    kind, source = task_of(next(iter(models.values())))
    for name, model in models.items():
        if model.card.kind != kind:
            raise ShiftError(f"{name} models another task ({model.card.kind}, not {kind})")
        for shift in shifts:
            if shift.kind != kind:
                raise ShiftError(f"a {shift.kind} shift ({shift.label}) does not apply to a {kind} model")
            _check_length(model, shift.length())
    rows = []
    for i, shift in enumerate(tqdm(shifts, disable=not progress, desc="shifts", unit="shift", leave=False)):
        if kind == "automaton":
            inputs: Any = _automaton_words(source, shift, samples, seed + i)
        elif kind == "ffl":
            inputs = ffl.sample_ffl(shift.params["p"], samples, shift.params["length"], step_rng(seed + i, 0, stream=5))
        else:
            lang = Dyck(source.k, shift.params.get("D", source.D), shift.params["q"])
            inputs = lang.closing_prefixes(samples, shift.params["band"], seed=seed + i)
        for name, model in models.items():
            if kind == "automaton":
                row = _evaluate_automaton(model, source, shift, inputs)
            elif kind == "ffl":
                row = _evaluate_ffl(model, shift, inputs)
            else:
                row = _evaluate_dyck(model, Dyck(source.k, shift.params.get("D", source.D), shift.params["q"]), shift, inputs)
            rows.append({"model": name, **row})
    return rows


# -- the exact skyline ---------------------------------------------------------------------------
#: Tried in this order for an automaton twin; the first that accepts the automaton is the skyline.
SKYLINE_ORDER = ("modular_counter", "memory", "gridworld", "krohn_rhodes", "prefix_scan")


def skyline(model, length: int):
    """The exact construction of the model's task, built for inputs of up to ``length`` (or None
    when the model is itself a construction, or none applies at that length)."""
    from constructions import build_model

    if model.card.construction != "trained":
        return None
    kind, source = task_of(model)
    if kind == "ffl":
        return build_model("ffl", None, max(2, length))
    if kind == "dyck":
        return build_model("dyck", source, max(1, length), variant="stack")
    for name in SKYLINE_ORDER:
        try:
            return build_model(name, source, length)
        except ConstructionError:
            continue
    return None
