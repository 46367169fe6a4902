"""The circuit-discovery methods, one function call each: every method returns an edge ranking (a
score per graph edge, higher first, NaN where it never scored one) and the circuit it recovers.

=========== ======= ====================================================================
method      level   recovered circuit
=========== ======= ====================================================================
patching    node    nodes whose activation patching moves the metric by ≥ threshold
path        edge    edges whose path patching moves the metric by ≥ threshold
attribution edge    edges whose attribution-patching estimate (EAP) is ≥ threshold
eap-ig      edge    the same with integrated gradients over m steps (``steps``)
acdc        edge    what ACDC keeps (mode ``normalised`` or ``reference``)
masks       edge    learned hard-concrete edge masks under an L0 penalty (edge pruning): the open gates
random      edge    a baseline: uniform random scores; the edges scoring ≥ 1/2
magnitude   edge    a baseline: each sender's mean activation norm, relative to the largest;
                    the edges scoring ≥ threshold
=========== ======= ====================================================================

Rankings use the size of a score (ACDC's reference mode the signed change, as the reference's τ
sweep does; the masks their log α); a node method ranks an edge by the smaller of its two ends' effects.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sandbox_lens.interp.circuits.acdc import acdc
from sandbox_lens.interp.circuits.graph import Edge, Graph
from sandbox_lens.interp.circuits.patching import Patcher
from sandbox_lens.interp.circuits.effects import attribution, node_patching, path_patching

__all__ = ["METHODS", "LEVEL", "Found", "run_method"]

METHODS = ("patching", "path", "attribution", "eap-ig", "acdc", "masks", "random", "magnitude")
LEVEL = {m: ("node" if m == "patching" else "edge") for m in METHODS}
#: Methods that measure no intervention: they take no metric and no ablation of their own.
BASELINES = ("random", "magnitude")


@dataclass
class Found:
    """What a method returns: its ranking, its circuit, and the raw scores it is built from."""

    rank: np.ndarray
    circuit: list[Edge]
    edge_fx: np.ndarray | None = None
    node_fx: dict[str, float] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def run_method(method: str, patcher: Patcher, data: Any, src: dict[str, Any], source: str, *, threshold: float,
               metric: str, acdc_mode: str = "normalised", steps: int = 16, per_position: bool = False,
               seed: int = 0, progress: bool = False) -> Found:
    """Run ``method`` (see the module docstring) on prepared pairs ``data`` with ablation values ``src``."""
    g = patcher.graph
    if method == "patching":
        r = node_patching(patcher, data, source, per_position=per_position, metric=metric, progress=progress)
        node_fx = r["nodes"]
        chosen = {n for n, v in node_fx.items() if abs(v) >= threshold} | {"logits"}
        return Found(_edge_ranking_of_nodes(g, node_fx), [e for e in g.edges if e.sender in chosen and e.receiver in chosen],
                     node_fx=node_fx, extra={"per_position": r["per_position"]} if per_position else {})
    if method in ("path", "attribution", "eap-ig"):
        node_fx = None
        if method == "path":
            edge_fx = path_patching(patcher, data, source=src, metric=metric, progress=progress)
        else:
            edge_fx, node_fx = attribution(patcher, data, src, steps=steps if method == "eap-ig" else 1)
        return Found(np.abs(edge_fx), [e for e, v in zip(g.edges, edge_fx) if abs(v) >= threshold], edge_fx, node_fx,
                     {"steps": steps} if method == "eap-ig" else {})
    if method == "acdc":
        r = acdc(patcher, data, threshold, metric=metric, mode=acdc_mode, source=src, progress=progress)
        rank = r.effects if acdc_mode == "reference" else np.abs(r.effects)
        return Found(rank, r.kept, r.effects, extra={"acdc": {
            "mode": acdc_mode, "metric": r.metric, "tried": r.tried, "removed": len(g.edges) - len(r.kept),
            "untested": int(np.isnan(r.effects).sum()), "removal_order": r.order}})
    if method == "masks":
        from sandbox_lens.interp.circuits.masks import learn_edge_masks

        r = learn_edge_masks(patcher, data, src, seed=seed)
        return Found(r["log_alpha"], [e for e, gate in zip(g.edges, r["gates"]) if gate > 0.5], r["log_alpha"],
                     extra={"masks": {"trace": r["trace"], "open": int((r["gates"] > 0.5).sum())}})
    if method == "random":
        from sandbox_lens.interp.streams import Stream, rng

        scores = rng(seed, Stream.RANDOM_BASELINE).random(len(g.edges))
        return Found(scores, [e for e, v in zip(g.edges, scores) if v >= 0.5], scores)
    if method == "magnitude":
        norms = {name: float(x.double().norm(dim=-1).mean()) for name, x in patcher.outputs(data.clean).items()}
        top = max(norms.values()) or 1.0
        scores = np.array([norms[e.sender] / top for e in g.edges])
        return Found(scores, [e for e, v in zip(g.edges, scores) if v >= threshold], scores)
    raise ValueError(f"unknown method {method!r}")


def _edge_ranking_of_nodes(g: Graph, node_fx: dict[str, float]) -> np.ndarray:
    """An edge ranking from node scores: the smaller of its two ends' |effects| (the logits count as ∞)."""
    size = {n: abs(v) for n, v in node_fx.items()} | {"logits": np.inf}
    return np.array([min(size.get(e.sender, 0.0), size.get(e.receiver, np.inf)) for e in g.edges])
