"""High-level causal models of an automaton task, and what they predict under an interchange.

The variable is the state ``S_p`` after reading position p. Two rival models of how the outputs
depend on it:

* ``parallel`` — every output is computed from the word directly: output p *is* S_p and no other
  output depends on it (a parallel count, a prefix scan's read-out);
* ``recurrent`` — the state is carried forward: S_{t+1} = δ(S_t, σ_{t+1}), so setting S_p sets
  every later output too (the step-by-step update of an RNN or of the thesis's recurrent reading).

Setting S_p to its value on a *source* word and running the *base* word gives the counterfactual
outputs; an interchange intervention on a model site is scored against them
(:mod:`interp.causal.interchange`). Only the outputs a model says the variable reaches are scored.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from interp.errors import SandboxError

__all__ = ["StateModel", "MODES", "HighLevelError"]

MODES = ("parallel", "recurrent")


class HighLevelError(SandboxError, ValueError):
    """A variable, position or mode the high-level model does not have."""


@dataclass(frozen=True)
class StateModel:
    """The automaton's state at one position, under a ``parallel`` or ``recurrent`` reading."""

    automaton: object
    mode: str = "parallel"

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise HighLevelError(f"unknown high-level model {self.mode!r} (choose from {', '.join(MODES)})")

    def counterfactual(self, base: np.ndarray, source: np.ndarray, position: int) -> tuple[np.ndarray, np.ndarray]:
        """(labels, scored): the outputs of ``base`` words with S_position set to its value on ``source``
        words (``[n, T]`` state indices), and which outputs the variable reaches in this model."""
        n, T = base.shape
        if not 0 <= position < T:
            raise HighLevelError(f"position {position} is outside words of length {T}")
        a = self.automaton
        labels = a.run(base).copy()
        swapped = a.run(source)[:, position]
        scored = np.zeros((n, T), dtype=bool)
        labels[:, position] = swapped
        scored[:, position] = True
        if self.mode == "recurrent":
            q = swapped
            for t in range(position + 1, T):
                q = a.delta[base[:, t], q]
                labels[:, t] = q
            scored[:, position:] = True
        return labels, scored
