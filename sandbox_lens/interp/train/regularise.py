"""Training options the thesis uses beyond plain AdamW: dropout (also on the embeddings), an
attention-entropy penalty that sharpens attention, random position shifts (length
generalisation), and an exponential moving average of the weights.

Dropout masks come from a generator seeded by (seed, step), like the batches, so an interrupted run
resumes onto the very masks it would have drawn; the moving average is part of the checkpoint.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sandbox_lens.interp.model.run import hook_name
from sandbox_lens.interp.streams import Stream, torch_seed
from sandbox_lens.interp.tasks.batches import step_rng

__all__ = ["training_hooks", "attention_entropy", "contrastive_penalty", "EMA"]


def _dropout(p: float, generator) -> Callable:
    import torch

    def hook(x, hook):
        keep = torch.rand(x.shape, generator=generator, dtype=x.dtype) >= p
        return x * keep / (1.0 - p)

    return hook


def _shifted_positions(model, config, step: int) -> Callable:
    """The thesis's random position shift: one offset in 0..pos_shift per batch, from (seed, step)."""

    offset = int(step_rng(config.seed, step, Stream.POSITION_SHIFTS).integers(0, config.pos_shift + 1))

    def hook(pos_embed, hook):  # [batch, pos, d_model]: rows offset..offset+pos of W_pos
        n = pos_embed.shape[1]
        return model.pos_embed.W_pos[offset : offset + n].unsqueeze(0).expand_as(pos_embed)

    return hook


def training_hooks(model, config, step: int, patterns: list) -> list[tuple[str, Callable]]:
    """Forward hooks for one training step: dropout on every block's attention and MLP output
    (``config.dropout``), on the embeddings entering block 0 (``config.embed_dropout``), and, when
    ``config.sharpen`` is set, hooks that collect every attention pattern (with its gradient) into
    ``patterns`` for :func:`attention_entropy`."""
    import torch

    hooks: list[tuple[str, Callable]] = []
    generator = torch.Generator().manual_seed(torch_seed(config.seed, Stream.DROPOUT, step))
    if config.pos_shift:
        hooks.append(("hook_pos_embed", _shifted_positions(model, config, step)))
    if config.embed_dropout:
        hooks.append((hook_name("resid_pre", 0), _dropout(config.embed_dropout, generator)))
    if config.dropout:
        for layer in range(model.cfg.n_layers):
            hooks.append((hook_name("attn_out", layer), _dropout(config.dropout, generator)))
            hooks.append((hook_name("mlp_out", layer), _dropout(config.dropout, generator)))
    if config.sharpen:

        def keep(pattern, hook):
            patterns.append(pattern)

        hooks += [(hook_name("pattern", layer), keep) for layer in range(model.cfg.n_layers)]
    return hooks


def attention_entropy(patterns: list) -> Any:
    """Mean entropy (nats) of the attention rows of every head in ``patterns`` ([batch, head, q, k] each)."""
    import torch

    rows = [-(p * torch.log(p.clamp_min(1e-12))).sum(-1).mean() for p in patterns]
    return torch.stack(rows).mean()


def contrastive_penalty(model, tokens, logits, lang, seed: int, step: int) -> Any:
    """The Dyck balance regulariser (thesis eq. 3.40): the squared change of the logits on a batch
    when r nested matched pairs are put before it, r ~ U{1..D} with uniformly random types (one draw
    per step, from (seed, step)); BOS stays first; the mean over positions of the sum over the
    vocabulary. A model that generalises in length perfectly pays nothing."""
    import numpy as np
    import torch

    rng = step_rng(seed, step, Stream.CONTRASTIVE_PAIRS)
    r = int(rng.integers(1, lang.D + 1))
    types = rng.integers(lang.k, size=r)
    pairs = np.concatenate([2 * types, (2 * types + 1)[::-1]]) + 1  # tokens: 1 + bracket index
    B = tokens.shape[0]
    shifted = np.concatenate([tokens[:, :1], np.broadcast_to(pairs, (B, 2 * r)), tokens[:, 1:]], axis=1)
    moved = model(torch.from_numpy(np.ascontiguousarray(shifted)), return_type="logits")[:, 1 + 2 * r :]
    return ((moved - logits[:, 1:]) ** 2).sum(-1).mean()


class EMA:
    """w̄ ← γ·w̄ + (1 − γ)·w after every step; the averaged weights are the ones evaluated and kept."""

    def __init__(self, model, decay: float) -> None:
        self.decay = float(decay)
        self.state = {k: v.detach().clone() for k, v in model.state_dict().items()}

    def update(self, model) -> None:
        import torch

        with torch.no_grad():
            for k, v in model.state_dict().items():
                if v.dtype.is_floating_point:
                    self.state[k].mul_(self.decay).add_(v.detach(), alpha=1.0 - self.decay)
                else:
                    self.state[k].copy_(v)

    def averaged(self, model):
        """A copy of ``model`` holding the averaged weights."""
        import copy

        twin = copy.deepcopy(model)
        twin.load_state_dict(self.state, strict=True)
        return twin
