"""The transformer's arithmetic, once: TransformerLens's standard forward as plain PyTorch, for every engine that
runs without hook points.

TransformerLens computes a pre-LayerNorm decoder — token plus position embedding; per block causal multi-head
attention and a ReLU MLP, each added to the residual stream, each with LayerNorm before it when the model has one;
a final LayerNorm and the unembedding — head by head, with a hook point on every activation. This module is that
function with fused kernels and nothing else: one matmul for the queries, keys and values of every head, torch's
``scaled_dot_product_attention`` with its causal mask, torch's ``layer_norm``, fused bias-matmuls. The engines
differ only in where their weights come from and how a projection is carried out, so a :class:`Stack` holds the
projections and norms as small objects and :func:`run` is the forward that all of them share:

- the verifier's bare forward (:mod:`sandbox_lens.interp.model.bare`): detached weights read once, each projection
  restricted to the residual coordinates it reads and writes, wide MLPs in cache-sized row chunks;
- the training forward (:mod:`sandbox_lens.interp.model.fast`): the live parameters, dense projections,
  differentiable;
- an ensemble of same-shape twins at once (:class:`Stacked`, ``benchmarks/populations.py``): a leading member
  dimension and batched matmuls.

The batched circuit engine (:mod:`sandbox_lens.interp.circuits.bare`) must give every head's query, key and value
channel its own input, so it keeps its per-head projections and MLP but takes the LayerNorm, the attention and the
attention scale from here. The agreement of all of them with TransformerLens is tested once, in
``tests/model/test_arithmetic.py``.

Rows: every activation is ``[*members, rows, width]`` with ``rows = batch × positions`` (``members`` empty but for an
ensemble); attention alone sees the positions.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Dense",
    "Edit",
    "LayerNorm",
    "Stacked",
    "StackedLayerNorm",
    "Block",
    "Stack",
    "attend",
    "attention_scale",
    "dense_stack",
    "layer_norm",
    "mlp",
    "residual_start",
    "run",
]


def attention_scale(cfg: Any) -> float:
    """The factor on query-key scores: 1/``attn_scale``, which is √d_head unless the configuration sets another
    (TransformerLens 4's bridge holds −1 for "√d_head"), or 1 when the model does not scale them
    (``use_attn_scale = False``, an option of the constructions)."""
    if not getattr(cfg, "use_attn_scale", True):
        return 1.0
    scale = getattr(cfg, "attn_scale", -1.0)
    return 1.0 / (scale if scale > 0 else math.sqrt(cfg.d_head))


def layer_norm(x: Any, weight: Any, bias: Any, eps: float) -> Any:
    """TransformerLens's LayerNorm, ``(x − mean) / sqrt(biased variance + ε) · weight + bias`` over the last
    dimension, in torch's fused kernel."""
    import torch.nn.functional as F

    return F.layer_norm(x, (x.shape[-1],), weight, bias, eps)


def attend(q: Any, k: Any, v: Any, scale: float) -> Any:
    """Causal softmax attention of queries ``q`` on keys ``k`` and values ``v`` (each ``[..., heads, positions,
    d_head]``): the mixed values ``z``, same shape."""
    import torch.nn.functional as F

    return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale)


@dataclass
class Dense:
    """``x @ W + b`` for ``x`` of shape ``[rows, d_in]`` (one model)."""

    W: Any
    b: Any

    def __call__(self, x: Any) -> Any:
        import torch

        return torch.addmm(self.b, x, self.W)

    def add_into(self, resid: Any, x: Any) -> Any:
        """``resid + (x @ W + b)``."""
        return resid + self(x)


@dataclass
class Stacked(Dense):
    """``x @ W + b`` member by member for ``x`` of shape ``[members, rows, d_in]`` (``W``: ``[members, d_in, d_out]``,
    ``b``: ``[members, d_out]``): an ensemble of same-shape models in one batched matmul."""

    def __call__(self, x: Any) -> Any:
        import torch

        return torch.baddbmm(self.b[:, None], x, self.W)


@dataclass
class LayerNorm:
    """:func:`layer_norm` with a model's weight, bias and ε (or the identity, for a model without LayerNorm, when
    ``weight`` is None)."""

    weight: Any = None
    bias: Any = None
    eps: float = 1e-5

    def __call__(self, x: Any) -> Any:
        return x if self.weight is None else layer_norm(x, self.weight, self.bias, self.eps)


@dataclass
class StackedLayerNorm(LayerNorm):
    """:class:`LayerNorm` member by member (``weight``, ``bias``: ``[members, d_model]``)."""

    def __call__(self, x: Any) -> Any:
        if self.weight is None:
            return x
        return layer_norm(x, None, None, self.eps) * self.weight[:, None] + self.bias[:, None]


Projection = Any  # an object with __call__(x) and add_into(resid, x), as Dense


@dataclass
class Block:
    """One transformer block: LayerNorm, the fused query-key-value projection ``[d_model → 3·heads·d_head]`` (queries,
    then keys, then values, each head by head), the output projection ``[heads·d_head → d_model]``, LayerNorm, the
    MLP's two projections; ``rows``: run the MLP in chunks of this many rows (None: all at once)."""

    ln1: Callable[[Any], Any]
    qkv: Projection
    out: Projection
    ln2: Callable[[Any], Any]
    mlp_in: Projection
    mlp_out: Projection
    rows: int | None = None


@dataclass
class Stack:
    """A whole model for :func:`run`: its blocks, the final LayerNorm, the unembedding, and the attention's shape."""

    blocks: Sequence[Block]
    ln_final: Callable[[Any], Any]
    unembed: Projection
    n_heads: int
    d_head: int
    scale: float


def mlp(block: Block, x: Any) -> Any:
    """The residual stream after ``block``'s MLP: ``x + W_out · ReLU(W_in · LN(x) + b_in) + b_out``."""
    import torch

    h = block.ln2(x)
    rows = block.rows
    if rows is None or h.shape[-2] <= rows:
        return block.mlp_out.add_into(x, block.mlp_in(h).relu_())
    # wide MLPs (a counter's staircase) in row chunks whose hidden units stay in cache
    return torch.cat(
        [block.mlp_out.add_into(xc, block.mlp_in(hc).relu_()) for xc, hc in zip(x.split(rows, -2), h.split(rows, -2))],
        -2,
    )


#: an edit of one activation, in TransformerLens's shape (``[batch, pos, d_model]``; ``attn.hook_z``: ``[batch, pos,
#: heads, d_head]``), returning the activation the forward goes on with
Edit = Callable[[Any], Any]


def run(
    stack: Stack,
    x: Any,
    positions: int,
    stream: dict[str, Any] | None = None,
    start: str | None = None,
    edits: Mapping[str, Edit] | None = None,
) -> Any:
    """The logits ``[*members, rows, d_vocab_out]`` of the embedded input ``x`` ``[*members, rows, d_model]`` whose
    rows are ``rows / positions`` sequences of ``positions`` tokens each. ``stream`` (when given) receives the
    residual stream under TransformerLens's names (``blocks.{l}.hook_resid_pre``, ``…_mid``, ``…_post``).
    ``start``: ``x`` is the residual stream at that hook (one of those names), and the forward runs from there.
    ``edits`` (one model, no members): hook name → :data:`Edit`, applied where TransformerLens's hook point of that
    name sits — the residual stream's, ``hook_attn_out``, ``attn.hook_z`` and ``hook_mlp_out`` — at or after
    ``start``: an interchange intervention without hook points (an edit that returns its input changes nothing)."""
    H, dh = stack.n_heads, stack.d_head
    first, skip_attention = residual_start(start, len(stack.blocks))
    edits = edits or {}

    def at(name: str, a: Any, shape: tuple[int, ...]) -> Any:
        edit = edits.get(name)
        return a if edit is None else edit(a.view(*shape)).reshape(a.shape)

    for l, block in enumerate(stack.blocks):
        if l < first:
            continue
        attention = not (l == first and skip_attention)  # a start at resid_mid has block l's attention in x
        *members, rows, d = x.shape
        wide = (rows // positions, positions, d)
        name = f"blocks.{l}."
        if attention:
            x = at(name + "hook_resid_pre", x, wide)
            if stream is not None:
                stream[name + "hook_resid_pre"] = x
            qkv = block.qkv(block.ln1(x)).view(*members, rows // positions, positions, 3, H, dh)
            q, k, v = qkv.movedim(-3, 0).transpose(-3, -2)  # each [*members, batch, heads, positions, d_head]
            z = attend(q, k, v, stack.scale).transpose(-3, -2)  # [*members, batch, positions, heads, d_head]
            z = at(name + "attn.hook_z", z, z.shape).reshape(*members, rows, H * dh)
            if name + "hook_attn_out" in edits:  # the layer's output alone (zeros elsewhere), then added
                x = x + at(name + "hook_attn_out", block.out.add_into(x.new_zeros(x.shape), z), wide)
            else:
                x = block.out.add_into(x, z)
        x = at(name + "hook_resid_mid", x, wide)
        if stream is not None:
            stream[name + "hook_resid_mid"] = x
        if name + "hook_mlp_out" in edits:
            out = block.mlp_out.add_into(x.new_zeros(x.shape), block.mlp_in(block.ln2(x)).relu_())
            x = x + at(name + "hook_mlp_out", out, wide)
        else:
            x = mlp(block, x)
        x = at(name + "hook_resid_post", x, wide)
        if stream is not None:
            stream[name + "hook_resid_post"] = x
    return stack.unembed(stack.ln_final(x))


def residual_start(hook: str | None, n_layers: int) -> tuple[int, bool]:
    """Where :func:`run` starts for the residual hook ``hook`` (None: the embedding): (the first block it runs,
    whether that block's attention is already in ``x``, i.e. ``hook`` is its ``resid_mid``)."""
    if hook is None:
        return 0, False
    parts = hook.split(".")
    kinds = {"hook_resid_pre": (0, False), "hook_resid_mid": (0, True), "hook_resid_post": (1, False)}
    if len(parts) != 3 or parts[0] != "blocks" or not parts[1].isdigit() or parts[2] not in kinds:
        raise ValueError(f"not a residual hook: {hook!r}")
    layer = int(parts[1])
    if layer >= n_layers:
        raise ValueError(f"{hook!r}: the model has {n_layers} blocks")
    step, mid = kinds[parts[2]]
    return layer + step, mid


def fused_qkv(W_Q: Any, W_K: Any, W_V: Any, b_Q: Any, b_K: Any, b_V: Any) -> tuple[Any, Any]:
    """TransformerLens's per-head ``W_Q, W_K, W_V`` ``[(members,) heads, d_model, d_head]`` and biases ``[(members,)
    heads, d_head]`` as one matrix ``[(members,) d_model, 3·heads·d_head]`` and one bias."""
    import torch

    W = torch.cat([w.transpose(-3, -2).flatten(-2) for w in (W_Q, W_K, W_V)], -1)
    b = torch.cat([x.flatten(-2) for x in (b_Q, b_K, b_V)], -1)
    return W, b


def dense_stack(weights: Callable[[str], Any], cfg: Any, members: bool = False) -> Stack:
    """A :class:`Stack` of dense projections on the weights ``weights(name)`` returns under TransformerLens's
    state-dict names (live parameters for training, detached tensors, or with ``members`` a leading ensemble
    dimension); a model without LayerNorm (``cfg.normalization_type`` not ``"LN"``) gets identities."""
    linear, norm = (Stacked, StackedLayerNorm) if members else (Dense, LayerNorm)
    ln = getattr(cfg, "normalization_type", None) == "LN"
    eps = getattr(cfg, "eps", 1e-5)

    def layer_norm_of(name: str) -> LayerNorm:
        return norm(weights(f"{name}.w"), weights(f"{name}.b"), eps) if ln else norm()

    blocks = []
    for l in range(cfg.n_layers):
        a, m = f"blocks.{l}.attn", f"blocks.{l}.mlp"
        W, b = fused_qkv(*(weights(f"{a}.{x}_{c}") for x in "Wb" for c in "QKV"))
        blocks.append(
            Block(
                ln1=layer_norm_of(f"blocks.{l}.ln1"),
                qkv=linear(W, b),
                out=linear(weights(f"{a}.W_O").flatten(-3, -2), weights(f"{a}.b_O")),
                ln2=layer_norm_of(f"blocks.{l}.ln2"),
                mlp_in=linear(weights(f"{m}.W_in"), weights(f"{m}.b_in")),
                mlp_out=linear(weights(f"{m}.W_out"), weights(f"{m}.b_out")),
            )
        )
    return Stack(
        blocks,
        layer_norm_of("ln_final"),
        linear(weights("unembed.W_U"), weights("unembed.b_U")),
        cfg.n_heads,
        cfg.d_head,
        attention_scale(cfg),
    )
