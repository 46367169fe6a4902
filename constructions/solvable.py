"""The algebra behind the Krohn–Rhodes constructions: an abelian series with coordinates.

Theorem 16 builds a simulator for a solvable group G from a composition series, one
Lemma 18/19 extension step at a time. The construction here flattens that recursion
(krohn-rhodes.md §2.5–2.6, "Lemma 18′"):

* take the derived series G = D_0 ⊳ D_1 ⊳ … ⊳ D_d = 1 (every quotient A_i = D_{i−1}/D_i is
  abelian, and d is the shortest possible);
* write each A_i as a direct sum of cyclic groups Z_{n_i1} ⊕ … ⊕ Z_{n_ir} (so it is simulated by
  r Lemma 15 counters side by side, Lemma 17), with a coordinate map ``coord_i: D_{i−1} → ⊕ Z``
  whose kernel is D_i and a transversal τ_i(P) = t_1^{P_1}∘…∘t_r^{P_r};
* for an input sequence x_1..x_T in D_{i−1} let P_s = Σ_{s′≤s} coord_i(x_{s′}) and
  c_s = τ_i(P_s)⁻¹ ∘ x_s ∘ τ_i(P_s − coord_i(x_s)). Then c_s ∈ D_i and the product telescopes:
  x_t ∘ … ∘ x_1 = τ_i(P_t) ∘ (c_t ∘ … ∘ c_1). Recursing on the c_s gives
  g_t∘…∘g_1 = τ_1(P¹_t) ∘ τ_2(P²_t) ∘ … ∘ τ_d(P^d_t).

When τ_i is a homomorphism (a complement exists), c_s = φ⁻¹_{P_s}(x_s) is exactly Lemma 18;
otherwise (Q8, D8 over its centre) it replaces Lemma 19's wreath product without its |H| copies.

Group elements are maps on the state set as tuples (``f[q]`` is the image of q), composed as
in :func:`interp.groups.compose`. sympy supplies solvability and the derived series; its
``p*q`` applies p first, so nothing here multiplies sympy permutations.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Iterator, Sequence

from interp.errors import ConstructionError
from interp.groups import compose

__all__ = ["Map", "AbelianLevel", "SolvablePlan", "plan_solvable_group", "abelian_basis", "inverse", "power",
           "cycle_notation"]

Map = tuple[int, ...]

#: Groups larger than this are refused (the final lookup has 2|G| units; the mix tables
#: |D_{i−1}|·|A_i| each).
MAX_GROUP_ORDER = 5040


def inverse(f: Map) -> Map:
    out = [0] * len(f)
    for q, image in enumerate(f):
        out[image] = q
    return tuple(out)


def power(f: Map, k: int) -> Map:
    out = tuple(range(len(f)))
    for _ in range(k):
        out = compose(f, out)
    return out


def cycle_notation(g: Map) -> str:
    """Cycle notation, e.g. "(0 1 2)(3 4)"; "e" for the identity."""
    seen, cycles = set(), []
    for start in range(len(g)):
        if start in seen or g[start] == start:
            continue
        cycle, q = [], start
        while q not in seen:
            seen.add(q)
            cycle.append(q)
            q = g[q]
        cycles.append("(" + " ".join(map(str, cycle)) + ")")
    return "".join(cycles) or "e"


def _closure(generators: Sequence[Map], identity: Map) -> list[Map]:
    seen = {identity}
    order = [identity]
    frontier = [identity]
    while frontier:
        nxt = []
        for f in frontier:
            for g in generators:
                h = compose(g, f)
                if h not in seen:
                    seen.add(h)
                    order.append(h)
                    nxt.append(h)
        frontier = nxt
    return order


def abelian_basis(n: int, mul: Sequence[Sequence[int]], identity: int) -> list[tuple[int, int]]:
    """A basis of a finite abelian group given by its multiplication table: [(element, order)].

    Greedy by the structure theorem: repeatedly take an element x whose order k modulo the
    span found so far is largest, and lift it to an element of the coset x·span whose order
    is exactly k, so that the new cyclic factor meets the span trivially. The result is
    checked (the orders multiply to n), so a failure is an error, never a wrong basis.
    """

    def order_mod(x: int, span: set[int]) -> int:
        k, y = 1, x
        while y not in span:
            y, k = mul[y][x], k + 1
        return k

    span = {identity}
    basis: list[tuple[int, int]] = []
    while len(span) < n:
        k, x = max((order_mod(x, span), -x) for x in range(n))
        x = -x
        lift = None
        for s in sorted(span):
            y = mul[x][s]
            if order_mod(y, {identity}) == k:
                lift = y
                break
        if lift is None:
            raise ConstructionError("internal error: no lift of maximal order in an abelian quotient")
        basis.append((lift, k))
        powers = [identity]
        for _ in range(k - 1):
            powers.append(mul[powers[-1]][lift])
        span = {mul[s][p] for s in span for p in powers}
    product = 1
    for _, k in basis:
        product *= k
    if product != n:
        raise ConstructionError("internal error: the abelian basis is not a direct decomposition")
    return basis


@dataclass(frozen=True)
class AbelianLevel:
    """One step D_{i−1} ⊳ D_i with D_{i−1}/D_i ≅ Z_{n_1} ⊕ … ⊕ Z_{n_r}."""

    elements: tuple[Map, ...]  # D_{i−1}, identity first
    kernel: frozenset[Map]  # D_i
    orders: tuple[int, ...]  # n_1..n_r
    lifts: tuple[Map, ...]  # t_1..t_r ∈ D_{i−1}
    coords: dict[Map, tuple[int, ...]]  # coord_i on D_{i−1}

    def coord(self, x: Map) -> tuple[int, ...]:
        return self.coords[x]

    def tau(self, P: Sequence[int]) -> Map:
        """The transversal τ(P) = t_1^{P_1} ∘ … ∘ t_r^{P_r}, with τ(0) = e."""
        out = self.elements[0]
        for t, p in zip(self.lifts, P):
            out = compose(out, power(t, p))
        return out

    def prefixes(self) -> Iterator[tuple[int, ...]]:
        """Every value of the level's prefix coordinate P."""
        return itertools.product(*(range(n) for n in self.orders))

    def sub(self, P: Sequence[int], Q: Sequence[int]) -> tuple[int, ...]:
        return tuple((p - q) % n for p, q, n in zip(P, Q, self.orders))

    def mix(self, x: Map, P: Sequence[int]) -> Map:
        """c = τ(P)⁻¹ ∘ x ∘ τ(P − coord(x)): the input of the next level (an element of D_i)."""
        return compose(inverse(self.tau(P)), compose(x, self.tau(self.sub(P, self.coord(x)))))


@dataclass(frozen=True)
class SolvablePlan:
    """A solvable permutation group with its derived series, ready to be emitted as weights."""

    degree: int
    elements: tuple[Map, ...]
    levels: tuple[AbelianLevel, ...]

    @property
    def identity(self) -> Map:
        return tuple(range(self.degree))

    @property
    def order(self) -> int:
        return len(self.elements)

    @property
    def derived_length(self) -> int:
        return len(self.levels)

    def element(self, prefixes: Sequence[Sequence[int]]) -> Map:
        """g = τ_1(P¹) ∘ τ_2(P²) ∘ … ∘ τ_d(P^d)."""
        out = self.identity
        for level, P in zip(self.levels, prefixes):
            out = compose(out, level.tau(P))
        return out

    def run(self, word: Sequence[Map]) -> list[Map]:
        """The flattened recursion on a word of group elements, returning g_{≤t} for every t.

        This is the algorithm the weights implement, in plain Python: it is what the tests
        compare with direct composition.
        """
        states = [[0] * len(lv.orders) for lv in self.levels]
        out = []
        for x in word:
            prefixes = []
            for i, level in enumerate(self.levels):
                P = tuple((p + c) % n for p, c, n in zip(states[i], level.coord(x), level.orders))
                states[i] = list(P)
                prefixes.append(P)
                if i + 1 < len(self.levels):
                    x = level.mix(x, P)
            out.append(self.element(prefixes))
        return out


def plan_solvable_group(generators: Sequence[Map], degree: int, name: str = "the group") -> SolvablePlan:
    """Derived series, abelian bases and transversals for the group generated by ``generators``.

    Raises :class:`ConstructionError` when the group is not solvable (Theorem 11 needs it) or
    too large to tabulate.
    """
    from sympy.combinatorics import Permutation, PermutationGroup

    identity = tuple(range(degree))
    gens = [tuple(int(x) for x in g) for g in generators if tuple(g) != identity]
    group = PermutationGroup([Permutation(list(g)) for g in gens] or [Permutation(degree - 1)])
    order = int(group.order())
    if order > MAX_GROUP_ORDER:
        raise ConstructionError(f"{name} has order {order}; krohn_rhodes tabulates groups up to order {MAX_GROUP_ORDER}")
    series = group.derived_series()
    if not series[-1].is_trivial:
        raise ConstructionError(
            f"{name} (order {order}) is not solvable: its derived series stops at a perfect subgroup of order "
            f"{int(series[-1].order())}, so Theorem 11's constant-depth construction does not apply; "
            f"use prefix_scan (Theorem 10, depth ⌈log2 T⌉) instead"
        )
    layers = [_closure([tuple(p.array_form) for p in H.generators], identity) for H in series]
    levels = []
    for upper, lower in zip(layers, layers[1:]):
        levels.append(_abelian_level(upper, frozenset(lower)))
    return SolvablePlan(degree, tuple(layers[0]), tuple(levels))


def _abelian_level(upper: list[Map], kernel: frozenset[Map]) -> AbelianLevel:
    """Coordinates of upper/kernel (abelian) as Z_{n_1} ⊕ … ⊕ Z_{n_r}."""
    coset: dict[Map, int] = {}
    reps: list[list[Map]] = []
    for x in upper:
        if x in coset:
            continue
        idx = len(reps)
        members = sorted({compose(x, k) for k in kernel})
        reps.append(members)
        for m in members:
            coset[m] = idx
    m = len(reps)
    mul = [[coset[compose(reps[a][0], reps[b][0])] for b in range(m)] for a in range(m)]
    basis = abelian_basis(m, mul, coset[upper[0]])
    # lift each basis coset to one of its elements of least order: a homomorphic τ (literal
    # Lemma 18) whenever such lifts exist, and any lift works for Lemma 18′.
    lifts = tuple(min(reps[b], key=lambda y: (_order(y), y)) for b, _ in basis)
    orders = tuple(k for _, k in basis)
    level = AbelianLevel(tuple(upper), kernel, orders, lifts, {})
    coords: dict[Map, tuple[int, ...]] = {}
    for P in level.prefixes():
        t = level.tau(P)
        for k in kernel:
            coords[compose(t, k)] = P
    if len(coords) != len(upper):
        raise ConstructionError("internal error: coordinates do not cover the group")
    return AbelianLevel(tuple(upper), kernel, orders, lifts, coords)


def _order(f: Map) -> int:
    k, g = 1, f
    while g != tuple(range(len(f))):
        g, k = compose(f, g), k + 1
    return k
