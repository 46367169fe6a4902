"""The circuit a Krohn–Rhodes construction is assembled in (Theorem 11's shared machinery).

:class:`Circuit` holds the layout (BOS, a constant, the token one-hots, positional features added on
demand), the blocks written so far and the embeddings; :func:`finish` turns it into a
:class:`~sandbox_lens.interp.model.spec.ConstructionSpec` that reads the state out of one one-hot subspace.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from sandbox_lens.constructions.gadgets import bos_token_io, one_hot_readout
from sandbox_lens.interp.model.spec import MLP, Block, ConstructionSpec, Direction, Head, Layout, variable_site
from sandbox_lens.interp.tasks.automata import Semiautomaton

#: Krohn–Rhodes's counters are Lemma 15 heads + staircases like ``modular_counter``'s, and round the same
#: way on TransformerLens 4's bridge: krohn_rhodes C3 at T = 4096 there, its own forward, 0.99986 of
#: 103 words; exact at 2048 (README, "TransformerLens 3.9 and 4.x"). 3.9 is exact to 4096.
BRIDGE_FLOAT32_MAX_LENGTH = 2048

__all__ = ["Circuit", "direction_sum", "finish"]


class Circuit:
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


def direction_sum(terms: Sequence[tuple[Direction, float]]) -> dict:
    """The linear combination Σ w·direction as one :data:`Direction` mapping."""
    out: dict = {}
    for direction, w in terms:
        items = direction.items() if isinstance(direction, dict) else [(direction, 1.0)]
        for key, v in items:
            key = key if isinstance(key, tuple) else (key, 0)
            out[key] = out.get(key, 0.0) + w * v
    return {k: v for k, v in out.items() if v}


def finish(
    c: Circuit,
    automaton: Semiautomaton,
    state: str,
    length: int,
    theorem: str,
    options: dict,
    notes: str,
    W_U: np.ndarray | None = None,
    b_U: np.ndarray | None = None,
    inert: str | None = None,
    variables: list[dict] | None = None,
) -> ConstructionSpec:
    """The finished construction: embeddings from the circuit, the state read out of ``state`` (the high-level
    state's site; ``inert``: a subspace the last block holds that nothing reads any more; ``variables``: the sites
    of other high-level variables, e.g. a cascade's levels)."""

    variables = [
        variable_site("state", -1, "post", state, note="the simulated state the unembedding reads"),
        *(variables or []),
    ]
    if inert is not None:
        variables.append(
            variable_site(
                "state",
                -1,
                "post",
                inert,
                "inert",
                "a lower level's coordinate, read by the levels above it, then by nothing",
            )
        )
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
        bridge_float32_max_length=BRIDGE_FLOAT32_MAX_LENGTH,
        variables=variables,
    )
