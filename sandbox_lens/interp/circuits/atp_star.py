"""AtP* (Kramár, Lieberum, Shah & Nanda 2024, arXiv 2403.00745) on edges: attribution patching with its two fixes.

Attribution patching estimates an edge's effect as (sender's ablated − clean output) · ∂m/∂(receiver's input) at
the clean run (:func:`~sandbox_lens.interp.circuits.effects.attribution`). AtP* mends the two ways it misses:

* **QK fix** (attention saturation): for an edge into a head's query or key, the first-order step through the
  softmax is replaced by the head's exact output with that input patched (the softmax recomputed over every key:
  :meth:`~sandbox_lens.interp.circuits.bare.BarePatcher.head_outputs`), times ∂m/∂(the head's output). A pinned
  softmax, whose gradient vanishes, no longer hides the edge.
* **GradDrop** (cancellation of direct and indirect effects): the estimate is repeated L times, the l-th with no
  gradient back through block l's writes (:meth:`~sandbox_lens.interp.circuits.bare.BarePatcher.gradients`'s
  ``drop``); the score is (1/(L − 1)) Σ_l |I_l| — a path that cancels another shows once the other is cut. (An
  edge into block l gets I_l = 0, hence L − 1.) Two cases the paper's node formula leaves open, on edges: an edge
  into the logits, which no drop cuts, is averaged over all L passes; in a one-block model, where no other block
  can be dropped, an edge into the block keeps the plain per-pair |I|.

Each |·| is taken per pair (the paper's E_x |I(n; x)|) and the sum normalised by the metric's clean-minus-ablated
span, like every effect here. The signed estimate (QK-fixed, no block dropped) is what ``--agreement`` compares with
real patching; the ranking and the circuit use the GradDrop score. The paper scores nodes; here every edge is
scored (an edge's sender delta through its receiver's input), and nodes get plain attribution. It runs on the bare
engine only (its QK fix recomputes heads from the weights).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from sandbox_lens.interp.circuits.effects import node_estimates
from sandbox_lens.interp.circuits.pairs import Pairs

__all__ = ["atp_star"]

#: The receiver channels whose edges get the QK fix.
QK = ("q", "k")


def atp_star(patcher: Any, pairs: Pairs, source: dict[str, Any], graddrop: bool = True) -> dict[str, Any]:
    """AtP* on every edge of ``patcher``'s graph (a :class:`~sandbox_lens.interp.circuits.bare.BarePatcher`), the
    ablated senders delivering ``source``'s outputs: ``{"score": GradDrop scores (or, without ``graddrop``, the
    per-pair |estimate| summed), "estimate": signed QK-fixed estimates, "nodes": plain node attributions}``, edges
    in graph order, every number normalised by the metric's span."""

    g = patcher.graph
    state = patcher.clean_state(pairs.clean)
    diff = {s: source[s] - state.outputs[s] for s in state.outputs}
    change = _qk_changes(patcher, state, diff)
    span = (pairs.clean_metric - pairs.corrupt_metric) or 1.0
    drops: list[int | None] = [None, *(range(patcher.L) if graddrop else ())]
    per_pair = []  # one [edges, pairs] array per pass
    nodes: dict[str, float] = {}
    for drop in drops:
        _, sender_grad, receiver_grad = patcher.gradients(pairs.clean, pairs.logit_diff, drop=drop)
        per_pair.append(_contributions(g, diff, change, sender_grad, receiver_grad, len(pairs.clean)) / span)
        if drop is None:
            nodes = node_estimates(g, diff, sender_grad, span)
    plain = np.abs(per_pair[0]).sum(1)
    if not graddrop:
        return {"score": plain, "estimate": per_pair[0].sum(1), "nodes": nodes}
    block = np.array([g.by_name[e.receiver].layer for e in g.edges])
    others = patcher.L - (block < patcher.L)  # the drops that leave the receiver's own block in place
    dropped = sum(np.abs(c) for c in per_pair[1:]).sum(1)
    score = np.where(others > 0, dropped / np.maximum(others, 1), plain)
    return {"score": score, "estimate": per_pair[0].sum(1), "nodes": nodes}


def _qk_changes(patcher: Any, state: Any, diff: dict[str, Any]) -> dict[int, Any]:
    """For every edge into a head's query or key (graph index → ``[B, T, d]``): the head's exact output change
    when that edge alone delivers its ablated sender (one batched recomputation per head and channel)."""
    g = patcher.graph
    incoming: dict[tuple[str, str], list[int]] = defaultdict(list)
    for i, e in enumerate(g.edges):
        if e.channel in QK:
            incoming[(e.receiver, e.channel)].append(i)
    out: dict[int, Any] = {}
    torch = patcher.torch
    for (receiver, channel), members in incoming.items():
        node = g.by_name[receiver]
        resid = state.resid[node.layer]
        deltas = torch.stack([diff[g.edges[i].sender] for i in members] + [torch.zeros_like(resid)])
        heads = patcher.head_outputs(resid, node, channel, deltas)
        for j, i in enumerate(members):
            out[i] = heads[j] - heads[-1]  # against the same arithmetic's clean output
    return out


def _contributions(
    g: Any,
    diff: dict[str, Any],
    change: dict[int, Any],
    sender_grad: dict[str, Any],
    receiver_grad: dict[tuple[str, str], Any],
    n: int,
) -> np.ndarray:
    """Each edge's first-order change of the metric, per pair (``[edges, pairs]``): the QK-fixed head-output change
    times the head's output gradient for query and key edges, the sender's change times the receiver input's
    gradient for the rest; 0 where no gradient reaches."""
    out = np.zeros((len(g.edges), n))
    for i, e in enumerate(g.edges):
        if i in change:
            delta, grad = change[i], sender_grad.get(e.receiver)
        else:
            delta, grad = diff[e.sender], receiver_grad.get((e.receiver, e.channel))
        if grad is not None:
            out[i] = (-(delta * grad).sum((1, 2))).double().cpu().numpy()
    return out
