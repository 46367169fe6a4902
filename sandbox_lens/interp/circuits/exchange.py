"""Circuits other tools read, and circuits from other tools scored here.

Three formats, each a JSON file:

* ``sandbox-lens`` — this project's own (:data:`SCHEMA`): every edge of the graph by name
  (``embed->a0.0.q``, ``a0.0->m0``, ``m1->logits``) with its ``score`` (null: never scored) and
  ``in_graph``, and the settings the circuit was found under (method, ablation, corruption, pairs,
  seed, pair length), so that scoring it again reproduces the run that wrote it;
* ``eap-ig`` — the graph JSON of EAP-IG and of the MIB circuit track: ``cfg`` (``n_layers``,
  ``n_heads``, ``parallel_attn_mlp``, ``d_model``), ``nodes`` (``input``, ``a{l}.h{h}``, ``m{l}``,
  ``logits``: ``{"in_graph": bool}``) and ``edges`` (``a0.h1->m2``, ``input->a1.h0<q>``: ``{"score",
  "in_graph"}``) over the *complete* graph of ``n_heads`` heads per layer. That graph has one
  ``input`` node where this project has two (``embed`` and ``pos``): exporting, ``input->X`` takes the
  larger score of the two and is in the graph if either is; importing, it stands for both;
* ``auto-circuit`` — auto-circuit's edge names with their scores: ``{"edges": {"Resid Start->A1.0.Q":
  0.5, "A0.1->MLP 2": …, "MLP 1->Resid End": …}}`` (``Resid Start`` is the embeddings, ``A{l}.{h}.Q|K|V``
  a head's inputs, ``A{l}.{h}`` its output, ``MLP {l}``, ``Resid End`` the logits); the circuit is the
  edges with a score (or, given ``in_graph``, those marked).

:func:`read_circuit` detects the format, refuses files over :data:`MAX_BYTES`, malformed JSON and
unknown node or edge names (one line each) and returns per-edge scores and membership in this
project's graph order.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from sandbox_lens.interp.circuits.graph import Edge, Graph
from sandbox_lens.interp.errors import SandboxError

__all__ = ["SCHEMA", "FORMATS", "MAX_BYTES", "CircuitFileError", "to_sandbox_lens", "to_eap_ig", "to_auto_circuit",
           "auto_circuit_name", "auto_circuit_names", "read_circuit", "ground_truth_files"]

FORMATS = ("sandbox-lens", "eap-ig", "auto-circuit")
#: The largest circuit file read (a 16-block scan's complete graph is about 60 kB).
MAX_BYTES = 64 << 20
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
        "settings": {"type": "object", "description": "what the circuit was found under", "properties": {
            "method": {"type": "string"}, "ablation": {"enum": ["resample", "zero", "mean"]},
            "corruption": {"type": "string"}, "pairs": {"type": "integer", "minimum": 1},
            "seed": {"type": "integer"}, "pair_length": {"type": ["integer", "null"]},
            "threshold": {"type": "number"}}},
        "nodes": {"type": "array", "items": {"type": "string"}},
        "edges": {"type": "object", "additionalProperties": {
            "type": "object", "required": ["score", "in_graph"],
            "properties": {"score": {"type": ["number", "null"]}, "in_graph": {"type": "boolean"}},
            "additionalProperties": False}},
    },
}


class CircuitFileError(SandboxError, ValueError):
    """A circuit file that cannot be read or does not fit the model's graph."""


def _score(v: Any) -> float | None:
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)


def to_sandbox_lens(graph: Graph, scores: Any, chosen: Any, *, construction: str | None = None,
                    settings: dict[str, Any] | None = None, level: str | None = None) -> dict[str, Any]:
    """This project's format: every edge's score (None: unscored) and membership."""
    return {"format": FORMAT_NAME, "version": 1, "construction": construction, "level": level,
            "settings": settings or {}, "nodes": [n.name for n in graph.nodes],
            "edges": {e.name: {"score": _score(s), "in_graph": bool(c)} for e, s, c in zip(graph.edges, scores, chosen)}}


def _eap_node(name: str) -> str:
    if name in ("embed", "pos"):
        return "input"
    if name.startswith("a"):
        layer, head = name[1:].split(".")
        return f"a{layer}.h{head}"
    return name


def _eap_edge(e: Edge) -> str:
    receiver = _eap_node(e.receiver)
    return f"{_eap_node(e.sender)}->{receiver}" + (f"<{e.channel}>" if e.channel != "in" else "")


def _complete_eap_graph(n_layers: int, n_heads: int) -> list[str]:
    """Every edge name of EAP-IG's complete graph (sequential attention and MLP)."""
    edges, upstream = [], ["input"]
    for l in range(n_layers):
        heads = [f"a{l}.h{h}" for h in range(n_heads)]
        edges += [f"{u}->{h}<{c}>" for u in upstream for h in heads for c in "qkv"]
        upstream = upstream + heads
        edges += [f"{u}->m{l}" for u in upstream]
        upstream = upstream + [f"m{l}"]
    return edges + [f"{u}->logits" for u in upstream]


def to_eap_ig(graph: Graph, scores: Any, chosen: Any, cfg: Any) -> dict[str, Any]:
    """EAP-IG's / MIB's graph JSON over the complete graph of ``cfg``'s shape (see the module docstring)."""
    best: dict[str, tuple[float, bool]] = {}
    for e, s, c in zip(graph.edges, scores, chosen):
        name, s = _eap_edge(e), _score(s)
        old = best.get(name)
        value = 0.0 if s is None else s
        if old is None or abs(value) > abs(old[0]):
            best[name] = (value, bool(c) or (old[1] if old else False))
        elif c:
            best[name] = (old[0], True)
    edges = {name: {"score": best.get(name, (0.0, False))[0], "in_graph": best.get(name, (0.0, False))[1]}
             for name in _complete_eap_graph(cfg.n_layers, cfg.n_heads)}
    used = {n for name, v in edges.items() if v["in_graph"] for n in name.split("<")[0].split("->")}
    nodes = ["input"] + [f"a{l}.h{h}" for l in range(cfg.n_layers) for h in range(cfg.n_heads)] \
        + [f"m{l}" for l in range(cfg.n_layers)] + ["logits"]
    return {"cfg": {"n_layers": cfg.n_layers, "n_heads": cfg.n_heads, "parallel_attn_mlp": False, "d_model": cfg.d_model},
            "nodes": {n: {"in_graph": n in used or n == "logits"} for n in nodes}, "edges": edges}


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


def ground_truth_files(graph: Graph, members: dict[str, set[Edge]], construction: str, cfg: Any) -> dict[str, dict[str, Any]]:
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


def read_circuit(path: str | Path, graph: Graph) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """(scores per graph edge — NaN unscored —, membership per edge, the file's settings) of a circuit file in
    any of :data:`FORMATS`; a :class:`CircuitFileError` (one line) for anything that does not fit."""
    path = Path(path)
    if not path.is_file():
        raise CircuitFileError(f"no circuit file at {path}")
    size = path.stat().st_size
    if size > MAX_BYTES:
        raise CircuitFileError(f"{path} is {size / 2**20:.0f} MiB; circuit files are read up to {MAX_BYTES >> 20} MiB")
    try:
        data = json.loads(path.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CircuitFileError(f"{path} is not JSON: {e}") from None
    if not isinstance(data, dict) or not isinstance(data.get("edges"), dict):
        raise CircuitFileError(f"{path} is not a circuit file: it needs an object with \"edges\" "
                               f"(formats: {', '.join(FORMATS)})")
    if data.get("format") == FORMAT_NAME:
        return _read_own(path, data, graph)
    if "cfg" in data and "nodes" in data:
        return _read_eap_ig(path, data, graph)
    return _read_auto_circuit(path, data, graph)


def _read_own(path: Path, data: dict[str, Any], graph: Graph) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    unknown = sorted(set(data["edges"]) - {e.name for e in graph.edges})
    if unknown:
        raise CircuitFileError(f"{path} names {len(unknown)} edge(s) this model's graph does not have, e.g. {unknown[0]}")
    scores, chosen = np.full(len(graph.edges), np.nan), np.zeros(len(graph.edges), dtype=bool)
    for i, e in enumerate(graph.edges):
        entry = data["edges"].get(e.name)
        if entry is None:
            continue
        if not isinstance(entry, dict) or not isinstance(entry.get("in_graph"), bool) \
                or not (entry.get("score") is None or isinstance(entry.get("score"), (int, float))):
            raise CircuitFileError(f"{path}: edge {e.name} needs {{\"score\": number or null, \"in_graph\": true/false}}")
        scores[i] = np.nan if entry["score"] is None else float(entry["score"])
        chosen[i] = entry["in_graph"]
    return scores, chosen, dict(data.get("settings") or {})


def _read_eap_ig(path: Path, data: dict[str, Any], graph: Graph) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    ours: dict[str, list[int]] = {}
    for i, e in enumerate(graph.edges):
        ours.setdefault(_eap_edge(e), []).append(i)
    cfg = data["cfg"]
    try:
        complete = set(_complete_eap_graph(int(cfg["n_layers"]), int(cfg["n_heads"])))
    except (KeyError, TypeError, ValueError):
        raise CircuitFileError(f"{path}: cfg needs integer n_layers and n_heads") from None
    unknown = sorted(set(data["edges"]) - complete)
    if unknown:
        raise CircuitFileError(f"{path} names {len(unknown)} edge(s) an EAP-IG graph of this shape does not have, "
                               f"e.g. {unknown[0]}")
    scores, chosen = np.full(len(graph.edges), np.nan), np.zeros(len(graph.edges), dtype=bool)
    for name, entry in data["edges"].items():
        if not isinstance(entry, dict) or "score" not in entry or "in_graph" not in entry:
            raise CircuitFileError(f"{path}: edge {name} needs \"score\" and \"in_graph\"")
        for i in ours.get(name, []):  # an edge into or out of a part this model does not have carries nothing
            scores[i], chosen[i] = float(entry["score"]), bool(entry["in_graph"])
    lost = [n for n, v in data["edges"].items() if v["in_graph"] and n not in ours]
    return scores, chosen, {"dropped_in_graph_edges": lost}


def _read_auto_circuit(path: Path, data: dict[str, Any], graph: Graph) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    ours = auto_circuit_names(graph)
    unknown = sorted(set(data["edges"]) - set(ours))
    if unknown:
        raise CircuitFileError(f"{path} names {len(unknown)} edge(s) this model's graph does not have, e.g. {unknown[0]} "
                               f"(formats: {', '.join(FORMATS)})")
    marked = data.get("in_graph")
    scores, chosen = np.full(len(graph.edges), np.nan), np.zeros(len(graph.edges), dtype=bool)
    for name, value in data["edges"].items():
        if not isinstance(value, (int, float)):
            raise CircuitFileError(f"{path}: edge {name} needs a number as its score")
        for i in ours[name]:
            scores[i] = float(value)
            chosen[i] = name in marked if isinstance(marked, list) else True
    return scores, chosen, {}
