"""The gridworld "boundary detector score" of attention heads.

Theorem 12's insight: the state of a 1-D gridworld follows from the most recent time it was at
a wall (state 0 or S). A head *detects the boundary* at query position t when its largest
attention weight falls on that position. For each head this module reports the fraction of
query positions where it does, and, per block, the fraction of query positions where at least
one head does — so a constructed model and a trained one can be compared head for head.

Positions are positions of the model's token sequence (BOS, any padding prefix, then the word).
The prefix is run through the automaton from q0 like the word, BOS holds q0, and a boundary
time τ ∈ [0, t] is the last one with q_τ ∈ {0, S}.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sandbox_lens.interp.errors import AutomatonError, VocabularyError
from sandbox_lens.interp.model.run import attention_patterns
from sandbox_lens.interp.tasks.automata import Semiautomaton
from sandbox_lens.interp.tasks.gridworld import last_boundary_positions
from sandbox_lens.interp.tasks.kinds import AUTOMATON

__all__ = ["BoundaryScores", "boundary_detector_scores"]


@dataclass
class BoundaryScores:
    """Per head ``(block, head)`` and per block: fraction of query positions on the last boundary."""

    heads: dict[tuple[int, int], float]
    blocks: dict[int, float]
    queries: int


def _states_over_tokens(
    automaton: Semiautomaton, prefix_symbols: Sequence[int | None], word: Sequence[int]
) -> np.ndarray:
    """The state held at every token position: BOS (None) holds the current state, symbols move it."""
    q = automaton.initial
    out = []
    for s in [*prefix_symbols, *word]:
        if s is not None:
            q = int(automaton.delta[s, q])
        out.append(q)
    return np.array(out)


def boundary_detector_scores(model, words: np.ndarray, automaton: Semiautomaton | None = None) -> BoundaryScores:
    """Boundary-detector score of every live head of ``model`` on 1-D gridworld ``words``.

    ``model`` is a sandbox-lens ``HookedTransformer`` (it carries a ``card`` with its token
    layout); ``automaton`` defaults to the card's. ``words`` are symbol-index sequences of
    equal length.
    """
    card = model.card
    if automaton is None:
        if card.task_kind is not AUTOMATON:
            raise AutomatonError(f"the boundary detector score needs an automaton model, not a {card.kind} one")
        automaton = card.source
    if any("," in s for s in automaton.states) or automaton.states != tuple(str(q) for q in range(automaton.n_states)):
        raise AutomatonError("the boundary detector score is defined for 1-D gridworlds (states 0..S)")
    words = np.atleast_2d(np.asarray(words, dtype=np.int64))
    if words.size and (words.min() < 0 or words.max() >= automaton.n_symbols):
        raise VocabularyError(f"word symbols must be in 0..{automaton.n_symbols - 1}")
    token_to_symbol = {tok: s for s, tok in enumerate(card.io.symbol_tokens)}
    prefix_symbols = [token_to_symbol.get(tok) for tok in card.io.prefix]
    if prefix_symbols and prefix_symbols[0] is not None:
        raise AutomatonError("expected the model's token sequence to start with a BOS token")
    P = len(card.io.prefix)
    hits: dict[tuple[int, int], int] = {}
    any_hits: dict[int, int] = {}
    queries = 0
    for word in words:
        ids = card.io.encode(word)
        patterns = attention_patterns(model, ids)
        target = last_boundary_positions(_states_over_tokens(automaton, prefix_symbols, word), automaton.n_states)
        rows = np.arange(P, ids.shape[1])
        per_block: dict[int, np.ndarray] = {}
        for (block, head), pattern in patterns.items():
            ok = pattern[0, rows].argmax(axis=1) == target[rows]
            hits[(block, head)] = hits.get((block, head), 0) + int(ok.sum())
            per_block[block] = per_block.get(block, np.zeros(len(rows), bool)) | ok
        for block, ok in per_block.items():
            any_hits[block] = any_hits.get(block, 0) + int(ok.sum())
        queries += len(rows)
    return BoundaryScores(
        {k: v / queries for k, v in sorted(hits.items())},
        {k: v / queries for k, v in sorted(any_hits.items())},
        queries,
    )
