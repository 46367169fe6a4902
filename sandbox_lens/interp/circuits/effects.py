"""What patching measures: each edge alone, each node, the attribution estimates, a circuit's
faithfulness — every one a use of :class:`~sandbox_lens.interp.circuits.patching.Patcher`.

* :func:`path_patching` — each edge alone (Wang et al.'s path patching, sender → receiver through
  the residual stream), batched;
* :func:`node_patching` — each node (optionally at each position), with any ablation;
* :func:`attribution` — gradient × activation difference for every edge and node from one forward
  and one backward pass (attribution patching / EAP), or averaged over m interpolation steps (EAP-IG);
* :func:`faithfulness` — the metric of a circuit: everything outside it patched.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from sandbox_lens.interp.circuits.graph import Edge
from sandbox_lens.interp.circuits.pairs import Pairs
from sandbox_lens.interp.circuits.patching import Patcher, _chunk
from sandbox_lens.interp.model.device import to_numpy
from sandbox_lens.interp.model.run import exact_precision
from sandbox_lens.interp.progress import bar as progress_bar

__all__ = [
    "path_patching",
    "grouped_runs",
    "node_patching",
    "attribution",
    "node_estimates",
    "faithfulness",
    "COPY_BYTES",
    "MAX_COPIES",
]


def path_patching(
    patcher: Patcher,
    pairs: Pairs,
    edges: Sequence[Edge] | None = None,
    source: dict[str, Any] | None = None,
    metric: str = "logit_diff",
    progress: bool = False,
    batched: bool = True,
) -> np.ndarray:
    """The effect of patching each edge alone (default: resampled from the corrupted word), in ``edges`` order.

    Batched (the default), an edge whose receiver cannot read anything its sender writes scores 0 without
    a run (:meth:`Patcher.connected`); the others are grouped by the block their receiver is in, and each
    group runs from that block on, from the clean run's residual, many edges side by side (one copy of
    the batch each, patched through its own delta on the receiver's input). ``batched=False`` runs one
    full forward pass per edge: the reference the batched scores are tested against."""

    edges = list(patcher.graph.edges if edges is None else edges)
    source = patcher.source(pairs, "resample") if source is None else source
    out = np.zeros(len(edges))
    with exact_precision():
        if not batched:
            for j, e in enumerate(
                progress_bar(edges, disable=not progress, desc="path patching", unit="edge", leave=False)
            ):
                out[j] = patcher.effect(pairs, patcher.run(pairs.clean, [e], source)[0], metric)
            return out
        connected = patcher.connected()
        live = [j for j, e in enumerate(edges) if connected[patcher.graph.index[e]]]  # the rest: effect 0
        bar = progress_bar(total=len(edges), disable=not progress, desc="path patching", unit="edge", leave=False)
        bar.update(len(edges) - len(live))
        runs = [([edges[j]], None) for j in live]
        groups = grouped_runs(
            patcher, pairs.clean, runs, source, lambda start, _size: _copies(patcher, pairs.clean, start)
        )
        for part, logits in groups:
            for i, k in enumerate(part):
                out[live[k]] = patcher.effect(pairs, logits[i], metric)
            bar.update(len(part))
        bar.close()
    return out


def grouped_runs(
    patcher: Patcher,
    tokens: np.ndarray,
    runs: Sequence[tuple[list[Edge], Any]],
    source: dict[str, Any],
    copies: Callable[[int, int], int],
) -> Iterator[tuple[list[int], Any]]:
    """Patched runs side by side: grouped by the first block they patch (each group starts there, from the clean
    run's residual), ``copies(start, group size)`` runs per pass; yields (indices into ``runs``, their logits)."""
    state = patcher.clean_state(tokens)
    by_start: dict[int, list[int]] = defaultdict(list)
    for j, (patched, _) in enumerate(runs):
        by_start[patcher.start_layer(patched)].append(j)
    for start, members in sorted(by_start.items()):
        step = copies(start, len(members))
        for first in range(0, len(members), step):
            part = members[first : first + step]
            yield part, patcher.run_many(tokens, [runs[j] for j in part], source, state)


def _copies(patcher: Patcher, tokens: np.ndarray, start: int) -> int:
    """Copies of the batch per pass from block ``start`` on, within :data:`COPY_BYTES` of activations."""
    cfg = patcher.model.cfg
    n, T = tokens.shape
    blocks = max(patcher.L - start, 1)
    per_copy = 4 * n * T * (3 * cfg.n_heads * T + 4 * cfg.d_model + 2 * cfg.d_mlp + cfg.d_vocab_out) * blocks
    return int(max(1, min(MAX_COPIES, COPY_BYTES // max(per_copy, 1))))


#: Activation memory one batched pass may take, and the most copies it runs side by side.
COPY_BYTES = 256 << 20
MAX_COPIES = 256


def node_patching(
    patcher: Patcher,
    pairs: Pairs,
    kind: str = "resample",
    per_position: bool = False,
    metric: str = "logit_diff",
    progress: bool = False,
    source: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The effect of patching each node's output (all its outgoing edges) with ``kind`` (or with the values
    in ``source``, when given); with ``per_position``, also at each token position alone (``[node, position]``)."""

    g = patcher.graph
    source = patcher.source(pairs, kind) if source is None else source
    senders = g.senders
    outgoing = {n.name: [e for e in g.edges if e.sender == n.name] for n in senders}
    settings = [(outgoing[n.name], None) for n in senders]
    T = pairs.clean.shape[1]
    if per_position:
        for n in senders:
            for p in range(T):
                mask = np.zeros(T, dtype=bool)
                mask[p] = True
                settings.append((outgoing[n.name], mask))
    effects = np.zeros(len(settings))
    step = _chunk(len(settings), patcher.model, pairs.clean)
    with exact_precision():
        for start in progress_bar(
            range(0, len(settings), step), disable=not progress, desc="node patching", unit="batch", leave=False
        ):
            logits = patcher.run_many(pairs.clean, settings[start : start + step], source)
            for j in range(len(logits)):
                effects[start + j] = patcher.effect(pairs, logits[j], metric)
    out: dict[str, Any] = {"nodes": {n.name: float(effects[i]) for i, n in enumerate(senders)}}
    if per_position:
        out["per_position"] = {
            n.name: [float(x) for x in effects[len(senders) + i * T : len(senders) + (i + 1) * T]]
            for i, n in enumerate(senders)
        }
    return out


def attribution(
    patcher: Patcher,
    pairs: Pairs,
    source: dict[str, Any] | None = None,
    steps: int = 1,
    per_position: bool = False,
    clean_gradients: tuple[dict[str, Any], dict[str, Any], dict[tuple[str, str], Any]] | None = None,
) -> tuple[np.ndarray, dict[str, float]]:
    """Attribution patching (EAP): effect(s → r) ≈ −Σ (s_source − s_clean)·∂m/∂(r's input), normalised like
    the other effects; the same for nodes with ∂m/∂(s's output). ``source`` is what an ablated sender
    delivers (default: the corrupted run). Returns (edge effects in graph order, node effects).

    With ``steps`` = m > 1 this is **EAP-IG** over the inputs (Hanna, Pezzelle, Belinkov 2024): the
    gradients are averaged over m runs whose token and position embeddings lie at α = k/m, k = 1..m, of
    the way from the ablated embeddings (``source``'s ``embed`` and ``pos``) to the clean ones — α = 1 is
    the clean run, so m = 1 is attribution patching exactly.

    With ``per_position`` the edge effects are ``[edges, positions]``: the same terms before the sum over positions
    (an edge at position p: its sender's output at p entering its receiver's channel at p). ``clean_gradients``:
    ``patcher.gradients(pairs.clean, pairs.logit_diff)`` already computed (m = 1 only; PEAP shares them)."""
    if steps < 1:
        raise ValueError(f"EAP-IG needs at least one step, got {steps}")
    g = patcher.graph
    corrupt = patcher.outputs(pairs.corrupt) if source is None else source
    sender_grad: dict[str, Any] = {}
    receiver_grad: dict[tuple[str, str], Any] = {}
    outputs: dict[str, Any] = {}
    if clean_gradients is not None and steps != 1:
        raise ValueError("clean gradients stand for one step (attribution patching), not EAP-IG's")
    for k in range(1, steps + 1):
        outputs, gs, gr = clean_gradients or patcher.gradients(pairs.clean, pairs.logit_diff, corrupt, k / steps)
        for name, grad in gs.items():
            if grad is not None:
                sender_grad[name] = sender_grad.get(name, 0) + grad / steps
        for key, grad in gr.items():
            if grad is not None:
                receiver_grad[key] = receiver_grad.get(key, 0) + grad / steps
    span = pairs.clean_metric - pairs.corrupt_metric or 1.0
    diff = {n.name: corrupt[n.name] - outputs[n.name] for n in g.senders}
    node_fx = node_estimates(g, diff, sender_grad, span)
    by_position = np.zeros((len(g.edges), pairs.clean.shape[1]))
    for i, e in enumerate(g.edges):
        grad = receiver_grad.get((e.receiver, e.channel))
        if grad is not None:
            by_position[i] = to_numpy(-(diff[e.sender] * grad).double().sum(dim=(0, 2)) / span)
    if per_position:
        return by_position, node_fx
    return by_position.sum(1), node_fx


def node_estimates(g: Any, diff: dict[str, Any], sender_grad: dict[str, Any], span: float) -> dict[str, float]:
    """Attribution's node estimates: −Σ (s_ablated − s_clean)·∂m/∂(s's output) / ``span`` per sender (0 where no
    gradient reaches it)."""
    return {
        n.name: 0.0 if sender_grad.get(n.name) is None else float(-(diff[n.name] * sender_grad[n.name]).sum() / span)
        for n in g.senders
    }


def faithfulness(
    patcher: Patcher, pairs: Pairs, circuit: Iterable[Edge], source: dict[str, Any] | None = None
) -> dict[str, float]:
    """The circuit's metric with every edge outside it patched from the corrupted word: its accuracy on
    the affected outputs (the full model's is 1 by definition: labels are its own answers) and its
    normalised logit difference (the full model's is 1, the corrupted word's 0)."""
    keep = set(circuit)
    outside = [e for e in patcher.graph.edges if e not in keep]
    source = patcher.source(pairs, "resample") if source is None else source
    with exact_precision():
        logits = patcher.run(pairs.clean, outside, source)[0]
        return {
            "accuracy": pairs.accuracy(logits),
            "logit_diff": 1.0 - Patcher.effect(pairs, logits, "logit_diff"),
            "kl": 1.0 - Patcher.effect(pairs, logits, "kl"),
            "edges": len(keep),
            "patched": len(outside),
        }
