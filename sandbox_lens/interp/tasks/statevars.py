"""An automaton's variables beside its state, from the constructions that compute it (issue 29).

:class:`~sandbox_lens.interp.tasks.highlevel.StateModel` offers these next to ``state`` where they exist:

* **cascade levels** (Definition 6, Lemma 21): for an automaton with a known Krohn–Rhodes cascade (the 1-D
  gridworlds' flip-flop cascade, or the cascade a ``krohn_rhodes`` model was built from), each level's state
  ``q^{(i)}_p``, named by the level. Setting it to the source's value at p gives the output
  h(q^{(1)}_p, …, source's q^{(i)}_p, …) (parallel reading: output p only; an unreachable product state has no
  output and is not scored) or, in the recurrent reading, the cascade run on from that product state.
* **window maps** of the prefix scan (Theorem 10, Lemma 14): ``window<l>`` is the transition map of the
  2^l symbols ending at p, δ_p ∘ … ∘ δ_{p−2^l+1} (positions before the word hold the constant map to q0).
  Setting it at p rebuilds the scan tree above that node: w_{l+1}(t) = w_l(t) ∘ w_l(t − 2^l) reads it at
  t = p and t = p + 2^l, and so on up to the last layer, whose map at t, applied to q0, is the output.
  Only the outputs the node reaches are scored. Offered when the maps a window can hold — the transformation
  monoid the symbols generate, and the constant maps (windows that begin before the word) — are at most
  :data:`MAX_WINDOW_VALUES` (S5: 120 + 5, not 5^5; :func:`window_maps`); each map is one class, numbered in that
  list. Asked for by name (``--variable window2``), not aligned by default (there are ⌈log₂T⌉ − 1 of them).
* **group coordinates** of a permutation automaton of a solvable group (:mod:`sandbox_lens.interp.tasks.groupvars`):
  the Krohn–Rhodes levels ``level<i>`` and the ``sign`` of the prefix. Asked for by name.
* **symbol** σ_p, the input itself: setting it at p reruns the automaton from p on, so every output t ≥ p is
  scored (a counter reads it at every later position in one attention layer: the rival algorithms of
  :mod:`sandbox_lens.interp.causal.algorithms` ask for it where the count is made). Asked for by name.
* **gridworld** (Theorem 12, Algorithm 1; 1-D grids): ``displacement`` z_p, the unclamped prefix sum of
  the moves, and ``boundary`` lo_p, the value of z at the start of the most recent complete window of S + 1
  visited values — where the walk last stood at a wall — so that q_p = z_p − lo_p. Setting the
  displacement runs Algorithm 1 at p on the base's visits with z_p replaced (recurrent reading: every later
  z moves with it); setting the boundary gives z_p − the source's lo_p where that is a cell.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from sandbox_lens.interp.errors import AutomatonError
from sandbox_lens.interp.tasks.cascade import known_cascade
from sandbox_lens.interp.tasks.gridworld import grid_axes, start_moves, window_states
from sandbox_lens.interp.tasks.groups import transformation_semigroup
from sandbox_lens.interp.tasks.groupvars import group_variables

__all__ = [
    "LevelVariables",
    "WindowVariables",
    "GridVariables",
    "SymbolVariables",
    "MAX_WINDOW_VALUES",
    "state_variables",
    "window_maps",
]

#: the most window maps a prefix scan's window can hold (each a class, for probes); beyond this they are not offered
MAX_WINDOW_VALUES = 256
#: a cascade's levels are aligned by default up to this many (more: ask for them by name)
DEFAULT_LEVELS = 3


def _scored(labels: np.ndarray) -> np.ndarray:
    return labels >= 0


class LevelVariables:
    """The levels of a cascade that simulates the automaton (see the module docstring)."""

    def __init__(self, cascade: Any) -> None:
        self.cascade = cascade
        states = cascade.product_states()
        self.states = np.array(states, dtype=np.int64)  # [P, k]
        index = {p: i for i, p in enumerate(states)}
        self.index = index
        self.step = np.array([[index[cascade.step(p, s)] for p in states] for s in range(len(cascade.alphabet))])
        out = cascade.output if cascade.target is not None else {p: i for i, p in enumerate(states)}
        self.output = np.array([out.get(p, -1) for p in states], dtype=np.int64)
        self.names = tuple(lv.name for lv in cascade.levels)
        self.default = self.names if len(self.names) <= DEFAULT_LEVELS else ()
        self.radix = np.cumprod([1] + [lv.automaton.n_states for lv in cascade.levels][::-1])[::-1][1:]

    def run(self, words: np.ndarray) -> np.ndarray:
        """The product state's index after each position ``[n, T]``."""
        n, T = words.shape
        out = np.empty((n, T), dtype=np.int64)
        p = np.full(n, self.index[self.cascade.initial])
        for t in range(T):
            p = self.step[words[:, t], p]
            out[:, t] = p
        return out

    def values(self, words: np.ndarray, name: str) -> tuple[np.ndarray, np.ndarray, int]:
        i = self.names.index(name)
        return (
            self.states[self.run(words)][..., i],
            np.ones(words.shape, dtype=bool),
            self.cascade.levels[i].automaton.n_states,
        )

    def counterfactual(
        self, base: np.ndarray, source: np.ndarray, position: int, name: str, mode: str
    ) -> tuple[np.ndarray, np.ndarray]:
        i = self.names.index(name)
        run = self.run(base)
        labels = self.output[run]
        swapped = self.states[run[:, position]].copy()
        swapped[:, i] = self.states[self.run(source)[:, position], i]
        p = swapped @ self.radix  # product_states() is itertools.product order: mixed radix
        labels[:, position] = self.output[p]
        scored = np.zeros(base.shape, dtype=bool)
        scored[:, position] = True
        if mode == "recurrent":
            for t in range(position + 1, base.shape[1]):
                p = self.step[base[:, t], p]
                labels[:, t] = self.output[p]
            scored[:, position:] = True
        return labels, scored & _scored(labels)


def window_maps(automaton: Any, limit: int = MAX_WINDOW_VALUES) -> np.ndarray | None:
    """Every map a window of the prefix scan can hold, sorted (``[m, |Q|]``, images of every state): the products
    δ_{σ_k} ∘ … ∘ δ_{σ_1} of one or more symbols (the transformation monoid the symbols generate) and the constant
    maps (a window that begins before the word starts from q0). None when there are more than ``limit``. Computed
    once per automaton table and limit."""
    delta = np.asarray(automaton.delta)
    key = (delta.shape, delta.tobytes(), limit)
    if key not in _WINDOW_MAPS:
        _WINDOW_MAPS[key] = _window_maps(automaton, limit)
    return _WINDOW_MAPS[key]


#: :func:`window_maps` by transition table and limit
_WINDOW_MAPS: dict[tuple[Any, bytes, int], np.ndarray | None] = {}


def _window_maps(automaton: Any, limit: int) -> np.ndarray | None:
    Q = automaton.n_states
    try:
        monoid = transformation_semigroup(automaton, max_size=limit)
    except AutomatonError:
        return None
    found = set(monoid.elements) | {(q,) * Q for q in range(Q)}
    return np.array(sorted(found), dtype=np.int64) if len(found) <= limit else None


class WindowVariables:
    """The prefix scan's window maps (see the module docstring); ``known``: :func:`window_maps`'s list."""

    def __init__(self, automaton: Any, known: np.ndarray | None = None) -> None:
        self.automaton = automaton
        self.default: tuple[str, ...] = ()
        self.known = window_maps(automaton, limit=automaton.n_states**automaton.n_states) if known is None else known
        self.index = {tuple(m): i for i, m in enumerate(self.known.tolist())}  # a map's class

    def accepts(self, name: str) -> bool:
        return name.startswith("window") and name[6:].isdigit() and int(name[6:]) >= 1

    def maps(self, words: np.ndarray, top: int) -> list[np.ndarray]:
        """The window maps ``[n, T, |Q|]`` (images of every state) of layers 0..top."""
        a = self.automaton
        layers = [a.delta[words]]  # [n, T, Q]: δ_σ as the images of every state
        for l in range(1, top + 1):
            layers.append(self.compose(layers[-1], 2 ** (l - 1)))
        return layers

    def compose(self, w: np.ndarray, shift: int) -> np.ndarray:
        """w_l(t) = w_{l−1}(t) ∘ w_{l−1}(t − shift): the older window first; before the word, the constant q0."""
        older = np.full_like(w, self.automaton.initial)
        if shift < w.shape[1]:
            older[:, shift:] = w[:, :-shift]
        return np.take_along_axis(w, older, axis=-1)

    def top(self, T: int, l: int) -> int:
        return max(l, 1, math.ceil(math.log2(T)) if T > 1 else 1)

    def values(self, words: np.ndarray, name: str) -> tuple[np.ndarray, np.ndarray, int]:
        """Each window map's index in :attr:`known` (its class), every position defined, the number of classes."""
        l = int(name[6:])
        w = self.maps(words, l)[l]
        rows, inverse = np.unique(w.reshape(-1, w.shape[-1]), axis=0, return_inverse=True)
        classes = np.array([self.index[tuple(r)] for r in rows.tolist()], dtype=np.int64)
        return classes[inverse.reshape(-1)].reshape(words.shape), np.ones(words.shape, dtype=bool), len(self.known)

    def counterfactual(
        self, base: np.ndarray, source: np.ndarray, position: int, name: str, mode: str
    ) -> tuple[np.ndarray, np.ndarray]:
        l, T = int(name[6:]), base.shape[1]
        top = self.top(T, l)
        w = self.maps(base, l)[l].copy()
        w[:, position] = self.maps(source, l)[l][:, position]
        reach = np.zeros(T, dtype=bool)
        reach[position] = True
        for k in range(l + 1, top + 1):
            shift = 2 ** (k - 1)
            w = self.compose(w, shift)
            if shift < T:
                reach[shift:] |= reach[:-shift].copy()
        labels = w[..., self.automaton.initial]
        return labels, np.broadcast_to(reach, base.shape).copy()


class GridVariables:
    """A 1-D gridworld's displacement and last boundary (see the module docstring)."""

    names = default = ("displacement", "boundary")

    def __init__(self, automaton: Any, axis: Any) -> None:
        self.automaton, self.axis = automaton, axis
        self.start = np.cumsum([0] + [int(m) for m in start_moves(axis)])[1:]  # z during Algorithm 1's start

    def z(self, words: np.ndarray) -> np.ndarray:
        z0 = self.start[-1] if len(self.start) else 0
        return z0 + np.cumsum(np.asarray(self.axis.step)[words], axis=1)

    def visits(self) -> dict[int, int]:
        """The latest visit time of each value of z during Algorithm 1's start (times before 0)."""
        return {int(v): i - len(self.start) for i, v in enumerate(self.start)}

    def walk(self, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Algorithm 1 along each row of ``z``: (states, boundaries lo = z − state) ``[n, T]``."""
        n, T = z.shape
        states = np.empty((n, T), dtype=np.int64)
        for r in range(n):
            latest = self.visits()
            for t in range(T):
                latest[int(z[r, t])] = t
                states[r, t] = window_states(z[r, t], latest, self.axis.S)
        return states, z - states

    def values(self, words: np.ndarray, name: str) -> tuple[np.ndarray, np.ndarray, int]:
        z = self.z(words)
        v = z if name == "displacement" else self.walk(z)[1]
        span = words.shape[1] + len(self.start) + self.axis.S + 1
        return np.clip(v + span, 0, 2 * span), np.ones(words.shape, dtype=bool), 2 * span + 1

    def counterfactual(
        self, base: np.ndarray, source: np.ndarray, position: int, name: str, mode: str
    ) -> tuple[np.ndarray, np.ndarray]:
        z, zs = self.z(base), self.z(source)
        states, lo = self.walk(z)
        labels = states.copy()
        scored = np.zeros(base.shape, dtype=bool)
        if name == "boundary":
            q = z[:, position] - self.walk(zs)[1][:, position]
            ok = (q >= 0) & (q <= self.axis.S)
            labels[:, position] = np.where(ok, q, -1)
            scored[:, position] = ok
            return labels, scored
        z2 = z.copy()
        if mode == "recurrent":
            z2[:, position:] += (zs[:, position] - z[:, position])[:, None]
        else:
            z2[:, position] = zs[:, position]
        last = base.shape[1] if mode == "recurrent" else position + 1
        for r in range(len(base)):
            latest = self.visits()
            for t in range(last):
                latest[int(z2[r, t])] = t
                if t >= position:
                    labels[r, t] = window_states(z2[r, t], latest, self.axis.S)
        scored[:, position:last] = True
        return labels, scored & _scored(labels)


class SymbolVariables:
    """The input symbol at each position (see the module docstring)."""

    names = ("symbol",)
    default: tuple[str, ...] = ()

    def __init__(self, automaton: Any) -> None:
        self.automaton = automaton

    def values(self, words: np.ndarray, name: str) -> tuple[np.ndarray, np.ndarray, int]:
        return np.asarray(words, dtype=np.int64), np.ones(words.shape, dtype=bool), len(self.automaton.alphabet)

    def counterfactual(
        self, base: np.ndarray, source: np.ndarray, position: int, name: str, mode: str
    ) -> tuple[np.ndarray, np.ndarray]:
        words = np.array(base, dtype=np.int64, copy=True)
        words[:, position] = source[:, position]
        a = self.automaton
        if getattr(a, "feasible", None) is not None:  # an illegal symbol here has no output to score
            legal = _legal(a, words)
            labels = np.where(legal, a.run(np.where(legal, words, base)), -1)
        else:
            labels = a.run(words)
        scored = np.zeros(base.shape, dtype=bool)
        scored[:, position:] = True
        return labels, scored & _scored(labels)


def _legal(automaton: Any, words: np.ndarray) -> np.ndarray:
    """``[n, T]``: whether each word is still legal after each position (False from its first illegal symbol on)."""
    n, T = words.shape
    ok = np.ones((n, T), dtype=bool)
    q = np.full(n, automaton.initial)
    alive = np.ones(n, dtype=bool)
    for t in range(T):
        alive &= automaton.feasible[words[:, t], q]
        ok[:, t] = alive
        q = automaton.delta[words[:, t], q]
    return ok


def state_variables(automaton: Any, cascade: Any = None) -> list[Any]:
    """The families of variables ``automaton`` has beside its state (``cascade``: the one a model was built from;
    otherwise the automaton's known cascade, if any)."""

    out: list[Any] = []
    cascade = cascade if cascade is not None else known_cascade(automaton)
    if cascade is not None:
        out.append(LevelVariables(cascade))
    axes = grid_axes(automaton)
    if axes is not None and len(axes) == 1 and axes[0].S >= 1:
        out.append(GridVariables(automaton, axes[0]))
    known = window_maps(automaton)
    if known is not None:
        out.append(WindowVariables(automaton, known))

    group = group_variables(automaton)
    if group is not None:
        out.append(group)
    out.append(SymbolVariables(automaton))
    return out
