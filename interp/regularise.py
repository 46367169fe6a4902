"""Training options the thesis uses beyond plain AdamW: dropout (also on the embeddings), an
attention-entropy penalty that sharpens attention, and an exponential moving average of the weights.

Dropout masks come from a generator seeded by (seed, step), like the batches, so an interrupted run
resumes onto the very masks it would have drawn; the moving average is part of the checkpoint.
"""

from __future__ import annotations

from typing import Any, Callable

__all__ = ["training_hooks", "attention_entropy", "EMA"]


def _dropout(p: float, generator) -> Callable:
    import torch

    def hook(x, hook):
        keep = torch.rand(x.shape, generator=generator, dtype=x.dtype) >= p
        return x * keep / (1.0 - p)

    return hook


def training_hooks(model, config, step: int, patterns: list) -> list[tuple[str, Callable]]:
    """Forward hooks for one training step: dropout on every block's attention and MLP output
    (``config.dropout``), on the embeddings entering block 0 (``config.embed_dropout``), and, when
    ``config.sharpen`` is set, hooks that collect every attention pattern (with its gradient) into
    ``patterns`` for :func:`attention_entropy`."""
    import torch

    from interp.model.run import hook_name

    hooks: list[tuple[str, Callable]] = []
    generator = torch.Generator().manual_seed(int(config.seed) * 1_000_003 + int(step))
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
