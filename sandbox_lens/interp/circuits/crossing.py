"""PEAP's crossing edges: attribution patching's term for a key or value edge split by the query that reads it.

A key or value edge s → h.c at key position j feeds every query i ≥ j of head h. Position-aware EAP (Haklay et al.
2025) scores it per (query i, key j); :func:`crossing_terms` gives those terms exactly as first-order pieces of
attribution patching's per-position term (:func:`~sandbox_lens.interp.circuits.effects.attribution` with
``per_position``), so that summed over the queries they are that term. With Δ_j = source[s]_j − s_j the sender's
change at j, J_j the head's LayerNorm's Jacobian at the clean residual x_j (the identity without LayerNorm),
a[b, i, j] the clean pattern, g_i = ∂m/∂z_i (the metric's gradient at the head's mixed value, from its output's
gradient through W_O) and m's span the normaliser:

* value: term(i, j) = −Σ_b a_ij ⟨g_i, (J_j Δ_j) W_V⟩ / span;
* key: term(i, j) = −Σ_b ∂m/∂score_ij · scale · ⟨q_i, (J_j Δ_j) W_K⟩ / span, with
  ∂m/∂score_ij = a_ij (⟨g_i, v_j⟩ − ⟨g_i, z_i⟩) (the softmax's Jacobian).

Every other edge (a query, an MLP, the unembedding) reads the position it is patched at: its term stays there.
The truth per (edge, query, key) is :attr:`~sandbox_lens.interp.circuits.positions.PositionTruth.crossing`.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

from sandbox_lens.interp.circuits.config import MethodError
from sandbox_lens.interp.circuits.pairs import Pairs
from sandbox_lens.interp.circuits.patching import Patcher
from sandbox_lens.interp.circuits.positions import causal_pattern, head_input
from sandbox_lens.interp.model.arithmetic import attention_scale
from sandbox_lens.interp.model.bare import config_unsupported
from sandbox_lens.interp.model.device import to_numpy
from sandbox_lens.interp.model.hooked import tl_state_dict
from sandbox_lens.interp.model.run import exact_precision

__all__ = ["crossing_terms", "crossing_items", "not_split", "CROSSING_MAX_POSITIONS"]

#: Words longer than this are not split by query: the split costs batch × positions² × d_model per key or value edge
#: (measured on the parity scan at 384 positions, 200 such edges, 32 pairs: 18 CPU-s against attribution's 0.8).
CROSSING_MAX_POSITIONS = 64


def not_split(model: Any, positions: int) -> str | None:
    """Why PEAP does not split ``model``'s keys and values by query on words of ``positions`` (None: it does): words
    past :data:`CROSSING_MAX_POSITIONS`, or attention other than a standard causal softmax (the split recomputes it)."""
    if positions > CROSSING_MAX_POSITIONS:
        return f"words of {positions} positions (split up to {CROSSING_MAX_POSITIONS})"
    why = config_unsupported(model.cfg)
    return (
        None if why is None else f"the split recomputes a standard causal softmax attention, not this model's ({why})"
    )


def crossing_terms(
    patcher: Patcher, pairs: Pairs, source: dict[str, Any], clean_gradients: tuple | None = None
) -> dict[int, np.ndarray]:
    """Per key or value edge (its index in graph order), the terms ``[query, key]`` (float64, zero above the
    diagonal) described in the module docstring, for the clean run of ``pairs`` with ``source`` delivered.
    ``clean_gradients``: ``patcher.gradients(pairs.clean, pairs.logit_diff)`` already computed."""
    import torch

    if getattr(patcher, "rules", None) is not None:
        raise MethodError("crossing terms are plain attribution patching's; this patcher runs other backward rules")
    g = patcher.graph
    outputs, sender_grad, _ = clean_gradients or patcher.gradients(pairs.clean, pairs.logit_diff)
    resid = patcher.clean_state(pairs.clean).resid
    span = pairs.clean_metric - pairs.corrupt_metric or 1.0
    sd = {k: v.detach().double() for k, v in tl_state_dict(patcher.model).items()}
    cfg = patcher.model.cfg
    scale = attention_scale(cfg)
    out: dict[int, np.ndarray] = {}
    with exact_precision(grad=True):
        for head in (n for n in g.nodes if n.kind == "head"):
            rows = [(i, e) for i, e in enumerate(g.edges) if e.receiver == head.name and e.channel in "kv"]
            if not rows:
                continue
            p, h = f"blocks.{head.layer}", head.head
            norm = partial(head_input, sd, cfg, head.layer)
            x = resid[head.layer].detach().double()
            xn = norm(x)
            q, k, v = (xn @ sd[f"{p}.attn.W_{c}"][h] + sd[f"{p}.attn.b_{c}"][h] for c in "QKV")
            a = causal_pattern(q, k, scale)
            grad = sender_grad.get(head.name)
            g_z = torch.zeros_like(q) if grad is None else grad.double() @ sd[f"{p}.attn.W_O"][h].T
            d_score = a * (g_z @ v.transpose(-1, -2) - (g_z * (a @ v)).sum(-1, keepdim=True))
            for i, e in rows:
                delta = (source[e.sender] - outputs[e.sender]).detach().double()
                moved = torch.func.jvp(norm, (x,), (delta,))[1]  # J_j Δ_j (Δ_j itself without LayerNorm)
                # [batch, query, key] products summed over the batch (no [batch, query, key, d_head] intermediate)
                if e.channel == "v":
                    term = (a * (g_z @ (moved @ sd[f"{p}.attn.W_V"][h]).transpose(-1, -2))).sum(0)
                else:
                    term = (d_score * (q @ (moved @ sd[f"{p}.attn.W_K"][h]).transpose(-1, -2))).sum(0) * scale
                out[i] = to_numpy(-term / span)
    return out


def crossing_items(
    by_position: np.ndarray, crossing: dict[int, np.ndarray], truth: Any, candidates: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(scores, labels, candidate flags) over the (edge, query, key) items: a key or value edge's items are its
    crossing terms at j ≤ i; every other edge's its per-position terms (query = key). ``truth``: a
    :class:`~sandbox_lens.interp.circuits.positions.PositionTruth`; ``candidates``: one flag per edge."""
    scores, labels, flags = [], [], []
    for i, row in enumerate(by_position):
        if i in crossing:
            below = np.tri(len(row), dtype=bool)
            scores.append(np.abs(crossing[i][below]))
            labels.append(truth.crossing[i][below])
        else:
            scores.append(np.abs(row))
            labels.append(truth.edges[i])
        flags.append(np.full(len(scores[-1]), bool(candidates[i])))
    return np.concatenate(scores), np.concatenate(labels), np.concatenate(flags)
