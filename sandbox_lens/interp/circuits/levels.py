"""Ground truth in levels: every edge of a construction's graph, which levels it belongs to, and why it
is absent from the others.

The weights give three levels (:mod:`sandbox_lens.interp.circuits.truth`): ``structural``, ``live`` and
``relevant``. A method, though, sees the model through a metric, a corruption and an ablation, and
each of those narrows what it *can* find:

* ``read`` — relevant, with liveness seeded from the outputs the metric reads only (Dyck's closing
  brackets; every output for automata and the flip-flop language);
* ``resample`` — read, and *visible to the corruption*: the sender's output, in the coordinates the
  receiver takes in live, differs between the clean and the corrupted word on some pair (patching
  from the corrupted run can only move an edge whose delivered value it changes);
* ``zero`` — the sender's output in the receiver's live coordinates (seeded from the read outputs) is
  nonzero on some clean input: zeroing it changes what the receiver reads. Constants and position
  codes belong here;
* ``mean`` — that output differs from its mean over the clean batch at the same position.

A method is scored against the level of its ablation (:data:`ABLATION_LEVEL`). An edge absent from
a level carries the first reason that applies (:data:`REASONS`); each is checked against behaviour
in ``tests/circuits/test_levels.py`` (patching every edge outside a level, with its ablation, leaves
the read outputs exact; an edge called invisible has effect 0 under the corruption).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from sandbox_lens.interp.circuits.graph import Edge
from sandbox_lens.interp.circuits.truth import GroundTruth
from sandbox_lens.interp.errors import SandboxError

__all__ = [
    "Levels",
    "levels_of",
    "LEVEL_NAMES",
    "ABLATION_LEVEL",
    "REASONS",
    "LevelError",
    "ablation_change",
    "ablation_coords",
    "tolerance_of",
]

#: Every level, widest first.
LEVEL_NAMES = ("structural", "live", "relevant", "read", "resample", "zero", "mean")
#: The level a method that patches with each ablation is scored against.
ABLATION_LEVEL = {"resample": "resample", "zero": "zero", "mean": "mean"}
#: Why an edge is absent from a level (the first that applies).
REASONS = {
    "not-connected": "not connected: nothing the writer writes is read on this channel",
    "not-imposed": "outside the imposed circuit: a trained twin's node that strict IIT trained to be irrelevant",
    "unused": "unused: it meets the reader only in coordinates through which no output can move",
    "cancelled": "cancelled: it leaves or enters a head whose output another head of its block cancels exactly",
    "invariant": "invariant: what it delivers where it is used is the same for every word (constant or position-only)",
    "unread-output": "unread output: it reaches only outputs the metric does not read",
    "invisible": "the corruption cannot vary it: equal on the clean and the corrupted words of every pair",
    "zero-on-data": "zero on the data: what it delivers where it is used is 0 on every clean input",
    "mean-on-data": "equal to its mean: what it delivers where it is used is the same for every clean input at each position",
}
#: Relative size below which two float32 activations count as equal.
TOLERANCE = 1e-6


class LevelError(SandboxError, ValueError):
    """A ground-truth level that does not exist, or that this construction does not have."""


@dataclass
class Levels:
    """Per level, the edges in it; per level and absent edge, the reason code (a key of :data:`REASONS`)."""

    truth: GroundTruth
    members: dict[str, set[Edge]]
    reasons: dict[str, dict[Edge, str]]
    corruption: str
    outputs: list[int]

    def labels(self, level: str) -> np.ndarray:
        """0/1 per edge of the graph, in its order."""
        chosen = self.members[self.check(level)]
        return np.array([e in chosen for e in self.truth.graph.edges], dtype=bool)

    def node_labels(self, level: str) -> dict[str, bool]:
        """Per node: does it send or receive an edge of the level."""
        chosen = self.members[self.check(level)]
        used = {e.sender for e in chosen} | {e.receiver for e in chosen}
        return {n.name: n.name in used for n in self.truth.graph.nodes}

    def check(self, level: str) -> str:
        if level not in LEVEL_NAMES:
            raise LevelError(f"unknown ground-truth level {level!r} (choose from {', '.join(LEVEL_NAMES)})")
        if not self.members[level]:
            raise LevelError(
                f"{self.truth.construction} has no edge at the {level!r} level "
                f"({REASONS[_common_reason(self.reasons[level])]})"
            )
        return level

    def why_absent(self, edge: Edge, level: str) -> str | None:
        """The reason code for ``edge`` being absent from ``level``; None when it is in it."""
        return self.reasons[level].get(edge)

    def or_items(self, level: str) -> list[list[list[Edge]]]:
        """The level's OR groups: per group, per route, the route's edges in the level (edges into or out of
        the route's nodes). Empty unless a group's ablation is this level's (``negatives=backup``: zero)."""
        groups = []
        for g in self.truth.or_groups:
            if ABLATION_LEVEL.get(g.get("ablation", "")) != level:
                continue
            routes = [
                [
                    e
                    for e in sorted(self.members[level], key=self.truth.graph.index.get)
                    if e.sender in nodes or e.receiver in nodes
                ]
                for nodes in (set(r) for r in g["routes"])
            ]
            if all(routes):
                groups.append(routes)
        return groups

    def to_dict(self) -> dict[str, Any]:
        """Per edge, the levels it is in and, for the others, why not; per level, its size."""
        edges = {}
        for e in self.truth.graph.edges:
            edges[e.name] = {
                "in": [lv for lv in LEVEL_NAMES if e in self.members[lv]],
                "absent": {lv: self.reasons[lv][e] for lv in LEVEL_NAMES if e in self.reasons[lv]},
            }
        return {
            "construction": self.truth.construction,
            "corruption": self.corruption,
            "read_outputs": self.outputs,
            "sizes": {lv: len(self.members[lv]) for lv in LEVEL_NAMES},
            "reasons": REASONS,
            "or_groups": {
                lv: [[[e.name for e in r] for r in g] for g in self.or_items(lv)]
                for lv in LEVEL_NAMES
                if self.or_items(lv)
            },
            "ablation_level": ABLATION_LEVEL,
            "edges": edges,
        }


def _common_reason(reasons: dict[Edge, str]) -> str:
    codes = list(reasons.values())
    return max(set(codes), key=codes.count) if codes else "not-connected"


def levels_of(truth: GroundTruth, patcher: Any, pairs: Any) -> Levels:
    """Every level of ``truth`` for the metric's outputs and the corruption of ``pairs`` (a
    :class:`~sandbox_lens.interp.circuits.pairs.Pairs`), measured on ``patcher``'s model (the construction itself, or
    a trained twin for an imposed truth: :func:`_imposed_checks`)."""
    if not truth.imposed and truth.flow is None:
        raise LevelError("this ground truth was made without its coordinate flow; derive it again with ground_truth()")
    clean, corrupt = patcher.outputs(pairs.clean), patcher.outputs(pairs.corrupt)
    tol = tolerance_of(clean)
    checks_of = (_imposed_checks if truth.imposed else _flow_checks)(truth, pairs, clean, corrupt, tol)
    members: dict[str, set[Edge]] = {lv: set() for lv in LEVEL_NAMES}
    reasons: dict[str, dict[Edge, str]] = {lv: {} for lv in LEVEL_NAMES}
    for e in truth.graph.edges:
        for lv, why in checks_of(e).items():
            if why:
                reasons[lv][e] = why
            else:
                members[lv].add(e)
    return Levels(truth, members, reasons, pairs.corruption, [int(o) for o in pairs.outputs])


def _flow_checks(truth: GroundTruth, pairs: Any, clean: dict, corrupt: dict, tol: float) -> Any:
    """Edge → {level: the reason it is absent, or None}, for a construction: through its coordinate flow."""
    flow = truth.flow
    live_read = flow.live_inputs(pairs.outputs)

    def varies(x: Any, coords: list[int]) -> bool:
        return bool(len(coords)) and float(x[..., coords].abs().max()) > tol

    def checks_of(e: Edge) -> dict[str, str | None]:
        static = _static_reason(truth, e)
        used = ablation_coords("zero", flow, e, live_read)
        word = ablation_coords("resample", flow, e, live_read)
        x = clean[e.sender]
        checks = {
            "structural": None if e in truth.structural else "not-connected",
            "live": None if e in truth.live else static,
            "relevant": None if e in truth.relevant else static,
            "read": static or (None if word else "unread-output"),
        }
        checks["resample"] = checks["read"] or (
            None if varies(ablation_change("resample", x, corrupt[e.sender]), word) else "invisible"
        )
        reach = "not-connected" if e not in truth.structural else (static if e not in truth.live else "unread-output")
        checks["zero"] = None if used and varies(x, used) else (reach if not used else "zero-on-data")
        checks["mean"] = checks["read"] or (None if varies(ablation_change("mean", x, None), used) else "mean-on-data")
        return checks

    return checks_of


def tolerance_of(outputs: dict[str, Any]) -> float:
    """The size below which two of these float32 activations count as equal: :data:`TOLERANCE` of the largest."""
    return TOLERANCE * (max(float(v.abs().max()) for v in outputs.values()) or 1.0)


def ablation_coords(level: str, flow: Any, e: Edge, live: dict) -> list[int]:
    """The coordinates in which ``level``'s ablation of ``e`` counts: where it meets its receiver's ``live`` inputs,
    and for resample only those where its sender writes word information."""
    used = sorted(flow.used(e, live))
    return sorted(set(used) & flow.word(e.sender)) if level == "resample" else used


def ablation_change(level: str, clean: Any, corrupt: Any) -> Any:
    """What ``level``'s ablation changes in a sender's clean output (a tensor, batch first): its difference from the
    corrupted run's (resample), the output itself (zero), its difference from its clean batch mean per position
    (mean)."""
    if level == "resample":
        return clean - corrupt
    if level == "zero":
        return clean
    return clean - clean.mean(0, keepdim=True)


def _imposed_checks(truth: GroundTruth, pairs: Any, clean: dict, corrupt: dict, tol: float) -> Any:
    """Edge → {level: the reason it is absent, or None}, for a trained twin's imposed circuit: the weights-only levels
    are the edges between imposed nodes (anything else is ``not-imposed``); an ablation's level keeps those whose
    sender's output, measured on the twin, the ablation can change — it differs between the clean and the corrupted
    word (resample: the position embedding never does), is nonzero (zero), or differs from its mean over the clean
    batch at the same position (mean). No coordinate flow narrows them (a twin has none), so each level is an upper
    bound on the edges the twin uses."""

    def varies(x: Any) -> bool:
        return float(x.abs().max()) > tol

    def checks_of(e: Edge) -> dict[str, str | None]:
        x = clean[e.sender]
        inside = None if e in truth.structural else "not-imposed"
        checks = {lv: inside for lv in ("structural", "live", "relevant", "read")}
        checks["resample"] = inside or (
            None if varies(ablation_change("resample", x, corrupt[e.sender])) else "invisible"
        )
        checks["zero"] = inside or (None if varies(x) else "zero-on-data")
        checks["mean"] = inside or (None if varies(ablation_change("mean", x, None)) else "mean-on-data")
        return checks

    return checks_of


def _static_reason(truth: GroundTruth, e: Edge) -> str | None:
    """Why an edge is not task-relevant, from the weights alone; None when it is."""
    if e not in truth.structural:
        return "not-connected"
    if e not in truth.live:
        flow = truth.flow
        return (
            "cancelled"
            if flow is not None and (e.sender in flow.cancelled or e.receiver in flow.cancelled)
            else "unused"
        )
    if e not in truth.relevant:
        return "invariant"
    return None
