"""Circuits other tools read, and circuits from other tools scored here.

Three formats, each a JSON file:

* ``sandbox-lens`` — this project's own (:data:`SCHEMA`): every edge of the graph by name
  (``embed->a0.0.q``, ``a0.0->m0``, ``m1->logits``) with its ``score`` (null: never scored) and
  ``in_graph``, and the settings the circuit was found under (method, ablation, corruption, pairs,
  seed, pair length), so that scoring it again reproduces the run that wrote it;
* ``eap-ig`` — the graph JSON of EAP-IG and of the MIB circuit track: ``cfg`` (``n_layers``,
  ``n_heads``, ``parallel_attn_mlp``, ``d_model``), ``nodes`` (``input``, ``a{l}.h{h}``, ``m{l}``,
  ``logits``: ``{"in_graph": bool}``) and ``edges`` (``a0.h1->m2``, ``input->a1.h0<q>``: ``{"score",
  "in_graph"}``) over the *complete* graph of ``n_heads`` heads per layer. Its ``input`` node reads
  ``hook_embed``, the token embedding only: ``input->X`` is this project's ``embed->X``, and the ``pos``
  edges, which that graph has no node for, are not exported and come back unscored and out of the circuit.
  Scores are signed; EAP-IG's ``loss=True`` (MIB's default) makes positive important, ``loss=False``
  negative. The files written here say which (``"score_sign": "loss"``); a file that does not, with a
  negative score, is read only with the sign given (``--sign loss|metric``);
* ``auto-circuit`` — auto-circuit's edge names with their scores: ``{"edges": {"Resid Start->A1.0.Q":
  0.5, "A0.1->MLP 2": …, "MLP 1->Resid End": …}}`` (``Resid Start`` is the embeddings, ``A{l}.{h}.Q|K|V``
  a head's inputs, ``A{l}.{h}`` its output, ``MLP {l}``, ``Resid End`` the logits); the circuit is the
  edges with a score (or, given ``in_graph``, those marked).

:func:`read_circuit` detects the format, refuses files over :data:`~sandbox_lens.interp.files.MAX_READ_BYTES`, malformed JSON and
unknown node or edge names (one line each) and returns per-edge scores and membership in this
project's graph order.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from sandbox_lens.interp.circuits.graph import Edge, Graph
from sandbox_lens.interp.circuits.mib import CompleteGraph, complete_edge_count, mib_edge
from sandbox_lens.interp.errors import SandboxError
from sandbox_lens.interp.jsonfile import check_schema, read_json

__all__ = [
    "SCHEMA",
    "FORMATS",
    "SIGNS",
    "CircuitFileError",
    "to_sandbox_lens",
    "to_eap_ig",
    "to_auto_circuit",
    "auto_circuit_name",
    "auto_circuit_names",
    "read_circuit",
    "ground_truth_files",
    "CircuitFile",
]

FORMATS = ("sandbox-lens", "eap-ig", "auto-circuit")
#: How an EAP-IG file's scores are signed: ``loss`` (EAP-IG's loss=True, MIB's default: positive = important) or
#: ``metric`` (loss=False: negative = important).
SIGNS = ("loss", "metric")
FORMAT_NAME = "sandbox-lens/circuit"

#: JSON Schema of the ``sandbox-lens`` format.
SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "sandbox-lens circuit",
    "type": "object",
    "required": ["format", "version", "edges"],
    "properties": {
        "format": {"const": FORMAT_NAME},
        "version": {"const": 1},
        "construction": {"type": ["string", "null"]},
        "level": {"type": ["string", "null"], "description": "for a ground truth: its level"},
        "settings": {
            "type": "object",
            "description": "what the circuit was found under",
            "properties": {
                "method": {"type": "string"},
                "ablation": {"enum": ["resample", "zero", "mean"]},
                "corruption": {"type": "string"},
                "pairs": {"type": "integer", "minimum": 1},
                "seed": {"type": "integer"},
                "pair_length": {"type": ["integer", "null"]},
                "threshold": {"type": "number"},
            },
        },
        "nodes": {"type": "array", "items": {"type": "string"}},
        "edges": {
            "type": "object",
            "additionalProperties": {
                "type": "object",
                "required": ["score", "in_graph"],
                "properties": {
                    "score": {"type": ["number", "null"]},
                    "in_graph": {"type": "boolean"},
                    "signed": {
                        "type": ["number", "null"],
                        "description": "the signed score (positive: important) where it is not score",
                    },
                },
                "additionalProperties": False,
            },
        },
    },
}


#: The largest EAP-IG complete graph read (64 layers × 16 heads is about 2.5 million edges; the models here have ≤ 16 × 4)
MAX_COMPLETE_EDGES = 2_000_000

#: What an EAP-IG (MIB circuit track) graph file must hold before its edge names are read.
EAP_IG_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "EAP-IG graph",
    "type": "object",
    "required": ["cfg", "nodes", "edges"],
    "properties": {
        "cfg": {
            "type": "object",
            "required": ["n_layers", "n_heads"],
            "properties": {
                "n_layers": {"type": "integer", "minimum": 1, "maximum": 4096},
                "n_heads": {"type": "integer", "minimum": 1, "maximum": 4096},
            },
        },
        "nodes": {"type": "object"},
        "edges": {
            "type": "object",
            "additionalProperties": {
                "type": "object",
                "required": ["score", "in_graph"],
                "properties": {"score": {"type": "number"}, "in_graph": {"type": "boolean"}},
            },
        },
        "score_sign": {"enum": list(SIGNS)},
    },
}


class CircuitFileError(SandboxError, ValueError):
    """A circuit file that cannot be read or does not fit the model's graph."""


class CircuitFile(NamedTuple):
    """A circuit file read onto a model's graph, in its edge order."""

    rank: np.ndarray  #: the ranking (NaN: unscored)
    chosen: np.ndarray  #: membership in the circuit
    settings: dict[str, Any]  #: what the file says it was found under (and what reading it dropped)
    signed: np.ndarray  #: the signed scores, positive important (the ranking where the file has no signs)


def _score(v: Any) -> float | None:
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)


def to_sandbox_lens(
    graph: Graph,
    scores: Any,
    chosen: Any,
    *,
    construction: str | None = None,
    settings: dict[str, Any] | None = None,
    level: str | None = None,
    signed: Any = None,
) -> dict[str, Any]:
    """This project's format: every edge's score (its ranking; None: unscored), membership and, where the method's
    signed scores differ from its ranking, the signed score (positive: important)."""
    signed = scores if signed is None else signed
    edges = {}
    for e, s, c, v in zip(graph.edges, scores, chosen, signed):
        edges[e.name] = {"score": _score(s), "in_graph": bool(c)}
        if _score(v) != _score(s):
            edges[e.name]["signed"] = _score(v)
    return {
        "format": FORMAT_NAME,
        "version": 1,
        "construction": construction,
        "level": level,
        "settings": settings or {},
        "nodes": [n.name for n in graph.nodes],
        "edges": edges,
    }


def to_eap_ig(graph: Graph, scores: Any, chosen: Any, cfg: Any) -> dict[str, Any]:
    """EAP-IG's / MIB's graph JSON over the complete graph of ``cfg``'s shape (see the module docstring): edges
    this model does not have score 0, the ``pos`` edges are left out, positive scores are important."""
    ours: dict[str, tuple[float, bool]] = {}
    for e, s, c in zip(graph.edges, scores, chosen):
        name = mib_edge(e)
        if name is not None:
            ours[name] = (_score(s) or 0.0, bool(c))
    complete = CompleteGraph(cfg.n_layers, cfg.n_heads)
    edges = {
        name: {"score": ours.get(name, (0.0, False))[0], "in_graph": ours.get(name, (0.0, False))[1]}
        for name in complete.edge_names
    }
    used = {n for name, v in edges.items() if v["in_graph"] for n in name.split("<")[0].split("->")}
    return {
        "cfg": {"n_layers": cfg.n_layers, "n_heads": cfg.n_heads, "parallel_attn_mlp": False, "d_model": cfg.d_model},
        "score_sign": "loss",
        "nodes": {n: {"in_graph": n in used or n == "logits"} for n in [*complete.forward, "logits"]},
        "edges": edges,
    }


def _ac_node(name: str, channel: str | None = None) -> str:
    if name in ("embed", "pos"):
        return "Resid Start"
    if name == "logits":
        return "Resid End"
    if name.startswith("m"):
        return f"MLP {name[1:]}"
    return f"A{name[1:]}" + (f".{channel.upper()}" if channel else "")


def auto_circuit_name(e: Edge) -> str:
    """auto-circuit's name for an edge of this project's graph (``embed`` and ``pos`` are both ``Resid Start``)."""
    return f"{_ac_node(e.sender)}->{_ac_node(e.receiver, e.channel if e.channel != 'in' else None)}"


def auto_circuit_names(graph: Graph) -> dict[str, list[int]]:
    """auto-circuit's edge name → the indices of the edges of ``graph`` it stands for."""
    ours: dict[str, list[int]] = {}
    for i, e in enumerate(graph.edges):
        ours.setdefault(auto_circuit_name(e), []).append(i)
    return ours


def to_auto_circuit(graph: Graph, scores: Any, chosen: Any) -> dict[str, Any]:
    """auto-circuit's edge names with their scores (the larger of ``embed`` and ``pos`` for ``Resid Start``)."""
    out: dict[str, tuple[float, bool]] = {}
    for e, s, c in zip(graph.edges, scores, chosen):
        name = auto_circuit_name(e)
        value = _score(s) or 0.0
        old = out.get(name)
        out[name] = (value if old is None or abs(value) > abs(old[0]) else old[0], bool(c) or bool(old and old[1]))
    return {"edges": {k: v[0] for k, v in out.items()}, "in_graph": sorted(k for k, v in out.items() if v[1])}


def ground_truth_files(
    graph: Graph, members: dict[str, set[Edge]], construction: str, cfg: Any
) -> dict[str, dict[str, Any]]:
    """Every non-empty ground-truth level (``members``: level → its edges) in both graph formats:
    ``{file name: content}``."""
    out = {}
    for level, edges in members.items():
        if edges:
            chosen = [e in edges for e in graph.edges]
            scores = [1.0 if c else 0.0 for c in chosen]
            out[f"{level}.json"] = to_sandbox_lens(graph, scores, chosen, construction=construction, level=level)
            out[f"{level}.eap-ig.json"] = to_eap_ig(graph, scores, chosen, cfg)
    return out


def read_circuit(path: str | Path, graph: Graph, sign: str | None = None) -> CircuitFile:
    """(scores per graph edge — NaN unscored, positive important —, membership per edge, the file's settings) of a
    circuit file in any of :data:`FORMATS`; a :class:`CircuitFileError` (one line) for anything that does not fit.
    ``sign`` (:data:`SIGNS`) says how an EAP-IG file's scores were signed when the file does not."""
    if sign is not None and sign not in SIGNS:
        raise CircuitFileError(f"unknown score sign {sign!r} (choose from {', '.join(SIGNS)})")
    path = Path(path)
    if not path.is_file():
        raise CircuitFileError(f"no circuit file at {path}")
    data = read_json(path, error=CircuitFileError, what="a circuit file")
    if not isinstance(data, dict) or not isinstance(data.get("edges"), dict):
        raise CircuitFileError(
            f'{path} is not a circuit file: it needs an object with "edges" (formats: {", ".join(FORMATS)})'
        )
    if "cfg" in data and "nodes" in data:
        return _read_eap_ig(path, data, graph, sign)
    if sign is not None:
        raise CircuitFileError(
            f"--sign applies to EAP-IG files; {path} is in another format, whose scores are positive where important"
        )
    if data.get("format") == FORMAT_NAME:
        check_schema(data, SCHEMA, str(path), CircuitFileError)
        return _read_own(path, data, graph)
    return _read_auto_circuit(path, data, graph)


def _read_own(path: Path, data: dict[str, Any], graph: Graph) -> CircuitFile:
    unknown = sorted(set(data["edges"]) - {e.name for e in graph.edges})
    if unknown:
        raise CircuitFileError(
            f"{path} names {len(unknown)} edge(s) this model's graph does not have, e.g. {unknown[0]}"
        )
    scores, chosen = np.full(len(graph.edges), np.nan), np.zeros(len(graph.edges), dtype=bool)
    signed = np.full(len(graph.edges), np.nan)
    for i, e in enumerate(graph.edges):
        entry = data["edges"].get(e.name)
        if entry is None:
            continue
        if (
            not isinstance(entry, dict)
            or not isinstance(entry.get("in_graph"), bool)
            or not all(_number_or_null(entry.get(k)) for k in ("score", "signed"))
        ):
            raise CircuitFileError(f'{path}: edge {e.name} needs {{"score": number or null, "in_graph": true/false}}')
        scores[i] = np.nan if entry["score"] is None else float(entry["score"])
        value = entry.get("signed", entry["score"])
        signed[i] = np.nan if value is None else float(value)
        chosen[i] = entry["in_graph"]
    settings = data.get("settings")
    if not isinstance(settings, (dict, type(None))):
        raise CircuitFileError(f"{path}: settings must be an object")
    return CircuitFile(scores, chosen, dict(settings or {}), signed)


def _number_or_null(x: Any) -> bool:
    return x is None or (isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x))


def _read_eap_ig(path: Path, data: dict[str, Any], graph: Graph, sign: str | None) -> CircuitFile:
    ours: dict[str, list[int]] = {}
    for i, e in enumerate(graph.edges):
        name = mib_edge(e)
        if name is not None:  # a pos edge has no EAP-IG name: it stays unscored and out of the circuit
            ours.setdefault(name, []).append(i)
    check_schema(data, EAP_IG_SCHEMA, str(path), CircuitFileError)
    n_layers, n_heads = data["cfg"]["n_layers"], data["cfg"]["n_heads"]
    if complete_edge_count(n_layers, n_heads) > MAX_COMPLETE_EDGES:
        raise CircuitFileError(
            f"{path}: cfg declares {n_layers} layers × {n_heads} heads, a complete graph of "
            f"{complete_edge_count(n_layers, n_heads):,} edges; files are read up to {MAX_COMPLETE_EDGES:,}"
        )
    complete = set(CompleteGraph(n_layers, n_heads).edge_names)
    unknown = sorted(set(data["edges"]) - complete)
    if unknown:
        raise CircuitFileError(
            f"{path} names {len(unknown)} edge(s) an EAP-IG graph of this shape does not have, e.g. {unknown[0]}"
        )
    for name, entry in data["edges"].items():
        if (
            not isinstance(entry, dict)
            or not isinstance(entry.get("in_graph"), bool)
            or isinstance(entry.get("score"), bool)
            or not isinstance(entry.get("score"), (int, float))
            or not math.isfinite(entry["score"])
        ):
            raise CircuitFileError(f'{path}: edge {name} needs {{"score": a finite number, "in_graph": true/false}}')
    declared = data.get("score_sign")
    if declared is not None and declared not in SIGNS:
        raise CircuitFileError(f"{path}: score_sign must be one of {', '.join(SIGNS)}, not {declared!r}")
    if declared is not None and sign is not None and declared != sign:
        raise CircuitFileError(f"{path} says its scores are signed as {declared}; --sign {sign} contradicts it")
    sign = sign or declared
    if sign is None and any(v["score"] < 0 for v in data["edges"].values()):
        raise CircuitFileError(
            f"{path} has negative scores and does not say how they are signed: give --sign loss "
            "(EAP-IG's loss=True, MIB's default: positive = important) or --sign metric "
            "(loss=False: negative = important)"
        )
    flip = -1.0 if sign == "metric" else 1.0
    scores, chosen = np.full(len(graph.edges), np.nan), np.zeros(len(graph.edges), dtype=bool)
    for name, entry in data["edges"].items():
        for i in ours.get(name, []):  # an edge into or out of a part this model does not have carries nothing
            scores[i], chosen[i] = flip * float(entry["score"]), entry["in_graph"]
    lost = [n for n, v in data["edges"].items() if v["in_graph"] and n not in ours]
    unscored = [e.name for e in graph.edges if mib_edge(e) is None]
    return CircuitFile(
        scores,
        chosen,
        {"dropped_in_graph_edges": lost, "score_sign": sign or "loss", "unscored_positional_edges": unscored},
        scores,
    )


def _read_auto_circuit(path: Path, data: dict[str, Any], graph: Graph) -> CircuitFile:
    ours = auto_circuit_names(graph)
    unknown = sorted(set(data["edges"]) - set(ours))
    if unknown:
        raise CircuitFileError(
            f"{path} names {len(unknown)} edge(s) this model's graph does not have, e.g. {unknown[0]} "
            f"(formats: {', '.join(FORMATS)})"
        )
    marked = data.get("in_graph")
    scores, chosen = np.full(len(graph.edges), np.nan), np.zeros(len(graph.edges), dtype=bool)
    for name, value in data["edges"].items():
        if not isinstance(value, (int, float)):
            raise CircuitFileError(f"{path}: edge {name} needs a number as its score")
        for i in ours[name]:
            scores[i] = float(value)
            chosen[i] = name in marked if isinstance(marked, list) else True
    return CircuitFile(scores, chosen, {}, scores)
