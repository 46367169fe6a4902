"""What every comparison shares: the models' inputs, canonical attention coordinates and the
reference patterns written in them, the twin's name and head names.

A comparison puts several models of one task on the *same* inputs. Models may lay tokens out
differently (a gridworld construction reads a padding prefix before the word; a trained twin reads
BOS then the word), so every analysis is phrased on the word:

* an adapter's ``inputs(model, words)`` gives the model's own tokens, targets, scored positions and
  the probed task latents (a label at every token position);
* attention patterns are compared in *canonical coordinates* ``[word query, key]``: one row per
  word position, key 0 = everything before the word (BOS and any padding), key j = word token j.
  :func:`canonical` maps a model's pattern there, and the reference patterns are written there.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from sandbox_lens.interp.streams import Stream
from sandbox_lens.interp.tasks.batches import step_rng
from sandbox_lens.probes.attention import lookback_reference, target_reference, uniform_reference

__all__ = [
    "ModelInputs",
    "canonical",
    "square",
    "AfterBos",
    "canonical_lookback",
    "canonical_uniform",
    "canonical_prefix",
    "canonical_keys",
]


@dataclass
class ModelInputs:
    """One model's view of a set of words: its tokens, targets and scored positions, and latents."""

    tokens: np.ndarray  # [B, n]
    targets: np.ndarray  # [B, n]
    loss_mask: np.ndarray  # [B, n]
    score_mask: np.ndarray  # [B, n]
    prefix: int  # tokens before the word
    latents: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)  # name -> (labels, mask)


def canonical(pattern: np.ndarray, prefix: int) -> np.ndarray:
    """``[word query, key]``: rows of the word's positions; the prefix's keys summed into key 0."""
    rows = pattern[prefix:]
    return np.concatenate([rows[:, :prefix].sum(1, keepdims=True), rows[:, prefix:]], axis=1)


def square(pattern: np.ndarray, prefix: int) -> np.ndarray:
    """Canonical coordinates plus a first row for the prefix (it attends to itself): a square picture."""
    c = canonical(pattern, prefix)
    first = np.zeros((1, c.shape[1]))
    first[0, 0] = 1.0
    return np.concatenate([first, c], axis=0)


def canonical_lookback(T: int, k: int) -> np.ndarray:
    """The look-back-by-``k`` attention pattern over T positions (BOS dropped): the reference a prefix-scan head is
    compared with."""
    return lookback_reference(T + 1, k)[1:]


def canonical_uniform(T: int) -> np.ndarray:
    """The uniform causal attention pattern over T positions (BOS dropped)."""
    return uniform_reference(T + 1)[1:]


def canonical_prefix(T: int) -> np.ndarray:
    """All mass on the tokens before the word: a BOS sink (the constructions' counting heads)."""
    return target_reference(np.zeros(T + 1, dtype=np.int64))[1:]


def canonical_keys(sources: np.ndarray) -> np.ndarray:
    """Canonical one-hot rows for a word without prefix: query t → key 1 + sources[t]."""
    return target_reference(np.concatenate([[0], np.asarray(sources) + 1]))[1:]


class AfterBos:
    """Shared by the tasks whose models read BOS, then token 1 + symbol (Dyck, automata)."""

    def train_words(self, step: int, seed: int) -> np.ndarray:
        """Fresh words for a mask-learning step (another stream than :meth:`words`)."""
        return self.task.batch(step_rng(seed, step, Stream.MASK_BATCHES), 32).tokens[:, 1:] - 1

    def scored_queries(self, word: Sequence[int]) -> np.ndarray:
        """Rows whose attention is scored against the references: all of them."""
        return np.arange(len(word))
