"""Ground-truth circuits derived from a construction's weights and named residual subspaces.

Two levels, both read off the weights, never written by hand:

* **structural** — an edge writer → reader whose writer puts something nonzero in a residual
  coordinate that the reader's channel reads (a nonzero column of the head's W_V·W_O, of the MLP's
  W_out or b_out, of W_E or W_pos, met by a nonzero row of W_Q·W_Kᵀ (channel q), a nonzero
  column of it (k), a nonzero row of W_V·W_O (v), of W_in, of W_U);
* **task-relevant** — a structural edge that carries *word information* to a reader whose output
  reaches the logits with word information. Every coordinate a writer writes gets a level:
  ``const`` (the same at every position of every word: e.g. a constant "one" coordinate),
  ``pos`` (depends on the position only: the position code, the BOS token's marks), ``word``
  (depends on the input word). The token embedding writes ``word`` where symbol tokens differ;
  a head writes ``word`` where its value reads ``word``, or where its value reads ``pos`` and its
  pattern depends on the word (its query or key reads ``word``); an MLP unit writes the highest
  level it reads. A position code that every head reads is therefore structural but not
  task-relevant; so is an edge into a part whose output never reaches the logits with word
  information.

Patching every non-relevant edge leaves the output unchanged and patching every relevant one gives
the corrupted word's output (``tests/circuits/test_circuits.py`` checks both on every construction family):
that is what ties this ground truth to behaviour.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from interp.circuits.graph import Edge, Graph
from interp.errors import ModelKindError

__all__ = ["GroundTruth", "ground_truth", "ground_truth_of_model", "LEVELS"]

CONST, POS, WORD = 0, 1, 2
LEVELS = ("const", "pos", "word")


@dataclass
class GroundTruth:
    """The structural and task-relevant edges of a construction, each labelled with the subspaces it goes through."""

    construction: str
    graph: Graph
    structural: dict[Edge, list[str]]  # edge -> the subspaces it goes through
    relevant: dict[Edge, list[str]]  # edge -> the subspaces through which it carries word information
    writes: dict[str, dict[str, str]] = field(default_factory=dict)  # node -> {subspace: level}

    def edge_labels(self, level: str = "relevant") -> np.ndarray:
        """0/1 per edge of :attr:`graph` (in its order): in the ``relevant`` or ``structural`` ground truth."""
        chosen = self._level(level)
        return np.array([e in chosen for e in self.graph.edges], dtype=bool)

    def node_labels(self, level: str = "relevant") -> dict[str, bool]:
        """Per node: does it send or receive an edge of the ground truth (the logits always do)."""
        chosen = self._level(level)
        used = {e.sender for e in chosen} | {e.receiver for e in chosen}
        return {n.name: n.name in used for n in self.graph.nodes}

    def _level(self, level: str) -> dict[Edge, list[str]]:
        if level not in ("relevant", "structural"):
            raise ValueError(f"ground-truth level is 'relevant' or 'structural', not {level!r}")
        return self.relevant if level == "relevant" else self.structural

    def to_dict(self) -> dict[str, Any]:
        return {
            "construction": self.construction,
            "levels": {"structural": "every nonzero writer → reader path through the residual stream",
                       "relevant": "structural edges that carry word information to a part that reaches the logits"},
            "structural": {e.name: labs for e, labs in self.structural.items()},
            "relevant": {e.name: labs for e, labs in self.relevant.items()},
            "writes": self.writes,
        }


def ground_truth(spec: Any) -> GroundTruth:
    """The ground-truth circuit of a :class:`~interp.model.spec.ConstructionSpec` (see the module docstring)."""
    from interp.model.hooked import state_dict_arrays

    sd = state_dict_arrays(spec)
    return _derive(spec.name, sd, spec.n_layers, spec.n_heads, spec.layout.labels(),
                   prefix=spec.io.prefix, symbols=spec.io.symbol_tokens)


def ground_truth_of_model(model: Any) -> GroundTruth:
    """The ground truth of a built or saved construction (its card names its residual subspaces)."""
    card = getattr(model, "card", None)
    if card is None or card.construction == "trained" or not card.theorem:
        raise ModelKindError("a trained twin has no ground-truth circuit: only constructions have one "
                             "(score a method on the construction, then compare the twin's recovered circuit with it)")
    from interp.model.hooked import tl_state_dict

    sd = {k: v.cpu().double().numpy() for k, v in tl_state_dict(model).items()}
    return _derive(card.construction, sd, model.cfg.n_layers, model.cfg.n_heads, list(card.residual_labels),
                   prefix=card.io.prefix, symbols=card.io.symbol_tokens)


def _subspace(label: str) -> str:
    return label.split(":", 1)[0]


def _nonzero_rows(m: np.ndarray) -> np.ndarray:
    return np.flatnonzero(np.any(m != 0, axis=1))


def _derive(name: str, sd: dict[str, np.ndarray], n_layers: int, n_heads: int, labels: Sequence[str],
            prefix: Sequence[int], symbols: Sequence[int]) -> GroundTruth:
    graph = Graph.of_weights(sd, n_layers, n_heads)
    d = sd["embed.W_E"].shape[1]
    names = [_subspace(lab) for lab in labels] if len(labels) == d else [str(i) for i in range(d)]

    # -- what each node writes, coordinate by coordinate, at which level --------------------------
    writes: dict[str, dict[int, int]] = {"embed": _embedding_levels(sd["embed.W_E"], prefix, symbols),
                                         "pos": _position_levels(sd["pos_embed.W_pos"])}
    reads: dict[tuple[str, str], set[int]] = {}
    resid = np.full(d, -1)  # the highest level any writer so far put in each coordinate (-1: nothing)
    for node in ("embed", "pos"):
        for i, lev in writes[node].items():
            resid[i] = max(resid[i], lev)

    for l in range(n_layers):
        p = f"blocks.{l}."
        heads = [n for n in graph.nodes if n.kind == "head" and n.layer == l]
        new = resid.copy()
        for node in heads:
            h = node.head
            qk = sd[p + "attn.W_Q"][h] @ sd[p + "attn.W_K"][h].T
            ov = sd[p + "attn.W_V"][h] @ sd[p + "attn.W_O"][h]
            q, k, v = set(_nonzero_rows(qk)), set(_nonzero_rows(qk.T)), set(_nonzero_rows(ov))
            reads[(node.name, "q")], reads[(node.name, "k")], reads[(node.name, "v")] = q, k, v
            pattern_word = any(resid[i] == WORD for i in q | k)
            out: dict[int, int] = {}
            for j in np.flatnonzero(np.any(ov != 0, axis=0)):
                lev = max((resid[i] for i in np.flatnonzero(ov[:, j])), default=CONST)
                out[int(j)] = WORD if lev == WORD or (lev == POS and pattern_word) else max(lev, CONST)
            writes[node.name] = out
            for j, lev in out.items():
                new[j] = max(new[j], lev)
        resid = new
        if f"m{l}" in graph.by_name:
            w_in, w_out, b_out = sd[p + "mlp.W_in"], sd[p + "mlp.W_out"], sd[p + "mlp.b_out"]
            used = np.flatnonzero(np.any(w_out != 0, axis=1))
            reads[(f"m{l}", "in")] = set(_nonzero_rows(w_in[:, used])) if len(used) else set()
            out = {int(j): CONST for j in np.flatnonzero(b_out != 0)}
            for u in used:
                lev = max((resid[i] for i in np.flatnonzero(w_in[:, u])), default=CONST)
                for j in np.flatnonzero(w_out[u]):
                    out[int(j)] = max(out.get(int(j), CONST), max(lev, CONST))
            writes[f"m{l}"] = out
            for j, lev in out.items():
                resid[j] = max(resid[j], lev)
    reads[("logits", "in")] = set(_nonzero_rows(sd["unembed.W_U"]))

    # -- edges: structural where write meets read; relevant where word information reaches a live reader
    structural: dict[Edge, list[str]] = {}
    carries: dict[Edge, list[str]] = {}
    for e in graph.edges:
        meet = sorted(set(writes[e.sender]) & reads.get((e.receiver, e.channel), set()))
        if meet:
            structural[e] = _names(names, meet)
            word = [i for i in meet if writes[e.sender][i] == WORD]
            if word:
                carries[e] = _names(names, word)
    live = {"logits"}
    for node in reversed(graph.nodes):  # a node is live if word information flows from it to a live node
        if node.writes and any(e.sender == node.name and e.receiver in live for e in carries):
            live.add(node.name)
    relevant = {e: labs for e, labs in carries.items() if e.receiver in live}
    return GroundTruth(name, graph, structural, relevant, _summarise(names, writes))


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
    return {int(j): POS if np.any(W_pos[:, j] != W_pos[0, j]) else CONST for j in np.flatnonzero(np.any(W_pos != 0, axis=0))}
