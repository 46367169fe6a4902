"""Lemma 15: the modular counter C_n (parity = C_2) in one attention layer.

The counting head (Lemma 15's BOS-sink trick) writes s_t = Σ_{j≤t} a_j / N exactly, where a_j
is the increment of symbol σ_j; the MLP is a bank of Lemma 10 trapezoids that maps the grid
point k/N to the one-hot state (k + q0) mod n.

Errata handled (krohn-rhodes.md §2.1): γ_t = log(N − t) (E1, the OCR lost a minus); the sum
is over j ≤ t (E2); the lookup must be (N·s + q0) mod n (E3); the output goes to a fresh
channel because TransformerLens keeps the residual stream (E4). N is a power of two ≥ 2T so
1/N and every partial sum are exact binary fractions: float32 stays exact far beyond the
supported range.
"""

from __future__ import annotations

import math

import numpy as np

from sandbox_lens.constructions.gadgets import bos_token_io, one_hot_readout, prefix_average_head, trapezoid
from sandbox_lens.interp.errors import ConstructionError, LengthError
from sandbox_lens.interp.model.spec import MLP, Block, ConstructionSpec, Layout, variable_site
from sandbox_lens.interp.tasks.automata import Semiautomaton

__all__ = ["build_modular_counter", "counter_increments", "MAX_LENGTH"]

#: Longest verified length. (The float32 limit of the construction itself is ~2²¹/(n−1);
#: the MLP width 4((n−1)T+1) is what makes longer models impractical.)
MAX_LENGTH = 4096
#: On TransformerLens 4's bridge the MLP's F.linear rounds the staircase's large cancelling sums
#: differently: C3 verified exact to 2048 there (300 words), 0.9997 at 4096 (README, "TransformerLens 3.9 and 4.x").
BRIDGE_FLOAT32_MAX_LENGTH = 2048


def counter_increments(automaton: Semiautomaton) -> list[int] | None:
    """The increment a_σ of each symbol if every δ(·, σ) is q ↦ q + a_σ mod n, else None."""
    n = automaton.n_states
    incs = []
    for s in range(automaton.n_symbols):
        a = int(automaton.delta[s][0]) % n
        if any(int(automaton.delta[s][q]) != (q + a) % n for q in range(n)):
            return None
        incs.append(a)
    return incs


def build_modular_counter(automaton: Semiautomaton, length: int) -> ConstructionSpec:
    """Lemma 15: C_n (parity = C_2) in one attention layer — a uniform counting head and an MLP that reads the sum mod
    n."""
    incs = counter_increments(automaton)
    if incs is None:
        raise ConstructionError(
            f"modular_counter needs an automaton in which every symbol adds a constant mod |Q| "
            f"(C<n>, parity); {automaton.name!r} is not one (prefix_scan handles any automaton)"
        )
    if not 1 <= length <= MAX_LENGTH:
        raise LengthError(f"modular_counter is verified for lengths 1..{MAX_LENGTH}, got {length}")
    n = automaton.n_states
    N = 2 ** math.ceil(math.log2(2 * length))  # power-of-two normaliser > T

    layout = Layout()
    layout.add("bos")
    layout.add("log_sink")  # positional: log(N − t)
    layout.add("val")  # the token's increment a_σ
    layout.add("s")  # head output Σ_{j≤t} a_j / N
    layout.add("state", n, [f"q{q}" for q in range(n)])

    tokens = ["BOS", *automaton.alphabet]
    W_E = np.zeros((len(tokens), layout.d_model))
    W_E[0, layout.index("bos")] = 1.0
    for s, a in enumerate(incs):
        W_E[1 + s, layout.index("val")] = a
    W_pos = np.zeros((length + 1, layout.d_model))
    W_pos[:, layout.index("log_sink")] = np.log(N - np.arange(length + 1, dtype=np.float64))

    head = prefix_average_head(layout, src="val", dst="s")
    mlp = MLP(layout, "Lemma 10 trapezoids: s -> state")
    for k in range((n - 1) * length + 1):
        trapezoid(mlp, "s", x0=k / N, spacing=1.0 / N, write=("state", (k + automaton.initial) % n))

    W_U, b_U = one_hot_readout(layout, "state")
    return ConstructionSpec(
        name="modular_counter",
        theorem="Lemma 15 (modular counter)",
        layout=layout,
        W_E=W_E,
        W_pos=W_pos,
        blocks=[Block([head], mlp, "count: s = Σ a_j / N; trapezoids -> one-hot state")],
        W_U=W_U,
        b_U=b_U,
        input_tokens=tokens,
        output_names=list(automaton.states),
        io=bos_token_io(automaton.n_symbols),
        max_length=length,
        task={"kind": "automaton", "automaton": automaton.to_dict()},
        options={"N": N, "increments": incs},
        notes=f"BOS sink with score log({N} - t); grid spacing 1/{N}.",
        bridge_float32_max_length=BRIDGE_FLOAT32_MAX_LENGTH,
        variables=[
            variable_site("state", 0, "mid", "s", note="the head's count Σ a_j / N, before the staircase"),
            variable_site("state", 0, "post", "state", note="the staircase's one-hot state"),
            variable_site(
                "state",
                0,
                "post",
                "s",
                "inert",
                "the count, still readable, once the MLP has written the state: nothing reads it",
            ),
        ],
    )
