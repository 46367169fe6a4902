"""A trainable twin without TransformerLens: ``HookedTransformer``'s parameters, none of its hook points.

A training step that reads no activation (no dropout, entropy or contrastive regulariser, no aligned
interchange) needs nothing from TransformerLens but its parameters and its arithmetic, and importing it costs most
of a short ``interp train`` (it pulls in ``transformers``). :class:`HookFreeTransformer` holds the parameters
TransformerLens 3.9's ``HookedTransformer`` would hold — the same names, shapes and registration order, initialised
the same way (``init_mode="gpt2"``: the seed set, then every ``W_`` matrix drawn from N(0, 0.8²/d_model) in
registration order, biases 0, LayerNorm weights 1) — so a seed gives the same twin bit for bit, and its forward is
:func:`sandbox_lens.interp.model.fast.fast_forward`, the one the training loop runs on a ``HookedTransformer``
whenever no hook is attached. A run trained on it therefore equals, bit for bit, the run trained on TransformerLens's
model (``tests/model/test_hook_free.py``), and its checkpoints and saved model are the same files.

Anything that needs a hook point builds the TransformerLens model of the same weights (:meth:`hooked`)."""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import torch

from sandbox_lens.interp.model.bare import config_unsupported
from sandbox_lens.interp.model.fast import fast_forward
from sandbox_lens.interp.model.hooked import load_strict, new_model

__all__ = ["HookFreeTransformer", "covered"]


def covered(cfg: dict[str, Any]) -> str | None:
    """Why :class:`HookFreeTransformer` cannot stand in for the ``HookedTransformer`` of config ``cfg`` (None when
    it can): the bare forward's configurations, TransformerLens's GPT-2 initialisation and scaled scores."""
    why = config_unsupported(SimpleNamespace(**cfg))
    if why is not None:
        return why
    for name, allowed in {"init_mode": "gpt2", "use_attn_scale": True}.items():
        if cfg.get(name, allowed) != allowed:
            return f"{name} = {cfg[name]!r}"
    if cfg.get("dtype", "float32") not in ("float32", "float64"):
        return f"dtype = {cfg['dtype']!r}"
    return None


class _Parameters(torch.nn.Module):
    """A module that only holds parameters, registered in the order given (TransformerLens's order)."""

    def __init__(self, shapes: dict[str, tuple[int, ...]], dtype: Any, device: Any) -> None:
        super().__init__()
        for name, shape in shapes.items():
            # LayerNorm weights start at 1, biases at 0; W_ matrices are drawn by _initialise
            fill = torch.ones if name == "w" else torch.zeros
            self.register_parameter(name, torch.nn.Parameter(fill(shape, dtype=dtype, device=device)))


class _Block(torch.nn.Module):
    def __init__(self, c: SimpleNamespace, dtype: Any, device: Any) -> None:
        super().__init__()
        d, H, dh = c.d_model, c.n_heads, c.d_head
        if c.normalization_type == "LN":
            self.ln1 = _Parameters({"w": (d,), "b": (d,)}, dtype, device)
            self.ln2 = _Parameters({"w": (d,), "b": (d,)}, dtype, device)
        attention = {
            "W_Q": (H, d, dh),
            "W_O": (H, dh, d),
            "b_Q": (H, dh),
            "b_O": (d,),
            "W_K": (H, d, dh),
            "W_V": (H, d, dh),
            "b_K": (H, dh),
            "b_V": (H, dh),
        }
        self.attn = _Parameters(attention, dtype, device)
        mlp = {"W_in": (d, c.d_mlp), "b_in": (c.d_mlp,), "W_out": (c.d_mlp, d), "b_out": (d,)}
        self.mlp = _Parameters(mlp, dtype, device)


class HookFreeTransformer(torch.nn.Module):
    """TransformerLens 3.9's ``HookedTransformer`` of config ``cfg`` (the dict ``model.json`` stores, as
    :func:`sandbox_lens.interp.model.hooked.new_model` takes it) without hook points: its parameters under the same
    names, initialised as TransformerLens initialises them, run by the training loop's fused forward. Check
    :func:`covered` first.

    ``model(tokens)`` (``tokens [batch, pos]``) gives the logits ``[batch, pos, d_vocab_out]``; ``cfg`` holds the
    configuration fields the engines read; :meth:`hooked` builds the TransformerLens model of the same weights."""

    hook_free = True  # what the training loop asks before it would patch TransformerLens's forward

    def __init__(self, cfg: dict[str, Any], device: Any = "cpu") -> None:
        super().__init__()
        why = covered(cfg)
        if why is not None:
            raise ValueError(f"a hook-free twin cannot have {why}")
        self.sandbox_config = dict(cfg)
        dtype = getattr(torch, cfg.get("dtype", "float32"))
        fields: dict[str, Any] = {
            "eps": 1e-5,
            "positional_embedding_type": "standard",
            "act_fn": "relu",
            "attn_only": False,
            "use_attn_scale": True,
            "attn_scale": math.sqrt(cfg["d_head"]),
            "initializer_range": 0.8 / math.sqrt(cfg["d_model"]),
            "normalization_type": None,
            "seed": None,
        }
        c = SimpleNamespace(**{**fields, **{k: v for k, v in cfg.items() if k != "dtype"}})
        c.dtype, c.device = dtype, torch.device(device)
        self.cfg = c
        d, cpu = c.d_model, torch.device("cpu")  # drawn on the CPU and then moved, as TransformerLens does
        self.embed = _Parameters({"W_E": (c.d_vocab, d)}, dtype, cpu)
        self.pos_embed = _Parameters({"W_pos": (c.n_ctx, d)}, dtype, cpu)
        self.blocks = torch.nn.ModuleList(_Block(c, dtype, cpu) for _ in range(c.n_layers))
        if c.normalization_type == "LN":
            self.ln_final = _Parameters({"w": (d,), "b": (d,)}, dtype, cpu)
        self.unembed = _Parameters({"W_U": (d, c.d_vocab_out), "b_U": (c.d_vocab_out,)}, dtype, cpu)
        self._initialise()
        self.to(c.device)

    def _initialise(self) -> None:
        """TransformerLens's ``init_weights`` in ``gpt2`` mode: the config's seed, then N(0, initializer_range²)
        for every ``W_`` parameter in registration order."""
        if self.cfg.seed is not None:
            torch.manual_seed(self.cfg.seed)
        with torch.no_grad():
            for name, p in self.named_parameters():
                if "W_" in name:
                    torch.nn.init.normal_(p, std=self.cfg.initializer_range)

    def forward(self, tokens: Any, return_type: str | None = "logits") -> Any:
        """The logits on ``tokens`` (``return_type`` other than ``"logits"`` needs :meth:`hooked`)."""
        if return_type != "logits":
            raise ValueError(f"a hook-free twin returns logits only (asked for {return_type!r}); use .hooked()")
        return fast_forward(self, tokens.to(self.embed.W_E.device))

    def hooked(self) -> Any:
        """The TransformerLens model of the same configuration and weights (a copy), with the card if one is set."""
        model = new_model(self.sandbox_config)
        load_strict(model, {k: v.detach().clone() for k, v in self.named_parameters()})
        for name, p in self.named_parameters():
            model.get_parameter(name).requires_grad_(p.requires_grad)
        model.sandbox_config = dict(self.sandbox_config)
        if hasattr(self, "card"):
            from sandbox_lens.interp.model.tokens import attach_tokenizer

            model.card = self.card
            attach_tokenizer(model)
        return model
