"""One circuit analysis of one model: the method's scores, its recovered circuit, faithfulness, and —
on a construction — the scores against the ground truth. :func:`analyse` returns what
``circuit.json`` holds.

Methods (see :mod:`interp.circuits.patching`):

========== ======= ====================================================================
method     level   recovered circuit
========== ======= ====================================================================
patching   node    nodes whose activation patching moves the metric by ≥ threshold
path       edge    edges whose path patching moves the metric by ≥ threshold
attribution edge   edges whose attribution estimate is ≥ threshold
acdc       edge    what ACDC keeps
========== ======= ====================================================================

Every score is an effect: the fraction of the clean-vs-corrupted gap in the metric that patching
removes (the absolute value ranks). AUROC, precision and recall are taken at the method's level
against the **task-relevant** ground truth (``ground_truth_level`` in the JSON).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from interp.circuits.graph import Edge
from interp.circuits.pairs import METRICS, make_pairs
from interp.circuits.patching import (SOURCES, Patcher, acdc, attribution, faithfulness, node_patching,
                                      path_patching)
from interp.circuits.score import auroc, precision_recall, spearman
from interp.circuits.truth import GroundTruth
from interp.errors import SandboxError

__all__ = ["analyse", "check_settings", "METHODS", "DEFAULT_THRESHOLD"]

METHODS = ("patching", "path", "attribution", "acdc")
LEVEL = {"patching": "node", "path": "edge", "attribution": "edge", "acdc": "edge"}
DEFAULT_THRESHOLD = 0.01


class MethodError(SandboxError, ValueError):
    """An unknown method or a setting it cannot take."""


def analyse(model: Any, method: str, truth: GroundTruth | None = None, *, pairs: int = 64,
            corruption: str | None = None, length: int | None = None, threshold: float = DEFAULT_THRESHOLD,
            metric: str | None = None, source: str = "resample", per_position: bool = False, seed: int = 0,
            progress: bool = False) -> dict[str, Any]:
    """Run ``method`` on ``model`` and score it against ``truth`` when given (a construction's)."""
    metric = check_settings(method, metric, source, threshold)
    patcher = Patcher(model, truth.graph if truth is not None else None)
    g = patcher.graph
    data = make_pairs(model, pairs, corruption, length, seed)
    t0 = time.perf_counter()
    out: dict[str, Any] = {"method": method, "level": LEVEL[method], "metric": metric, "threshold": threshold,
                           "source": source, "seed": seed, "pairs": data.to_dict(), "graph": g.to_dict()}
    edge_fx: np.ndarray | None = None
    node_fx: dict[str, float] | None = None
    if method == "patching":
        r = node_patching(patcher, data, source, per_position=per_position, metric=metric, progress=progress)
        node_fx = r["nodes"]
        if per_position:
            out["per_position"] = r["per_position"]
        chosen_nodes = {n for n, v in node_fx.items() if abs(v) >= threshold} | {"logits"}
        circuit = [e for e in g.edges if e.sender in chosen_nodes and e.receiver in chosen_nodes]
    elif method == "path":
        edge_fx = path_patching(patcher, data, metric=metric, progress=progress)
        circuit = [e for e, v in zip(g.edges, edge_fx) if abs(v) >= threshold]
    elif method == "attribution":
        edge_fx, node_fx = attribution(patcher, data)
        circuit = [e for e, v in zip(g.edges, edge_fx) if abs(v) >= threshold]
    else:
        r = acdc(patcher, data, threshold, metric=metric, progress=progress)
        edge_fx, circuit = r.effects, r.kept
        out["acdc"] = {"tried": r.tried, "removed": len(g.edges) - len(r.kept)}
    out["wall_seconds"] = time.perf_counter() - t0
    if method == "attribution":  # how far the linear estimate agrees with the real interventions
        t1 = time.perf_counter()
        exact_edges = path_patching(patcher, data, metric="logit_diff", progress=progress)
        path_seconds = time.perf_counter() - t1
        exact_nodes = node_patching(patcher, data, "resample", metric="logit_diff")["nodes"]
        names = list(exact_nodes)
        out["agreement"] = {
            "edges_spearman_vs_path_patching": spearman(edge_fx, exact_edges),
            "nodes_spearman_vs_activation_patching": spearman([node_fx[n] for n in names], [exact_nodes[n] for n in names]),
            "path_patching_seconds": path_seconds,
            "speedup_vs_path_patching": path_seconds / max(out["wall_seconds"], 1e-9),
        }
    if edge_fx is not None:
        out["edges"] = {e.name: float(v) for e, v in zip(g.edges, edge_fx)}
    if node_fx is not None:
        out["nodes"] = {n: float(v) for n, v in node_fx.items()}
    out["circuit"] = {"edges": [e.name for e in circuit],
                      "nodes": sorted({e.sender for e in circuit} | {e.receiver for e in circuit},
                                      key=lambda n: list(g.by_name).index(n))}
    detail = faithfulness(patcher, data, circuit)
    out["faithfulness"] = detail["accuracy"]  # a fraction of the full model's accuracy, which is 1 by definition
    out["faithfulness_metrics"] = detail
    if truth is not None:
        out.update(_scores(truth, g.edges, edge_fx, node_fx, circuit))
    return out


def check_settings(method: str, metric: str | None, source: str, threshold: float) -> str:
    """Refuse settings a method cannot take (before any model is built); return the metric to use."""
    if method not in METHODS:
        raise MethodError(f"unknown method {method!r} (choose from {', '.join(METHODS)})")
    metric = metric or ("kl" if method == "acdc" else "logit_diff")
    if metric not in METRICS:
        raise MethodError(f"unknown metric {metric!r} (choose from {', '.join(METRICS)})")
    if method == "attribution" and metric != "logit_diff":
        raise MethodError("attribution patching needs the logit difference: the KL's gradient is zero at the clean run")
    if source not in SOURCES:
        raise MethodError(f"unknown patching source {source!r} (choose from {', '.join(SOURCES)})")
    if source != "resample" and method != "patching":
        raise MethodError(f"--source {source} goes with --method patching; path patching, attribution and ACDC "
                          "patch from the corrupted word")
    if not threshold > 0:
        raise MethodError(f"the threshold must be positive, got {threshold}")
    return metric


def _scores(truth: GroundTruth, edges: list[Edge], edge_fx: np.ndarray | None, node_fx: dict[str, float] | None,
            circuit: list[Edge]) -> dict[str, Any]:
    labels = truth.edge_labels("relevant")
    chosen = np.array([e in set(circuit) for e in edges])
    out: dict[str, Any] = {"ground_truth_level": "relevant", "ground_truth": truth.to_dict()}
    precision, recall = precision_recall(chosen, labels)
    out["edge_precision"], out["edge_recall"] = precision, recall
    if edge_fx is not None:
        out["auroc"] = auroc(np.abs(edge_fx), labels)
        out["auroc_structural"] = auroc(np.abs(edge_fx), truth.edge_labels("structural"))
    if node_fx is not None:
        node_truth = truth.node_labels("relevant")
        names = [n for n in node_fx]
        node_auroc = auroc([abs(node_fx[n]) for n in names], [node_truth[n] for n in names])
        out["node_auroc"] = node_auroc
        if edge_fx is None:
            out["auroc"] = node_auroc
            chosen_nodes = {e.sender for e in circuit}
            out["node_precision"], out["node_recall"] = precision_recall(
                [n in chosen_nodes for n in names], [node_truth[n] for n in names])
    out["missed"] = {e.name: truth.relevant[e] for e, y, c in zip(edges, labels, chosen) if y and not c}
    out["spurious"] = [e.name for e, y, c in zip(edges, labels, chosen) if c and not y]
    return out
