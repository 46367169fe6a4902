"""One circuit analysis of one model: the method's scores, its recovered circuit, faithfulness (at the
method's threshold and over circuit sizes), and — on a construction — the scores against the ground
truth at the level the method can see. :func:`analyse` returns what ``circuit.json`` holds;
:func:`score_circuit` scores a circuit found elsewhere (a file) the same way.

The methods are in :mod:`sandbox_lens.interp.circuits.methods`; auto-circuit's (``auto-circuit:acdc``, ...), when
that optional package is installed, in :mod:`sandbox_lens.interp.circuits.autocircuit`. Every method patches with one ablation
(``resample`` from the corrupted word, ``zero`` or ``mean``) and is scored against that ablation's
ground-truth level (:data:`~sandbox_lens.interp.circuits.levels.ABLATION_LEVEL`); ``scores_by_level`` gives the
same ranking against every level. Edges a method never scored rank last. Each miss carries a reason
(its score, and its effect when patched alone); each spurious edge the ground truth's reason for
leaving it out.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from sandbox_lens.interp.circuits.acdc import ACDC_MODES
from sandbox_lens.interp.circuits.autocircuit import METHODS as AUTO_CIRCUIT_METHODS
from sandbox_lens.interp.circuits.curves import faithfulness_curve
from sandbox_lens.interp.circuits.graph import Edge
from sandbox_lens.interp.circuits.levels import ABLATION_LEVEL, LEVEL_NAMES, Levels, levels_of
from sandbox_lens.interp.circuits.methods import BASELINES, LEVEL, METHODS, Found, run_method
from sandbox_lens.interp.circuits.pairs import METRICS, make_pairs
from sandbox_lens.interp.circuits.effects import faithfulness, node_patching, path_patching
from sandbox_lens.interp.circuits.patching import SOURCES, Patcher, ablated_pairs
from sandbox_lens.interp.circuits.score import precision_recall, ranking_scores, spearman
from sandbox_lens.interp.circuits.truth import GroundTruth
from sandbox_lens.interp.errors import SandboxError

__all__ = ["analyse", "score_circuit", "check_settings", "METHODS", "DEFAULT_THRESHOLD", "MethodError"]

DEFAULT_THRESHOLD = 0.01


class MethodError(SandboxError, ValueError):
    """An unknown method or a setting it cannot take."""


def _prepare(model: Any, truth: GroundTruth | None, pairs: int, corruption: str | None, length: int | None,
             seed: int, source: str, engine: str = "auto") -> tuple[Patcher, Any, dict[str, Any]]:
    from sandbox_lens.interp.circuits.bare import patcher_for

    patcher = patcher_for(model, truth.graph if truth is not None else None, engine)
    raw = make_pairs(model, pairs, corruption, length, seed)
    src = patcher.source(raw, source)
    return patcher, ablated_pairs(patcher, raw, source, src), src


def analyse(model: Any, method: str, truth: GroundTruth | None = None, *, pairs: int = 64,
            corruption: str | None = None, length: int | None = None, threshold: float = DEFAULT_THRESHOLD,
            metric: str | None = None, source: str = "resample", acdc_mode: str = "normalised", steps: int = 16,
            per_position: bool = False, curve: bool = True, seed: int = 0, level: str | None = None,
            engine: str = "auto", progress: bool = False) -> dict[str, Any]:
    """Run ``method`` on ``model`` and score it against ``truth`` when given (a construction's), at ``level``
    (default: the level of its ablation). ``engine``: the patching engine (:func:`~sandbox_lens.interp.circuits.bare.patcher_for`)."""
    metric = check_settings(method, metric, source, threshold, acdc_mode, steps)
    patcher, data, src = _prepare(model, truth, pairs, corruption, length, seed, source, engine)
    if method in AUTO_CIRCUIT_METHODS:
        return _auto_circuit(model, method, truth, patcher, data, src, threshold=threshold, seed=seed, curve=curve,
                             level=level, progress=progress)
    out: dict[str, Any] = {"method": method, "level": LEVEL[method], "metric": metric, "threshold": threshold,
                           "source": source, "seed": seed, "engine": type(patcher).__name__,
                           "pairs": data.to_dict(), "graph": patcher.graph.to_dict()}
    t0 = time.perf_counter()
    found = run_method(method, patcher, data, src, source, threshold=threshold, metric=metric, acdc_mode=acdc_mode,
                       steps=steps, per_position=per_position, seed=seed, progress=progress)
    out["wall_seconds"] = time.perf_counter() - t0
    out.update(found.extra)
    if method == "attribution":
        out["agreement"] = _agreement(patcher, data, src, found.edge_fx, found.node_fx, out["wall_seconds"], progress)
    if found.edge_fx is not None:
        out["edges"] = {e.name: (None if np.isnan(v) else float(v)) for e, v in zip(patcher.graph.edges, found.edge_fx)}
    if found.node_fx is not None:
        out["nodes"] = {n: float(v) for n, v in found.node_fx.items()}
    out.update(_evaluate(patcher, data, src, source, truth, found, threshold, curve, level))
    return out


def _auto_circuit(model: Any, method: str, truth: GroundTruth | None, patcher: Patcher, data: Any,
                  src: dict[str, Any], *, threshold: float, seed: int, curve: bool, level: str | None,
                  progress: bool) -> dict[str, Any]:
    """auto-circuit's ``method`` (:mod:`sandbox_lens.interp.circuits.autocircuit`) on the pairs this project's methods
    get, scored as theirs are; a ranking with no circuit of its own gets no faithfulness, precision or
    recall at a threshold."""
    from sandbox_lens.interp.circuits.autocircuit import prune_scores

    g = patcher.graph
    t0 = time.perf_counter()
    rank, chosen, info = prune_scores(model, g, method, data, connected=patcher.connected(), seed=seed,
                                      quiet=not progress)
    out: dict[str, Any] = {"method": method, "level": "edge", "metric": "auto-circuit's own (last position)",
                           "threshold": threshold, "source": "resample", "seed": seed, "engine": type(patcher).__name__,
                           "pairs": data.to_dict(), "graph": g.to_dict(), "wall_seconds": time.perf_counter() - t0,
                           "auto_circuit": info}
    own = info["circuit_of_its_own"]
    found = Found(rank, [e for e, c in zip(g.edges, chosen) if c], rank)
    out.update(_evaluate(patcher, data, src, "resample", truth, found, threshold, curve, level, misses=own))
    if not own:
        out["faithfulness"] = None
        if truth is not None:
            out["edge_precision"] = out["edge_recall"] = None
            for scores in out["scores_by_level"].values():
                scores["precision"] = scores["recall"] = None
    return out


def score_circuit(model: Any, truth: GroundTruth, scores: np.ndarray, chosen: np.ndarray, *, pairs: int = 64,
                  corruption: str | None = None, length: int | None = None, source: str = "resample",
                  threshold: float = DEFAULT_THRESHOLD, seed: int = 0, curve: bool = True,
                  level: str | None = None, engine: str = "auto") -> dict[str, Any]:
    """Score a circuit found elsewhere — ``scores`` per graph edge (NaN: unscored) and ``chosen`` (bool per
    edge) — exactly as :func:`analyse` scores a method's: faithfulness, the curve, every level."""
    if source not in SOURCES:
        raise MethodError(f"unknown ablation {source!r} (choose from {', '.join(SOURCES)})")
    patcher, data, src = _prepare(model, truth, pairs, corruption, length, seed, source, engine)
    g = patcher.graph
    found = Found(np.asarray(scores, dtype=np.float64), [e for e, c in zip(g.edges, chosen) if c])
    out: dict[str, Any] = {"method": "file", "level": "edge", "source": source, "seed": seed, "threshold": threshold,
                           "pairs": data.to_dict(), "graph": g.to_dict()}
    out.update(_evaluate(patcher, data, src, source, truth, found, threshold, curve, level))
    return out


def _evaluate(patcher: Patcher, data: Any, src: dict[str, Any], source: str, truth: GroundTruth | None, found: Found,
              threshold: float, curve: bool, level: str | None = None, misses: bool = True) -> dict[str, Any]:
    g = patcher.graph
    circuit, rank = found.circuit, found.rank
    out: dict[str, Any] = {"ranking": [None if np.isnan(v) else float(v) for v in rank],
                           "circuit": {"edges": [e.name for e in circuit],
                                       "nodes": sorted({e.sender for e in circuit} | {e.receiver for e in circuit},
                                                       key=lambda n: list(g.by_name).index(n))}}
    detail = faithfulness(patcher, data, circuit, src)
    out["faithfulness"] = detail["accuracy"]  # a fraction of the full model's accuracy, which is 1 by definition
    out["faithfulness_metrics"] = detail
    if curve:
        out["curve"] = faithfulness_curve(patcher, data, rank, src, "logit_diff")
    if truth is not None:
        levels = levels_of(truth, patcher, data)
        level = levels.check(level or ABLATION_LEVEL[source])
        out.update(_scores(levels, level, rank, found.edge_fx, found.node_fx, circuit))
        out["missed"] = _miss_reasons(patcher, data, src, levels, level, rank, circuit, threshold) if misses else {}
    return out


def _agreement(patcher: Patcher, data: Any, src: dict[str, Any], edge_fx: np.ndarray, node_fx: dict[str, float],
               seconds: float, progress: bool) -> dict[str, Any]:
    """How far the linear estimate agrees with the real interventions (same ablation)."""
    t1 = time.perf_counter()
    exact_edges = path_patching(patcher, data, source=src, progress=progress)
    path_seconds = time.perf_counter() - t1
    exact_nodes = node_patching(patcher, data, source=src)["nodes"]
    names = list(exact_nodes)
    return {"edges_spearman_vs_path_patching": spearman(edge_fx, exact_edges),
            "nodes_spearman_vs_activation_patching": spearman([node_fx[n] for n in names], [exact_nodes[n] for n in names]),
            "path_patching_seconds": path_seconds, "speedup_vs_path_patching": path_seconds / max(seconds, 1e-9)}


def check_settings(method: str, metric: str | None, source: str, threshold: float,
                   acdc_mode: str = "normalised", steps: int = 16) -> str:
    """Refuse settings a method cannot take (before any model is built); return the metric to use."""
    if method in AUTO_CIRCUIT_METHODS:
        if metric is not None:
            raise MethodError(f"{method} measures auto-circuit's own metric at the last position; leave out --metric")
        if source != "resample":
            raise MethodError(f"{method} runs with resample ablation here (auto-circuit's default), not {source}")
        if acdc_mode != "normalised":
            raise MethodError(f"an ACDC mode ({acdc_mode}) goes with --method acdc, not {method}")
        if not threshold > 0:
            raise MethodError(f"the threshold must be positive, got {threshold}")
        return "auto-circuit"
    if method not in METHODS:
        raise MethodError(f"unknown method {method!r} (choose from {', '.join(METHODS + AUTO_CIRCUIT_METHODS)})")
    if method in BASELINES and metric is not None:
        raise MethodError(f"the {method} baseline measures no metric; leave out --metric")
    if method == "masks" and metric not in (None, "kl"):
        raise MethodError("learned edge masks train on the KL over the full output distribution; leave out --metric")
    metric = metric or ("kl" if method == "acdc" else "logit_diff")
    if metric not in METRICS:
        raise MethodError(f"unknown metric {metric!r} (choose from {', '.join(METRICS)})")
    if method in ("attribution", "eap-ig") and metric != "logit_diff":
        raise MethodError(f"{method} needs the logit difference: the KL's gradient is zero at the clean run")
    if source not in SOURCES:
        raise MethodError(f"unknown ablation {source!r} (choose from {', '.join(SOURCES)})")
    if acdc_mode not in ACDC_MODES:
        raise MethodError(f"unknown ACDC mode {acdc_mode!r} (choose from {', '.join(ACDC_MODES)})")
    if acdc_mode != "normalised" and method != "acdc":
        raise MethodError(f"an ACDC mode ({acdc_mode}) goes with --method acdc, not {method}")
    if acdc_mode == "reference" and metric != "kl":
        raise MethodError("ACDC's reference mode measures the KL over the full output distribution; leave out --metric")
    if not 1 <= steps <= 1024:
        raise MethodError(f"EAP-IG takes 1 to 1024 steps, got {steps}")
    if not threshold > 0:
        raise MethodError(f"the threshold must be positive, got {threshold}")
    return metric


def _scores(levels: Levels, level: str, rank: np.ndarray, edge_fx: np.ndarray | None,
            node_fx: dict[str, float] | None, circuit: list[Edge]) -> dict[str, Any]:
    """AUROC and average precision of the ranking, precision and recall of the circuit, at ``level``
    (and the ranking's scores at every level); spurious edges with the ground truth's reason."""
    truth = levels.truth
    edges = truth.graph.edges
    labels = levels.labels(level)
    candidates = truth.edge_labels("structural")
    chosen = np.array([e in set(circuit) for e in edges])
    out: dict[str, Any] = {"ground_truth_level": level, "ground_truth": truth.to_dict(), "levels": levels.to_dict(),
                           "ground_truth_edges": sorted(e.name for e in levels.members[level])}
    ranked, recall = _or_scored(levels, level, rank, chosen, candidates)
    out["ranking_scores"] = ranked
    out["auroc"], out["average_precision"] = ranked["auroc"], ranked["average_precision"]
    out["edge_precision"], out["edge_recall"] = precision_recall(chosen, labels)[0], recall
    out["scores_by_level"] = {}
    for lv in LEVEL_NAMES:
        if levels.members[lv]:
            ranked_lv, recall_lv = _or_scored(levels, lv, rank, chosen, candidates)
            out["scores_by_level"][lv] = {**ranked_lv, "precision": precision_recall(chosen, levels.labels(lv))[0],
                                          "recall": recall_lv}
    if node_fx is not None:
        node_truth = levels.node_labels(level)
        names = list(node_fx)
        node_scores = ranking_scores([abs(node_fx[n]) for n in names], [node_truth[n] for n in names])
        out["node_auroc"] = node_scores["auroc"]
        if edge_fx is None:
            chosen_nodes = {e.sender for e in circuit}
            out["node_precision"], out["node_recall"] = precision_recall(
                [n in chosen_nodes for n in names], [node_truth[n] for n in names])
    out["spurious"] = {e.name: levels.why_absent(e, level) for e, y, c in zip(edges, labels, chosen) if c and not y}
    return out


def _or_scored(levels: Levels, level: str, rank: np.ndarray, chosen: np.ndarray,
               candidates: np.ndarray) -> tuple[dict[str, Any], float | None]:
    """Ranking scores and recall at ``level`` with each OR group (redundant routes) as one item: its score
    the best route's weakest edge, found when one route is kept whole. Precision stays per edge: keeping
    both routes is not an error."""
    labels = levels.labels(level)
    groups = levels.or_items(level)
    if not groups:
        return ranking_scores(rank, labels, candidates), precision_recall(chosen, labels)[1]
    index = levels.truth.graph.index
    grouped = {index[e] for g in groups for route in g for e in route}
    keep = np.array([i not in grouped for i in range(len(labels))])
    filled = np.where(np.isnan(rank), -np.inf, rank)
    score = [max(min(filled[index[e]] for e in route) for route in g) for g in groups]
    found = [any(all(chosen[index[e]] for e in route) for route in g) for g in groups]
    s = np.concatenate([rank[keep], [np.nan if v == -np.inf else v for v in score]])
    y = np.concatenate([labels[keep], np.ones(len(groups), dtype=bool)])
    c = np.concatenate([candidates[keep], np.ones(len(groups), dtype=bool)])
    picked = np.concatenate([chosen[keep], found])
    return {**ranking_scores(s, y, c), "or_groups": len(groups)}, precision_recall(picked, y)[1]


def _miss_reasons(patcher: Patcher, data: Any, src: dict[str, Any], levels: Levels, level: str, rank: np.ndarray,
                  circuit: list[Edge], threshold: float) -> dict[str, dict[str, Any]]:
    """Per ground-truth edge the circuit left out: its score, its effect patched alone (same ablation) and
    why it was missed — never scored, no effect alone (an interaction or a redundancy: it matters only
    with other edges patched), or an effect alone that the method's score did not reflect."""
    g = patcher.graph
    kept = set(circuit)
    missed = [e for e in g.edges if e in levels.members[level] and e not in kept]
    alone = path_patching(patcher, data, missed, source=src) if missed else []
    out = {}
    for e, fx in zip(missed, alone):
        score = rank[g.index[e]]
        if np.isnan(score):
            why = "never scored (its receiver was cut off first)"
        elif abs(fx) < threshold:
            why = "no effect alone: an interaction or a redundancy (it matters only with other edges patched)"
        else:
            why = "an effect alone at or above the threshold that the method's score did not reflect"
        out[e.name] = {"score": None if np.isnan(score) else float(score), "effect_alone": float(fx), "reason": why,
                       "subspaces": levels.truth.relevant.get(e, levels.truth.structural.get(e, []))}
    return out

