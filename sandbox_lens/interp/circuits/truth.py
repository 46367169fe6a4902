"""Ground-truth circuits derived from a construction's weights and named residual subspaces.

Levels read off the weights, never written by hand (:mod:`sandbox_lens.interp.circuits.levels` adds the ones that
depend on the metric, the corruption and the ablation):

* **structural** — an edge writer → reader whose writer puts something nonzero in a residual
  coordinate that the reader's channel reads (a nonzero column of the head's W_V·W_O, of the MLP's
  W_out or b_out, of W_E or W_pos, met by a nonzero row of W_Q·W_Kᵀ (channel q), a nonzero
  column of it (k), a nonzero row of W_V·W_O (v), of W_in, of W_U);
* **live** — a structural edge that meets the reader in a *live* coordinate: one through which the
  reader can change an output. Liveness runs backwards, coordinate by coordinate: the unembedding's
  live inputs are the rows of W_U that reach an output; a reader's live outputs are the coordinates
  it writes that a later reader takes in as live; a head's value coordinate is live when its W_V·W_O
  row reaches a live output, its query and key coordinates when the head has any live output (the
  pattern moves every output) and its value reads something that is not one constant (an average of
  a constant is that constant, whatever the pattern); an MLP's input coordinate when it feeds a unit whose W_out row reaches
  a live output (per unit: the units are explicit);
  A pair of heads of one block with equal patterns and opposite outputs (W_V·W_O of one is minus the
  other's) sums to 0 on every input: edges into or out of either are structural but never live;
* **task-relevant** — a live edge that carries *word information* in a live coordinate. Every
  coordinate a writer writes gets a level: ``const`` (the same at every position of every word: e.g.
  a constant "one" coordinate), ``pos`` (depends on the position only: the position code, the BOS
  token's marks), ``word`` (depends on the input word). The token embedding writes ``word`` where
  symbol tokens differ; a head writes ``word`` where its value reads ``word``, or where its value
  reads ``pos`` and its pattern depends on the word (its query or key reads ``word``); an MLP unit
  writes the highest level it reads. A position code that every head reads is therefore structural
  but not task-relevant; so is an edge whose word information lands only in coordinates that no path
  takes to an output.

Patching every edge outside a level leaves the outputs the level is about unchanged
(``tests/circuits/test_circuits.py`` checks it on every construction family and on random automata):
that is what ties the ground truth to behaviour.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sandbox_lens.interp.circuits.graph import CHANNELS, Edge, Graph
from sandbox_lens.interp.errors import ModelKindError
from sandbox_lens.interp.model.hooked import state_dict_arrays, tl_state_dict

__all__ = ["GroundTruth", "Flow", "ground_truth", "ground_truth_of_model", "LEVELS"]

CONST, POS, WORD = 0, 1, 2
LEVELS = ("const", "pos", "word")

Channel = tuple[str, str]  # (reader, channel)


@dataclass
class Flow:
    """Coordinate-level facts of one model: what each node writes (coordinate → level) and, per reader
    channel, which of its outputs each input coordinate can move (for the unembedding: output indices)."""

    graph: Graph
    names: list[str]  # the subspace of each residual coordinate
    writes: dict[str, dict[int, int]]
    reach: dict[Channel, dict[int, frozenset[int]]]
    cancelled: dict[str, str] = field(default_factory=dict)  # head -> the head of its block whose output cancels it

    def reads(self, receiver: str, channel: str) -> set[int]:
        return set(self.reach.get((receiver, channel), {}))

    def meet(self, e: Edge) -> set[int]:
        """The coordinates the sender writes and the receiver's channel reads."""
        return set(self.writes[e.sender]) & self.reads(e.receiver, e.channel)

    def used(self, e: Edge, live: dict[Channel, set[int]]) -> set[int]:
        """The coordinates where the edge meets its receiver's ``live`` inputs (none if it touches a cancelled head)."""
        if e.sender in self.cancelled or e.receiver in self.cancelled:
            return set()
        return self.meet(e) & live[(e.receiver, e.channel)]

    def word(self, node: str) -> set[int]:
        """The coordinates where ``node`` writes word information."""
        return {i for i, lev in self.writes[node].items() if lev == WORD}

    def live_inputs(self, outputs: Sequence[int] | None = None) -> dict[Channel, set[int]]:
        """Per reader channel, the input coordinates through which it can move one of ``outputs``
        (default: every output), by backward liveness (see the module docstring)."""
        g = self.graph
        seed = None if outputs is None else frozenset(int(o) for o in outputs)
        live: dict[Channel, set[int]] = {}
        for r in sorted(g.receivers, key=lambda n: (n.order, n.head), reverse=True):
            if r.kind == "logits":
                targets: frozenset[int] | set[int] | None = seed
            elif r.name in self.cancelled:
                targets = set()
            else:
                later = [(r2, c) for (r2, c) in live if Graph.before(r, g.by_name[r2])]
                targets = {j for j in self.writes[r.name] if any(j in live[k] for k in later)}
            for c in CHANNELS[r.kind]:
                reach = self.reach.get((r.name, c), {})
                live[(r.name, c)] = {i for i, outs in reach.items() if targets is None or outs & targets}
        return live


@dataclass
class GroundTruth:
    """The structural, live and task-relevant edges of a construction, each with the subspaces it goes through."""

    construction: str
    graph: Graph
    structural: dict[Edge, list[str]]  # edge -> the subspaces it goes through
    relevant: dict[Edge, list[str]]  # edge -> the live subspaces through which it carries word information
    writes: dict[str, dict[str, str]] = field(default_factory=dict)  # node -> {subspace: level}
    live: dict[Edge, list[str]] = field(default_factory=dict)  # edge -> the live subspaces it goes through
    flow: Flow | None = None
    #: redundant routes the construction declares (``negatives=backup``): under ``ablation``, any one of
    #: ``routes`` (lists of nodes) suffices — scored as one OR item (sandbox_lens.interp.circuits.levels)
    or_groups: list[dict[str, Any]] = field(default_factory=list)
    #: a trained twin's imposed circuit (:func:`sandbox_lens.interp.circuits.imposed.imposed_truth`), not a
    #: construction's: the weights-only levels are the edges between imposed nodes, and the ablation levels are
    #: measured on the twin's activations (:func:`sandbox_lens.interp.circuits.levels.levels_of`)
    imposed: bool = False

    def edge_labels(self, level: str = "relevant") -> np.ndarray:
        """0/1 per edge of :attr:`graph` (in its order): in the ``structural``, ``live`` or ``relevant`` level."""
        chosen = self._level(level)
        return np.array([e in chosen for e in self.graph.edges], dtype=bool)

    def node_labels(self, level: str = "relevant") -> dict[str, bool]:
        """Per node: does it send or receive an edge of the level (the logits always do)."""
        chosen = self._level(level)
        used = {e.sender for e in chosen} | {e.receiver for e in chosen}
        return {n.name: n.name in used for n in self.graph.nodes}

    def _level(self, level: str) -> dict[Edge, list[str]]:
        table = {"structural": self.structural, "live": self.live, "relevant": self.relevant}
        if level not in table:
            raise ValueError(f"a weights-only ground-truth level is one of {', '.join(table)}, not {level!r}")
        return table[level]

    def to_dict(self) -> dict[str, Any]:
        return {
            "construction": self.construction,
            "levels": {
                "structural": "every nonzero writer → reader path through the residual stream",
                "live": "structural edges that meet the reader in a coordinate through which it can move an output",
                "relevant": "live edges that carry word information in such a coordinate",
            },
            "structural": {e.name: labs for e, labs in self.structural.items()},
            "live": {e.name: labs for e, labs in self.live.items()},
            "relevant": {e.name: labs for e, labs in self.relevant.items()},
            "writes": self.writes,
            **({"imposed": True} if self.imposed else {}),
        }


def ground_truth(spec: Any) -> GroundTruth:
    """The ground-truth circuit of a :class:`~sandbox_lens.interp.model.spec.ConstructionSpec` (see the module docstring)."""

    sd = state_dict_arrays(spec)
    truth = _derive(
        spec.name,
        sd,
        spec.n_layers,
        spec.n_heads,
        spec.layout.labels(),
        prefix=spec.io.prefix,
        symbols=spec.io.symbol_tokens,
    )
    truth.or_groups = list(spec.options.get("negative_routes", []))
    return truth


def ground_truth_of_model(model: Any) -> GroundTruth:
    """The ground truth of a built or saved construction (its card names its residual subspaces)."""
    card = getattr(model, "card", None)
    if card is None or card.construction == "trained" or not card.theorem:
        raise ModelKindError(
            "a trained twin has no ground-truth circuit: only constructions have one "
            "(score a method on the construction, then compare the twin's recovered circuit with it)"
        )

    sd = {k: v.cpu().double().numpy() for k, v in tl_state_dict(model).items()}
    truth = _derive(
        card.construction,
        sd,
        model.cfg.n_layers,
        model.cfg.n_heads,
        list(card.residual_labels),
        prefix=card.io.prefix,
        symbols=card.io.symbol_tokens,
    )
    truth.or_groups = list(card.options.get("negative_routes", []))
    return truth


def _subspace(label: str) -> str:
    return label.split(":", 1)[0]


def _nonzero_rows(m: np.ndarray) -> np.ndarray:
    return np.flatnonzero(np.any(m != 0, axis=1))


def _derive(
    name: str,
    sd: dict[str, np.ndarray],
    n_layers: int,
    n_heads: int,
    labels: Sequence[str],
    prefix: Sequence[int],
    symbols: Sequence[int],
) -> GroundTruth:
    graph = Graph.of_weights(sd, n_layers, n_heads)
    d = sd["embed.W_E"].shape[1]
    names = [_subspace(lab) for lab in labels] if len(labels) == d else [str(i) for i in range(d)]
    flow = _flow(graph, sd, n_layers, prefix, symbols, names)
    live_in = flow.live_inputs()
    structural: dict[Edge, list[str]] = {}
    live: dict[Edge, list[str]] = {}
    relevant: dict[Edge, list[str]] = {}
    for e in graph.edges:
        meet = flow.meet(e)
        if meet:
            structural[e] = _names(names, meet)
            used = flow.used(e, live_in)
            if used:
                live[e] = _names(names, used)
                word = flow.word(e.sender) & used
                if word:
                    relevant[e] = _names(names, word)
    return GroundTruth(name, graph, structural, relevant, _summarise(names, flow.writes), live=live, flow=flow)


def _flow(
    graph: Graph,
    sd: dict[str, np.ndarray],
    n_layers: int,
    prefix: Sequence[int],
    symbols: Sequence[int],
    names: list[str],
) -> Flow:
    """What each node writes (coordinate → level, forwards) and how each reader's inputs reach its outputs."""
    d = sd["embed.W_E"].shape[1]
    writes: dict[str, dict[int, int]] = {
        "embed": _embedding_levels(sd["embed.W_E"], prefix, symbols),
        "pos": _position_levels(sd["pos_embed.W_pos"]),
    }
    reach: dict[tuple[str, str], dict[int, frozenset[int]]] = {}
    cancelled: dict[str, str] = {}
    resid = np.full(d, -1)  # the highest level any writer so far put in each coordinate (-1: nothing)
    for node in ("embed", "pos"):
        for i, lev in writes[node].items():
            resid[i] = max(resid[i], lev)
    for l in range(n_layers):
        p = f"blocks.{l}."
        new = resid.copy()
        cancelled.update(_cancelling_heads(sd, p, [n for n in graph.nodes if n.kind == "head" and n.layer == l]))
        for node in (n for n in graph.nodes if n.kind == "head" and n.layer == l):
            h = node.head
            qk = sd[p + "attn.W_Q"][h] @ sd[p + "attn.W_K"][h].T
            ov = sd[p + "attn.W_V"][h] @ sd[p + "attn.W_O"][h]
            outs = frozenset(int(j) for j in np.flatnonzero(np.any(ov != 0, axis=0)))
            # a query or key coordinate moves the pattern, and so every output — unless every value is the
            # same constant (averaging a constant gives it back, whatever the pattern); a value coordinate
            # moves its OV row
            moved = outs if any(resid[i] > CONST for i in _nonzero_rows(ov)) else frozenset()
            reach[(node.name, "q")] = {int(i): moved for i in _nonzero_rows(qk)}
            reach[(node.name, "k")] = {int(i): moved for i in _nonzero_rows(qk.T)}
            reach[(node.name, "v")] = {
                int(i): frozenset(int(j) for j in np.flatnonzero(ov[i])) for i in _nonzero_rows(ov)
            }
            pattern_word = any(resid[i] == WORD for i in set(reach[(node.name, "q")]) | set(reach[(node.name, "k")]))
            out: dict[int, int] = {}
            for j in outs:
                lev = max((resid[i] for i in np.flatnonzero(ov[:, j])), default=CONST)
                out[j] = WORD if lev == WORD or (lev == POS and pattern_word) else max(lev, CONST)
            writes[node.name] = out
            for j, lev in out.items():
                new[j] = max(new[j], lev)
        resid = new
        if f"m{l}" in graph.by_name:
            w_in, w_out, b_out = sd[p + "mlp.W_in"], sd[p + "mlp.W_out"], sd[p + "mlp.b_out"]
            units = [
                int(u) for u in np.flatnonzero(np.any(w_out != 0, axis=1))
            ]  # a unit that writes nothing is no path
            unit_out = {u: frozenset(int(j) for j in np.flatnonzero(w_out[u])) for u in units}
            per_input: dict[int, set[int]] = {}
            for u in units:
                for i in np.flatnonzero(w_in[:, u]):
                    per_input.setdefault(int(i), set()).update(unit_out[u])
            reach[(f"m{l}", "in")] = {i: frozenset(o) for i, o in per_input.items()}
            out = {int(j): CONST for j in np.flatnonzero(b_out != 0)}
            for u in units:
                lev = max((resid[i] for i in np.flatnonzero(w_in[:, u])), default=CONST)
                for j in unit_out[u]:
                    out[j] = max(out.get(j, CONST), max(lev, CONST))
            writes[f"m{l}"] = out
            for j, lev in out.items():
                resid[j] = max(resid[j], lev)
    w_u = sd["unembed.W_U"]
    reach[("logits", "in")] = {int(i): frozenset(int(o) for o in np.flatnonzero(w_u[i])) for i in _nonzero_rows(w_u)}
    return Flow(graph, names, writes, reach, cancelled)


def _cancelling_heads(sd: dict[str, np.ndarray], p: str, heads: list) -> dict[str, str]:
    """Pairs of heads of one block with the same pattern (equal W_Q·W_Kᵀ) and opposite outputs
    (W_V·W_O summing to 0): their sum is 0 on every input, so neither is part of any circuit."""
    mats = {
        n.name: (
            sd[p + "attn.W_Q"][n.head] @ sd[p + "attn.W_K"][n.head].T,
            sd[p + "attn.W_V"][n.head] @ sd[p + "attn.W_O"][n.head],
        )
        for n in heads
    }
    out: dict[str, str] = {}
    for i, a in enumerate(heads):
        for b in heads[i + 1 :]:
            if a.name in out or b.name in out:
                continue
            (qa, oa), (qb, ob) = mats[a.name], mats[b.name]
            if np.array_equal(qa, qb) and np.any(oa != 0) and np.array_equal(oa, -ob):
                out[a.name], out[b.name] = b.name, a.name
    return out


def _names(names: Sequence[str], dims: Sequence[int]) -> list[str]:
    return sorted({names[i] for i in dims})


def _summarise(names: Sequence[str], writes: dict[str, dict[int, int]]) -> dict[str, dict[str, str]]:
    """Per node and subspace, the highest level it writes there."""
    out: dict[str, dict[str, str]] = {}
    for node, w in writes.items():
        per: dict[str, int] = {}
        for i, lev in w.items():
            per[names[i]] = max(per.get(names[i], CONST), lev)
        out[node] = {s: LEVELS[lev] for s, lev in per.items()}
    return out


def _embedding_levels(W_E: np.ndarray, prefix: Sequence[int], symbols: Sequence[int]) -> dict[int, int]:
    sym = W_E[list(symbols)]
    out: dict[int, int] = {}
    for j in np.flatnonzero(np.any(W_E[list(symbols) + list(prefix)] != 0, axis=0)):
        if np.any(sym[:, j] != sym[0, j]):
            out[int(j)] = WORD
        elif any(W_E[t, j] != sym[0, j] for t in prefix):
            out[int(j)] = POS  # the prefix (BOS) differs from every symbol: known from the position alone
        else:
            out[int(j)] = CONST
    return out


def _position_levels(W_pos: np.ndarray) -> dict[int, int]:
    return {
        int(j): POS if np.any(W_pos[:, j] != W_pos[0, j]) else CONST for j in np.flatnonzero(np.any(W_pos != 0, axis=0))
    }
