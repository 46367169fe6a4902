"""One policy for the fast forward: :func:`sandbox_lens.interp.model.bare.bare_forward` runs only where it agrees with
the model on a cross-checked sample of the inputs it is given; one disagreement and the model itself runs
the rest, and the result says which ran. A construction's weights checked without TransformerLens
(:class:`~sandbox_lens.interp.model.bare.BareModel`) are cross-checked against the same weights run in float64,
which catches a float32 rounding that flips a prediction; TransformerLens is built only if they disagree (that the
one forward computes TransformerLens's function is tested on every construction, ``tests/model/test_bare.py``).

What must agree depends on what is read:

* logits (the verifier's predictions) — the argmax at every position of the first sequences of each
  input set (:data:`CROSS_CHECK_POSITIONS` positions, at least one whole input): a wrong fast path must
  never decide a verdict; the largest logit difference is recorded;
* the residual stream (the probes' activations) — every requested hook on the first sequence, within
  :data:`RESIDUAL_TOLERANCE` of ``run_with_cache`` relative to the largest activation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from sandbox_lens.interp.model import bare as _bare
from sandbox_lens.interp.model.device import on
from sandbox_lens.interp.model.run import exact_precision, logits

__all__ = ["CheckedForward", "FORWARDS", "CROSS_CHECK_POSITIONS", "RESIDUAL_TOLERANCE", "residual_stream"]

FORWARDS = ("bare", "model")
#: positions of each input set run through both forwards (at least one whole input)
CROSS_CHECK_POSITIONS = 1 << 12
#: largest |bare − TransformerLens| on the cross-checked sequence, relative to max(1, largest |activation|)
RESIDUAL_TOLERANCE = 1e-4
_RESIDUAL_HOOKS = ("hook_resid_pre", "hook_resid_mid", "hook_resid_post")


class CheckedForward:
    """``forward`` for :func:`sandbox_lens.interp.model.run.logits`: the bare forward while it agrees with the model.

    ``residuals`` (hook names): the forward also returns those residual-stream activations, and
    :meth:`residual_stream` checks and reads them; a hook the bare forward does not record sends
    everything to the model.
    """

    def __init__(self, model: Any, forward: str = "bare", residuals: Sequence[str] | None = None) -> None:
        if forward not in FORWARDS:
            raise ValueError(f"forward must be one of {', '.join(FORWARDS)}; got {forward!r}")
        self.model = model
        self.residuals = list(residuals or ())
        covered = all(n.startswith("blocks.") and n.rsplit(".", 1)[-1] in _RESIDUAL_HOOKS for n in self.residuals)
        self.bare: Callable[[Any], Any] | None = (
            _bare.bare_forward(model, residuals=bool(self.residuals)) if forward == "bare" and covered else None
        )
        self.why_not = (
            None
            if forward == "model"
            else (_bare.bare_unsupported(model) or (None if covered else "hooks other than the residual stream"))
        )
        #: what the cross-check compares with: the model itself, or for a construction's weights without
        #: TransformerLens (a BareModel) the same weights in float64, so TransformerLens is built only on a disagreement
        self.reference: Callable[[Any], Any] | None = (
            model.float64_forward if isinstance(model, _bare.BareModel) and self.bare is not None else None
        )
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
        model = list(logits(self.model, sample, forward=self.reference))
        for (_, ours), (_, theirs) in zip(bare, model):
            self.checked_positions += ours.shape[0] * ours.shape[1]
            diff = float((ours.double() - theirs.double()).abs().max()) if ours.numel() else 0.0
            self.max_logit_difference = max(self.max_logit_difference, diff)
            if not torch.equal(ours.argmax(-1), theirs.argmax(-1)):
                self._fall_back()
                return

    def residual_stream(self, tokens: Any) -> tuple[dict[str, Any], str]:
        """The residual activations of ``tokens`` (as ``run_with_cache`` records them) and the forward that ran."""

        tokens = on(self.model, np.atleast_2d(np.asarray(tokens, dtype=np.int64)))
        with exact_precision():
            if self.bare is not None:
                _, cache = self.model.run_with_cache(tokens[:1], names_filter=self.residuals)
                _, ours = self.bare(tokens[:1])
                self.checked_positions += int(tokens.shape[1])
                if all(
                    float((ours[n].double() - cache[n].double()).abs().max())
                    <= RESIDUAL_TOLERANCE * max(1.0, float(cache[n].abs().max()))
                    for n in self.residuals
                ):
                    _, stream = self.bare(tokens)
                    return {n: stream[n] for n in self.residuals}, "bare"
                self._fall_back()
            _, cache = self.model.run_with_cache(tokens, names_filter=self.residuals)
            return {n: cache[n] for n in self.residuals}, "model"

    def _fall_back(self) -> None:
        self.disagreed, self.bare, self.reference = True, None, None

    def details(self) -> dict[str, Any]:
        """What ran, for :class:`~sandbox_lens.interp.verify.result.Verification`'s ``details["forward"]``."""
        if self.disagreed:
            path = "model (the bare forward disagreed on the cross-check)"
        elif self.bare is not None:
            path = "bare" if self.reference is None else "bare (cross-checked against the weights in float64)"
        else:
            path = "model" + (f" (no bare forward: {self.why_not})" if self.why_not else "")
        return {
            "path": path,
            "cross_checked_positions": self.checked_positions,
            "max_logit_difference": self.max_logit_difference,
        }


def residual_stream(model, tokens: Any, names: Sequence[str], forward: str = "bare") -> tuple[dict[str, Any], str]:
    """The residual-stream activations ``names`` (``blocks.{l}.hook_resid_pre|mid|post``) on a token
    batch, as ``run_with_cache`` gives them, and which forward produced them (see the module docstring):
    the bare forward after its check on the first sequence, else ``run_with_cache`` itself."""
    return CheckedForward(model, forward, residuals=names).residual_stream(tokens)
