"""The high-level graph in interchange intervention training (``--iit-variables graph``): an edge between two
imposed variables by a path interchange, a variable its parents determine by a joint interchange — the losses
:mod:`sandbox_lens.interp.train.align` adds, and their held-out IIA. They are the identification's own tests
(:mod:`sandbox_lens.interp.causal.paths`) on the imposed coordinates, with a gradient.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from sandbox_lens.interp.model.run import readout_answer, run_with_hooks

__all__ = [
    "edge_loss",
    "joint_loss",
    "held_out_edge",
    "held_out_joint",
    "edge_name",
    "joint_name",
    "path_run",
    "parent_hooks",
    "readout_loss",
    "counterfactual_labels",
]


def _edge_rows(T: int, offset: int, n: int, g: np.random.Generator) -> np.ndarray:
    """One parent position p per pair with p + ``offset`` inside the word."""
    return g.integers(T - offset, size=n)


def counterfactual_labels(
    high: Any,
    base: np.ndarray,
    source: np.ndarray,
    positions: np.ndarray,
    variable: str,
    answered: np.ndarray,
    reach: tuple[str, int] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(labels, scored) ``[n, T]`` of one interchange per pair: ``variable`` from the source at that pair's position
    p, scored where the high-level model says it changes an answered output — and, with ``reach`` = (child, offset),
    only at the outputs the child at p + offset reaches (a path interchange's end)."""
    labels = np.zeros(base.shape, dtype=np.int64)
    scored = np.zeros(base.shape, dtype=bool)
    for p in np.unique(positions):
        rows = np.flatnonzero(positions == p)
        lab, sc = high.counterfactual(base[rows], source[rows], int(p), variable)
        if reach is not None:
            sc = sc & high.counterfactual(base[rows], base[rows], int(p) + reach[1], reach[0])[1]
        labels[rows], scored[rows] = lab, sc & answered[rows]
    return labels, scored


def path_run(
    model: Any,
    tokens: Any,
    parent: Mapping[str, Any],
    child: Mapping[str, Any],
    parent_values: Any,
    at_p: Any,
    at_q: Any,
) -> Any:
    """Step 1 of a path interchange: the base run with the parent's coordinates at ``at_p`` set to
    ``parent_values``; returns the child's coordinates at ``at_q`` in that run (with their gradient)."""
    import torch

    rows = torch.arange(len(at_p), device=parent_values.device)
    (p0, p1), (c0, c1) = parent["dims"], child["dims"]
    kept: dict[str, Any] = {}

    def fn(name: str) -> Any:
        def hook_fn(x: Any, hook: Any) -> Any:
            if name == parent["hook"]:
                x = x.clone()
                x[rows, at_p, p0:p1] = parent_values
            if name == child["hook"]:
                kept["child"] = x[rows, at_q, c0:c1]
            return x

        return hook_fn

    names = sorted({parent["hook"], child["hook"]})
    run_with_hooks(model, tokens, fwd_hooks=[(h, fn(h)) for h in names], return_type=None)
    return kept["child"]


def edge_loss(
    model: Any,
    high: Any,
    base: np.ndarray,
    source: np.ndarray,
    base_tokens: Any,
    saved: Mapping[str, Any],
    by_name: Mapping[str, Mapping[str, Any]],
    edge: Mapping[str, Any],
    g: np.random.Generator,
    P: int,
    T: int,
    answered: np.ndarray,
) -> Any:
    """IIT on one edge of the algorithm's graph by a path interchange: the parent set from the source run at p in a
    base run, the child's coordinates at q = p + offset taken from that run into a second base run; its outputs
    must follow the parent's counterfactual at the outputs the child at q reaches (and the child's site must be
    computed from the parent: the gradient runs through both runs)."""
    import torch

    parent, child, offset = by_name[edge["parent"]], by_name[edge["child"]], int(edge["offset"])
    n = len(base)
    if offset >= T:
        return torch.zeros((), device=saved[parent["hook"]].device)
    positions = _edge_rows(T, offset, n, g)
    labels, scored = counterfactual_labels(
        high, base, source, positions, parent["variable"], answered, reach=(child["variable"], offset)
    )
    device = saved[parent["hook"]].device
    rows_t = torch.arange(n, device=device)
    at_p = torch.from_numpy(P + positions).to(device)
    at_q = at_p + offset
    d0, d1 = parent["dims"]
    value = path_run(model, base_tokens, parent, child, saved[parent["hook"]][rows_t, at_p, d0:d1], at_p, at_q)
    c0, c1 = child["dims"]

    def set_child(x, hook):
        x = x.clone()
        x[rows_t, at_q, c0:c1] = value
        return x

    logits = run_with_hooks(model, base_tokens, fwd_hooks=[(child["hook"], set_child)], return_type="logits")
    return readout_loss(logits[:, P : P + T], labels, scored, high)


def parent_hooks(
    by_name: Mapping[str, Mapping[str, Any]], parents: Any, values: Mapping[str, Any], q: Any, P: int
) -> list[tuple[str, Any]]:
    """Forward hooks that set every parent (name, offset) at word position q − offset (``q`` per row) to its value in
    ``values`` (another run's activations by hook); a row whose q − offset falls before the word is left alone (a
    parent there is a constant of the proof, the same in every word)."""
    import torch

    by_hook: dict[str, list[tuple[int, int, int]]] = {}
    for parent, offset in parents:
        v = by_name[parent]
        by_hook.setdefault(v["hook"], []).append((int(offset), *v["dims"]))

    def fn(name: str, entries: list[tuple[int, int, int]]) -> Any:
        def hook_fn(x: Any, hook: Any) -> Any:
            x = x.clone()
            for offset, d0, d1 in entries:
                p = q - offset
                rows = torch.nonzero(p >= 0).flatten()
                at = P + p[rows]
                x[rows, at, d0:d1] = values[name][rows, at, d0:d1]
            return x

        return hook_fn

    return [(name, fn(name, entries)) for name, entries in by_hook.items()]


def joint_loss(
    model: Any,
    high: Any,
    base: np.ndarray,
    source: np.ndarray,
    base_tokens: Any,
    saved: Mapping[str, Any],
    by_name: Mapping[str, Mapping[str, Any]],
    joint: Mapping[str, Any],
    g: np.random.Generator,
    P: int,
    T: int,
    answered: np.ndarray,
) -> Any:
    """IIT on a variable's mechanism by a joint interchange: every parent set at once from the source run (at q −
    its offset); the child is then the source's child at q, so the outputs must follow the child's counterfactual
    from the source at q."""
    import torch

    child = joint["child"]
    n = len(base)
    positions = g.integers(T, size=n)
    labels, scored = counterfactual_labels(high, base, source, positions, child, answered)
    device = next(iter(saved.values())).device
    q_t = torch.from_numpy(positions).to(device)
    fwd = parent_hooks(by_name, joint["parents"], saved, q_t, P)
    logits = run_with_hooks(model, base_tokens, fwd_hooks=fwd, return_type="logits")
    return readout_loss(logits[:, P : P + T], labels, scored, high)


def joint_name(joint: Mapping[str, Any]) -> str:
    """How an imposed joint interchange is named in logs and metrics: ``window2 ← all its parents``."""
    return f"{joint['child']} ← all its parents"


def edge_name(edge: Mapping[str, Any]) -> str:
    """How an imposed edge is named in logs and metrics: ``window1 → window2 +2``."""
    return f"{edge['parent']} → {edge['child']} +{edge['offset']}"


def held_out_edge(
    model: Any,
    high: Any,
    base: np.ndarray,
    source: np.ndarray,
    tb: Any,
    acts: Mapping[str, Any],
    by_name: Mapping[str, Mapping[str, Any]],
    edge: Mapping[str, Any],
    P: int,
    T: int,
    plain: np.ndarray,
    answered: np.ndarray,
) -> dict[str, Any]:
    """An imposed edge's held-out IIA by path interchange at every parent position p with p + offset inside the
    word: the share of changed outputs, among those the child at p + offset reaches, that follow the parent's
    counterfactual. ``acts``: the source words' activations at every imposed hook."""
    import torch

    parent, child, offset = by_name[edge["parent"]], by_name[edge["child"]], int(edge["offset"])
    d0, d1 = parent["dims"]
    c0, c1 = child["dims"]
    n = len(base)
    hits = total = 0
    for p in range(T - offset):
        at_p = torch.full((n,), P + p, dtype=torch.long)
        value = path_run(model, tb, parent, child, acts[parent["hook"]][:, P + p, d0:d1], at_p, at_p + offset)

        def set_child(x, hook, q=P + p + offset, value=value):
            x = x.clone()
            x[:, q, c0:c1] = value
            return x

        logits = run_with_hooks(model, tb, fwd_hooks=[(child["hook"], set_child)], return_type="logits")[:, P : P + T]
        got = readout_answer(logits, high.readout)
        labels, scored = high.counterfactual(base, source, p, parent["variable"])
        _, reach = high.counterfactual(base, base, p + offset, child["variable"])
        changed = scored & reach & answered & (labels != plain)
        hits, total = hits + int((got == labels)[changed].sum()), total + int(changed.sum())
    return {"iia": hits / total if total else None, "outputs": total}


def readout_loss(logits: Any, labels: np.ndarray, scored: np.ndarray, high: Any) -> Any:
    """Cross-entropy of ``logits`` ``[n, T, out]`` against ``labels`` at ``scored``, over ``high``'s readout classes."""
    import torch

    labels = high.readout_labels(labels)
    if high.readout is not None:
        logits = logits[..., list(high.readout)]
    mask = torch.from_numpy(scored).to(logits.device)
    if not bool(mask.any()):
        return logits.sum() * 0.0
    return torch.nn.functional.cross_entropy(logits[mask], torch.from_numpy(labels).to(logits.device)[mask])


def held_out_joint(
    model: Any,
    high: Any,
    base: np.ndarray,
    source: np.ndarray,
    tb: Any,
    acts: Mapping[str, Any],
    by_name: Mapping[str, Mapping[str, Any]],
    joint: Mapping[str, Any],
    P: int,
    T: int,
    plain: np.ndarray,
    answered: np.ndarray,
) -> dict[str, Any]:
    """A joint interchange's held-out IIA at every child position q: all the child's parents set at once from the
    source words (``acts``: their activations at every imposed hook); the share of changed outputs that follow the
    child's counterfactual from the source at q."""
    import torch

    hits = total = 0
    for q in range(T):
        fwd = parent_hooks(by_name, joint["parents"], acts, torch.full((len(base),), q, dtype=torch.long), P)
        logits = run_with_hooks(model, tb, fwd_hooks=fwd, return_type="logits")[:, P : P + T]
        got = readout_answer(logits, high.readout)
        labels, scored = high.counterfactual(base, source, q, joint["child"])
        changed = scored & answered & (labels != plain)
        hits, total = hits + int((got == labels)[changed].sum()), total + int(changed.sum())
    return {"iia": hits / total if total else None, "outputs": total}
