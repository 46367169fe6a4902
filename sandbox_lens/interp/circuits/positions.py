"""Ground truth per position: which edges a construction uses *at which token position*.

An edge at position p is the sender's output at p entering the receiver's channel at p — what patching the edge at
that position alone replaces. For a query, an MLP or the unembedding, position p feeds the receiver's output at p;
for a key or value it feeds every later query that reads p, so a crossing edge is counted at the position its
sender writes; :attr:`PositionTruth.crossing` splits it further by the query that reads it (PEAP's crossing edges).

Derived from the construction and the pairs, backwards from the outputs the metric reads, at one ablation level
(:mod:`sandbox_lens.interp.circuits.levels`):

* a receiver's output is **used at p** when one of its edges in the level is used at a position its reader takes;
  the unembedding is used at the positions the metric reads;
* a receiver channel **takes** position p: a query, an MLP or the unembedding at the positions where its receiver
  is used; a value at every p that some used query i routes to — the clean pattern gives p at least
  :data:`ROUTE_FLOOR` on some clean word, or, for a head none of whose query or key edges is in the level, the
  pattern with those edges ablated does (a circuit without them runs it); a key at every p ≤ some used query (a key
  moves the softmax wherever the query sees it);
* the edge is **in the truth at p** when it is in the level, its receiver channel takes p, and the ablation can
  change what it delivers there, in the coordinates the level counts (resample: the clean and corrupted outputs
  differ at p on some pair; zero: nonzero at p; mean: differs from its mean at p);
* a key or value edge in the truth at key j is **in the truth for query i** when i is a used query of its head
  that takes j (a value: j is one of i's routes; a key: j ≤ i).

For a head whose pattern reads only positions and constants (the prefix scan's look-back heads: Theorem 10 routes
query t to t − 2^(l−1)), the routes are the same for every word and follow from the weights; for a head whose
pattern reads the word (FFL, Dyck, the gridworld's detectors) they are those the clean words of the batch take,
and the head is listed in ``word_routed``. ``tests/circuits/test_positions.py`` checks the prefix scan's routes
against the proof and that patching every (edge, position) outside the truth leaves the read outputs' answers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sandbox_lens.interp.circuits.graph import CHANNELS, Edge, Graph
from sandbox_lens.interp.circuits.levels import LevelError, Levels, ablation_change, ablation_coords, tolerance_of
from sandbox_lens.interp.circuits.truth import WORD
from sandbox_lens.interp.model.arithmetic import attention_scale, layer_norm
from sandbox_lens.interp.model.device import to_numpy
from sandbox_lens.interp.model.hooked import tl_state_dict
from sandbox_lens.interp.model.run import exact_precision

__all__ = ["PositionTruth", "position_truth", "head_input", "causal_pattern", "ROUTE_FLOOR", "POSITION_LEVELS"]

#: A value route counts when the clean pattern gives it at least this weight on some clean word: below it, the key's
#: value moves the head's output by less than 2⁻¹⁶ of the values' size (the ties' tolerance in
#: :mod:`sandbox_lens.interp.circuits.score`). Hard attention leaves far less elsewhere (the prefix scan: under 10⁻¹²
#: at the read queries); a counting head's averaged positions (1/64 beside an attention sink) stay far above it.
ROUTE_FLOOR = 2.0**-16
#: The ablation levels a per-position truth is defined at.
POSITION_LEVELS = ("resample", "zero", "mean")


@dataclass
class PositionTruth:
    """Per edge (graph order) and position, whether the construction uses it (see the module docstring)."""

    graph: Graph
    level: str
    edges: np.ndarray  # bool [edges, positions]
    read: list[int]  # the positions the metric reads
    routes: dict[str, dict[int, list[int]]]  # head -> query position -> the key positions its value takes
    word_routed: list[str]  # heads whose routes come from the batch's clean words (their pattern reads the word)
    #: per key or value edge (graph index): bool ``[query, key]``, the edge at key j read by query i (PEAP's crossing
    #: edges, :mod:`~sandbox_lens.interp.circuits.crossing`); its any over queries is the edge's row of ``edges``
    crossing: dict[int, np.ndarray] = field(default_factory=dict)

    @property
    def n_positions(self) -> int:
        return int(self.edges.shape[1])

    def node_labels(self) -> dict[str, np.ndarray]:
        """Per sender, the positions at which one of its edges is in the truth (bool ``[positions]``)."""
        out = {n.name: np.zeros(self.n_positions, dtype=bool) for n in self.graph.senders}
        for e, row in zip(self.graph.edges, self.edges):
            out[e.sender] |= row
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "level": self.level,
            "positions": self.n_positions,
            "read": self.read,
            "edges": {
                e.name: [int(p) for p in np.flatnonzero(row)]
                for e, row in zip(self.graph.edges, self.edges)
                if row.any()
            },
            "routes": {h: {str(i): js for i, js in r.items()} for h, r in self.routes.items()},
            "word_routed": self.word_routed,
            "crossing_positives": int(sum(int(c.sum()) for c in self.crossing.values())),
            "route_floor": ROUTE_FLOOR,
        }


def position_truth(levels: Levels, level: str, patcher: Any, pairs: Any) -> PositionTruth:
    """The per-position truth of a construction at ``level`` (resample, zero or mean) for ``pairs``' metric and
    corruption, measured on ``patcher``'s model (see the module docstring)."""
    truth = levels.truth
    if truth.imposed or truth.flow is None:
        raise LevelError(
            "per-position ground truth is derived from a construction's weights; a trained twin's imposed truth is "
            "per node (score its positions against the construction it was aligned to)"
        )
    if level not in POSITION_LEVELS:
        raise LevelError(f"per-position ground truth is defined at {', '.join(POSITION_LEVELS)}, not {level!r}")
    g = truth.graph
    flow = truth.flow
    members = levels.members[levels.check(level)]
    state = patcher.clean_state(pairs.clean)
    clean, corrupt = state.outputs, patcher.outputs(pairs.corrupt)
    tol = tolerance_of(clean)
    T = pairs.clean.shape[1]
    routes = {h: _routes(a) for h, a in _patterns(patcher.model, state.resid, g).items()}
    # a head none of whose query or key edges is in the level reads with them ablated: its value also takes the routes
    # of the pattern those ablated inputs give (the same as the clean ones where the ablation delivers the same)
    kept = {(e.receiver, e.channel) for e in members}
    detached = [n for n in g.nodes if n.kind == "head" and not {(n.name, "q"), (n.name, "k")} & kept]
    shifts = {
        n.name: tuple(
            -sum(
                ablation_change(level, clean[e.sender], corrupt[e.sender])
                for e in g.edges
                if e.receiver == n.name and e.channel == c
            )
            for c in "qk"
        )
        for n in detached
    }
    for h, a in _patterns(patcher.model, state.resid, g, shifts).items():
        routes[h] = routes[h] | _routes(a)
    live = flow.live_inputs(pairs.outputs)

    def delivered(e: Edge) -> np.ndarray:
        """Per position, whether the ablation can change what ``e`` delivers there (in the level's coordinates)."""
        coords = ablation_coords(level, flow, e, live)
        if not coords:
            return np.zeros(T, dtype=bool)
        moved = ablation_change(level, clean[e.sender], corrupt[e.sender])[..., coords]
        return to_numpy(moved.abs().amax(dim=(0, 2)).double()) > tol

    used = {n.name: np.zeros(T, dtype=bool) for n in g.nodes}
    used["logits"][sorted({int(p) for p in np.flatnonzero(np.asarray(pairs.read).any(0))})] = True
    edges = np.zeros((len(g.edges), T), dtype=bool)
    crossing = {i: np.zeros((T, T), dtype=bool) for i, e in enumerate(g.edges) if e.channel in "kv"}
    incoming: dict[str, list[tuple[int, Edge]]] = {n.name: [] for n in g.receivers}
    for i, e in enumerate(g.edges):
        if e in members:
            incoming[e.receiver].append((i, e))
    for r in sorted(g.receivers, key=lambda n: (n.order, n.head), reverse=True):
        reads = {c: _reads(c, used[r.name], routes.get(r.name)) for c in CHANNELS[r.kind]}
        for i, e in incoming[r.name]:
            moved = delivered(e)
            if e.channel in "kv":
                crossing[i] = reads[e.channel] & moved[None, :]
                edges[i] = crossing[i].any(0)
            else:
                edges[i] = reads[e.channel] & moved
            used[e.sender] |= edges[i]
    word_routed = [n.name for n in g.nodes if n.kind == "head" and _reads_word(g, flow, n.name)]
    return PositionTruth(
        g,
        level,
        edges,
        [int(p) for p in np.flatnonzero(used["logits"])],
        {
            h: {i: [int(j) for j in np.flatnonzero(row)] for i, row in enumerate(r) if row.any()}
            for h, r in routes.items()
        },
        word_routed,
        crossing,
    )


def _reads_word(g: Graph, flow: Any, head: str) -> bool:
    """Whether a head's query or key reads a coordinate that some earlier writer fills with word information."""
    qk = flow.reads(head, "q") | flow.reads(head, "k")
    senders = {e.sender for e in g.edges if e.receiver == head}
    return any(flow.writes[s].get(c) == WORD for s in senders for c in qk)


def _reads(channel: str, used: np.ndarray, routes: np.ndarray | None) -> np.ndarray:
    """What a receiver channel takes of its senders' outputs, given where its receiver is used: for a key or value
    ``[query, key]`` (a used query reads every earlier key, a routed value the keys its routes give), for any
    other channel the positions (those where its receiver is used)."""
    if channel not in "kv":
        return used.copy()
    T = len(used)
    reach = routes if channel == "v" and routes is not None else np.tri(T, dtype=bool)
    return reach & used[:, None]


def _routes(pattern: np.ndarray) -> np.ndarray:
    """``[query, key]``: the key positions a query's value reads on some clean word (see :data:`ROUTE_FLOOR`)."""
    return (pattern >= ROUTE_FLOOR).any(0) & np.tri(pattern.shape[-1], dtype=bool)


def head_input(sd: dict[str, Any], cfg: Any, layer: int, x: Any) -> Any:
    """What block ``layer``'s heads project: the residual ``x`` through the block's first LayerNorm (``x`` itself in a
    model without LayerNorm); ``sd``: TransformerLens weights (:func:`~sandbox_lens.interp.model.hooked.tl_state_dict`)."""
    if getattr(cfg, "normalization_type", None) != "LN":
        return x
    return layer_norm(x, sd[f"blocks.{layer}.ln1.w"], sd[f"blocks.{layer}.ln1.b"], getattr(cfg, "eps", 1e-5))


def causal_pattern(q: Any, k: Any, scale: float) -> Any:
    """The causal softmax pattern ``[..., query, key]`` of queries ``q`` on keys ``k``, its scores in float64."""
    import torch

    scores = (q @ k.transpose(-1, -2)).double() * scale
    T = scores.shape[-1]
    mask = torch.ones(T, T, dtype=torch.bool, device=scores.device).tril()
    return torch.softmax(scores.masked_fill(~mask, float("-inf")), -1)


def _patterns(
    model: Any, resid: list[Any], graph: Graph, shifts: dict[str, tuple[Any, Any]] | None = None
) -> dict[str, np.ndarray]:
    """Each head's attention pattern ``[batch, query, key]`` (float64) on the clean run, from the weights and the
    residual entering its block; with ``shifts`` (head → what is added to its query's and its key's input), only those
    heads', with their inputs shifted."""
    sd = {k: v.detach() for k, v in tl_state_dict(model).items()}
    scale = attention_scale(model.cfg)
    out: dict[str, np.ndarray] = {}
    with exact_precision():
        for node in (n for n in graph.nodes if n.kind == "head" and (shifts is None or n.name in shifts)):
            p, h, x = f"blocks.{node.layer}", node.head, resid[node.layer]
            shift_q, shift_k = (0, 0) if shifts is None else shifts[node.name]
            q = head_input(sd, model.cfg, node.layer, x + shift_q) @ sd[f"{p}.attn.W_Q"][h] + sd[f"{p}.attn.b_Q"][h]
            k = head_input(sd, model.cfg, node.layer, x + shift_k) @ sd[f"{p}.attn.W_K"][h] + sd[f"{p}.attn.b_K"][h]
            out[node.name] = to_numpy(causal_pattern(q, k, scale))
    return out
