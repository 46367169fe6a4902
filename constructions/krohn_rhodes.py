"""Theorem 11: constant-depth simulators for solvable semiautomata (Krohn–Rhodes).

Three paths, chosen from the automaton (:func:`build_krohn_rhodes`):

* **group** (Theorem 16, Lemmas 15, 17, 18 and 18′): every symbol permutes the states. The
  derived series of the generated group is turned into levels of Lemma 15 counters
  (:mod:`constructions.solvable`); per level, one block counts (one head per cyclic factor,
  trapezoids to a one-hot prefix coordinate) and one MLP block "mixes" the level's input into
  the next level's input; a last lookup composes the transversals. 2d TL blocks for derived
  length d (1 for a cyclic group).
* **permutation-reset** (Lemma 20): every symbol is a permutation or a reset (constant map). The
  group part runs on the permutations (resets and BOS act as e); a Lemma 16 memory head in the
  last block fetches the group prefix and the reset target at the last reset (BOS is a reset to
  q0), and the lookup applies Φ(g_{≤t} g_{≤r}⁻¹) to the reset target (eq. 3.2).
* **cascade** (Definition 6, Lemma 21): an explicit :class:`interp.tasks.cascade.Cascade` of
  permutation-reset levels. Each level is simulated as above on a one-hot input written by the
  previous wiring block; the wiring block's MLP computes φ^{(i+1)} from the earlier levels'
  states **before** σ_t, fetched by a previous-token head (the thesis's wiring reads the states
  after σ_t, erratum E19; ``as_printed="wiring"`` rebuilds that defect as a negative control).

Every discrete value lives in the residual stream as an exact one-hot (trapezoid and lookup
outputs are exactly 0 or 1), so errors never accumulate across levels. Depth does not depend on
T; only the counters' MLP width does (4((n−1)T+1) units per cyclic factor).
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import numpy as np

from constructions.gadgets import (
    READOUT_ALPHA,
    bos_token_io,
    one_hot_lookup,
    one_hot_readout,
    prefix_average_head,
    previous_token_head,
    trapezoid,
)
from constructions.solvable import Map, SolvablePlan, cycle_notation, inverse, plan_solvable_group
from interp.tasks.automata import Semiautomaton
from interp.errors import ConstructionError, LengthError
from interp.tasks.groups import compose
from interp.model.spec import MLP, Block, ConstructionSpec, Direction, Head, Layout

if TYPE_CHECKING:
    from interp.tasks.cascade import Cascade

__all__ = ["build_krohn_rhodes", "classify", "describe_path", "cascade_stages", "MAX_LENGTH", "WIRINGS"]

#: Longest length the tests verify (float32 stays exact much further: krohn-rhodes.md §5.2).
MAX_LENGTH = 1024
WIRINGS = ("previous", "current")


# -- the automaton's shape -------------------------------------------------------------------
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


# -- the circuit being assembled -------------------------------------------------------------
class _Circuit:
    """Layout, blocks, embeddings and positional features of the model under construction."""

    def __init__(self, tokens: Sequence[str], length: int) -> None:
        self.tokens = list(tokens)
        self.length = length
        self.layout = Layout()
        self.blocks: list[Block] = []
        self.layout.add("bos")
        self.layout.add("one")
        self.layout.add("tok", len(tokens), labels=tokens)
        self._embed: list[tuple[int, Direction]] = [(0, "bos")]
        self._embed += [(i, "one") for i in range(len(tokens))]
        self._embed += [(i, ("tok", i)) for i in range(len(tokens))]
        self._positional: dict[str, np.ndarray] = {}
        self.N = 2 ** math.ceil(math.log2(2 * length))  # power-of-two counter normaliser (notes §2.1)

    def positional(self, name: str, values: np.ndarray) -> str:
        if name not in self._positional:
            self.layout.add(name)
            self._positional[name] = values
        return name

    @property
    def t(self) -> np.ndarray:
        return np.arange(self.length + 1, dtype=np.float64)

    def log_sink(self) -> str:
        return self.positional("log_sink", np.log(self.N - self.t))

    def pos_frac(self) -> str:
        return self.positional("posT", self.t / self.length)

    def parity(self) -> str:
        return self.positional("par", (-1.0) ** self.t)

    def block(self, label: str, heads: Sequence[Head] = (), mlp: MLP | None = None) -> None:
        self.blocks.append(Block(list(heads), mlp, label))

    def embeddings(self) -> tuple[np.ndarray, np.ndarray]:
        W_E = np.zeros((len(self.tokens), self.layout.d_model))
        for tok, direction in self._embed:
            W_E[tok] += self.layout.vector(direction)
        W_pos = np.zeros((self.length + 1, self.layout.d_model))
        for name, values in self._positional.items():
            W_pos[:, self.layout.index(name)] = values
        return W_E, W_pos


# -- one permutation-reset component -----------------------------------------------------------
def _sum(terms: Sequence[tuple[Direction, float]]) -> dict:
    """The linear combination Σ w·direction as one :data:`Direction` mapping."""
    out: dict = {}
    for direction, w in terms:
        items = direction.items() if isinstance(direction, dict) else [(direction, 1.0)]
        for key, v in items:
            key = key if isinstance(key, tuple) else (key, 0)
            out[key] = out.get(key, 0.0) + w * v
    return {k: v for k, v in out.items() if v}


def _simulate_component(
    c: _Circuit, automaton: Semiautomaton, slots: Sequence[Direction], tag: str, plan: SolvablePlan | None = None
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
    slot_element = [identity] + [automaton.transition_map(s) if s in perms else identity for s in range(automaton.n_symbols)]
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


def _count_level(c: _Circuit, level, i: int, x_dirs: list[Direction], x_elements: list[Map], tag: str,
                 write: list[tuple[str, int]] | None = None) -> list[str]:
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
        value = _sum([(x_dirs[slot], level.coord(x)[j]) for slot, x in enumerate(x_elements)])
        heads.append(prefix_average_head(c.layout, src=value, dst=s, log_sink=c.log_sink(),
                                         label=f"L{i} counter Z{order}[{j}]"))
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


def _mix_level(c: _Circuit, plan: SolvablePlan, i: int, x_dirs: list[Direction], x_elements: list[Map],
               spaces: list[str], tag: str) -> tuple[list[Direction], list[Map]]:
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


def _compose_levels(c: _Circuit, automaton: Semiautomaton, plan: SolvablePlan, spaces: list[str], state: str,
                    tag: str) -> None:
    """Theorem 16 (flattened): q_t = (τ_1(P¹) ∘ … ∘ τ_d(P^d))(q0), one lookup per group element."""
    final = MLP(c.layout, "Φ(τ_1(P¹)∘…∘τ_d(P^d)) lookup -> one-hot state")
    if plan.derived_length == 0:  # trivial group: the state never changes
        final.out_bias((state, automaton.initial))
    else:
        for Ps in _prefix_tuples(plan):
            one_hot_lookup(final, _flat(spaces, Ps), (state, plan.element(Ps)[automaton.initial]))
    c.block(f"{tag}compose the levels' transversals", [], final)


def _last_reset(c: _Circuit, automaton: Semiautomaton, plan: SolvablePlan, slots: Sequence[Direction],
                perms: list[int], resets: dict[int, int], spaces: list[str], state: str, tag: str) -> None:
    """Lemma 20: q_t = Φ(g_{≤t} g_{≤r}⁻¹)(q_r), r the last reset (BOS counts as a reset to q0).

    A Lemma 16 head attends to the last reset and copies the group prefix there (the levels'
    one-hot coordinates) and the reset target; the MLP looks up the state.
    """
    n = automaton.n_states
    kept = [f"{tag}at_reset.{sp[len(tag):]}" for sp in spaces]
    for sp, dst in zip(spaces, kept):
        c.layout.add(dst, c.layout.size(sp))
    target = f"{tag}reset_to"
    c.layout.add(target, n, labels=list(automaton.states))
    k_in = 2 * len(spaces) + 1
    head = Head(c.layout, f"{tag}last reset (Lemma 16)")
    cscale = c.length * math.log(64 * c.length * k_in)  # copy error ≤ 1/(32 k_in) per channel
    not_reset = _sum([(slots[1 + s], 1.0) for s in perms])
    if not_reset:
        head.qk("one", not_reset, -2.0 * cscale)
    head.qk("one", c.pos_frac(), cscale)
    for sp, dst in zip(spaces, kept):
        head.copy(sp, dst)
    reset_slots = {0: automaton.initial, **{1 + s: q for s, q in resets.items()}}
    for q in range(n):
        read = _sum([(slots[slot], 1.0) for slot, tq in reset_slots.items() if tq == q])
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


# -- builder -----------------------------------------------------------------------------------
def build_krohn_rhodes(
    automaton: Semiautomaton, length: int, cascade: "Cascade | str | Path | None" = None, as_printed: str = ""
) -> ConstructionSpec:
    """Theorem 11: a constant-depth simulator for a solvable group, a permutation-reset automaton or a cascade.

    ``cascade`` (a :class:`~interp.tasks.cascade.Cascade` or the path of a cascade JSON file) is used
    instead of ``automaton`` when given; the 1-D gridworlds use their built-in flip-flop cascade.
    ``as_printed="wiring"`` rebuilds Lemma 21's printed wiring as a negative control.
    """
    if not 1 <= length <= MAX_LENGTH:
        raise LengthError(f"krohn_rhodes is verified for lengths 1..{MAX_LENGTH}, got {length}")
    if as_printed not in ("", "wiring"):
        raise ConstructionError(f"krohn_rhodes: as_printed must be wiring (or empty), got {as_printed!r}")
    wiring = "current" if as_printed == "wiring" else "previous"
    from interp.tasks.cascade import Cascade, known_cascade, load_cascade_file

    if isinstance(cascade, (str, Path)):
        cascade = load_cascade_file(cascade)
    if cascade is None:
        cascade = known_cascade(automaton)
    if cascade is not None:
        if not isinstance(cascade, Cascade):
            raise ConstructionError("krohn_rhodes: cascade must be a Cascade or the path of a cascade JSON file")
        return _build_cascade(cascade, length, wiring)
    perms, resets = _classify_or_refuse(automaton)
    c = _Circuit(["BOS", *automaton.alphabet], length)
    plan = plan_solvable_group([automaton.transition_map(s) for s in perms], automaton.n_states, automaton.name)
    slots = [("tok", i) for i in range(automaton.n_symbols + 1)]
    state = _simulate_component(c, automaton, slots, "", plan)
    path = "permutation-reset (Lemma 20)" if resets else "solvable group (Theorem 16 via Lemma 18′)"
    orders = [list(lv.orders) for lv in plan.levels]
    return _finish(c, automaton, state, length, "Theorem 11: " + path,
                   {"path": "permutation_reset" if resets else "group", "group_order": plan.order,
                    "derived_length": plan.derived_length, "cyclic_factors": orders},
                   f"derived series quotients {orders}; counters with normaliser N = {c.N}")


def describe_path(automaton: Semiautomaton) -> str:
    """One line: which Krohn–Rhodes path ``automaton`` takes, or why it is refused."""
    from interp.tasks.cascade import known_cascade

    cascade = known_cascade(automaton)
    if cascade is not None:
        return f"cascade of {len(cascade.levels)} levels ({', '.join(lv.automaton.name for lv in cascade.levels)})"
    try:
        perms, resets = _classify_or_refuse(automaton)
        plan = plan_solvable_group([automaton.transition_map(s) for s in perms], automaton.n_states, automaton.name)
    except ConstructionError as e:
        return f"refused: {e}"
    series = " ⊳ ".join("×".join(f"Z{n}" for n in lv.orders) for lv in plan.levels) or "trivial group"
    kind = "permutation-reset, group" if resets else "group"
    return f"{kind} of order {plan.order}, derived-series quotients {series}"


def _classify_or_refuse(automaton: Semiautomaton) -> tuple[list[int], dict[int, int]]:
    """:func:`classify`, but an automaton that contains a non-solvable group is refused as such."""
    try:
        return classify(automaton)
    except ConstructionError:
        _refuse_if_unsolvable(automaton)
        raise


def _refuse_if_unsolvable(automaton: Semiautomaton) -> None:
    """Definition 8: a semiautomaton containing a non-solvable group has no constant-depth simulator here."""
    from interp.tasks.groups import transformation_semigroup

    bad = [g for g in transformation_semigroup(automaton).maximal_subgroups if not g.is_solvable]
    if bad:
        order = max(int(g.order()) for g in bad)
        raise ConstructionError(
            f"{automaton.name!r} is not solvable: its transformation semigroup contains a non-solvable group "
            f"(order {order}), so Theorem 11's constant-depth construction does not apply; use prefix_scan "
            f"(Theorem 10, depth ⌈log2 T⌉) instead")


def _finish(c: _Circuit, automaton: Semiautomaton, state: str, length: int, theorem: str, options: dict,
            notes: str, W_U: np.ndarray | None = None, b_U: np.ndarray | None = None) -> ConstructionSpec:
    W_E, W_pos = c.embeddings()
    if W_U is None:
        W_U, b_U = one_hot_readout(c.layout, state)
    return ConstructionSpec(
        name="krohn_rhodes",
        theorem=theorem,
        layout=c.layout,
        W_E=W_E,
        W_pos=W_pos,
        blocks=c.blocks,
        W_U=W_U,
        b_U=b_U,
        input_tokens=c.tokens,
        output_names=list(automaton.states),
        io=bos_token_io(automaton.n_symbols),
        max_length=length,
        task={"kind": "automaton", "automaton": automaton.to_dict()},
        options=options,
        notes=notes,
    )


def cascade_stages(cascade: "Cascade") -> list[list[int]]:
    """Group the levels into stages: a level runs in the first stage after every level it reads.

    Levels of one stage do not read each other, so they are simulated side by side in the same
    blocks (Lemma 17, direct product); only a level that reads others waits for them and for a
    wiring block. Returns the level indices of each stage.
    """
    stage: list[int] = []
    for i, level in enumerate(cascade.levels):
        deps = level_dependencies(cascade, i)
        stage.append(1 + max(stage[j] for j in deps) if deps else 0)
    return [[i for i, s in enumerate(stage) if s == k] for k in range(max(stage) + 1)]


def level_dependencies(cascade: "Cascade", i: int) -> list[int]:
    """The earlier levels whose state changes level i's input for some σ (its wiring reads them)."""
    wiring = cascade.levels[i].wiring
    deps = []
    for j in range(i):
        for (prev, s), b in wiring.items():
            if any(wiring[(prev[:j] + (q,) + prev[j + 1:], s)] != b
                   for q in range(cascade.levels[j].automaton.n_states)):
                deps.append(j)
                break
    return deps


def _build_cascade(cascade: "Cascade", length: int, wiring: str) -> ConstructionSpec:
    """Lemma 21 with previous-state wiring; levels that do not read each other run side by side (Lemma 17)."""
    c = _Circuit(["BOS", *cascade.alphabet], length)
    states: dict[int, str] = {}
    stages = cascade_stages(cascade)
    for k, members in enumerate(stages):
        if k == 0:  # these levels read only σ: their input is a renaming of the token one-hot
            inputs = {i: _renamed_tokens(cascade, i) for i in members}
        else:
            inputs = _wiring_block(c, cascade, members, states, wiring)
        parts = []
        for i in members:
            saved, c.blocks = c.blocks, []
            states[i] = _simulate_component(c, cascade.levels[i].automaton, inputs[i], f"{cascade.levels[i].name}/")
            parts.append(c.blocks)
            c.blocks = saved
        c.blocks.extend(_side_by_side(c.layout, parts))
    automaton = cascade.automaton()
    spaces = [states[i] for i in range(len(cascade.levels))]
    if cascade.target is None:
        # sum-of-one-hots readout: logit(p) = α·#(levels whose state matches p); the exact tuple wins by α
        W_U = np.zeros((c.layout.d_model, automaton.n_states))
        for col, p in enumerate(cascade.product_states()):
            for space, q in zip(spaces, p):
                W_U[c.layout.index(space, q), col] = READOUT_ALPHA
        b_U = np.zeros(automaton.n_states)
        out = None
    else:
        out = "output"
        c.layout.add(out, automaton.n_states, labels=list(automaton.states))
        mlp = MLP(c.layout, f"output map: product state -> {automaton.name} state")
        for p, y in cascade.output.items():
            one_hot_lookup(mlp, [(space, q) for space, q in zip(spaces, p)], (out, y))
        c.block(f"output: product state -> {automaton.name} state", [], mlp)
        W_U = b_U = None
    theorem = "Lemma 21 (cascade product)" + (", wiring as printed (current states)" if wiring == "current" else "")
    options = {"path": "cascade", "levels": [lv.name for lv in cascade.levels], "wiring": wiring,
               "stages": [[cascade.levels[i].name for i in m] for m in stages], "cascade": cascade.to_dict()}
    notes = ("each wiring block fetches the earlier levels' states at t − 1 with a previous-token head"
             if wiring == "previous" else "NEGATIVE CONTROL: the wiring reads states after σ_t (thesis erratum E19)")
    return _finish(c, automaton, out or spaces[-1], length, theorem, options, notes, W_U, b_U)


def _renamed_tokens(cascade: "Cascade", i: int) -> list[Direction]:
    """Input slots of a level that reads only σ: slot b is the sum of the tokens σ it maps to b."""
    level = cascade.levels[i]
    prev = tuple(0 for _ in range(i))  # any earlier states: the wiring does not read them
    return [("tok", 0)] + [
        _sum([(("tok", 1 + s), 1.0) for s in range(len(cascade.alphabet)) if level.wiring[(prev, s)] == b])
        for b in range(level.automaton.n_symbols)]


def _side_by_side(layout: Layout, parts: list[list[Block]]) -> list[Block]:
    """Lemma 17: run several simulators in the same blocks (their subspaces are disjoint)."""
    if len(parts) == 1:
        return parts[0]
    merged = []
    for b in range(max(len(p) for p in parts)):
        here = [p[b] for p in parts if b < len(p)]
        mlps = [blk.mlp for blk in here if blk.mlp is not None]
        merged.append(Block([h for blk in here for h in blk.heads], MLP.combine(layout, mlps, " | ".join(m.label for m in mlps)),
                            " | ".join(blk.label for blk in here)))
    return merged


def _wiring_block(c: _Circuit, cascade: "Cascade", members: list[int], states: dict[int, str],
                  wiring: str) -> dict[int, list[Direction]]:
    """The block before a stage: σ^{(i)}_t = φ^{(i)}(q^{(j)}_{t−1} for the levels j it reads, σ_t) as one-hots.

    Returns the input slots of every level i of the stage (slot 0 = BOS). The thesis's wiring
    (Lemma 21) reads q_t instead of q_{t−1}; ``wiring="current"`` reproduces that.
    """
    heads: list[Head] = []
    sources = dict(states)
    if wiring == "previous":
        reads = []
        for j in sorted({j for i in members for j in level_dependencies(cascade, i)}):
            prev = f"{cascade.levels[members[0]].name}/prev.{cascade.levels[j].name}"
            c.layout.add(prev, c.layout.size(states[j]), labels=list(cascade.levels[j].automaton.states))
            reads.append((states[j], prev))
            sources[j] = prev
        heads.append(previous_token_head(c.layout, c.length, reads, pos_frac=c.pos_frac(), parity=c.parity()))
    mlp = MLP(c.layout, "wiring φ -> " + ", ".join(cascade.levels[i].name for i in members))
    slots: dict[int, list[Direction]] = {}
    for i in members:
        level = cascade.levels[i]
        a = level.automaton
        inp = f"{level.name}/input"
        c.layout.add(inp, a.n_symbols + 1, labels=["BOS", *a.alphabet])
        deps = level_dependencies(cascade, i)
        # one-hot with a default: b_out sets the most common symbol, every other entry moves the 1
        default = int(np.bincount(list(level.wiring.values()), minlength=a.n_symbols).argmax())
        mlp.out_bias((inp, 1 + default))
        mlp.unit("bos", 0.0, {(inp, 0): 1.0, (inp, 1 + default): -1.0})
        table = {(tuple(prev[j] for j in deps), s): b for (prev, s), b in level.wiring.items()}
        for (qs, s), b in sorted(table.items()):
            if b != default:
                inputs = [(sources[j], q) for j, q in zip(deps, qs)] + [("tok", 1 + s)]
                one_hot_lookup(mlp, inputs, {(inp, 1 + b): 1.0, (inp, 1 + default): -1.0})
        slots[i] = [(inp, k) for k in range(a.n_symbols + 1)]
    names = ", ".join(cascade.levels[i].name for i in members)
    c.block(f"wire into {names}" + (" (previous states)" if wiring == "previous" else " (current states, as printed)"),
            heads, mlp)
    return slots
