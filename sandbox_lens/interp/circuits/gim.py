"""GIM, gradient interaction modifications (Edin et al. 2025, arXiv 2505.17630): attribution patching whose
backward pass is changed where attention redistributes — the forward pass is the model's own.

Self-repair hides a component from ablation and from gradients alike: with several similar values, a softmax
that loses one score moves its weight to the others and the output barely changes. GIM changes three things in
the backward pass only (:class:`Rules`, its defaults the paper's):

1. the LayerNorms' scale is frozen (√(variance + ε) treated as a constant, as the paper's package does);
2. the softmax's backward uses the Jacobian of softmax(x / T), T = 2: ∂ = s_T ⊙ (g − ⟨g, s_T⟩), with s_T the
   tempered pattern (a flatter one, so the redistribution is seen);
3. the gradients reaching the queries and keys are scaled by 1/4, those reaching the values by 1/2.

(The paper's fourth rule, for gated MLPs, has nothing to act on here.) The edge scores are then attribution
patching's, (sender's ablated − clean output) · ∂m/∂(receiver's input), with the modified gradient. It runs on
the bare engine (:class:`~sandbox_lens.interp.circuits.bare.BarePatcher`), whose forward it changes.
"""

from __future__ import annotations

import functools
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from sandbox_lens.interp.circuits.effects import attribution

__all__ = ["Rules", "GIM", "gim_attribution", "tempered_softmax", "scaled_gradient"]


@dataclass(frozen=True)
class Rules:
    """GIM's backward rules: softmax temperature, the factors on the query/key and value gradients, frozen norm
    scales.
    ``Rules(1.0, 1.0, 1.0, False)`` is the plain gradient."""

    temperature: float = 2.0
    qk: float = 0.25
    v: float = 0.5
    freeze_norm: bool = True


GIM = Rules()


@functools.cache
def _functions() -> tuple[Any, Any]:
    import torch

    class TemperedSoftmax(torch.autograd.Function):
        """softmax(x) forward; backward through softmax(x / T)'s Jacobian (masked entries are −∞ and stay 0)."""

        @staticmethod
        def forward(ctx: Any, x: Any, temperature: float) -> Any:
            ctx.save_for_backward(x)
            ctx.temperature = temperature
            return torch.softmax(x, dim=-1)

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            (x,) = ctx.saved_tensors
            s = torch.softmax(x / ctx.temperature, dim=-1)
            return s * (g - (g * s).sum(-1, keepdim=True)), None

    class ScaledGradient(torch.autograd.Function):
        """The identity forward; the gradient multiplied by a factor."""

        @staticmethod
        def forward(ctx: Any, x: Any, factor: float) -> Any:
            ctx.factor = factor
            return x.view_as(x)

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            return g * ctx.factor, None

    return TemperedSoftmax, ScaledGradient


def tempered_softmax(x: Any, temperature: float) -> Any:
    """softmax over the last dimension whose backward is that of softmax(x / ``temperature``)."""
    return _functions()[0].apply(x, temperature)


def scaled_gradient(x: Any, factor: float) -> Any:
    """``x`` unchanged, its gradient times ``factor``."""
    return _functions()[1].apply(x, factor)


def frozen_layer_norm(x: Any, weight: Any, bias: Any, eps: float) -> Any:
    """TransformerLens's LayerNorm with its scale (√(variance + ε)) held constant in the backward pass."""
    mean = x.mean(-1, keepdim=True)
    scale = ((x - mean).pow(2).mean(-1, keepdim=True) + eps).sqrt().detach()
    return (x - mean) / scale * weight + bias


def rule_attend(q: Any, k: Any, v: Any, scale: float, rules: Rules) -> Any:
    """Causal attention (``[..., heads, positions, d_head]``) with ``rules``' backward: the same ``z`` forward."""
    import torch

    q, k, v = scaled_gradient(q, rules.qk), scaled_gradient(k, rules.qk), scaled_gradient(v, rules.v)
    scores = (q @ k.transpose(-1, -2)) * scale
    T = scores.shape[-1]
    mask = torch.ones(T, T, dtype=torch.bool, device=scores.device).triu(1)
    pattern = tempered_softmax(scores.masked_fill(mask, float("-inf")), rules.temperature)
    return pattern @ v


@contextmanager
def backward_rules(patcher: Any, rules: Rules):
    """``patcher``'s forward under ``rules``' backward for the duration (a bare engine's :meth:`gradients`)."""
    before = patcher.rules
    patcher.rules = rules
    try:
        yield patcher
    finally:
        patcher.rules = before


def gim_attribution(
    patcher: Any, pairs: Any, source: dict[str, Any] | None = None, rules: Rules = GIM
) -> tuple[np.ndarray, dict[str, float]]:
    """Attribution patching's edge and node estimates (:func:`~sandbox_lens.interp.circuits.effects.attribution`)
    with ``rules``' gradient."""
    with backward_rules(patcher, rules):
        return attribution(patcher, pairs, source)
