"""A permutation automaton's group coordinates: the Krohn–Rhodes cascade's levels and the sign of the prefix.

For an automaton whose every symbol permutes the states, the state after p symbols is g_p(q0) with
g_p = σ_p ∘ … ∘ σ_1 in the group G the symbols generate. Two rival algorithms compute g_p through
coordinates (notes: algorithms-and-methods.md, table (a)):

* **the cascade** (Theorem 11 via Theorem 16, Lemmas 15, 17, 18; :mod:`sandbox_lens.interp.tasks.solvable`):
  along the derived series G = D_0 ⊳ D_1 ⊳ … ⊳ D_d = 1, level i counts the coordinates of its inputs
  x^i_s ∈ D_{i−1} in D_{i−1}/D_i, P^i_p = Σ_{s≤p} coord_i(x^i_s) (an attention layer's sum), and mixes the
  next level's input x^{i+1}_p = τ_i(P^i_p)⁻¹ x^i_p τ_i(P^i_p − coord_i(x^i_p)) (an MLP);
  g_p = τ_1(P^1_p) ∘ … ∘ τ_d(P^d_p). ``level<i>`` is P^i. Setting it at p to the source's value changes
  output p and the mixed input x^{i+1}_p, which every later level-(i+1) count reads: outputs t ≥ p are
  scored (t = p only at the last level). P^i at other positions is recomputed from the inputs, unchanged.
* **parity first** (Li, Guo & Andreas 2025's PAA, for groups with an odd permutation): ``sign`` is
  ε(g_p), the parity of the prefix, computed first (a counter) and used to resolve the state at p only:
  g_p = τ(ε_p) ∘ h_p with h_p in the even part G ∩ A_n and τ(1) the odd element of least order (the
  cascade's own transversal where the first level is the sign, as for S_n). Setting it at p gives
  output p = (τ(ε'_p) ∘ h_p)(q0); no other output reads it.

Both are offered by :func:`group_variables` beside the state of every permutation automaton of a solvable group
(:func:`sandbox_lens.interp.tasks.statevars.state_variables`); a group that is not solvable (S5, A5) has no cascade
but, where it has an odd permutation and at most :data:`MAX_SIGN_GROUP` elements, its ``sign``
(:class:`SignVariables`, the prefix's element by direct composition). They are asked for by name as the rival
algorithms
(:mod:`sandbox_lens.interp.causal.algorithms`) and ``interp train --align krohn_rhodes`` do; neither is aligned by
default.
"""

from __future__ import annotations

import functools
import itertools
from typing import Any

import numpy as np

from sandbox_lens.interp.errors import AutomatonError, ConstructionError
from sandbox_lens.interp.tasks.groups import compose, transformation_semigroup
from sandbox_lens.interp.tasks.solvable import inverse, order_of, plan_solvable_group

__all__ = ["GroupVariables", "SignVariables", "group_variables", "permutation_group", "is_permutation_automaton"]

#: The largest group (elements) whose sign is offered without a solvable plan: its composition table is E² entries.
MAX_SIGN_GROUP = 1024


def is_permutation_automaton(automaton: Any) -> bool:
    """Whether every symbol of ``automaton`` permutes its states (no sympy needed to tell)."""
    return all(
        sorted(automaton.transition_map(s)) == list(range(automaton.n_states)) for s in range(len(automaton.alphabet))
    )


def permutation_group(automaton: Any) -> Any | None:
    """The solvable plan (:func:`sandbox_lens.interp.tasks.solvable.plan_solvable_group`) of the group
    ``automaton``'s symbols generate, computed once per automaton; None where a symbol is not a permutation of the
    states. Raises the plan's :class:`~sandbox_lens.interp.errors.ConstructionError` for a group that is not
    solvable or too large."""
    if not is_permutation_automaton(automaton):
        return None
    return _plan(automaton.name, automaton.delta.tobytes(), automaton)


@functools.lru_cache(maxsize=64)
def _plan(name: str, delta: bytes, automaton: Any) -> Any:
    """The plan of an automaton's group, keyed by its name and table (the derived series needs sympy)."""

    maps = [automaton.transition_map(s) for s in range(len(automaton.alphabet))]
    return plan_solvable_group(maps, automaton.n_states, automaton.name)


def _parity(g: tuple[int, ...]) -> int:
    return sum(1 for i, j in itertools.combinations(range(len(g)), 2) if g[i] > g[j]) % 2


class _Signed:
    """A permutation group's elements, their composition table, and the prefix's ``sign`` (parity first): what
    :class:`GroupVariables` and :class:`SignVariables` share. ``_group(words)`` gives each prefix's element."""

    default: tuple[str, ...] = ()
    names: tuple[str, ...] = ()

    def _elements(self, automaton: Any, elements: list[tuple[int, ...]]) -> None:
        self.automaton = automaton
        self.index = {g: i for i, g in enumerate(elements)}
        self.compose = np.array([[self.index[compose(f, g)] for g in elements] for f in elements], dtype=np.int64)
        self.image = np.array([g[automaton.initial] for g in elements], dtype=np.int64)
        self.symbol = np.array([self.index[automaton.transition_map(s)] for s in range(len(automaton.alphabet))])
        odd = [g for g in elements if _parity(g)]
        self.has_sign = bool(odd)
        if odd:
            lift = min(odd, key=lambda g: (order_of(g), g))
            self.sign = np.array([_parity(g) for g in elements], dtype=np.int64)
            self.lift = np.array([self.index[tuple(range(len(lift)))], self.index[lift]], dtype=np.int64)
            self.inverse = np.array([self.index[inverse(g)] for g in elements], dtype=np.int64)

    def _group(self, words: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _sign_values(self, words: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
        return self.sign[self._group(words)], np.ones(words.shape, dtype=bool), 2

    def _sign_counterfactual(
        self, base: np.ndarray, source: np.ndarray, position: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """Output p = (τ(ε'_p) ∘ h_p)(q0): the base's even part with the source's sign; no other output reads it."""
        scored = np.zeros(base.shape, dtype=bool)
        g = self._group(base)
        labels = self.image[g]
        eps = self.sign[self._group(source)[:, position]]
        h = self.compose[self.inverse[self.lift[self.sign[g[:, position]]]], g[:, position]]
        labels[:, position] = self.image[self.compose[self.lift[eps], h]]
        scored[:, position] = True
        return labels, scored


class SignVariables(_Signed):
    """``sign`` of a permutation automaton whose group is not solvable (no cascade levels): each prefix's element
    by composing its symbols, g_p = σ_p ∘ g_{p−1}."""

    def __init__(self, automaton: Any, elements: list[tuple[int, ...]]) -> None:
        self._elements(automaton, elements)
        self.names = ("sign",) if self.has_sign else ()

    def _group(self, words: np.ndarray) -> np.ndarray:
        x = self.symbol[np.asarray(words, dtype=np.int64)]
        g = np.empty_like(x)
        if x.shape[1]:
            g[:, 0] = x[:, 0]
        for t in range(1, x.shape[1]):
            g[:, t] = self.compose[x[:, t], g[:, t - 1]]
        return g

    def values(self, words: np.ndarray, name: str) -> tuple[np.ndarray, np.ndarray, int]:
        return self._sign_values(words)

    def counterfactual(
        self, base: np.ndarray, source: np.ndarray, position: int, name: str, mode: str
    ) -> tuple[np.ndarray, np.ndarray]:
        return self._sign_counterfactual(base, source, position)


class GroupVariables(_Signed):
    """``level<i>`` and ``sign`` of a permutation automaton (see the module docstring), as a family of
    :class:`~sandbox_lens.interp.tasks.highlevel.StateModel` variables."""

    def __init__(self, automaton: Any, plan: Any) -> None:

        self.plan = plan
        elements = list(plan.elements)
        self._elements(automaton, elements)
        E = len(elements)
        self.levels = []
        for level in plan.levels:
            radix = np.cumprod([1, *level.orders[:0:-1]])[::-1]  # mixed radix of the level's coordinate P
            values = list(level.prefixes())
            code = {P: int(np.dot(P, radix)) for P in values}
            coord = np.full(E, -1, dtype=np.int64)
            for g, P in level.coords.items():
                coord[self.index[g]] = code[P]
            tau = np.array([self.index[level.tau(P)] for P in values], dtype=np.int64)
            mix = np.full((E, len(values)), -1, dtype=np.int64)
            for g in level.elements:
                for P in values:
                    mix[self.index[g], code[P]] = self.index[level.mix(g, P)]
            add = np.array(
                [[code[tuple((a + b) % n for a, b, n in zip(P, Q, level.orders))] for Q in values] for P in values],
                dtype=np.int64,
            )
            self.levels.append({"coord": coord, "tau": tau, "mix": mix, "add": add, "size": len(values)})
        self.names = tuple(f"level{i + 1}" for i in range(len(self.levels))) + (("sign",) if self.has_sign else ())

    def prefixes(self, words: np.ndarray, override: tuple[int, int, np.ndarray] | None = None) -> list[np.ndarray]:
        """Each level's prefix coordinate P^i ``[n, T]`` (as codes), ``override`` = (level, position, codes) set
        before the next level mixes (the cascade's intervention)."""
        x = self.symbol[np.asarray(words, dtype=np.int64)]
        out = []
        for i, lv in enumerate(self.levels):
            c = lv["coord"][x]
            P = np.empty_like(c)
            acc = np.zeros(len(c), dtype=np.int64)
            for t in range(c.shape[1]):
                acc = lv["add"][acc, c[:, t]]
                P[:, t] = acc
            if override is not None and override[0] == i:
                P[:, override[1]] = override[2]
            out.append(P)
            if i + 1 < len(self.levels):
                x = lv["mix"][x, P]
        return out

    def elements(self, prefixes: list[np.ndarray]) -> np.ndarray:
        """g = τ_1(P¹) ∘ … ∘ τ_d(P^d) as element indices ``[n, T]``."""
        g = self.levels[0]["tau"][prefixes[0]]
        for lv, P in zip(self.levels[1:], prefixes[1:]):
            g = self.compose[g, lv["tau"][P]]
        return g

    def _group(self, words: np.ndarray) -> np.ndarray:
        return self.elements(self.prefixes(words))

    def values(self, words: np.ndarray, name: str) -> tuple[np.ndarray, np.ndarray, int]:
        if name == "sign":
            return self._sign_values(words)
        i = self.names.index(name)
        return self.prefixes(words)[i], np.ones(words.shape, dtype=bool), self.levels[i]["size"]

    def counterfactual(
        self, base: np.ndarray, source: np.ndarray, position: int, name: str, mode: str
    ) -> tuple[np.ndarray, np.ndarray]:
        if name == "sign":
            return self._sign_counterfactual(base, source, position)
        scored = np.zeros(base.shape, dtype=bool)
        i = self.names.index(name)
        value = self.prefixes(source)[i][:, position]
        labels = self.image[self.elements(self.prefixes(base, (i, position, value)))]
        scored[:, position:] = True
        if i == len(self.levels) - 1:
            scored[:, position + 1 :] = False
        return labels, scored


#: Why an automaton has no group variables at all (one line, ``{name}`` its name).
NOT_A_GROUP = "{name}'s symbols are not all permutations of its states (not a group)"
#: Why a group has no sign to compute first.
NO_ODD = "{name}'s group has no odd permutation: its sign is always even"


def group_variables(automaton: Any) -> GroupVariables | SignVariables | None:
    """The family for ``automaton`` (computed once per automaton): :class:`GroupVariables` for a permutation
    automaton of a solvable group, :class:`SignVariables` for another permutation group of at most
    :data:`MAX_SIGN_GROUP` elements with an odd permutation, otherwise None (:func:`sign_refusal` says why)."""
    return _family_of(automaton)[0]


def sign_refusal(automaton: Any) -> str | None:
    """Why ``automaton`` has no prefix sign to compute first (one line), or None where it has one: not a group, a
    group too large to tabulate, or one without an odd permutation."""
    family, why = _family_of(automaton)
    if why is None and family is not None and not family.has_sign:
        why = NO_ODD.format(name=automaton.name)
    return why


def _family_of(automaton: Any) -> tuple[GroupVariables | SignVariables | None, str | None]:
    if not is_permutation_automaton(automaton):
        return None, NOT_A_GROUP.format(name=automaton.name)  # no sympy
    return _family(automaton.name, automaton.delta.tobytes(), automaton.initial, automaton)


@functools.lru_cache(maxsize=64)
def _family(
    name: str, delta: bytes, initial: int, automaton: Any
) -> tuple[GroupVariables | SignVariables | None, str | None]:

    try:
        return GroupVariables(automaton, permutation_group(automaton)), None
    except ConstructionError:
        pass
    try:
        group = transformation_semigroup(automaton, max_size=MAX_SIGN_GROUP)
    except AutomatonError:
        return None, f"{name}'s group has more than {MAX_SIGN_GROUP} elements (its sign is not tabulated)"
    family = SignVariables(automaton, sorted(group.elements | {tuple(range(automaton.n_states))}))
    if not family.has_sign:
        return None, NO_ODD.format(name=name)
    return family, None
