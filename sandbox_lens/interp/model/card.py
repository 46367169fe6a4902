"""What travels with a model: how task inputs become tokens (:class:`TokenIO`) and what the model
is (:class:`ModelCard`: construction, the task it models, verified lengths and dtypes, labels).

A card's ``task`` is one dict with a ``"kind"`` that the task-kind registry knows
(:mod:`sandbox_lens.interp.tasks.kinds`); the thesis's three:

* ``{"kind": "automaton", "automaton": {...}}`` — predict q_t after σ_1..σ_t (the JSON automaton);
* ``{"kind": "dyck", "k": K, "D": D, "q": q}`` — next-token prediction of Dyck_{k,D};
* ``{"kind": "ffl", ...}`` — the flip-flop language.

Trained twins add the training length (``"length"``) and, for FFL, ``"p"``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sandbox_lens.interp.errors import VocabularyError
from sandbox_lens.interp.tasks.kinds import TaskKind, canonical_name, task_kind

__all__ = ["TokenIO", "ModelCard", "normalise_task"]


def normalise_task(task: Mapping[str, Any]) -> dict[str, Any]:
    """A task dict with its kind spelled as today (an older name, e.g. ``flipflop``, resolved by the registry)."""
    out = dict(task)
    if "kind" in out:
        out["kind"] = canonical_name(out["kind"])
    return out


@dataclass(frozen=True)
class TokenIO:
    """How task inputs become model tokens and where outputs are read.

    The model input for a word σ_1..σ_T (symbol indices) is ``prefix + [symbol_tokens[σ_t] for t]``,
    and the output for position t is read at token position ``len(prefix) + t - 1``.
    """

    prefix: tuple[int, ...]
    symbol_tokens: tuple[int, ...]

    @staticmethod
    def after_bos(n_symbols: int) -> TokenIO:
        """Token 0 is BOS (the attention sink / the write of q0); symbol σ is token 1 + σ."""
        return TokenIO(prefix=(0,), symbol_tokens=tuple(range(1, n_symbols + 1)))

    @property
    def n_symbols(self) -> int:
        return len(self.symbol_tokens)

    def encode(self, words: Any) -> np.ndarray:
        """Token ids ``[batch, len(prefix) + T]`` for symbol-index words ``[batch, T]`` (or one word)."""
        words = np.atleast_2d(np.asarray(words, dtype=np.int64))
        if words.size and (words.min() < 0 or words.max() >= self.n_symbols):
            raise VocabularyError(f"input symbol index out of range: the model knows {self.n_symbols} symbols")
        prefix = np.broadcast_to(np.asarray(self.prefix, dtype=np.int64), (len(words), len(self.prefix)))
        return np.concatenate([prefix, np.asarray(self.symbol_tokens, dtype=np.int64)[words]], axis=1)

    def decode(self, tokens: Any) -> np.ndarray:
        """The symbol indices of ``tokens`` after the prefix (−1 for a token that is no symbol)."""
        tokens = np.atleast_2d(np.asarray(tokens, dtype=np.int64))[:, len(self.prefix) :]
        table = np.full(max(self.symbol_tokens, default=-1) + 1, -1, dtype=np.int64)
        table[list(self.symbol_tokens)] = np.arange(self.n_symbols)
        inside = (tokens >= 0) & (tokens < len(table))
        return np.where(inside, table[np.clip(tokens, 0, len(table) - 1)], -1)

    def to_dict(self) -> dict[str, list[int]]:
        return {"prefix": list(self.prefix), "symbol_tokens": list(self.symbol_tokens)}

    @staticmethod
    def from_dict(d: Mapping[str, Sequence[int]]) -> TokenIO:
        return TokenIO(tuple(int(x) for x in d["prefix"]), tuple(int(x) for x in d["symbol_tokens"]))


@dataclass
class ModelCard:
    """Metadata that travels with a built or trained model (saved next to its weights)."""

    construction: str
    theorem: str
    task: dict[str, Any]
    io: TokenIO
    max_length: int
    verified_dtypes: tuple[str, ...]
    input_tokens: list[str]
    output_names: list[str]
    residual_labels: list[str]
    block_labels: list[str]
    attention_blocks: list[int]
    options: dict[str, Any] = field(default_factory=dict)
    notes: str = ""
    #: a construction's high-level variable sites (``sandbox_lens.interp.model.spec.variable_site`` with its ``hook``); empty
    #: for trained models and cards saved before they were recorded
    variables: list[dict[str, Any]] = field(default_factory=list)

    @property
    def kind(self) -> str:
        """The task kind's name: ``automaton``, ``dyck``, ``ffl`` or another registered kind's."""
        return str(self.task.get("kind", ""))

    @property
    def task_kind(self) -> TaskKind:
        """The task kind itself (:mod:`sandbox_lens.interp.tasks.kinds`): what the task means and how it is checked."""
        return task_kind(self.task)

    @property
    def source(self) -> Any:
        """What the task is about: the automaton, the Dyck language, ... (the kind reads it from ``task``)."""
        return self.task_kind.source(self.task)

    @property
    def attention_layers(self) -> int:
        return len(self.attention_blocks)

    def token_names(self, word: Any) -> list[str]:
        """The names of the tokens the model reads for one word (its prefix, then the word's symbols)."""
        return [self.input_tokens[i] for i in self.io.encode(word)[0]]

    def to_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["io"] = self.io.to_dict()
        d["verified_dtypes"] = list(self.verified_dtypes)
        return d

    @staticmethod
    def from_dict(d: Mapping[str, Any]) -> ModelCard:
        """Read a card, including the first format's (an ``automaton`` field beside an empty ``task``)."""
        d = dict(d)
        automaton = d.pop("automaton", None)
        if automaton and not d.get("task"):
            d["task"] = {"kind": "automaton", "automaton": automaton}
        d["task"] = normalise_task(d.get("task") or {})
        task_kind(d["task"])  # an unknown kind is refused here, in one line
        d["io"] = TokenIO.from_dict(d["io"])
        d["verified_dtypes"] = tuple(d["verified_dtypes"])
        return ModelCard(**d)
