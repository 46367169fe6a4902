"""The skeleton of the holonomy decomposition (Zeiger, Eilenberg; the computational form of Egri-Nagy and
Nehaniv, 2015): the images of a transformation semigroup, subduction and its classes, heights, tiles, and the
holonomy permutation group of each class — part 1 of issue 33 (the cascade and its covering map build on it).

For the transformation semigroup (Q, S) of an automaton (:mod:`sandbox_lens.interp.tasks.groups`; S¹ adds the identity):

* the **images** are Q, every Q·s (s ∈ S) and every singleton; an image of an image is an image;
* P is **subduced** by R (P ≤ R) when P ⊆ R·s for some s ∈ S¹; P ≡ R when each subduces the other (then some
  s ∈ S¹ maps R onto P bijectively and some t maps P back);
* the **height** of a singleton is 0, of any other image 1 + the largest height of an image strictly below it
  in subduction; the decomposition has one level per height 1..h(Q);
* the **tiles** of an image P (|P| ≥ 2) are the images maximal among those strictly inside P; they cover P;
* the **holonomy group** of P is the permutation group that the stabiliser {s ∈ S¹ : P·s = P} induces on the
  tiles of P (the same up to isomorphism across P's class). Each holonomy group divides a maximal subgroup of S,
  so the automaton is solvable exactly when every holonomy group is — :func:`holonomy_skeleton` computes both
  sides, and the tests check that they agree.

Sizes: everything is computed from the full semigroup, whose closure is bounded (``MAX_SEMIGROUP_SIZE`` and
the work budget, :mod:`sandbox_lens.interp.budget`): a semigroup past the bound is refused in one line before any of this.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

from sandbox_lens.interp.budget import require
from sandbox_lens.interp.tasks.automata import Semiautomaton
from sandbox_lens.interp.tasks.groups import Map, TransformationSemigroup, group_name, transformation_semigroup

__all__ = ["HolonomySkeleton", "holonomy_skeleton", "act"]

Image = frozenset[int]


def act(image: Image, s: Map) -> Image:
    """P·s: the image of a set of states under a map."""
    return frozenset(s[x] for x in image)


@dataclass(frozen=True, eq=False)
class HolonomySkeleton:
    """The images, subduction classes, heights, tiles and holonomy groups of an automaton (module docstring)."""

    automaton: Semiautomaton
    semigroup: TransformationSemigroup

    @cached_property
    def monoid(self) -> tuple[Map, ...]:
        """S¹: the semigroup's elements and the identity."""
        identity = tuple(range(self.semigroup.degree))
        return tuple(sorted(self.semigroup.elements | {identity}))

    @cached_property
    def images(self) -> tuple[Image, ...]:
        """Q, every Q·s and every singleton, largest first."""
        n = self.semigroup.degree
        found = (
            {frozenset(range(n))} | {frozenset(s) for s in self.semigroup.elements} | {frozenset([q]) for q in range(n)}
        )
        return tuple(sorted(found, key=lambda p: (-len(p), sorted(p))))

    @cached_property
    def orbits(self) -> dict[Image, frozenset[Image]]:
        """Each image's orbit {P·s : s ∈ S¹} (refused in one line past the work budget, :mod:`sandbox_lens.interp.budget`)."""

        require(
            f"the orbits of {len(self.images)} images under {len(self.monoid)} maps",
            operations=30.0 * len(self.images) * len(self.monoid) * self.semigroup.degree,
            lower="an automaton with a smaller semigroup",
        )
        return {p: frozenset(act(p, s) for s in self.monoid) for p in self.images}

    def subduces(self, p: Image, r: Image) -> bool:
        """P ≤ R: P lies inside some R·s."""
        return any(p <= q for q in self.orbits[r])

    @cached_property
    def classes(self) -> tuple[tuple[Image, ...], ...]:
        """The subduction classes (images of one class have one size and map onto each other), largest first; the
        first image of each class is its representative."""
        out: list[tuple[Image, ...]] = []
        for p in self.images:
            if not any(p in c for c in out):
                out.append(
                    tuple(q for q in self.images if len(q) == len(p) and q in self.orbits[p] and p in self.orbits[q])
                )
        return tuple(out)

    def class_of(self, p: Image) -> int:
        return next(i for i, c in enumerate(self.classes) if p in c)

    @cached_property
    def heights(self) -> dict[Image, int]:
        """0 for singletons; else 1 + the largest height of a class strictly below (subduced, not equivalent) —
        which may have the same size: a map can carry P onto R with nothing carrying R back."""
        by_class: dict[int, int] = {}

        def height(i: int) -> int:
            if i not in by_class:
                rep = self.classes[i][0]
                below = [j for j, c in enumerate(self.classes) if j != i and self.subduces(c[0], rep)]
                by_class[i] = 0 if len(rep) == 1 else 1 + max((height(j) for j in below), default=0)
            return by_class[i]

        return {p: height(i) for i, c in enumerate(self.classes) for p in c}

    @property
    def levels(self) -> int:
        """The height of Q: the decomposition's number of levels."""
        return self.heights[frozenset(range(self.semigroup.degree))]

    def tiles(self, p: Image) -> tuple[Image, ...]:
        """The images maximal among those strictly inside ``p`` (empty for a singleton)."""
        inside = [q for q in self.images if q < p]
        return tuple(q for q in inside if not any(q < r for r in inside))

    def holonomy_group(self, p: Image) -> list[tuple[int, ...]]:
        """The permutations of ``tiles(p)`` (as index tuples) induced by the stabiliser of ``p``; the identity first."""
        tiles = self.tiles(p)
        index = {t: i for i, t in enumerate(tiles)}
        perms = {tuple(index[act(t, s)] for t in tiles) for s in self.monoid if act(p, s) == p}
        identity = tuple(range(len(tiles)))
        return [identity] + sorted(perms - {identity})

    @cached_property
    def components(self) -> list[dict[str, Any]]:
        """Per class of a non-singleton image: its representative, height, tiles and holonomy group (order and
        solvability via sympy), highest level first."""
        from sympy.combinatorics import Permutation, PermutationGroup

        out = []
        for c in self.classes:
            rep = c[0]
            if len(rep) < 2:
                continue
            perms = self.holonomy_group(rep)
            group = PermutationGroup([Permutation(list(g)) for g in perms])
            out.append(
                {
                    "representative": tuple(sorted(rep)),
                    "class_size": len(c),
                    "height": self.heights[rep],
                    "tiles": [tuple(sorted(t)) for t in self.tiles(rep)],
                    "order": int(group.order()),
                    "name": group_name(group),
                    "solvable": bool(group.is_solvable),
                    "group": group,
                }
            )
        return sorted(out, key=lambda d: (-d["height"], d["representative"]))

    @property
    def solvable(self) -> bool:
        """Every holonomy group is solvable (the decomposition's test of Theorem 11's condition)."""
        return all(c["solvable"] for c in self.components)


def holonomy_skeleton(automaton: Semiautomaton, semigroup: TransformationSemigroup | None = None) -> HolonomySkeleton:
    """The skeleton of ``automaton``'s holonomy decomposition (its semigroup closed first, within the limits)."""
    return HolonomySkeleton(automaton, semigroup or transformation_semigroup(automaton))
