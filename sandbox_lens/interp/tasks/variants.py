"""Variants of the training tasks the later experiments train (each a registry kind of its own):

* :class:`DyckCopyTask` — copying (thesis §3.6.5.1): the output at every bracket is that bracket itself.
* :class:`StackTopTask` — the stack of Dyck observed through its top (Fig. 3.18's Dyck_{4,8} column), for stacks
  too many for the catalogue's automata.
* :class:`ScratchpadTask` — an automaton with a scratchpad (thesis §3.4.5.2): the states written between the
  symbols, BOS σ_1 q_1 σ_2 q_2 … σ_T; the loss reads q_t at σ_t (teacher forcing).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from sandbox_lens.interp.errors import AutomatonError
from sandbox_lens.interp.tasks.automata import Semiautomaton
from sandbox_lens.interp.tasks.batches import AutomatonTask, Batch, DyckTask, TokenLayout

__all__ = ["DyckCopyTask", "StackTopTask", "ScratchpadTask"]


class DyckCopyTask(DyckTask):
    """Copying Dyck prefixes (thesis §3.6.5.1, Figs. 3.41–3.43): at every bracket the output is the bracket itself
    (the model "predicts the current token"); BOS is not scored. Inputs are those of :class:`DyckTask` (BOS and
    the first ``length − 1`` brackets), so a copying twin has the next-token twin's shape."""

    kind = "dyck-copy"

    @property
    def name(self) -> str:
        return f"{self.lang.name} copying (N={self.length})"

    def batch(self, rng: np.random.Generator, size: int) -> Batch:
        words = self.lang.sample(size, self.length - 1, seed=int(rng.integers(2**63)))
        tokens = np.concatenate([np.zeros((size, 1), dtype=np.int64), words + 1], axis=1)
        targets = np.concatenate([np.zeros((size, 1), dtype=np.int64), words], axis=1)
        scored = np.ones_like(tokens, dtype=bool)
        scored[:, 0] = False
        return Batch(tokens, targets, scored, scored.copy())


class StackTopTask:
    """The stack of Dyck with ``k`` types and depth ≤ ``depth``, observed through its top (thesis §3.4.5.2.1, Fig.
    3.18: Dyck_{4,8} "stack top"): BOS + a word of legal brackets drawn uniformly among the legal ones at each step
    (as the catalogue's ``dyck<k>-depth<n>`` walks), the target after each bracket the type on top of the stack (1 +
    type) or 0 when it is empty. Symbols are ordered as that automaton's: the k opens, then the k closes. Needs no
    automaton, so it reaches stacks the catalogue cannot hold (Dyck_{4,8}: 87,381).

    Args:
        k: bracket types (1–8).
        depth: the depth bound (1–64).
        length: the word length."""

    kind = "dyck-top"

    def __init__(self, k: int, depth: int, length: int) -> None:
        if not (1 <= k <= 8 and 1 <= depth <= 64 and length >= 1):
            raise AutomatonError(
                f"the stack top needs 1 ≤ k ≤ 8, 1 ≤ depth ≤ 64, length ≥ 1; got {k}, {depth}, {length}"
            )
        self.k, self.depth, self.length = int(k), int(depth), int(length)

    @property
    def name(self) -> str:
        return f"Dyck stack top (k={self.k}, depth ≤ {self.depth}, T={self.length})"

    d_vocab = property(lambda self: 2 * self.k + 1)
    d_vocab_out = property(lambda self: self.k + 1)
    n_ctx = property(lambda self: self.length + 1)

    def sample(self, rng: np.random.Generator, size: int) -> tuple[np.ndarray, np.ndarray]:
        """(words [size, T], tops [size, T]): uniform legal walks and the stack top after each bracket."""
        k = self.k
        stack = np.zeros((size, self.depth), dtype=np.int64)
        height = np.zeros(size, dtype=np.int64)
        words = np.empty((size, self.length), dtype=np.int64)
        tops = np.empty((size, self.length), dtype=np.int64)
        rows = np.arange(size)
        for t in range(self.length):
            # k opens while the stack is not full, the one legal close while it is not empty: uniform among them
            n_open = np.where(height < self.depth, k, 0)
            choice = (rng.random(size) * (n_open + (height > 0))).astype(np.int64)
            close = choice >= n_open
            top = stack[rows, np.maximum(height - 1, 0)]
            words[:, t] = np.where(close, k + top, choice)
            stack[rows[~close], height[~close]] = choice[~close]
            height += np.where(close, -1, 1)
            tops[:, t] = np.where(height > 0, 1 + stack[rows, np.maximum(height - 1, 0)], 0)
        return words, tops

    def batch(self, rng: np.random.Generator, size: int) -> Batch:
        words, tops = self.sample(rng, size)
        tokens = np.concatenate([np.zeros((size, 1), dtype=np.int64), words + 1], axis=1)
        targets = np.concatenate([np.zeros((size, 1), dtype=np.int64), tops], axis=1)
        mask = np.ones_like(tokens, dtype=bool)
        mask[:, 0] = False
        return Batch(tokens, targets, mask, mask.copy())

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "k": self.k, "depth": self.depth, "length": self.length}

    def token_layout(self) -> TokenLayout:
        opens, closes = "([{<⟨⌈⌊«"[: self.k], ")]}>⟩⌉⌋»"[: self.k]
        return TokenLayout(
            (0,), tuple(range(1, 2 * self.k + 1)), ["BOS", *opens, *closes], ["empty", *(f"top {o}" for o in opens)]
        )


class ScratchpadTask:
    """An automaton with a scratchpad (thesis §3.4.5.2, D10): the input interleaves the symbols and the states,
    BOS σ_1 q_1 σ_2 q_2 … q_{T−1} σ_T (an expanded vocabulary: BOS, the symbols, then one token per state), and
    the loss and the accuracy read q_t at the position of σ_t (⊥ at the states). Training is teacher-forced; at
    inference the states are filled in one at a time from the model's own predictions (done by the caller).

    Args:
        automaton: the semiautomaton.
        length: the word length T (2T input tokens).
        probs: the training words' symbol distribution (as :class:`AutomatonTask`'s)."""

    kind = "scratchpad"

    def __init__(self, automaton: Semiautomaton, length: int, probs: Sequence[float] | None = None) -> None:
        self.plain = AutomatonTask(automaton, length, probs=probs)  # the words, the states and their checks
        self.automaton, self.length, self.probs = automaton, self.plain.length, self.plain.probs

    @property
    def name(self) -> str:
        return self.plain.name.replace(f"(T={self.length}", f"(scratchpad, T={self.length}", 1)

    d_vocab = property(lambda self: 1 + self.automaton.n_symbols + self.automaton.n_states)
    d_vocab_out = property(lambda self: self.automaton.n_states)
    n_ctx = property(lambda self: 2 * self.length)

    def state_token(self, states: np.ndarray) -> np.ndarray:
        """The input token of each state."""
        return 1 + self.automaton.n_symbols + np.asarray(states, dtype=np.int64)

    def layout(self, words: np.ndarray, states: np.ndarray | None) -> np.ndarray:
        """BOS σ_1 q_1 … σ_T for ``words`` [n, T] with ``states`` [n, T] written in (None: the state slots hold BOS,
        to be filled in by the caller)."""
        n, T = words.shape
        tokens = np.zeros((n, 2 * T), dtype=np.int64)
        tokens[:, 1::2] = words + 1
        if states is not None:
            tokens[:, 2::2] = self.state_token(states[:, :-1])
        return tokens

    def batch(self, rng: np.random.Generator, size: int) -> Batch:
        words = self.automaton.sample(size, self.length, rng, self.probs)
        states = self.automaton.run(words)
        tokens = self.layout(words, states)
        targets = np.zeros_like(tokens)
        targets[:, 1::2] = states
        mask = np.zeros_like(tokens, dtype=bool)
        mask[:, 1::2] = True
        return Batch(tokens, targets, mask, mask.copy())

    def to_dict(self) -> dict[str, Any]:
        d = self.plain.to_dict()
        d["kind"] = self.kind
        return d

    def token_layout(self) -> TokenLayout:
        states = [f"q={s}" for s in self.automaton.states]
        return TokenLayout(
            (0,),
            tuple(range(1, self.automaton.n_symbols + 1)),
            ["BOS", *self.automaton.alphabet, *states],
            list(self.automaton.states),
        )
