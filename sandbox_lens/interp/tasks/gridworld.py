"""Gridworld facts used by analyses (thesis §3.4.4, Theorem 12's insight).

The state of a 1-D gridworld follows from the most recent time it was at a wall (state 0 or S):
:func:`last_boundary_positions` finds that time for every position.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sandbox_lens.interp.tasks.automata import Semiautomaton

__all__ = ["last_boundary_positions", "is_line_grid", "GridAxis", "grid_axes", "start_moves", "window_states"]


def is_line_grid(automaton: Semiautomaton) -> bool:
    """True for a 1-D gridworld as the catalogue names it: states ``0..S``, name ``grid…``."""
    return automaton.name.startswith("grid") and automaton.states == tuple(str(q) for q in range(automaton.n_states))


def last_boundary_positions(states: np.ndarray, n_states: int) -> np.ndarray:
    """For every position t, the last position τ ≤ t whose state is 0 or n−1 (−1 if none)."""
    at_wall = (states == 0) | (states == n_states - 1)
    idx = np.where(at_wall, np.arange(len(states)), -1)
    return np.maximum.accumulate(idx)


@dataclass(frozen=True)
class GridAxis:
    """One axis of a gridworld: its cells and which symbols move along it (−1, 0, +1)."""

    name: str
    cells: int
    step: tuple[int, ...]  # per automaton symbol
    initial: int

    @property
    def S(self) -> int:
        return self.cells - 1


def grid_axes(automaton: Semiautomaton) -> list[GridAxis] | None:
    """Recognise a 1-D or 2-D gridworld (any symbol order, optional no-ops): its axes, else None.

    1-D: n states 0..n−1 in a row; every symbol moves one step left, right, or not at all,
    clamped at the walls. 2-D: states named "x,y" as in the catalogue's ``grid<a>x<b>``.
    """
    n = automaton.n_states
    names = list(automaton.states)
    if all("," in s for s in names):
        try:
            coords = [tuple(int(v) for v in s.split(",")) for s in names]
        except ValueError:
            return None
        a, b = max(c[0] for c in coords) + 1, max(c[1] for c in coords) + 1
        if sorted(coords) != [(x, y) for x in range(a) for y in range(b)]:
            return None
        index = {c: i for i, c in enumerate(coords)}
        steps: list[list[int]] = [[], []]
        for s in range(automaton.n_symbols):
            found = None
            for dx, dy in ((-1, 0), (1, 0), (0, -1), (0, 1), (0, 0)):
                if all(
                    automaton.delta[s, index[(x, y)]] == index[(min(max(x + dx, 0), a - 1), min(max(y + dy, 0), b - 1))]
                    for x, y in coords
                ):
                    found = (dx, dy)
                    break
            if found is None:
                return None
            steps[0].append(found[0])
            steps[1].append(found[1])
        x0, y0 = coords[automaton.initial]
        return [GridAxis("x", a, tuple(steps[0]), x0), GridAxis("y", b, tuple(steps[1]), y0)]
    if names != [str(q) for q in range(n)] or n < 2:
        return None
    step = []
    for s in range(automaton.n_symbols):
        row = [int(v) for v in automaton.delta[s]]
        for d in (-1, 1, 0):
            if row == [min(max(q + d, 0), n - 1) for q in range(n)]:
                step.append(d)
                break
        else:
            return None
    return [GridAxis("", n, tuple(step), automaton.initial)]


def start_moves(axis: GridAxis) -> list[int]:
    """Algorithm 1's start (thesis §3.4.4.4, erratum D5): S + 1 moves down, then the initial cell's moves up, so
    that a complete window of S + 1 visited values exists before the first real move and the walk stands on
    the initial cell. Moves are −1 / +1 along the axis."""
    return [-1] * (axis.S + 1 if axis.S else 0) + [1] * axis.initial


def window_states(z: int, latest: dict[int, int], S: int) -> int:
    """Algorithm 1 at one position: the state S − s of the most recent complete window s (values z + s − S ..
    z + s all visited, scored by the older of its endpoints' latest visits ``latest``), −1 if none is complete."""
    best, state = -np.inf, -1
    for s in range(S + 1):
        lo, hi = latest.get(int(z) + s - S), latest.get(int(z) + s)
        if lo is not None and hi is not None and min(lo, hi) > best:
            best, state = min(lo, hi), S - s
    return state
