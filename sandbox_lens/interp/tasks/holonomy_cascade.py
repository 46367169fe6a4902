"""The holonomy cascade (part 2 of issue 33): any automaton whose holonomy groups are solvable as a cascade of
permutation-reset levels — the existing cascade format, so ``krohn_rhodes`` compiles it (Lemma 21).

Coordinates (after Egri-Nagy and Nehaniv, 2015, §5: positioned chains). Levels are the heights n..1 of the
skeleton (:mod:`sandbox_lens.interp.tasks.holonomy`). A state is a chain of tiles from Q down to a singleton: at level k, if the
current image A has height k, the level holds which tile of A's class representative P the chain enters (A is P
carried by a known bijection τ_A, so a tile of P names a tile of A); otherwise it holds a dummy (value 0). Levels
hold the disjoint union of the tiles of the representatives of their height.

A letter s acts top-down with the old chain's current image A and the new chain's B, A·s ⊆ B. At a level k where
B has height k: if A has height k too and A·s = B, then g = τ_A · s · τ_B⁻¹ permutes P and so its tiles — the
level moves by a holonomy permutation; otherwise A·s lies strictly inside B, so inside some tile of B: the level
is reset to the first such tile. Where B's height is below k the level is reset to the dummy. Either way the new
value at level k depends only on the levels above it (before s) and on s: a cascade (Definition 6), each level a
permutation-reset automaton whose group lies in the product of its holonomy groups. The covering map reads the
chain down to its singleton; :func:`sandbox_lens.interp.tasks.cascade.with_target` checks it on every reachable product state.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from sandbox_lens.interp.errors import AutomatonError
from sandbox_lens.interp.progress import bar as progress_bar
from sandbox_lens.interp.tasks.automata import Semiautomaton
from sandbox_lens.interp.tasks.cascade import Cascade, CascadeLevel, with_target
from sandbox_lens.interp.tasks.holonomy import HolonomySkeleton, Image, act, holonomy_skeleton

__all__ = ["holonomy_cascade", "Coordinates", "MAX_REACHABLE", "MAX_WIRING"]

#: chains (product states) the decomposition may reach from q0; each is stepped by every letter
MAX_REACHABLE = 20_000
#: (upper levels' values, letter) pairs the last level's wiring may tabulate
MAX_WIRING = 200_000


class Coordinates:
    """The positioned chains of a skeleton: level blocks, transports, encoding, decoding and the action."""

    def __init__(self, h: HolonomySkeleton) -> None:
        self.h = h
        self.n = h.levels
        self.rep = {p: c[0] for c in h.classes for p in c}
        # τ_Q: a bijection rep → Q realised by the monoid (rep·s = Q); the representative's own is the identity
        self.transport: dict[Image, dict[int, int]] = {}
        for c in h.classes:
            rep = c[0]
            for q in c:
                s = tuple(range(h.semigroup.degree)) if q == rep else next(s for s in h.monoid if act(rep, s) == q)
                self.transport[q] = {x: s[x] for x in rep}
        # level k's values: 0 the dummy, then each representative of height k's tiles
        self.blocks: dict[int, list[tuple[Image, tuple[Image, ...]]]] = {k: [] for k in range(1, self.n + 1)}
        for c in h.classes:
            rep = c[0]
            if len(rep) > 1:
                self.blocks[h.heights[rep]].append((rep, h.tiles(rep)))
        self.offset = {}
        for _k, blocks in self.blocks.items():
            at = 1
            for rep, tiles in blocks:
                self.offset[rep] = at
                at += len(tiles)
        self.size = {k: 1 + sum(len(t) for _, t in b) for k, b in self.blocks.items()}

    def descend(self, image: Image, tau: dict[int, int], value: int) -> tuple[Image, dict[int, int]] | None:
        """The chain's next image after ``image`` (= rep·τ) enters the tile ``value`` names; None if ``value`` is
        not a tile of ``image``'s representative."""
        rep = self.rep[image]
        i = value - self.offset[rep]
        tiles = self.h.tiles(rep)
        if not 0 <= i < len(tiles):
            return None
        tile = tiles[i]
        inner = self.transport[tile]  # tile's own representative → tile
        return act(tile, tau), {x: tau[inner[x]] for x in self.rep[tile]}

    def start(self) -> tuple[Image, dict[int, int]]:
        q = frozenset(range(self.h.semigroup.degree))
        return q, dict(self.transport[q])

    def decode(self, coords: tuple[int, ...]) -> int | None:
        """The state a chain ends in (coords[0] is level n); None for a chain that is not one."""
        a, tau = self.start()
        for k, value in zip(range(self.n, 0, -1), coords):
            if len(a) > 1 and self.h.heights[a] == k:
                nxt = self.descend(a, tau, value)
                if nxt is None:
                    return None
                a, tau = nxt
            elif value != 0:
                return None
        return next(iter(a)) if len(a) == 1 else None

    def encode(self, q: int) -> tuple[int, ...]:
        """A chain ending in ``q`` (the first tile containing it at every step)."""
        a, tau = self.start()
        out = []
        for k in range(self.n, 0, -1):
            if len(a) > 1 and self.h.heights[a] == k:
                rep = self.rep[a]
                i = next(i for i, t in enumerate(self.h.tiles(rep)) if q in act(t, tau))
                out.append(self.offset[rep] + i)
                a, tau = self.descend(a, tau, self.offset[rep] + i)
            else:
                out.append(0)
        return tuple(out)

    def step(self, coords: tuple[int, ...], s: tuple[int, ...]) -> list[tuple[str, Any]]:
        """Per level, top first, what ``s`` does there given the levels above: ``("perm", {old: new})`` or
        ``("reset", value)`` — down to the first level whose value is not a chain's (its action is still given:
        it depends on the levels above only)."""
        a, tau_a = self.start()
        b, tau_b = self.start()
        out: list[tuple[str, Any]] = []
        for k, value in zip(range(self.n, 0, -1), coords):
            a_here = len(a) > 1 and self.h.heights[a] == k
            if not (len(b) > 1 and self.h.heights[b] == k):
                out.append(("reset", 0))
            elif a_here and act(a, s) == b:
                rep, back = self.rep[b], {y: x for x, y in tau_b.items()}
                g = {x: back[s[tau_a[x]]] for x in rep}  # τ_A · s · τ_B⁻¹ on the representative
                tiles = self.h.tiles(rep)
                index = {t: i for i, t in enumerate(tiles)}
                perm = {
                    self.offset[rep] + i: self.offset[rep] + index[frozenset(g[x] for x in t)]
                    for i, t in enumerate(tiles)
                }
                out.append(("perm", perm))
                new = perm.get(value)
                if new is None:
                    return out
                b, tau_b = self.descend(b, tau_b, new)
            else:
                rep, back = self.rep[b], {y: x for x, y in tau_b.items()}
                inside = frozenset(back[y] for y in act(a, s))
                i = next(i for i, t in enumerate(self.h.tiles(rep)) if inside <= t)
                out.append(("reset", self.offset[rep] + i))
                b, tau_b = self.descend(b, tau_b, self.offset[rep] + i)
            if a_here:
                nxt = self.descend(a, tau_a, value)
                if nxt is None:
                    return out
                a, tau_a = nxt
        return out


def holonomy_cascade(automaton: Semiautomaton, skeleton: HolonomySkeleton | None = None, progress: bool = False) -> Any:
    """``automaton`` as a cascade of permutation-reset levels covering it (checked on every reachable product
    state); refuses, in one line, an automaton with a holonomy group that is not solvable. ``progress``: a tqdm
    bar over the chains reached (shown only when the enumeration takes more than a second)."""

    h = skeleton or holonomy_skeleton(automaton)
    bad = [c for c in h.components if not c["solvable"]]
    if bad:
        c = bad[0]
        raise AutomatonError(
            f"{automaton.name!r} is not solvable: the holonomy group of the image "
            f"{{{', '.join(automaton.states[q] for q in c['representative'])}}} is {c['name']} "
            f"(order {c['order']}), not solvable, so no constant-depth simulator exists here (Theorem 11)"
        )
    co = Coordinates(h)
    sizes = [co.size[k] for k in range(co.n, 0, -1)]
    maps = [automaton.transition_map(s) for s in range(automaton.n_symbols)]
    # the reachable chains, breadth-first from q0's, and what each level receives on the way
    wiring: list[dict[tuple[tuple[int, ...], int], tuple[int, ...]]] = [{} for _ in sizes]
    start = co.encode(automaton.initial)
    seen, frontier = {start}, [start]

    bar = progress_bar(total=None, unit="chain", desc=f"decomposing {automaton.name}", disable=not progress, delay=1.0)
    while frontier:
        bar.update(len(frontier))
        nxt = []
        for coords in frontier:
            for si, s in enumerate(maps):
                new = []
                for level, (kind, what) in enumerate(co.step(coords, s)):
                    row = (
                        tuple(what.get(v, v) for v in range(sizes[level])) if kind == "perm" else (what,) * sizes[level]
                    )
                    wiring[level].setdefault((coords[:level], si), row)
                    new.append(row[coords[level]])
                p = tuple(new)
                if p not in seen:
                    if len(seen) >= MAX_REACHABLE:
                        raise AutomatonError(
                            f"the holonomy cascade of {automaton.name!r} reaches more than "
                            f"{MAX_REACHABLE:,} chains (levels {sizes}); a smaller automaton"
                        )
                    seen.add(p)
                    nxt.append(p)
        frontier = nxt
    bar.close()
    prefixes = int(np.prod(sizes[:-1], dtype=float)) * len(maps) if sizes else 0
    if prefixes > MAX_WIRING:
        raise AutomatonError(
            f"the holonomy cascade of {automaton.name!r} would tabulate {prefixes:,} wirings "
            f"(levels {sizes}); at most {MAX_WIRING:,}"
        )
    for level, size in enumerate(sizes):  # prefixes no chain reaches: the level's commonest input (no MLP unit)
        rows = list(wiring[level].values())
        common = max(set(rows), key=rows.count) if rows else tuple(range(size))
        for prefix in itertools.product(*(range(n) for n in sizes[:level])):
            for si in range(len(maps)):
                wiring[level].setdefault((prefix, si), common)
    levels = []
    for level, size in enumerate(sizes):
        rows = sorted(set(wiring[level].values()))
        index = {r: i for i, r in enumerate(rows)}
        names = [f"m{i}" for i in range(len(rows))]
        delta = np.array(rows, dtype=np.int64)
        k = co.n - level
        init = start[level]
        a = Semiautomaton(
            f"holonomy level {k}",
            tuple(str(v) for v in range(size)),
            tuple(names),
            delta,
            init,
            f"holonomy level {k}: tiles of {len(co.blocks[k])} class(es)",
        )
        levels.append(CascadeLevel(f"h{k}", a, {key: index[row] for key, row in wiring[level].items()}))
    cascade = Cascade(f"{automaton.name} holonomy", tuple(automaton.alphabet), tuple(levels))
    output = {p: co.decode(p) for p in seen}
    return with_target(cascade, automaton, output, f"the holonomy cascade of {automaton.name!r}")
