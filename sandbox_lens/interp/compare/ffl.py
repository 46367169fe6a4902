"""The flip-flop-language adapter of `interp compare`: FFL(p) and Proposition 3's construction
``sandbox_lens.constructions.ffl``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from sandbox_lens.interp.compare.canonical import ModelInputs, canonical_keys
from sandbox_lens.interp.errors import ConstructionError
from sandbox_lens.interp.model.hooked import to_hooked
from sandbox_lens.interp.streams import Stream
from sandbox_lens.interp.tasks import ffl
from sandbox_lens.interp.tasks.batches import FFLTask, step_rng

__all__ = ["FFLComparison"]


class FFLComparison:
    """The flip-flop language FFL(p) (thesis §3.5): at every ``r``, predict the bit of the latest ``w``.

    Words are the model's tokens (w=0, r=1, i=2, "0"=3, "1"=4; no BOS): the first T − 1 symbols
    of an FFL(p) string of length T, which ends in ``r`` — the last read's answer follows from the
    word. Scored positions are the reads, as in training (the thesis's deterministic mode).
    """

    kind = "ffl"
    prefix_label, scored_positions = "(no BOS)", "reads"
    latent_names = ("last written bit", "after w")
    reference_names = ("latest write", "latest w", "all writes", "previous token", "itself", "uniform")

    theorem3 = False  # Theorem 3's random-network mask is a Dyck demonstration

    @classmethod
    def from_task(cls, task: FFLTask) -> FFLComparison:
        """The adapter for a training task (the registry's ``comparison`` of the flip-flop kind)."""
        return cls(task)

    def __init__(self, task: FFLTask) -> None:
        self.task, self.length = task, task.length

    @property
    def title(self) -> str:
        return f"flip-flop language {self.task.name}, the bit after every r"

    def train_defaults(self) -> dict[str, Any]:
        from sandbox_lens.interp.train import task_defaults

        return task_defaults(self.task)  # the same as `interp train`'s

    def constructions(self, names: Sequence[str] | None, seed: int) -> dict[str, Any]:
        from sandbox_lens.constructions.ffl import build_ffl

        unknown = [n for n in (names or []) if n != "ffl"]
        if unknown:
            raise ConstructionError(f"the flip-flop language has one construction, ffl; unknown: {', '.join(unknown)}")
        return {"ffl": to_hooked(build_ffl(self.task, max(64, self.task.n_ctx)))}

    def words(self, n: int, seed: int) -> np.ndarray:
        return self.task.batch(step_rng(seed, 0, Stream.ANALYSIS_WORDS), n).tokens

    def train_words(self, step: int, seed: int) -> np.ndarray:
        """Fresh words for a mask-learning step (another stream than :meth:`words`)."""
        return self.task.batch(step_rng(seed, step, Stream.MASK_BATCHES), 32).tokens

    def example_word(self, seed: int) -> np.ndarray:
        """A short string (≤ 19 tokens of FFL(0.4)) that writes both bits and reads at least three times."""
        short = FFLTask(0.4, min(20, self.length))
        for attempt in range(1000):
            word = short.batch(step_rng(seed, attempt, Stream.EXAMPLE_SEARCH), 1).tokens[0]
            bits = word[1:][word[:-1] == 0]
            if len(set(bits.tolist())) == 2 and (word == 1).sum() >= 3:
                return word
        return word

    def display_tokens(self, model, word: Sequence[int] | np.ndarray) -> list[str]:
        return [ffl.VOCAB[t] for t in word]

    def inputs(self, model, words: np.ndarray, with_latents: bool = True) -> ModelInputs:
        tokens = np.atleast_2d(np.asarray(words, dtype=np.int64))
        written, reads = ffl.read_targets(tokens)
        out = ModelInputs(tokens, np.maximum(written, 0), reads, reads, prefix=0)
        if with_latents:
            after_w = np.zeros_like(tokens)
            after_w[:, 1:] = tokens[:, :-1] == 0
            # Not probed on a w itself: a write is under way there, and Prop. 3's layer 2 attends to
            # the (flagged) w rather than carry the old bit through it — only reads need the bit.
            out.latents = {
                "last written bit": (np.maximum(written - 3, 0), (written >= 0) & (tokens != 0)),
                "after w": (after_w, np.ones(tokens.shape, dtype=bool)),
            }
        return out

    def scored_queries(self, word: Sequence[int]) -> np.ndarray:
        """The reads: the only positions the task scores (elsewhere a twin's attention is unconstrained)."""
        return np.flatnonzero(np.asarray(word) == 1)

    def references(self, word: Sequence[int]) -> dict[str, np.ndarray]:
        word = np.asarray(word, dtype=np.int64)
        T = len(word)
        t = np.arange(T)
        is_w = word == 0
        written = np.zeros(T, dtype=bool)
        written[1:] = is_w[:-1]  # the data token a w writes
        latest = np.maximum.accumulate(np.where(written, t, -1))
        latest_w = np.maximum.accumulate(np.where(is_w, t, -1))
        # "all writes": uniform over the written data tokens so far — the thesis's dense solution
        counts = np.cumsum(written)
        dense = np.zeros((T, T + 1))
        for q in range(T):
            if counts[q]:
                dense[q, 1 : q + 2] = written[: q + 1] / counts[q]
            else:
                dense[q, q + 1] = 1.0
        uniform = np.tril(np.ones((T, T))) / (t + 1)[:, None]
        return {
            "latest write": canonical_keys(np.where(latest >= 0, latest, t)),
            "latest w": canonical_keys(np.where(latest_w >= 0, latest_w, t)),
            "all writes": dense,
            "previous token": canonical_keys(np.maximum(t - 1, 0)),
            "itself": canonical_keys(t),
            "uniform": np.concatenate([np.zeros((T, 1)), uniform], axis=1),
        }
