"""The differentiable forward for training: TransformerLens's arithmetic with fused kernels.

TransformerLens's ``HookedTransformer`` computes attention head by head through einsums, a score tensor, an
explicit mask and a softmax, and passes every activation through a hook point. While training nothing reads
those hook points, so :func:`fast_forward` runs the same function, :func:`sandbox_lens.interp.model.arithmetic.run` (as the bare
forward of the verifier does), but on the model's live parameters, with gradients: one matmul for Q, K and V of every
head, torch's fused causal ``scaled_dot_product_attention``, torch's fused ``layer_norm``, fused bias-matmuls.
Its logits equal TransformerLens's up to float rounding (1.5·10⁻⁶ on the default twins); training steps are
1.10–1.17× faster on the default twins (``benchmarks/populations.py``, "hand-written, one at a time").

:func:`training_forward` swaps it in for a block of code: the model's ``forward`` runs it whenever no hook is
attached (regularisers and aligned training attach hooks through ``run_with_hooks``, and then TransformerLens's own
forward runs, hooks and all). It covers what :func:`sandbox_lens.interp.model.bare.bare_unsupported` covers, on TransformerLens
3.9's ``HookedTransformer``; anything else is left as it is.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

from sandbox_lens.interp.model.arithmetic import dense_stack, run
from sandbox_lens.interp.model.bare import bare_unsupported

__all__ = ["covers", "fast_forward", "stacked_forward", "training_forward"]


def covers(model: Any) -> bool:
    """Whether :func:`fast_forward` runs ``model``: TransformerLens 3.9's ``HookedTransformer`` in a configuration
    the bare forward covers (standard positions, ReLU MLPs, LayerNorm or none, causal attention)."""
    try:
        from transformer_lens import HookedTransformer
    except ImportError:  # pragma: no cover - TransformerLens 4.x without the 3.9 class
        return False
    return isinstance(model, HookedTransformer) and bare_unsupported(model) is None


def fast_forward(model: Any, tokens: Any) -> Any:
    """``model``'s logits ``[batch, pos, d_vocab_out]`` on ``tokens`` ``[batch, pos]``, from its parameters as
    they are now, differentiable (see the module docstring; check :func:`covers` first)."""
    stack = dense_stack(model.get_parameter, model.cfg)
    B, T = tokens.shape
    x = (model.embed.W_E[tokens] + model.pos_embed.W_pos[:T]).reshape(B * T, -1)
    return run(stack, x, T).view(B, T, -1)


def stacked_forward(params: Mapping[str, Any], tokens: Any, cfg: Any) -> Any:
    """The logits ``[E, batch, pos, d_vocab_out]`` of ``E`` same-shape twins at once: ``params`` holds their
    parameters under TransformerLens's names with a leading member dimension, ``tokens`` is ``[E, batch, pos]``
    (each member its own words). The same arithmetic as :func:`fast_forward`, on batched matmuls (``baddbmm``
    over the members; LayerNorm's affine part applied member by member), differentiable."""
    import torch

    E, B, T = tokens.shape
    x = params["embed.W_E"][torch.arange(E, device=tokens.device)[:, None, None], tokens]
    x = x + params["pos_embed.W_pos"][:, None, :T]
    return run(dense_stack(params.__getitem__, cfg, members=True), x.reshape(E, B * T, -1), T).view(E, B, T, -1)


def _hooked(model: Any) -> bool:
    """Whether any hook point of ``model`` has a hook attached (``run_with_hooks`` attaches them for its run)."""
    return any(hp._forward_hooks or hp._backward_hooks for hp in model.hook_dict.values())


@contextlib.contextmanager
def training_forward(model: Any) -> Iterator[Any]:
    """Within the block, ``model(tokens)`` and ``model(tokens, return_type="logits")`` run :func:`fast_forward`
    whenever no hook is attached; everything else (hooks, other arguments, a model it does not cover) runs
    TransformerLens's own forward. Restored afterwards."""
    if getattr(model, "hook_free", False) or not covers(model):  # a hook-free twin runs fast_forward already
        yield model
        return
    original = type(model).forward

    # a function of the module it is bound to: a copy made inside the block (the moving average's) runs on its
    # own parameters
    def forward(self: Any, tokens: Any, *args: Any, return_type: str | None = "logits", **kwargs: Any) -> Any:
        if (
            args
            or kwargs
            or return_type != "logits"
            or not hasattr(tokens, "dim")
            or tokens.dim() != 2
            or _hooked(self)
        ):
            return original(self, tokens, *args, return_type=return_type, **kwargs)
        return fast_forward(self, tokens.to(self.embed.W_E.device))

    model.forward = forward.__get__(model)
    try:
        yield model
    finally:
        del model.forward
