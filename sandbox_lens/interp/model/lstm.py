"""The recurrent baseline: an embedding, an LSTM and a linear read-out (the thesis's 64 / 128 / 1 layer).

It is called like a ``HookedTransformer`` where the toolkit only needs outputs —
``model(tokens, return_type="logits")`` and a ``cfg`` with the sizes the batching reads — so
training, checkpoints, resume, ``sandbox_lens.interp.model.run.predict`` and ``interp evaluate`` work on it
unchanged. It has no attention and no hook points: analyses that need them refuse it
(:func:`sandbox_lens.interp.model.run.require_hooked`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["LSTMModel", "LSTMConfig"]


@dataclass
class LSTMConfig:
    """The LSTM baseline's sizes: vocabularies, embedding and hidden widths, layers, context."""

    d_vocab: int
    d_vocab_out: int
    d_model: int  # embedding width
    hidden: int
    n_layers: int
    n_ctx: int  # no positional limit; the longest input the card admits
    n_heads: int = 0
    d_mlp: int = 0
    model_kind: str = "lstm"


class LSTMModel(torch.nn.Module):
    """Tokens ``[batch, pos]`` → logits ``[batch, pos, d_vocab_out]``, causal by construction."""

    def __init__(self, cfg: LSTMConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.embed = torch.nn.Embedding(cfg.d_vocab, cfg.d_model)
        self.lstm = torch.nn.LSTM(cfg.d_model, cfg.hidden, num_layers=cfg.n_layers, batch_first=True)
        self.unembed = torch.nn.Linear(cfg.hidden, cfg.d_vocab_out)

    def forward(self, tokens: torch.Tensor, return_type: str = "logits") -> torch.Tensor:
        if return_type != "logits":
            raise ValueError("an LSTM returns logits only")
        hidden, _ = self.lstm(self.embed(tokens.to(self.embed.weight.device)))
        return self.unembed(hidden)
