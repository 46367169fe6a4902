"""Where a gradient method's answer is decided by rounding: ReLU units whose clean pre-activation sits at the kink.

Attribution patching and its variants (and the learned masks) differentiate the model at the clean run. A ReLU unit
whose pre-activation is 0 there has no derivative: torch takes the left one (0), and a rounding error of either sign
in the layers before it decides whether the unit passes gradient. Hand-built constructions put many units there
(on 16 pairs of the balanced Dyck stack, 158 pre-activations of read units of its second MLP), and on them the
hook and bare engines, which round differently, gave one edge an attribution of 4.5e-6 and 41 where patching it
moves the whole metric. :func:`kinked_units` counts such units so that a result can say so; units whose output no
weight reads pass no gradient and are not counted.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from sandbox_lens.interp.model.arithmetic import dense_stack
from sandbox_lens.interp.model.bare import bare_forward
from sandbox_lens.interp.model.device import on
from sandbox_lens.interp.model.hooked import tl_state_dict
from sandbox_lens.interp.model.run import exact_precision

__all__ = ["kinked_units", "KINK_TOLERANCE"]

#: A pre-activation within this share of its block's largest |pre-activation| counts as at the kink: float32 rounding
#: through a few blocks moves a residual by ≈ 1e-4 of its size (the engines' streams on the balanced Dyck stack differ
#: by 7e-5 of theirs after two blocks), so a unit closer to 0 than this can land on either side.
KINK_TOLERANCE = 2.0**-12


def kinked_units(model: Any, tokens: np.ndarray) -> dict[str, Any] | None:
    """How many of ``model``'s ReLU pre-activations on ``tokens`` ``[batch, pos]`` (units whose output some weight
    reads, every position) lie within :data:`KINK_TOLERANCE` of their block's largest of 0: ``{"at_kink", "units",
    "by_block": {layer: at_kink}, "tolerance"}``; None where the model has no ReLU MLP or the bare forward does not
    cover it."""
    forward = bare_forward(model, residuals=True)
    if forward is None:  # the bare forward covers ReLU MLP blocks only (attention-only and GELU models are not)
        return None
    sd = {k: v.detach() for k, v in tl_state_dict(model).items()}
    stack = dense_stack(sd.__getitem__, model.cfg)  # the forward's own LayerNorm and MLP input projection
    with exact_precision():
        _, stream = forward(on(model, np.asarray(tokens)))
        by_block: dict[int, int] = {}
        units = 0
        for layer, block in enumerate(stack.blocks):
            x = stream[f"blocks.{layer}.hook_resid_mid"]
            read = block.mlp_out.W.ne(0).any(1)
            pre = block.mlp_in(block.ln2(x.reshape(-1, x.shape[-1])))[:, read]
            scale = float(pre.abs().max()) if pre.numel() else 0.0
            by_block[layer] = int((pre.abs() <= KINK_TOLERANCE * scale).sum()) if scale > 0 else 0
            units += pre.numel()
    return {
        "at_kink": sum(by_block.values()),
        "units": units,
        "by_block": by_block,
        "tolerance": f"|pre-activation| ≤ 2^{math.log2(KINK_TOLERANCE):g} of its block's largest",
    }
