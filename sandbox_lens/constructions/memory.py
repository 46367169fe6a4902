"""Lemma 16: the memory unit (Definition 5; the flip-flop when |Q| = 2) in one attention layer.

A head attends to the most recent write and copies the written value; a bank of Lemma 10
trapezoids rounds it to a one-hot state. Following krohn-rhodes.md §2.2 (E7), BOS is a write
of q0, so an input with no writes yet reads q0 and no-op tokens carry nothing.

Accepted automata: every symbol is either the identity (a no-op) or a constant map (a write).
"""

from __future__ import annotations

import numpy as np

from sandbox_lens.constructions.gadgets import bos_token_io, latest_write_head, one_hot_readout, trapezoid
from sandbox_lens.interp.errors import ConstructionError, LengthError
from sandbox_lens.interp.model.spec import MLP, Block, ConstructionSpec, Layout, variable_site
from sandbox_lens.interp.tasks.automata import Semiautomaton

__all__ = ["build_memory", "write_targets", "MAX_LENGTH"]

MAX_LENGTH = 4096


def write_targets(automaton: Semiautomaton) -> list[int | None] | None:
    """For each symbol: the state it writes, or None for a no-op; None if some symbol is neither."""
    n = automaton.n_states
    out: list[int | None] = []
    for s in range(automaton.n_symbols):
        row = [int(x) for x in automaton.delta[s]]
        if row == list(range(n)):
            out.append(None)
        elif len(set(row)) == 1:
            out.append(row[0])
        else:
            return None
    return out


def build_memory(automaton: Semiautomaton, length: int) -> ConstructionSpec:
    """Lemma 16: a memory automaton (writes and no-ops, e.g. flipflop) in one attention layer that attends to the last
    write."""
    targets = write_targets(automaton)
    if targets is None:
        raise ConstructionError(
            f"memory needs an automaton whose symbols are writes (constant maps) or no-ops "
            f"(memory<n>, flipflop); {automaton.name!r} is not one (prefix_scan handles any automaton)"
        )
    if not 1 <= length <= MAX_LENGTH:
        raise LengthError(f"memory is verified for lengths 1..{MAX_LENGTH}, got {length}")
    n = automaton.n_states

    layout = Layout()
    layout.add("one")
    layout.add("posT")  # positional: t / T
    layout.add("val")  # the written state (BOS writes q0)
    layout.add("notwrite")  # 1 on no-op tokens
    layout.add("mem")  # head output: the latest written value
    layout.add("state", n, [f"q{q}" for q in range(n)])

    tokens = ["BOS", *automaton.alphabet]
    W_E = np.zeros((len(tokens), layout.d_model))
    W_E[:, layout.index("one")] = 1.0
    W_E[0, layout.index("val")] = automaton.initial
    for s, target in enumerate(targets):
        if target is None:
            W_E[1 + s, layout.index("notwrite")] = 1.0
        else:
            W_E[1 + s, layout.index("val")] = target
    W_pos = np.zeros((length + 1, layout.d_model))
    W_pos[:, layout.index("posT")] = np.arange(length + 1) / length

    head = latest_write_head(layout, length, n, src="val", dst="mem")
    mlp = MLP(layout, "Lemma 10 trapezoids: mem -> state")
    for q in range(n):
        trapezoid(mlp, "mem", x0=q, spacing=1.0, write=("state", q))

    W_U, b_U = one_hot_readout(layout, "state")
    return ConstructionSpec(
        name="memory",
        theorem="Lemma 16 (memory unit)",
        layout=layout,
        W_E=W_E,
        W_pos=W_pos,
        blocks=[Block([head], mlp, "latest write -> mem; trapezoids -> one-hot state")],
        W_U=W_U,
        b_U=b_U,
        input_tokens=tokens,
        output_names=list(automaton.states),
        io=bos_token_io(automaton.n_symbols),
        max_length=length,
        task={"kind": "automaton", "automaton": automaton.to_dict()},
        options={"writes": targets},
        notes="BOS counts as a write of q0.",
        variables=[
            variable_site("state", 0, "mid", "mem", note="the head's copy of the latest written value"),
            variable_site("state", 0, "post", "state", note="the one-hot state"),
            variable_site(
                "state", 0, "post", "mem", "inert", "the copy, still readable, once the MLP has written the state"
            ),
        ],
    )
