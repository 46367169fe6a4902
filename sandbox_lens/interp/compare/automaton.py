"""The automaton adapter of `interp compare`: predict q_t for any catalogue automaton; the
constructions are those of the registry that accept it (e.g. ``modular_counter`` and
``prefix_scan`` for parity; ``gridworld``, ``krohn_rhodes`` and ``prefix_scan`` for ``grid9``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from sandbox_lens.interp.compare.canonical import (
    AfterBos,
    ModelInputs,
    canonical_lookback,
    canonical_prefix,
    canonical_uniform,
)
from sandbox_lens.interp.errors import ConstructionError
from sandbox_lens.interp.model.hooked import to_hooked
from sandbox_lens.interp.streams import Stream
from sandbox_lens.interp.tasks.automata import Semiautomaton
from sandbox_lens.interp.tasks.batches import AutomatonTask, step_rng
from sandbox_lens.interp.tasks.gridworld import is_line_grid, last_boundary_positions
from sandbox_lens.interp.tasks.kinds import AUTOMATON
from sandbox_lens.probes.attention import target_reference

__all__ = ["AutomatonComparison"]

BOUNDARY_DISTANCE_CAP = 8  # "distance to the last boundary" is probed as a class 0..8 (8 = 8 or more)


class AutomatonComparison(AfterBos):
    """Predict q_t at every position of a catalogue automaton's words (thesis §3.4.2)."""

    kind = "automaton"
    prefix_label, scored_positions = "prefix", "every position"

    theorem3 = False  # Theorem 3's random-network mask is a Dyck demonstration

    @classmethod
    def from_task(cls, task: AutomatonTask) -> AutomatonComparison:
        """The adapter for a training task (the registry's ``comparison`` of the automaton kind); refused for a
        twin of an observation of the state (the constructions output the state)."""
        if getattr(task, "observe", None) is not None:
            raise ConstructionError(
                f"{task.name}: the twin outputs an observation of the state, the constructions the state itself; "
                "there is nothing to compare its outputs with"
            )
        return cls(task.automaton, task.length)

    def __init__(self, automaton: Semiautomaton, length: int = 16) -> None:
        self.automaton, self.length = automaton, int(length)
        self.task = AutomatonTask(automaton, length)
        a = automaton
        self.is_grid = is_line_grid(a)
        self.resets = [s for s in range(a.n_symbols) if len(set(a.delta[s].tolist())) == 1]
        self.latent_names = ("state", *(("distance to the last boundary",) if self.is_grid else ()))
        # Look-backs by powers of two: the prefix scan's heads (Theorem 10) look back 2^j.
        self.lookbacks = [2**j for j in range(1, max(1, (self.length - 1).bit_length()))]
        self.reference_names = (
            "uniform",
            "previous token",
            *(f"look-back {k}" for k in self.lookbacks),
            "prefix",
            *(("last boundary",) if self.is_grid else ()),
            *(("last reset",) if self.resets else ()),
        )

    @property
    def title(self) -> str:
        return f"{self.automaton.name}, state at every position (T = {self.length})"

    def train_defaults(self) -> dict[str, Any]:
        from sandbox_lens.interp.train import task_defaults

        return task_defaults(self.task)  # the same as `interp train`'s

    def constructions(self, names: Sequence[str] | None, seed: int) -> dict[str, Any]:
        from sandbox_lens.constructions import build

        out = {}
        for name in names or AUTOMATON.constructions:
            try:
                out[name] = to_hooked(build(name, self.automaton, self.length))
            except ConstructionError:
                if names:  # asked for by name: say why not
                    raise
        if not out:
            raise ConstructionError(f"no construction accepts {self.automaton.name}")
        return out

    def words(self, n: int, seed: int) -> np.ndarray:
        return step_rng(seed, 0, Stream.ANALYSIS_WORDS).integers(self.automaton.n_symbols, size=(n, self.length))

    def example_word(self, seed: int) -> np.ndarray:
        return self.words(1, seed + 1)[0][: min(self.length, 16)]

    def display_tokens(self, model, word: Sequence[int] | np.ndarray) -> list[str]:
        return model.card.token_names(word)

    def inputs(self, model, words: np.ndarray, with_latents: bool = True) -> ModelInputs:
        io = model.card.io
        words = np.atleast_2d(np.asarray(words, dtype=np.int64))
        P = len(io.prefix)
        tokens = io.encode(words)
        states = self.automaton.run(words)
        targets = np.zeros_like(tokens)
        targets[:, P:] = states
        mask = np.zeros(tokens.shape, dtype=bool)
        mask[:, P:] = True
        out = ModelInputs(tokens, targets, mask, mask, prefix=P)
        if with_latents:
            out.latents = {"state": (targets, mask)}
            if self.is_grid:
                last = np.array(
                    [
                        last_boundary_positions(
                            np.concatenate([[self.automaton.initial], row]), self.automaton.n_states
                        )[1:]
                        for row in states
                    ]
                )
                distance = np.zeros_like(tokens)
                distance[:, P:] = np.minimum(np.arange(1, words.shape[1] + 1) - last, BOUNDARY_DISTANCE_CAP)
                out.latents["distance to the last boundary"] = (distance, mask)
        return out

    def references(self, word: Sequence[int]) -> dict[str, np.ndarray]:
        word = np.asarray(word, dtype=np.int64)
        T = len(word)
        refs = {
            "uniform": canonical_uniform(T),
            "previous token": canonical_lookback(T, 1),
            **{f"look-back {k}": canonical_lookback(T, k) for k in self.lookbacks},
            "prefix": canonical_prefix(T),
        }
        if self.is_grid:
            states = np.concatenate([[self.automaton.initial], self.automaton.run(word[None])[0]])
            refs["last boundary"] = target_reference(last_boundary_positions(states, self.automaton.n_states))[1:]
        if self.resets:
            is_reset = np.isin(word, self.resets)
            last = np.maximum.accumulate(np.where(is_reset, np.arange(1, T + 1), 0))
            refs["last reset"] = target_reference(np.concatenate([[0], last]))[1:]
        return refs
