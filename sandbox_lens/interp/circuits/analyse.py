"""One circuit analysis of one model: the method's scores, its recovered circuit, faithfulness (at the
method's threshold and over circuit sizes), and — on a construction — the scores against the ground
truth at the level the method can see. :func:`analyse` returns what ``circuit.json`` holds;
:func:`score_circuit` scores a circuit found elsewhere (a file) the same way.

The methods are registered in :mod:`sandbox_lens.interp.circuits.methods` (auto-circuit's, ``auto-circuit:acdc``, ...,
among them when that optional package is installed); the settings are one
:class:`~sandbox_lens.interp.circuits.config.CircuitConfig`. Every method patches with one ablation
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

from sandbox_lens.interp.circuits.bare import patcher_for
from sandbox_lens.interp.circuits.config import DEFAULT_THRESHOLD, CircuitConfig, MethodError
from sandbox_lens.interp.circuits.crossing import crossing_items
from sandbox_lens.interp.circuits.effects import faithfulness, node_patching, path_patching
from sandbox_lens.interp.circuits.graph import Edge
from sandbox_lens.interp.circuits.kinks import kinked_units
from sandbox_lens.interp.circuits.levels import ABLATION_LEVEL, LEVEL_NAMES, Levels, levels_of
from sandbox_lens.interp.circuits.methods import METHODS, CircuitMethod, Found, method_of
from sandbox_lens.interp.circuits.mib import mib_curve
from sandbox_lens.interp.circuits.pairs import make_pairs
from sandbox_lens.interp.circuits.patching import Patcher, ablated_pairs
from sandbox_lens.interp.circuits.positions import POSITION_LEVELS, position_truth
from sandbox_lens.interp.circuits.score import precision_recall, ranking_scores, spearman
from sandbox_lens.interp.circuits.truth import GroundTruth

__all__ = ["analyse", "score_circuit", "check_settings", "METHODS", "DEFAULT_THRESHOLD", "MethodError", "CircuitConfig"]


def _prepare(
    model: Any, truth: GroundTruth | None, c: CircuitConfig, record: CircuitMethod | None = None
) -> tuple[Patcher, Any, dict[str, Any]]:
    """The engine (refused for ``record`` before any pair is drawn where it cannot run it), the pairs normalised
    against the ablation, and the ablation's values."""
    patcher = patcher_for(model, truth.graph if truth is not None else None, c.engine)
    if record is not None:
        record.check_engine(patcher)
    raw = make_pairs(model, c.pairs, c.corruption, c.length, c.seed, forward=patcher.logits)
    src = patcher.source(raw, c.source)
    return patcher, ablated_pairs(patcher, raw, c.source, src, c.normaliser), src


def analyse(
    model: Any, method: str, truth: GroundTruth | None = None, config: CircuitConfig | None = None, **settings: Any
) -> dict[str, Any]:
    """Run ``method`` (a name in :data:`~sandbox_lens.interp.circuits.methods.METHODS`) on ``model`` and score it
    against ``truth`` when given (a construction's), at ``config.level`` (default: the level of its ablation).

    ``config`` holds the settings (:class:`~sandbox_lens.interp.circuits.config.CircuitConfig`); keyword
    ``settings`` override its fields (``analyse(model, "path", truth, pairs=32)``). Refusals (a setting the
    method cannot take) come before any model is run."""
    c = (config or CircuitConfig()).with_(**settings)
    metric = check_settings(method, c)
    record = method_of(method)
    c = c.with_(metric=metric)
    patcher, data, src = _prepare(model, truth, c, record)
    out: dict[str, Any] = {
        "method": method,
        "level": record.level,
        "metric": metric,
        "threshold": c.threshold,
        "source": c.source,
        "normaliser": c.normaliser,
        "seed": c.seed,
        "engine": type(patcher).__name__,
        "pairs": data.to_dict(),
        "graph": patcher.graph.to_dict(),
    }
    t0, cpu0 = time.perf_counter(), time.process_time()
    found = record.run(patcher, data, src, c)
    out["wall_seconds"] = time.perf_counter() - t0
    out["cpu_seconds"] = time.process_time() - cpu0  # the method alone: not the pairs, the curve or the levels
    out.update(found.extra)
    if record.gradients:  # where rounding decides the derivative (circuits/kinks.py)
        out["kinks"] = kinked_units(patcher.model, data.clean)
    if c.agreement:
        if found.edge_fx is None or found.node_fx is None:  # a record with estimates=True returns both
            raise MethodError(f"{method} returned no edge and node estimates to compare with real patching")
        out["agreement"] = _agreement(patcher, data, src, found.edge_fx, found.node_fx, out["cpu_seconds"], c.progress)
    if found.edge_fx is not None:
        out["edges"] = {e.name: (None if np.isnan(v) else float(v)) for e, v in zip(patcher.graph.edges, found.edge_fx)}
    if found.node_fx is not None:
        out["nodes"] = {n: float(v) for n, v in found.node_fx.items()}
    out.update(_evaluate(patcher, data, src, truth, found, c))
    if not found.own_circuit:  # a ranking with no circuit of its own: nothing to measure at a threshold
        out["faithfulness"] = None
        if truth is not None:
            out["edge_precision"] = out["edge_recall"] = None
            for scores in out["scores_by_level"].values():
                scores["precision"] = scores["recall"] = None
    return out


def score_circuit(
    model: Any,
    truth: GroundTruth,
    scores: np.ndarray,
    chosen: np.ndarray,
    config: CircuitConfig | None = None,
    signed: np.ndarray | None = None,
    **settings: Any,
) -> dict[str, Any]:
    """Score a circuit found elsewhere — ``scores`` per graph edge (its ranking; NaN: unscored), ``chosen`` (bool
    per edge) and, where they differ from ``scores``, the ``signed`` scores (positive: important) — exactly as
    :func:`analyse` scores a method's: faithfulness, MIB's areas, every level."""
    c = (config or CircuitConfig()).with_(**settings)
    c.check()
    patcher, data, src = _prepare(model, truth, c)
    g = patcher.graph
    found = Found(
        np.asarray(scores, dtype=np.float64),
        [e for e, k in zip(g.edges, chosen) if k],
        signed=None if signed is None else np.asarray(signed, dtype=np.float64),
    )
    out: dict[str, Any] = {
        "method": "file",
        "level": "edge",
        "source": c.source,
        "normaliser": c.normaliser,
        "seed": c.seed,
        "threshold": c.threshold,
        "pairs": data.to_dict(),
        "graph": g.to_dict(),
    }
    out.update(_evaluate(patcher, data, src, truth, found, c))
    return out


def check_settings(method: str, config: CircuitConfig | None = None, **settings: Any) -> str:
    """Refuse settings ``method`` cannot take (before any model is built, its optional package included);
    return the metric it will use."""
    record = method_of(method)
    metric = record.check((config or CircuitConfig()).with_(**settings))
    record.require()
    return metric


def _evaluate(
    patcher: Patcher, data: Any, src: dict[str, Any], truth: GroundTruth | None, found: Found, c: CircuitConfig
) -> dict[str, Any]:
    g = patcher.graph
    circuit, rank = found.circuit, found.rank
    out: dict[str, Any] = {
        "ranking": [None if np.isnan(v) else float(v) for v in rank],
        "signed": [None if np.isnan(v) else float(v) for v in found.signed_scores],
        "circuit": {
            "edges": [e.name for e in circuit],
            "nodes": sorted(
                {e.sender for e in circuit} | {e.receiver for e in circuit}, key=lambda n: list(g.by_name).index(n)
            ),
        },
    }
    detail = faithfulness(patcher, data, circuit, src)
    out["faithfulness"] = detail["accuracy"]  # a fraction of the full model's accuracy, which is 1 by definition
    out["faithfulness_metrics"] = detail
    if c.curve:
        out["curve"] = mib_curve(patcher, data, found.signed_scores, src, "logit_diff")
    if truth is not None:
        levels = levels_of(truth, patcher, data)
        level = levels.check(c.level or ABLATION_LEVEL[c.source])
        out.update(_scores(levels, level, rank, found.edge_fx, found.node_fx, circuit))
        out["missed"] = (
            _miss_reasons(patcher, data, src, levels, level, rank, circuit, c.threshold, c.why_missed)
            if found.own_circuit
            else {}
        )
        if "edge_positions" in found.extra or "per_position" in found.extra:
            out["position_scores"] = _position_scores(patcher, data, levels, level, found.extra, found.crossing)
    return out


def _position_scores(
    patcher: Patcher,
    data: Any,
    levels: Levels,
    level: str,
    extra: dict[str, Any],
    crossing: dict[int, np.ndarray] | None = None,
) -> dict[str, Any]:
    """A method's per-position scores against the construction's per-position truth
    (:mod:`~sandbox_lens.interp.circuits.positions`): AUROC and average precision over (edge, position) items (the
    candidates: structural edges at every position), or over (node, position) items for node patching; with
    ``crossing`` terms, also over (edge, query, key) items (``crossing``: a key or value edge split by its queries)."""
    truth = levels.truth
    if truth.imposed or level not in POSITION_LEVELS:
        why = "a trained twin's imposed truth is per node" if truth.imposed else f"it is not defined at {level!r}"
        return {"scored": False, "reason": f"no per-position ground truth: {why}"}
    pt = position_truth(levels, level, patcher, data)
    out: dict[str, Any] = {"scored": True, "level": level, "truth": pt.to_dict()}
    g = truth.graph
    if "edge_positions" in extra:
        scores = np.abs(np.array([extra["edge_positions"][e.name] for e in g.edges], dtype=np.float64))
        candidates = np.repeat(truth.edge_labels("structural")[:, None], pt.n_positions, 1)
        out["edges"] = ranking_scores(scores.ravel(), pt.edges.ravel(), candidates.ravel())
        if crossing is not None:
            out["crossing"] = ranking_scores(*crossing_items(scores, crossing, pt, truth.edge_labels("structural")))
    if "per_position" in extra:
        labels = pt.node_labels()
        names = [n.name for n in g.senders]
        scores = np.abs(np.array([extra["per_position"][n] for n in names], dtype=np.float64))
        out["nodes"] = ranking_scores(scores.ravel(), np.array([labels[n] for n in names]).ravel())
    return out


def _agreement(
    patcher: Patcher,
    data: Any,
    src: dict[str, Any],
    edge_fx: np.ndarray,
    node_fx: dict[str, float],
    seconds: float,
    progress: bool,
) -> dict[str, Any]:
    """How far the linear estimate agrees with the real interventions (same ablation), and how many times its CPU
    time (``seconds``) path patching's is (CPU time, so that other processes' load does not move the ratio)."""
    t1 = time.process_time()
    exact_edges = path_patching(patcher, data, source=src, progress=progress)
    path_seconds = time.process_time() - t1
    exact_nodes = node_patching(patcher, data, source=src)["nodes"]
    names = list(exact_nodes)
    return {
        "edges_spearman_vs_path_patching": spearman(edge_fx, exact_edges),
        "nodes_spearman_vs_activation_patching": spearman([node_fx[n] for n in names], [exact_nodes[n] for n in names]),
        "path_patching_cpu_seconds": path_seconds,
        "speedup_vs_path_patching": path_seconds / max(seconds, 1e-9),
    }


def _scores(
    levels: Levels,
    level: str,
    rank: np.ndarray,
    edge_fx: np.ndarray | None,
    node_fx: dict[str, float] | None,
    circuit: list[Edge],
) -> dict[str, Any]:
    """AUROC and average precision of the ranking, precision and recall of the circuit, at ``level``
    (and the ranking's scores at every level); spurious edges with the ground truth's reason."""
    truth = levels.truth
    edges = truth.graph.edges
    labels = levels.labels(level)
    candidates = truth.edge_labels("structural")
    chosen = np.array([e in set(circuit) for e in edges])
    out: dict[str, Any] = {
        "ground_truth_level": level,
        "ground_truth": truth.to_dict(),
        "levels": levels.to_dict(),
        "ground_truth_edges": sorted(e.name for e in levels.members[level]),
    }
    ranked, recall = _or_scored(levels, level, rank, chosen, candidates)
    out["ranking_scores"] = ranked
    out["auroc"], out["average_precision"] = ranked["auroc"], ranked["average_precision"]
    out["edge_precision"], out["edge_recall"] = precision_recall(chosen, labels)[0], recall
    out["scores_by_level"] = {}
    for lv in LEVEL_NAMES:
        if levels.members[lv]:
            ranked_lv, recall_lv = _or_scored(levels, lv, rank, chosen, candidates)
            out["scores_by_level"][lv] = {
                **ranked_lv,
                "precision": precision_recall(chosen, levels.labels(lv))[0],
                "recall": recall_lv,
            }
    if node_fx is not None:
        node_truth = levels.node_labels(level)
        names = list(node_fx)
        node_scores = ranking_scores([abs(node_fx[n]) for n in names], [node_truth[n] for n in names])
        out["node_auroc"] = node_scores["auroc"]
        if edge_fx is None:
            chosen_nodes = {e.sender for e in circuit}
            out["node_precision"], out["node_recall"] = precision_recall(
                [n in chosen_nodes for n in names], [node_truth[n] for n in names]
            )
    out["spurious"] = {e.name: levels.why_absent(e, level) for e, y, c in zip(edges, labels, chosen) if c and not y}
    return out


def _or_scored(
    levels: Levels, level: str, rank: np.ndarray, chosen: np.ndarray, candidates: np.ndarray
) -> tuple[dict[str, Any], float | None]:
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


def _miss_reasons(
    patcher: Patcher,
    data: Any,
    src: dict[str, Any],
    levels: Levels,
    level: str,
    rank: np.ndarray,
    circuit: list[Edge],
    threshold: float,
    limit: int | None = None,
) -> dict[str, dict[str, Any]]:
    """Per ground-truth edge the circuit left out: its score, its effect patched alone (same ablation) and
    why it was missed — never scored, no effect alone (an interaction or a redundancy: it matters only
    with other edges patched), or an effect alone that the method's score did not reflect. With ``limit``, only
    ``limit`` of the missed edges that were scored are patched: the cheapest, those whose receivers are nearest the
    output (an edge patched alone runs from its receiver's block on), in the graph's order within a block; the rest,
    and the edges never scored, have no effect alone (None)."""
    g = patcher.graph
    kept = set(circuit)
    missed = [e for e in g.edges if e in levels.members[level] and e not in kept]
    scored = sorted((e for e in missed if not np.isnan(rank[g.index[e]])), key=lambda e: -patcher.start_layer([e]))
    patched = missed if limit is None else scored[:limit]
    alone = dict(zip(patched, path_patching(patcher, data, patched, source=src))) if patched else {}
    out = {}
    for e in missed:
        score, fx = rank[g.index[e]], alone.get(e)
        if np.isnan(score):
            why = "never scored (its receiver was cut off first)"
        elif fx is None:
            why = "not patched alone (beyond --why-missed)"
        elif abs(fx) < threshold:
            why = "no effect alone: an interaction or a redundancy (it matters only with other edges patched)"
        else:
            why = "an effect alone at or above the threshold that the method's score did not reflect"
        out[e.name] = {
            "score": None if np.isnan(score) else float(score),
            "effect_alone": None if fx is None else float(fx),
            "reason": why,
            "subspaces": levels.truth.relevant.get(e, levels.truth.structural.get(e, [])),
        }
    return out
