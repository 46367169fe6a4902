"""Gridworld facts used by analyses (thesis §3.4.4, Theorem 12's insight).

The state of a 1-D gridworld follows from the most recent time it was at a wall (state 0 or S):
:func:`last_boundary_positions` finds that time for every position.
"""

from __future__ import annotations

import numpy as np

from interp.tasks.automata import Semiautomaton

__all__ = ["last_boundary_positions", "is_line_grid"]


def is_line_grid(automaton: Semiautomaton) -> bool:
    """True for a 1-D gridworld as the catalogue names it: states ``0..S``, name ``grid…``."""
    return automaton.name.startswith("grid") and automaton.states == tuple(str(q) for q in range(automaton.n_states))


def last_boundary_positions(states: np.ndarray, n_states: int) -> np.ndarray:
    """For every position t, the last position τ ≤ t whose state is 0 or n−1 (−1 if none)."""
    at_wall = (states == 0) | (states == n_states - 1)
    idx = np.where(at_wall, np.arange(len(states)), -1)
    return np.maximum.accumulate(idx)
