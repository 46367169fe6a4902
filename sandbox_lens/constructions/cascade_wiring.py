"""Definition 6 and Lemma 21: cascades of permutation-reset levels, and the wiring between them.

Each level is simulated as a permutation-reset component (:mod:`sandbox_lens.constructions.permutation_reset`)
on a one-hot input written by the previous wiring block; the wiring block's MLP computes φ^{(i+1)}
from the earlier levels' states **before** σ_t, fetched by a previous-token head (the thesis's
wiring reads the states after σ_t, erratum E19; ``wiring="current"`` — ``as_printed="wiring"`` in
the registry — rebuilds that defect as a negative control). Levels that do not read each other
run side by side (Lemma 17).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from sandbox_lens.constructions.circuit import Circuit, direction_sum, finish
from sandbox_lens.constructions.gadgets import READOUT_ALPHA, one_hot_lookup, previous_token_head
from sandbox_lens.constructions.permutation_reset import simulate_component
from sandbox_lens.interp.model.spec import MLP, Block, ConstructionSpec, Direction, Head, Layout, variable_site

if TYPE_CHECKING:
    from sandbox_lens.interp.tasks.cascade import Cascade

__all__ = ["build_cascade", "cascade_stages", "level_dependencies", "WIRINGS"]

WIRINGS = ("previous", "current")


def cascade_stages(cascade: Cascade) -> list[list[int]]:
    """Group the levels into stages: a level runs in the first stage after every level it reads.

    Levels of one stage do not read each other, so they are simulated side by side in the same
    blocks (Lemma 17, direct product); only a level that reads others waits for them and for a
    wiring block. Returns the level indices of each stage.
    """
    stage: list[int] = []
    for i, _level in enumerate(cascade.levels):
        deps = level_dependencies(cascade, i)
        stage.append(1 + max(stage[j] for j in deps) if deps else 0)
    return [[i for i, s in enumerate(stage) if s == k] for k in range(max(stage) + 1)]


def level_dependencies(cascade: Cascade, i: int) -> list[int]:
    """The earlier levels whose state changes level i's input for some σ (its wiring reads them)."""
    wiring = cascade.levels[i].wiring
    deps = []
    for j in range(i):
        for (prev, s), b in wiring.items():
            if any(
                wiring[(prev[:j] + (q,) + prev[j + 1 :], s)] != b for q in range(cascade.levels[j].automaton.n_states)
            ):
                deps.append(j)
                break
    return deps


def build_cascade(cascade: Cascade, length: int, wiring: str) -> ConstructionSpec:
    """Lemma 21 with previous-state wiring; levels that do not read each other run side by side (Lemma 17)."""
    c = Circuit(["BOS", *cascade.alphabet], length)
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
            states[i] = simulate_component(c, cascade.levels[i].automaton, inputs[i], f"{cascade.levels[i].name}/")
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
    options = {
        "path": "cascade",
        "levels": [lv.name for lv in cascade.levels],
        "wiring": wiring,
        "stages": [[cascade.levels[i].name for i in m] for m in stages],
        "cascade": cascade.to_dict(),
    }
    notes = (
        "each wiring block fetches the earlier levels' states at t − 1 with a previous-token head"
        if wiring == "previous"
        else "NEGATIVE CONTROL: the wiring reads states after σ_t (thesis erratum E19)"
    )
    return finish(
        c,
        automaton,
        out or spaces[-1],
        length,
        theorem,
        options,
        notes,
        W_U,
        b_U,
        variables=_level_sites(cascade, spaces, out is not None),
    )


def _level_sites(cascade: Cascade, spaces: list[str], mapped: bool) -> list[dict]:
    """Each level's state (:mod:`sandbox_lens.interp.tasks.statevars`): its one-hot where the read-out takes it — before the
    output map's block when there is one (then the one-hot is inert after it), else the last block."""

    sites = []
    for level, space in zip(cascade.levels, spaces):
        sites.append(
            variable_site(
                level.name,
                -2 if mapped else -1,
                "post",
                space,
                note=f"level {level.name}'s state, one-hot (Lemma 20's simulator)",
            )
        )
        if mapped:
            sites.append(
                variable_site(level.name, -1, "post", space, "inert", "read by the output map, then by nothing")
            )
    return sites


def _renamed_tokens(cascade: Cascade, i: int) -> list[Direction]:
    """Input slots of a level that reads only σ: slot b is the sum of the tokens σ it maps to b."""
    level = cascade.levels[i]
    prev = tuple(0 for _ in range(i))  # any earlier states: the wiring does not read them
    return [("tok", 0)] + [
        direction_sum([(("tok", 1 + s), 1.0) for s in range(len(cascade.alphabet)) if level.wiring[(prev, s)] == b])
        for b in range(level.automaton.n_symbols)
    ]


def _side_by_side(layout: Layout, parts: list[list[Block]]) -> list[Block]:
    """Lemma 17: run several simulators in the same blocks (their subspaces are disjoint)."""
    if len(parts) == 1:
        return parts[0]
    merged = []
    for b in range(max(len(p) for p in parts)):
        here = [p[b] for p in parts if b < len(p)]
        mlps = [blk.mlp for blk in here if blk.mlp is not None]
        merged.append(
            Block(
                [h for blk in here for h in blk.heads],
                MLP.combine(layout, mlps, " | ".join(m.label for m in mlps)),
                " | ".join(blk.label for blk in here),
            )
        )
    return merged


def _wiring_block(
    c: Circuit, cascade: Cascade, members: list[int], states: dict[int, str], wiring: str
) -> dict[int, list[Direction]]:
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
    c.block(
        f"wire into {names}" + (" (previous states)" if wiring == "previous" else " (current states, as printed)"),
        heads,
        mlp,
    )
    return slots
