"""The Dyck adapter of `interp compare`: next-token Dyck_{k,D} and the three constructions of
``sandbox_lens.constructions.dyck`` (stack-like, uniform and random-balanced second layers)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from sandbox_lens.interp.compare.canonical import (
    AfterBos,
    ModelInputs,
    canonical_lookback,
    canonical_prefix,
    canonical_uniform,
)
from sandbox_lens.interp.errors import ConstructionError
from sandbox_lens.interp.model.card import TokenIO
from sandbox_lens.interp.model.hooked import to_hooked
from sandbox_lens.interp.streams import Stream
from sandbox_lens.interp.tasks.batches import DyckTask, step_rng
from sandbox_lens.interp.tasks.dyck import Dyck
from sandbox_lens.probes.attention import target_reference

__all__ = ["DyckComparison"]


class DyckComparison(AfterBos):
    """Dyck_{k,D} next-token prediction; words are the bracket inputs after BOS."""

    kind = "dyck"
    prefix_label, scored_positions = "BOS", "closing-bracket positions"
    latent_names = ("depth", "stack-top type")
    reference_names = ("stack top", "uniform", "previous token", "BOS")

    theorem3 = True  # the stack construction pruned out of a random network (thesis Theorem 3)

    @classmethod
    def from_task(cls, task: DyckTask) -> DyckComparison:
        """The adapter for a training task (the registry's ``comparison`` of the Dyck kind)."""
        return cls(task.lang, task.length)

    def __init__(self, lang: Dyck, length: int = 28) -> None:
        self.lang, self.length = lang, int(length)
        self.task = DyckTask(lang, length)
        self.io = TokenIO.after_bos(lang.n_brackets)

    @property
    def title(self) -> str:
        return f"{self.lang.name}, next-token prediction (N = {self.length})"

    def train_defaults(self) -> dict[str, Any]:
        from sandbox_lens.interp.train import task_defaults

        return task_defaults(self.task)  # the same as `interp train`'s

    def constructions(self, names: Sequence[str] | None, seed: int) -> dict[str, Any]:
        from sandbox_lens.constructions.dyck import VARIANTS, build_dyck

        chosen = list(names or VARIANTS)
        unknown = [n for n in chosen if n not in VARIANTS]
        if unknown:
            raise ConstructionError(f"dyck constructions are {', '.join(VARIANTS)}; unknown: {', '.join(unknown)}")
        return {v: to_hooked(build_dyck(self.lang, max(64, self.length), v, seed=seed)) for v in chosen}

    def words(self, n: int, seed: int) -> np.ndarray:
        """Inputs: the first N − 1 brackets of sampled prefixes (the N-th is the last target)."""
        return self.task.batch(step_rng(seed, 0, Stream.ANALYSIS_WORDS), n).tokens[:, 1:] - 1

    def example_word(self, seed: int) -> np.ndarray:
        from sandbox_lens.probes.dyck import PROBE_INPUT

        fits = self.length - 1  # the twin reads BOS + the word
        if self.lang.k == 2 and self.lang.D >= 4 and len(PROBE_INPUT) <= fits:
            return self.lang.encode(PROBE_INPUT)
        return self.lang.sample(1, min(16, fits), seed=seed)[0]

    def display_tokens(self, model, word: Sequence[int] | np.ndarray) -> list[str]:
        return ["BOS", *(self.lang.bracket_names[b] for b in word)]

    def inputs(self, model, words: np.ndarray, with_latents: bool = True) -> ModelInputs:
        words = np.atleast_2d(np.asarray(words, dtype=np.int64))
        tokens = self.io.encode(words)  # every Dyck model reads BOS, then the brackets
        # Targets: the next bracket where the word goes on; the last position's target is not
        # known from the word alone, so it is left unscored.
        targets = np.zeros_like(tokens)
        targets[:, :-1] = words
        scored = np.zeros(tokens.shape, dtype=bool)
        scored[:, :-1] = words % 2 == 1
        loss = np.ones(tokens.shape, dtype=bool)
        loss[:, -1] = False
        out = ModelInputs(tokens, targets, loss, scored, prefix=1)
        if with_latents:
            steps = np.where(words % 2 == 0, 1, -1)
            depth = np.concatenate([np.zeros((len(words), 1), dtype=np.int64), np.cumsum(steps, axis=1)], axis=1)
            top = np.array(
                [
                    [self.lang.k if p == 0 else int(row[p - 1]) // 2 for p in self.lang.stack_top_positions(row)]
                    for row in words
                ]
            )
            everywhere = np.ones(tokens.shape, dtype=bool)
            out.latents = {"depth": (depth, everywhere), "stack-top type": (top, everywhere)}
        return out

    def references(self, word: Sequence[int]) -> dict[str, np.ndarray]:
        T = len(word)
        # With BOS as the only prefix token, token positions are canonical keys already.
        return {
            "stack top": target_reference(self.lang.stack_top_positions(word))[1:],
            "uniform": canonical_uniform(T),
            "previous token": canonical_lookback(T, 1),
            "BOS": canonical_prefix(T),
        }
