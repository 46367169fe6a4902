"""MIB's circuit-track faithfulness areas (CPR, CMD), computed as its evaluator computes them.

MIB's evaluator (hannamw/MIB-circuit-track, on EAP-IG's graph code) does, for a score file over the *complete*
graph of the model's shape (every head and MLP, dead ones included; one ``input`` node for the token
embedding and none for positions):

1. for each size p in :data:`~sandbox_lens.interp.circuits.score.MIB_PERCENTAGES`, n = ⌊p·N⌋ with N the complete
   graph's edge count;
2. ``apply_topn(n, absolute)``: the n best edges by score (by |score| when ``absolute``), then the nodes that
   have both an incoming and an outgoing edge (``input`` counts as having incoming ones), then ``prune``:
   repeatedly drop nodes missing an incoming or outgoing edge and edges missing either end (the logits are
   always present) until neither changes;
3. f(p) = (m(C) − m(∅)) / (m(full) − m(∅)), every edge outside the pruned circuit patched;
4. CPR = trapezoids of f over p from the **signed** ranking; CMD = trapezoids of |1 − f| from the
   **absolute** ranking (``print_results.py`` takes each from its own result file).

Here the same steps run on this project's graph: its edges map onto the complete graph's (``embed`` is
``input``; a dead head's or an empty MLP's edges are in the complete graph with score 0 and no effect when
patched), and the ``pos`` edges, which MIB's graph has no node for, are never patched. Ties are broken in
the complete graph's matrix order (MIB's argsort is not stable; a tie only matters among equal scores). The
metric m is the task's metric on every read output, not MIB's last-token logit difference.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from sandbox_lens.interp.circuits.effects import grouped_runs
from sandbox_lens.interp.circuits.graph import Edge, Graph
from sandbox_lens.interp.circuits.patching import Patcher, _chunk
from sandbox_lens.interp.circuits.score import MIB_PERCENTAGES, areas

__all__ = ["CompleteGraph", "mib_node", "mib_edge", "mib_curve", "complete_edge_count"]


def mib_node(name: str) -> str | None:
    """EAP-IG's name for one of this project's nodes (``embed`` → ``input``, ``a1.0`` → ``a1.h0``); None for
    ``pos``, which EAP-IG's graph does not have."""
    if name == "pos":
        return None
    if name == "embed":
        return "input"
    if name.startswith("a"):
        layer, head = name[1:].split(".")
        return f"a{layer}.h{head}"
    return name


def mib_edge(e: Edge) -> str | None:
    """EAP-IG's name for an edge of this project's graph (``input->a1.h0<q>``, ``a0.h1->m2``); None for a
    ``pos`` edge."""
    sender, receiver = mib_node(e.sender), mib_node(e.receiver)
    if sender is None or receiver is None:
        return None
    return f"{sender}->{receiver}" + (f"<{e.channel}>" if e.channel != "in" else "")


def complete_edge_count(n_layers: int, n_heads: int) -> int:
    """The number of edges of EAP-IG's complete graph (sequential attention and MLP):
    3HL + (3H+1)(H+1)·L(L−1)/2 + 2L(H+1) + 1."""
    H, L = n_heads, n_layers
    return 3 * H * L + (3 * H + 1) * (H + 1) * L * (L - 1) // 2 + 2 * L * (H + 1) + 1


@dataclass(frozen=True)
class CompleteGraph:
    """EAP-IG's complete graph of a model's shape as its matrices: forward nodes (senders: ``input``, then per
    layer the heads and the MLP) × backward nodes (receivers: per layer each head's q, k, v inputs and the MLP's,
    then the logits), ``real`` marking the edges that exist."""

    n_layers: int
    n_heads: int

    @cached_property
    def forward(self) -> list[str]:
        """The sender nodes, in EAP-IG's forward index order."""
        out = ["input"]
        for layer in range(self.n_layers):
            out += [f"a{layer}.h{h}" for h in range(self.n_heads)] + [f"m{layer}"]
        return out

    @cached_property
    def backward(self) -> list[str]:
        """The receiver inputs, in EAP-IG's backward index order (``a0.h1<k>``, ``m0``, …, ``logits``)."""
        out = []
        for layer in range(self.n_layers):
            out += [f"a{layer}.h{h}<{c}>" for c in "qkv" for h in range(self.n_heads)] + [f"m{layer}"]
        return out + ["logits"]

    @cached_property
    def owner(self) -> np.ndarray:
        """[forward, backward]: whether the receiver input belongs to the forward node (EAP-IG's
        ``forward_to_backward``)."""
        m = np.zeros((len(self.forward), len(self.backward)), dtype=bool)
        row = {n: i for i, n in enumerate(self.forward)}
        for j, name in enumerate(self.backward[:-1]):
            m[row[name.split("<")[0]], j] = True
        return m

    @cached_property
    def real(self) -> np.ndarray:
        """[forward, backward]: the edges of the complete graph (a sender before its receiver)."""
        m = np.zeros((len(self.forward), len(self.backward)), dtype=bool)
        for name in self.edge_names:
            i, j = self.index(name)
            m[i, j] = True
        return m

    @cached_property
    def edge_names(self) -> list[str]:
        """Every edge's name (``input->a0.h0<q>``, …, ``m1->logits``)."""
        edges, upstream = [], ["input"]
        for layer in range(self.n_layers):
            heads = [f"a{layer}.h{h}" for h in range(self.n_heads)]
            edges += [f"{u}->{h}<{c}>" for u in upstream for h in heads for c in "qkv"]
            upstream = upstream + heads
            edges += [f"{u}->m{layer}" for u in upstream]
            upstream = upstream + [f"m{layer}"]
        return edges + [f"{u}->logits" for u in upstream]

    @cached_property
    def _rows(self) -> dict[str, int]:
        return {n: i for i, n in enumerate(self.forward)}

    @cached_property
    def _cols(self) -> dict[str, int]:
        return {n: j for j, n in enumerate(self.backward)}

    def index(self, name: str) -> tuple[int, int]:
        """(forward, backward) of an edge name."""
        sender, receiver = name.split("->")
        return self._rows[sender], self._cols[receiver]

    def topn(self, scores: np.ndarray, n: int, absolute: bool) -> np.ndarray:
        """EAP-IG's ``apply_topn(n, absolute, level='edge', reset=True, prune=True)``: the edges in the circuit
        ([forward, backward] bool) given ``scores`` on the same matrix."""
        key = np.abs(scores) if absolute else scores.astype(np.float64)
        key = np.where(self.real, key, -np.inf).ravel()
        order = np.argsort(-key, kind="stable")
        edges = np.zeros(key.shape, dtype=bool)
        edges[order[:n]] = True
        return self.prune(edges.reshape(scores.shape))

    def prune(self, edges: np.ndarray) -> np.ndarray:
        """EAP-IG's ``prune``: drop nodes without an incoming or outgoing edge (``input`` counts as having
        incoming ones) and edges without both ends (the logits are always present), until neither changes."""
        edges = edges.copy()
        nodes = np.zeros(len(self.forward), dtype=bool)
        while True:
            incoming = np.asarray((self.owner & np.asarray(edges.any(axis=0))[None, :]).any(axis=1))
            incoming[0] = True
            new_nodes = edges.any(axis=1) & incoming
            receivers = (new_nodes[:, None] & self.owner).any(axis=0)
            receivers[-1] = True
            new_edges = edges & new_nodes[:, None] & receivers[None, :]
            if np.array_equal(new_nodes, nodes) and np.array_equal(new_edges, edges):
                return edges
            nodes, edges = new_nodes, new_edges


def _on_complete(
    graph: Graph, complete: CompleteGraph, scores: np.ndarray
) -> tuple[np.ndarray, list[tuple[int, int] | None]]:
    """``scores`` (one per edge of ``graph``, NaN unscored → 0 as in an exported file) on the complete graph's
    matrix, and each of ``graph``'s edges' place there (None: a ``pos`` edge)."""
    matrix = np.zeros(complete.real.shape)
    where: list[tuple[int, int] | None] = []
    for e, s in zip(graph.edges, scores):
        name = mib_edge(e)
        if name is None:
            where.append(None)
            continue
        i, j = complete.index(name)
        matrix[i, j] = 0.0 if np.isnan(s) else float(s)
        where.append((i, j))
    return matrix, where


def _measure(
    patcher: Patcher, pairs: Any, runs: list[tuple[list[Edge], None]], source: dict[str, Any], metric: str
) -> list[float]:
    """``metric`` of each run, in order; runs that patch only later blocks start there, from the clean run (the
    unpatched one costs only the unembedding), side by side with others of the same first block."""
    measured = [0.0] * len(runs)
    groups = grouped_runs(
        patcher, pairs.clean, runs, source, lambda _start, size: _chunk(size, patcher.model, pairs.clean)
    )
    for part, logits in groups:
        for i, j in enumerate(part):
            measured[j] = pairs.value(logits[i], metric)
    return measured


def mib_curve(
    patcher: Patcher,
    pairs: Any,
    signed: ArrayLike,
    source: dict[str, Any],
    metric: str = "logit_diff",
    percentages: Sequence[float] = MIB_PERCENTAGES,
) -> dict[str, Any]:
    """MIB's CPR (from the ``signed`` scores' ranking) and CMD (from their absolute values'), with each curve:
    the sizes, n = ⌊p·N⌋ over the complete graph, the edges left after pruning, and f (see the module
    docstring). ``signed`` is one score per edge of ``patcher.graph``, positive = important."""
    g = patcher.graph
    scores = np.asarray(signed, dtype=np.float64)
    if len(scores) != len(g.edges):
        raise ValueError(f"{len(scores)} scores for a graph of {len(g.edges)} edges")
    cfg = patcher.model.cfg
    complete = CompleteGraph(cfg.n_layers, cfg.n_heads)
    matrix, where = _on_complete(g, complete, scores)
    N = int(complete.real.sum())
    counts = [int(p * N) for p in percentages]
    settings: list[tuple[list[Edge], None]] = []
    kept: dict[bool, list[int]] = {}
    for absolute in (False, True):
        kept[absolute] = []
        for n in counts:
            circuit = complete.topn(matrix, n, absolute)
            patched = [e for e, w in zip(g.edges, where) if w is not None and not circuit[w]]
            settings.append((patched, None))
            kept[absolute].append(int(circuit.sum()))
    settings += [([], None), ([e for e, w in zip(g.edges, where) if w is not None], None)]
    # small graphs repeat circuits (n = 0 at the smallest sizes, the whole graph at the largest, signed = absolute
    # for scores of one sign): each distinct circuit runs once
    distinct: dict[frozenset[Edge], int] = {}
    runs: list[tuple[list[Edge], None]] = []
    for patched, _ in settings:
        if distinct.setdefault(frozenset(patched), len(distinct)) == len(runs):
            runs.append((patched, None))
    measured = _measure(patcher, pairs, runs, source, metric)
    *curves, full, empty = [measured[distinct[frozenset(patched)]] for patched, _ in settings]
    span = full - empty
    f = [float((v - empty) / span) if span else 1.0 for v in curves]
    f_signed, f_absolute = f[: len(counts)], f[len(counts) :]
    return {
        "definition": "MIB circuit track (signed ranking → CPR, absolute → CMD; complete graph; pruned)",
        "percentages": list(percentages),
        "complete_edges": N,
        "edges": counts,
        "metric": metric,
        "full": float(full),
        "empty": float(empty),
        "signed": {"faithfulness": f_signed, "kept": kept[False]},
        "absolute": {"faithfulness": f_absolute, "kept": kept[True]},
        "cpr": areas(percentages, f_signed)["cpr"],
        "cmd": areas(percentages, f_absolute)["cmd"],
    }
