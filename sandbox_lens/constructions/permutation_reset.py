"""Theorem 16 and Lemma 20: one permutation-reset component of a Krohn–Rhodes construction.

**Group** (Theorem 16, Lemmas 15, 17, 18 and 18′): the derived series of the generated group is
turned into levels of Lemma 15 counters (:mod:`sandbox_lens.constructions.solvable`); per level, one block
counts (one head per cyclic factor, trapezoids to a one-hot prefix coordinate) and one MLP block
"mixes" the level's input into the next level's input; a last lookup composes the transversals.

**Permutation-reset** (Lemma 20): the group part runs on the permutations (resets and BOS act as
e); a Lemma 16 memory head in the last block fetches the group prefix and the reset target at the
last reset (BOS is a reset to q0), and the lookup applies Φ(g_{≤t} g_{≤r}⁻¹) to the reset target
(eq. 3.2).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

from sandbox_lens.constructions.circuit import Circuit, direction_sum
from sandbox_lens.constructions.gadgets import one_hot_lookup, prefix_average_head, trapezoid
from sandbox_lens.constructions.solvable import Map, SolvablePlan, cycle_notation, inverse, plan_solvable_group
from sandbox_lens.interp.errors import ConstructionError
from sandbox_lens.interp.model.spec import MLP, Direction, Head
from sandbox_lens.interp.tasks.automata import Semiautomaton
from sandbox_lens.interp.tasks.groups import compose

__all__ = ["classify", "simulate_component"]


def classify(automaton: Semiautomaton) -> tuple[list[int], dict[int, int]]:
    """Split the symbols into permutations and resets: (permutation symbols, {reset symbol: target}).

    Raises :class:`ConstructionError` when some symbol is neither (not a permutation-reset
    automaton, Definition 7).
    """
    perms, resets = [], {}
    for s in range(automaton.n_symbols):
        f = automaton.transition_map(s)
        if len(set(f)) == len(f):
            perms.append(s)
        elif len(set(f)) == 1:
            resets[s] = f[0]
        else:
            raise ConstructionError(
                f"{automaton.name!r} is neither a group, a permutation-reset automaton nor a given cascade: symbol "
                f"{automaton.alphabet[s]!r} is neither a permutation nor a reset. krohn_rhodes needs a Krohn–Rhodes "
                f"cascade for it (pass one with --cascade-file; general holonomy decomposition is not implemented); "
                f"prefix_scan simulates any automaton"
            )
    return perms, resets


def simulate_component(
    c: Circuit, automaton: Semiautomaton, slots: Sequence[Direction], tag: str, plan: SolvablePlan | None = None
) -> str:
    """Blocks that simulate ``automaton`` (permutation-reset) on a one-hot input.

    ``slots[0]`` is the residual direction that is 1 exactly at BOS and ``slots[1 + s]`` the one
    that is 1 exactly where the input symbol is s (a token one-hot, a sum of them, or a wiring
    block's output). Returns the name of the subspace that holds the one-hot state q_t after the
    new blocks. ``tag`` prefixes every subspace name.
    """
    perms, resets = classify(automaton)
    n = automaton.n_states
    identity: Map = tuple(range(n))
    if plan is None:
        plan = plan_solvable_group([automaton.transition_map(s) for s in perms], n, automaton.name)
    # the group element each input slot carries: BOS and resets act as e (Lemma 20)
    slot_element = [identity] + [
        automaton.transition_map(s) if s in perms else identity for s in range(automaton.n_symbols)
    ]
    state = f"{tag}state"
    c.layout.add(state, n, labels=list(automaton.states))
    if plan.derived_length == 1 and len(plan.levels[0].orders) == 1 and not resets:
        # G cyclic: the counter's coordinate is the state; the trapezoids write it directly
        level = plan.levels[0]
        write = [(state, level.tau((k,))[automaton.initial]) for k in range(level.orders[0])]
        _count_level(c, level, 1, list(slots), slot_element, tag, write)
        return state

    # level inputs: level 1 reads the input slots, level i > 1 a one-hot over D_{i−1}
    x_dirs, x_elements = list(slots), slot_element
    coordinate_spaces: list[str] = []
    for i, level in enumerate(plan.levels, start=1):
        spaces = _count_level(c, level, i, x_dirs, x_elements, tag)
        coordinate_spaces += spaces
        if i < plan.derived_length:
            x_dirs, x_elements = _mix_level(c, plan, i, x_dirs, x_elements, spaces, tag)
    if resets:
        _last_reset(c, automaton, plan, slots, perms, resets, coordinate_spaces, state, tag)
    else:
        _compose_levels(c, automaton, plan, coordinate_spaces, state, tag)
    return state


def _count_level(
    c: Circuit,
    level,
    i: int,
    x_dirs: list[Direction],
    x_elements: list[Map],
    tag: str,
    write: list[tuple[str, int]] | None = None,
) -> list[str]:
    """Lemma 15 (× Lemma 17): one counting head per cyclic factor of D_{i−1}/D_i, trapezoids to one-hots.

    Head j writes s = Σ_{s′≤t} coord_j(x_{s′}) / N exactly; the trapezoid at k/N writes the one-hot
    coordinate k mod n_j (or, for a cyclic group, ``write[k mod n]`` directly). Returns the
    one-hot coordinate subspaces.
    """
    heads, mlp = [], MLP(c.layout, f"L{i} trapezoids: prefix sums -> one-hot coordinates")
    spaces = []
    for j, order in enumerate(level.orders):
        s = f"{tag}L{i}.s{j}"
        c.layout.add(s)
        value = direction_sum([(x_dirs[slot], level.coord(x)[j]) for slot, x in enumerate(x_elements)])
        heads.append(
            prefix_average_head(c.layout, src=value, dst=s, log_sink=c.log_sink(), label=f"L{i} counter Z{order}[{j}]")
        )
        targets = write
        if targets is None:
            oh = f"{tag}L{i}.P{j}"
            c.layout.add(oh, order, labels=[str(k) for k in range(order)])
            spaces.append(oh)
            targets = [(oh, k) for k in range(order)]
        for k in range((order - 1) * c.length + 1):  # s = k/N: coordinate k mod n_j
            trapezoid(mlp, s, x0=k / c.N, spacing=1.0 / c.N, write=targets[k % order])
    c.block(f"{tag}level {i}: count {'+'.join(f'Z{o}' for o in level.orders)} (Lemma 15)", heads, mlp)
    return spaces


def _mix_level(
    c: Circuit, plan: SolvablePlan, i: int, x_dirs: list[Direction], x_elements: list[Map], spaces: list[str], tag: str
) -> tuple[list[Direction], list[Map]]:
    """Lemma 18′: the next level's input c_s = τ(P_s)⁻¹ ∘ x_s ∘ τ(P_s − coord(x_s)), a one-hot over D_i.

    One exact lookup per (input, prefix coordinate) pair, in a block whose attention is empty.
    """
    level = plan.levels[i - 1]
    nxt = plan.levels[i].elements
    index = {g: k for k, g in enumerate(nxt)}
    x_next = f"{tag}L{i + 1}.x"
    c.layout.add(x_next, len(nxt), labels=[cycle_notation(g) for g in nxt])
    mix = MLP(c.layout, f"L{i} mix -> L{i + 1} input (Lemma 18′)")
    for slot, x in enumerate(x_elements):
        for P in level.prefixes():
            inputs = [x_dirs[slot]] + [(sp, p) for sp, p in zip(spaces, P)]
            one_hot_lookup(mix, inputs, (x_next, index[level.mix(x, P)]))
    c.block(f"{tag}level {i}: mix into level {i + 1}", [], mix)
    return [(x_next, k) for k in range(len(nxt))], list(nxt)


def _prefix_tuples(plan: SolvablePlan) -> list[tuple[tuple[int, ...], ...]]:
    """Every combination (P¹, …, P^d) of the levels' prefix coordinates (|G| of them)."""
    return list(itertools.product(*(list(level.prefixes()) for level in plan.levels)))


def _flat(spaces: list[str], Ps: Sequence[Sequence[int]]) -> list[tuple[str, int]]:
    return list(zip(spaces, [p for P in Ps for p in P]))


def _compose_levels(
    c: Circuit, automaton: Semiautomaton, plan: SolvablePlan, spaces: list[str], state: str, tag: str
) -> None:
    """Theorem 16 (flattened): q_t = (τ_1(P¹) ∘ … ∘ τ_d(P^d))(q0), one lookup per group element."""
    final = MLP(c.layout, "Φ(τ_1(P¹)∘…∘τ_d(P^d)) lookup -> one-hot state")
    if plan.derived_length == 0:  # trivial group: the state never changes
        final.out_bias((state, automaton.initial))
    else:
        for Ps in _prefix_tuples(plan):
            one_hot_lookup(final, _flat(spaces, Ps), (state, plan.element(Ps)[automaton.initial]))
    c.block(f"{tag}compose the levels' transversals", [], final)


def _last_reset(
    c: Circuit,
    automaton: Semiautomaton,
    plan: SolvablePlan,
    slots: Sequence[Direction],
    perms: list[int],
    resets: dict[int, int],
    spaces: list[str],
    state: str,
    tag: str,
) -> None:
    """Lemma 20: q_t = Φ(g_{≤t} g_{≤r}⁻¹)(q_r), r the last reset (BOS counts as a reset to q0).

    A Lemma 16 head attends to the last reset and copies the group prefix there (the levels'
    one-hot coordinates) and the reset target; the MLP looks up the state.
    """
    n = automaton.n_states
    kept = [f"{tag}at_reset.{sp[len(tag) :]}" for sp in spaces]
    for sp, dst in zip(spaces, kept):
        c.layout.add(dst, c.layout.size(sp))
    target = f"{tag}reset_to"
    c.layout.add(target, n, labels=list(automaton.states))
    k_in = 2 * len(spaces) + 1
    head = Head(c.layout, f"{tag}last reset (Lemma 16)")
    cscale = c.length * math.log(64 * c.length * k_in)  # copy error ≤ 1/(32 k_in) per channel
    not_reset = direction_sum([(slots[1 + s], 1.0) for s in perms])
    if not_reset:
        head.qk("one", not_reset, -2.0 * cscale)
    head.qk("one", c.pos_frac(), cscale)
    for sp, dst in zip(spaces, kept):
        head.copy(sp, dst)
    reset_slots = {0: automaton.initial, **{1 + s: q for s, q in resets.items()}}
    for q in range(n):
        read = direction_sum([(slots[slot], 1.0) for slot, tq in reset_slots.items() if tq == q])
        if read:
            head.ov(read, (target, q))
    memory = MLP(c.layout, "Φ(g_{≤t} g_{≤r}⁻¹)(q_r) lookup -> one-hot state (Lemma 20)")
    targets = sorted(set(reset_slots.values()))
    combos = _prefix_tuples(plan)
    for Ps in combos:
        g_now = plan.element(Ps)
        for Rs in combos:
            g_since_reset = compose(g_now, inverse(plan.element(Rs)))
            for q in targets:
                one_hot_lookup(memory, _flat(spaces, Ps) + _flat(kept, Rs) + [(target, q)], (state, g_since_reset[q]))
    c.block(f"{tag}last reset: Φ(g_t g_r⁻¹)(q_r) (Lemma 20)", [head], memory)
