"""The correspondence `interp train --align CONSTRUCTION` imposes on a twin, read from the construction's card
(the sites its proof names for each variable, :func:`sandbox_lens.interp.model.spec.variable_site`): each variable at
the twin's hook of the construction's *latest* ``carries`` site (the form the construction reads it out in:
the counter's one-hot state rather than its count, which a staircase MLP decodes), in a block of axis-aligned coordinates
as wide as the construction's named subspace there, variables side by side from coordinate 0; the
circuit's nodes are the construction's own heads and MLPs (:func:`sandbox_lens.interp.train.align.circuit_nodes`). The training itself is
:mod:`sandbox_lens.interp.train.align`.
"""

from __future__ import annotations

from typing import Any

from sandbox_lens.constructions.registry import REGISTRY, build
from sandbox_lens.interp.causal.algorithms import algorithms_for
from sandbox_lens.interp.causal.verdict import block_order
from sandbox_lens.interp.errors import OptionError
from sandbox_lens.interp.tasks.highlevel import HighLevelError
from sandbox_lens.interp.tasks.kinds import resolve, task_kind
from sandbox_lens.interp.train.align import circuit_nodes

__all__ = ["correspondence", "graph_edges", "graph_joints"]


def correspondence(construction: str, task: Any, shape: Any, edges: bool = False) -> dict[str, Any]:
    """The imposed correspondence (a JSON-able dict) of ``construction`` (``NAME`` or ``dyck:VARIANT``) on a twin
    of ``shape`` trained on ``task``. ``edges``: add ``"edges"``, every edge of the construction's algorithm
    (:mod:`sandbox_lens.interp.causal.algorithms`) between two imposed variables at one exact offset, and
    ``"joints"``, each variable those edges' parents determine — what ``--iit-variables graph`` trains by path and
    joint interchanges (refused where there is no edge)."""

    name, _, variant = construction.partition(":")
    if name not in REGISTRY:
        build(name, None, 1)  # an unknown name: the registry's own one-line refusal
    if variant and name != "dyck":
        raise OptionError(f"--align {construction}: only dyck has variants")
    kind = task_kind(task)
    if REGISTRY[name].takes != kind.name:
        raise OptionError(f"--align {name}: it models the {REGISTRY[name].takes} task, not this {kind.name} task")
    source, length = kind.construction_input(task)
    spec = build(name, source, length, **({"variant": variant} if variant else {}))

    high = resolve(kind.high_level).of_task(task.to_dict())

    def known(variable: str) -> bool:  # a card may name variables the task's high-level model does not have
        try:
            high.variable(variable)
        except HighLevelError:
            return False
        return True

    sites = [v for v in spec.card().variables if v["role"] == "carries" and known(v["variable"])]
    if not sites:
        raise OptionError(f"--align {name}: its card names no variable sites")
    chosen: dict[str, dict[str, Any]] = {}
    for v in sorted(sites, key=lambda v: -block_order(v["hook"])):
        chosen.setdefault(v["variable"], v)
    labels = [lab.split(":", 1)[0] for lab in spec.layout.labels()]
    variables, start = [], 0
    for variable, v in chosen.items():
        width = sum(labels.count(s) for s in v["subspace"])
        variables.append(
            {
                "variable": variable,
                "hook": v["hook"],
                "dims": [start, start + width],
                "construction_site": f"{'+'.join(v['subspace'])} @ {v['hook']}",
            }
        )
        start += width
    heads = [sum(1 for h in b.heads if h.writes) for b in spec.blocks]
    mlps = [l for l, b in enumerate(spec.blocks) if b.mlp is not None]
    out = {
        "construction": construction,
        "kind": kind.name,
        "variables": variables,
        "blocks": len(spec.blocks),
        "circuit": circuit_nodes(heads, mlps, shape.n_layers, shape.n_heads),
    }
    if edges:
        out["edges"] = graph_edges(name, kind.name, source, length, [v["variable"] for v in variables])
        out["joints"] = graph_joints(name, kind.name, source, length, out["edges"])
        if not out["edges"]:
            raise OptionError(
                f"--iit-variables graph: {name}'s algorithm has no edge between two of its imposed variables "
                f"({', '.join(v['variable'] for v in variables)}); use all"
            )
    return out


def _algorithm_variables(construction: str, kind: str, source: Any, length: int) -> tuple[Any, ...]:
    """The variables of the registered algorithm ``construction`` builds, on this task (none if it builds none)."""
    algorithms, _ = algorithms_for(kind, source, length)
    found = [a for a in algorithms if a.construction == construction]
    return found[0].variables(source, length) if found else ()


def graph_joints(
    construction: str, kind: str, source: Any, length: int, edges: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Each imposed variable the algorithm says its parents determine (``Variable.determined``), with those parents
    (name, offset) among ``edges``: what a joint interchange sets at once."""
    out = []
    for v in _algorithm_variables(construction, kind, source, length):
        parents = [[e["parent"], e["offset"]] for e in edges if e["child"] == v.name]
        if v.determined and parents:
            out.append({"child": v.name, "parents": parents})
    return out


def graph_edges(construction: str, kind: str, source: Any, length: int, imposed: list[str]) -> list[dict[str, Any]]:
    """Every edge (parent, child, offset) of the algorithm ``construction`` builds, between two ``imposed``
    variables at one exact offset (the edges the identification tests by path interchange)."""
    out = []
    for v in _algorithm_variables(construction, kind, source, length):
        for e in v.edges:
            if v.mode == "parallel" and e.child in imposed and v.name in imposed and e.hi == e.lo:
                out.append({"parent": v.name, "child": e.child, "offset": int(e.lo)})
    return out
