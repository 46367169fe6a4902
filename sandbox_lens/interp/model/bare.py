"""A bare PyTorch forward on a model's TransformerLens weights: the verifier's fast path.

The same arithmetic as TransformerLens's standard forward — token and position embeddings, then per
block causal attention and a ReLU MLP added to the residual stream (with LayerNorm before each when
the model has it), then the unembedding — without hook points, per-head einsums or the mask tensor:
one matmul for Q, K and V of every head, torch's ``scaled_dot_product_attention`` and fused
bias-matmuls. It reads the weights once (:func:`sandbox_lens.interp.model.hooked.tl_state_dict`, so a
``HookedTransformer`` and a 4.x ``TransformerBridge`` give the same one).

Constructions read and write few residual coordinates (a counter's MLP reads one count and writes a
few state coordinates, whatever its width), so every projection keeps only the rows its input
actually reads and the columns it writes (:class:`_Projection`): the dropped terms are exact zeros,
so this changes rounding only, and on the constructions whose MLP grows with T it is most of the
work saved. Those wide MLPs also run in chunks of rows whose hidden units fit a CPU cache
(:data:`HIDDEN_CHUNK`; 2.0–2.6× on the counter and Krohn–Rhodes at T = 1024, measured alternating).

Summation order differs from TransformerLens's, so logits agree to rounding, not bit for bit: the
verifier runs both on a sample of every check and runs the model itself if a prediction differs, and
the probes do the same with the residual stream: one policy, :class:`sandbox_lens.interp.model.checked.CheckedForward`. :func:`bare_forward` returns None for
configurations it does not cover; callers then use the model itself.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

__all__ = ["bare_forward", "bare_unsupported"]

#: hidden activations per MLP row chunk (floats): wide MLPs run in chunks of rows that fit a CPU cache
HIDDEN_CHUNK = 1 << 18


class _Projection:
    """``x @ W + b`` restricted to the rows of ``W`` that are not all zero (the coordinates read) and,
    with ``restrict_out``, to the output columns that are not all zero in ``W`` and ``b``
    (added into those columns of the residual stream by :meth:`add_into`)."""

    def __init__(self, W: Any, b: Any, restrict_out: bool = False) -> None:
        import torch

        rows = torch.nonzero(W.ne(0).any(1)).flatten()
        self.rows = None if len(rows) == W.shape[0] else rows
        W = W if self.rows is None else W[rows]
        cols = torch.nonzero(W.ne(0).any(0) | b.ne(0)).flatten() if restrict_out else None
        self.cols = None if cols is None or len(cols) == W.shape[1] else cols
        if self.cols is not None:
            W, b = W[:, self.cols], b[self.cols]
        self.W, self.b = W.contiguous(), b.contiguous()

    def __call__(self, x: Any) -> Any:  # x: [rows, d_in]
        import torch

        return torch.addmm(self.b, x if self.rows is None else x.index_select(1, self.rows), self.W)

    def add_into(self, resid: Any, x: Any) -> Any:
        """``resid + (x @ W + b)`` with the full output width; ``resid`` is [rows, d_out]."""
        out = self(x)
        if self.cols is None:
            return resid + out
        return resid.index_add(1, self.cols, out)


def bare_unsupported(model: Any) -> str | None:
    """Why the bare forward cannot run ``model`` (None when it can)."""
    cfg = getattr(model, "cfg", None)
    if cfg is None or not hasattr(type(model), "run_with_hooks"):  # e.g. the LSTM baseline
        return f"{type(model).__name__} is not a TransformerLens model"
    checks = {
        "positional_embedding_type": ("standard",),
        "act_fn": ("relu",),
        "normalization_type": (None, "LN"),
        "attn_only": (False,),
        "parallel_attn_mlp": (False,),
        "gated_mlp": (False,),
        "n_key_value_heads": (None,),
        "attention_dir": ("causal",),
    }
    for name, allowed in checks.items():
        value = getattr(cfg, name, allowed[0])
        if value not in allowed:
            return f"{name} = {value!r}"
    return None


def bare_forward(model: Any, residuals: bool = False) -> Callable[[Any], Any] | None:
    """``tokens [batch, pos] → logits [batch, pos, d_vocab_out]`` on ``model``'s weights, or None.

    With ``residuals`` the forward returns ``(logits, stream)``, ``stream`` holding the residual stream
    under TransformerLens's names (``blocks.{l}.hook_resid_pre``, ``…_mid``, ``…_post``), each
    ``[batch, pos, d_model]``."""
    if bare_unsupported(model) is not None:
        return None
    import torch
    import torch.nn.functional as F

    from sandbox_lens.interp.model.hooked import tl_state_dict

    cfg = model.cfg
    sd = {k: v.detach() for k, v in tl_state_dict(model).items()}
    n_heads, d_head = cfg.n_heads, cfg.d_head
    scale = 1.0 / (math.sqrt(d_head) if getattr(cfg, "use_attn_scale", True) else 1.0)
    ln = getattr(cfg, "normalization_type", None) == "LN"
    eps = getattr(cfg, "eps", 1e-5)

    def fused(prefix: str) -> tuple[Any, Any]:  # [d_model, 3·heads·d_head] and its bias
        ws = [sd[f"{prefix}.W_{x}"].permute(1, 0, 2).reshape(cfg.d_model, n_heads * d_head) for x in "QKV"]
        bs = [sd[f"{prefix}.b_{x}"].reshape(n_heads * d_head) for x in "QKV"]
        return torch.cat(ws, 1).contiguous(), torch.cat(bs)

    blocks = []
    for l in range(cfg.n_layers):
        p = f"blocks.{l}"
        W_qkv, b_qkv = fused(f"{p}.attn")
        W_O = sd[f"{p}.attn.W_O"].reshape(n_heads * d_head, cfg.d_model)
        W_in, b_in, W_out = sd[f"{p}.mlp.W_in"], sd[f"{p}.mlp.b_in"], sd[f"{p}.mlp.W_out"]
        used = W_out.ne(0).any(1)  # hidden units whose output is read at all
        if not bool(used.all()):
            W_in, b_in, W_out = W_in[:, used], b_in[used], W_out[used]
        norms = [(sd[f"{p}.{n}.w"], sd[f"{p}.{n}.b"]) if ln else None for n in ("ln1", "ln2")]
        chunk = max(64, HIDDEN_CHUNK // max(1, W_in.shape[1]))  # rows per MLP pass
        blocks.append(
            (
                _Projection(W_qkv, b_qkv),
                _Projection(W_O, sd[f"{p}.attn.b_O"], restrict_out=True),
                _Projection(W_in, b_in),
                _Projection(W_out, sd[f"{p}.mlp.b_out"], restrict_out=True),
                norms,
                chunk,
            )
        )
    final = (sd["ln_final.w"], sd["ln_final.b"]) if ln else None
    W_E, W_pos = sd["embed.W_E"], sd["pos_embed.W_pos"]
    unembed = _Projection(sd["unembed.W_U"], sd["unembed.b_U"])

    def norm(x: Any, wb: Any) -> Any:
        return x if wb is None else F.layer_norm(x, (x.shape[-1],), wb[0], wb[1], eps)

    def forward(tokens: Any) -> Any:
        batch, n = tokens.shape
        stream = {}
        x = (W_E[tokens] + W_pos[:n]).reshape(batch * n, -1)
        for l, (qkv_in, attn_out, mlp_in, mlp_out, (ln1, ln2), rows) in enumerate(blocks):
            stream[f"blocks.{l}.hook_resid_pre"] = x
            q, k, v = qkv_in(norm(x, ln1)).view(batch, n, 3, n_heads, d_head).permute(2, 0, 3, 1, 4)
            z = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale)
            x = attn_out.add_into(x, z.transpose(1, 2).reshape(batch * n, -1))
            stream[f"blocks.{l}.hook_resid_mid"] = x
            h = norm(x, ln2)
            if len(h) <= rows:
                x = mlp_out.add_into(x, mlp_in(h).relu_())
            else:  # wide MLPs (a counter's staircase) in row chunks whose hidden units stay in cache
                x = torch.cat(
                    [mlp_out.add_into(xc, mlp_in(hc).relu_()) for xc, hc in zip(x.split(rows), h.split(rows))]
                )
            stream[f"blocks.{l}.hook_resid_post"] = x
        out = unembed(norm(x, final)).view(batch, n, -1)
        if not residuals:
            return out
        return out, {name: value.view(batch, n, -1) for name, value in stream.items()}

    return forward
