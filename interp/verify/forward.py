"""Which forward pass a verification runs: the bare one, cross-checked, or the model's own.

:func:`interp.model.bare.bare_forward` computes the same function as TransformerLens on the same
weights, 3–7× faster in verification at T = 1024 (``make bench``), but sums in another order. So every input
set a verification checks starts with a sample run through both: the predictions (argmax at every
position) must be identical, and the largest logit difference is recorded. One disagreement and the
rest of the verification runs on the model itself, and the result says so.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from interp.model.bare import bare_forward, bare_unsupported
from interp.model.run import logits

__all__ = ["CheckedForward", "FORWARDS", "CROSS_CHECK_POSITIONS"]

FORWARDS = ("bare", "model")
#: positions of each input set run through both forwards (at least one whole input)
CROSS_CHECK_POSITIONS = 1 << 12


class CheckedForward:
    """``forward`` for :func:`interp.model.run.logits`: the bare forward while it agrees with the model."""

    def __init__(self, model: Any, forward: str = "bare") -> None:
        if forward not in FORWARDS:
            raise ValueError(f"forward must be one of {', '.join(FORWARDS)}; got {forward!r}")
        self.model = model
        self.bare: Callable[[Any], Any] | None = bare_forward(model) if forward == "bare" else None
        self.why_not = None if forward == "model" else bare_unsupported(model)
        self.checked_positions = 0
        self.max_logit_difference = 0.0
        self.disagreed = False

    @property
    def forward(self) -> Callable[[Any], Any] | None:
        return self.bare

    def cross_check(self, tokens: np.ndarray) -> None:
        """Run the first inputs of ``tokens`` through both; fall back to the model on any differing argmax."""
        if self.bare is None or len(tokens) == 0:
            return
        import torch

        sample = tokens[: max(1, CROSS_CHECK_POSITIONS // tokens.shape[1])]
        # one pass, then the other: the batch generators each hold a precision context, which must
        # not interleave (contexts restored out of order would leave inference mode switched on)
        bare = list(logits(self.model, sample, forward=self.bare))
        model = list(logits(self.model, sample))
        for (_, ours), (_, theirs) in zip(bare, model):
            self.checked_positions += ours.shape[0] * ours.shape[1]
            diff = float((ours.double() - theirs.double()).abs().max()) if ours.numel() else 0.0
            self.max_logit_difference = max(self.max_logit_difference, diff)
            if not torch.equal(ours.argmax(-1), theirs.argmax(-1)):
                self.disagreed, self.bare = True, None
                return

    def details(self) -> dict[str, Any]:
        """What ran, for :class:`~interp.verify.result.Verification`'s ``details["forward"]``."""
        if self.disagreed:
            path = "model (the bare forward disagreed on the cross-check)"
        elif self.bare is not None:
            path = "bare"
        else:
            path = "model" + (f" (no bare forward: {self.why_not})" if self.why_not else "")
        return {"path": path, "cross_checked_positions": self.checked_positions,
                "max_logit_difference": self.max_logit_difference}
