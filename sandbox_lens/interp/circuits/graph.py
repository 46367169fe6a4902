"""The computational graph circuit discovery works on, read from a model's weights.

Nodes are the parts that write to or read from the residual stream: the token embedding
(``embed``), the position embedding (``pos``), each attention head (``a<layer>.<head>``), each MLP
(``m<layer>``) and the unembedding (``logits``). An edge is a writer → reader path through the
residual stream; a head reads on three channels (``q``, ``k``, ``v``: its query, key and value
inputs), an MLP and the unembedding on one (``in``). The graph is *complete*: every writer before a
reader is joined to it, as ACDC's graph is — the ground truth (:mod:`sandbox_lens.interp.circuits.truth`) says
which of those edges the construction's proof uses.

Heads of one block read the same residual stream (``resid_pre``) and do not see each other; the
block's MLP reads ``resid_mid`` and so sees them. A construction's padded heads and empty MLPs
(all-zero weights) are not nodes: they compute nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from sandbox_lens.interp.model.hooked import tl_state_dict

__all__ = ["Node", "Edge", "Graph", "CHANNELS"]

#: The input channels of each kind of reader.
CHANNELS = {"head": ("q", "k", "v"), "mlp": ("in",), "logits": ("in",)}


@dataclass(frozen=True)
class Node:
    """A node of the computational graph: an embedding, a head, an MLP or the logits, with its layer."""

    name: str
    kind: str  # embed | pos | head | mlp | logits
    layer: int  # -1 for the embeddings, n_layers for the unembedding
    head: int = -1

    @property
    def order(self) -> tuple[int, int]:
        """Residual-stream order: heads of block l come before its MLP, which comes before block l + 1."""
        if self.kind in ("embed", "pos"):
            return (-1, 0)
        return (self.layer, 1 if self.kind == "mlp" else 0)

    @property
    def writes(self) -> bool:
        return self.kind != "logits"

    @property
    def reads(self) -> bool:
        return self.kind not in ("embed", "pos")


@dataclass(frozen=True)
class Edge:
    """An edge of the graph: a sender node writing into a receiver's input channel (a head's q, k or v; an MLP's or the
    logits' input)."""

    sender: str
    receiver: str
    channel: str  # q | k | v | in

    @property
    def name(self) -> str:
        return f"{self.sender}->{self.receiver}" + (f".{self.channel}" if self.channel != "in" else "")


class Graph:
    """The complete residual graph of a model: :attr:`nodes` in residual order and every edge between them."""

    def __init__(self, nodes: list[Node]) -> None:
        self.nodes = sorted(nodes, key=lambda n: (n.order, n.kind != "embed", n.head))
        self.by_name = {n.name: n for n in self.nodes}
        self.edges: list[Edge] = [
            Edge(s.name, r.name, c)
            for r in self.nodes
            if r.reads
            for c in CHANNELS[r.kind]
            for s in self.nodes
            if s.writes and self.before(s, r)
        ]
        self.index = {e: i for i, e in enumerate(self.edges)}

    @staticmethod
    def before(sender: Node, receiver: Node) -> bool:
        """Whether ``receiver`` reads what ``sender`` writes (heads of one block do not see each other)."""
        return sender.order < receiver.order and not (
            sender.kind == receiver.kind == "head" and sender.layer == receiver.layer
        )

    @property
    def senders(self) -> list[Node]:
        return [n for n in self.nodes if n.writes]

    @property
    def receivers(self) -> list[Node]:
        return [n for n in self.nodes if n.reads]

    def incoming(self, receiver: str) -> Iterator[Edge]:
        return (e for e in self.edges if e.receiver == receiver)

    def __len__(self) -> int:
        return len(self.edges)

    @staticmethod
    def of_model(model: Any) -> Graph:
        """The graph of a TransformerLens model; heads and MLPs whose weights are all zero are left out."""

        sd = {
            k: v.cpu().double().numpy()
            for k, v in tl_state_dict(model).items()
            if k.startswith("blocks.") and (".attn.W_" in k or ".mlp." in k)
        }
        return Graph.of_weights(sd, model.cfg.n_layers, model.cfg.n_heads)

    @staticmethod
    def of_weights(sd: dict[str, Any], n_layers: int, n_heads: int) -> Graph:
        """The graph of TransformerLens state-dict arrays (``blocks.<l>.attn.W_Q`` ..., numpy)."""
        import numpy as np

        nodes = [Node("embed", "embed", -1), Node("pos", "pos", -1)]
        for l in range(n_layers):
            p = f"blocks.{l}."
            for h in range(n_heads):
                if any(np.any(sd[p + f"attn.{w}"][h] != 0) for w in ("W_Q", "W_K", "W_V", "W_O")):
                    nodes.append(Node(f"a{l}.{h}", "head", l, h))
            if p + "mlp.W_in" in sd and any(np.any(sd[p + f"mlp.{w}"] != 0) for w in ("W_in", "W_out", "b_out")):
                nodes.append(Node(f"m{l}", "mlp", l))
        nodes.append(Node("logits", "logits", n_layers))
        return Graph(nodes)

    def to_dict(self) -> dict[str, Any]:
        return {"nodes": [n.name for n in self.nodes], "edges": [e.name for e in self.edges]}
