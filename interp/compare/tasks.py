"""What `interp compare` needs to know about a task: inputs, latents, reference patterns, models.

A comparison puts several models of one task on the *same* inputs. Models may lay tokens out
differently (a gridworld construction reads a padding prefix before the word; a trained twin reads
BOS then the word), so every analysis is phrased on the word:

* ``batch(model, …)`` turns words into the model's own tokens, targets and scored positions;
* ``latents(model, …)`` gives, per probed task latent, a label at every position of those tokens;
* attention patterns are compared in *canonical coordinates* ``[word query, key]``: one row per
  word position, key 0 = everything before the word (BOS and any padding), key j = word token j.
  :meth:`canonical` maps a model's pattern there, and the reference patterns are written there.

Three adapters: :class:`DyckComparison` (next-token Dyck_{k,D}, the three constructions of
``constructions.dyck``), :class:`AutomatonComparison` (any catalogue automaton; constructions
are those of the registry that accept it, e.g. ``modular_counter`` and ``prefix_scan`` for parity,
``gridworld``, ``krohn_rhodes`` and ``prefix_scan`` for ``grid9``) and :class:`FlipflopComparison`
(the flip-flop language FFL(p), Proposition 3's construction ``constructions.flipflop``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from interp.tasks.automata import Semiautomaton
from interp.tasks.dyck import Dyck
from interp.errors import ConstructionError
from interp.tasks.batches import AutomatonTask, DyckTask, FlipflopTask, step_rng
from probes.attention import lookback_reference, target_reference, uniform_reference
from probes.boundary import last_boundary_positions

__all__ = ["ModelInputs", "DyckComparison", "AutomatonComparison", "FlipflopComparison", "AUTOMATON_CONSTRUCTIONS",
           "canonical", "comparison_for"]

# Tried in this order for an automaton; those that refuse it are left out.
AUTOMATON_CONSTRUCTIONS = ("modular_counter", "memory", "gridworld", "krohn_rhodes", "prefix_scan")
BOUNDARY_DISTANCE_CAP = 8  # "distance to the last boundary" is probed as a class 0..8 (8 = 8 or more)


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


def _canonical_lookback(T: int, k: int) -> np.ndarray:
    return lookback_reference(T + 1, k)[1:]


def _canonical_uniform(T: int) -> np.ndarray:
    return uniform_reference(T + 1)[1:]


def _canonical_prefix(T: int) -> np.ndarray:
    """All mass on the tokens before the word: a BOS sink (the constructions' counting heads)."""
    return target_reference(np.zeros(T + 1, dtype=np.int64))[1:]


class _AfterBos:
    """Shared by the tasks whose models read BOS, then token 1 + symbol (Dyck, automata)."""

    def train_words(self, step: int, seed: int) -> np.ndarray:
        """Fresh words for a mask-learning step (another stream than :meth:`words`)."""
        return self.task.batch(step_rng(seed + 1000, step, stream=3), 32).tokens[:, 1:] - 1

    def scored_queries(self, word: Sequence[int]) -> np.ndarray:
        """Rows whose attention is scored against the references: all of them."""
        return np.arange(len(word))


class DyckComparison(_AfterBos):
    """Dyck_{k,D} next-token prediction; words are the bracket inputs after BOS."""

    kind = "dyck"
    prefix_label, scored_positions = "BOS", "closing-bracket positions"
    latent_names = ("depth", "stack-top type")
    reference_names = ("stack top", "uniform", "previous token", "BOS")

    def __init__(self, lang: Dyck, length: int = 28) -> None:
        self.lang, self.length = lang, int(length)
        self.task = DyckTask(lang, length)

    @property
    def title(self) -> str:
        return f"{self.lang.name}, next-token prediction (N = {self.length})"

    def train_defaults(self) -> dict[str, Any]:
        return {"steps": 1500, "lr": 3e-3, "target_accuracy": 0.97}

    def constructions(self, names: Sequence[str] | None, seed: int) -> dict[str, Any]:
        from constructions.dyck import VARIANTS, build_dyck

        chosen = list(names or VARIANTS)
        unknown = [n for n in chosen if n not in VARIANTS]
        if unknown:
            raise ConstructionError(f"dyck constructions are {', '.join(VARIANTS)}; unknown: {', '.join(unknown)}")
        return {v: build_dyck(self.lang, max(64, self.length), v, seed=seed).to_hooked() for v in chosen}

    def words(self, n: int, seed: int) -> np.ndarray:
        """Inputs: the first N − 1 brackets of sampled prefixes (the N-th is the last target)."""
        return self.task.batch(step_rng(seed, 0, stream=2), n).tokens[:, 1:] - 1

    def example_word(self, seed: int) -> np.ndarray:
        from probes.dyck import PROBE_INPUT

        return self.lang.encode(PROBE_INPUT) if self.lang.k == 2 else self.lang.sample(1, 16, seed=seed)[0]

    def display_tokens(self, model, word: Sequence[int]) -> list[str]:
        return ["BOS", *(self.lang.bracket_names[b] for b in word)]

    def inputs(self, model, words: np.ndarray, with_latents: bool = True) -> ModelInputs:
        words = np.atleast_2d(np.asarray(words, dtype=np.int64))
        tokens = np.concatenate([np.zeros((len(words), 1), dtype=np.int64), words + 1], axis=1)
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
            top = np.array([[self.lang.k if p == 0 else int(row[p - 1]) // 2
                             for p in self.lang.stack_top_positions(row)] for row in words])
            everywhere = np.ones(tokens.shape, dtype=bool)
            out.latents = {"depth": (depth, everywhere), "stack-top type": (top, everywhere)}
        return out

    def references(self, word: Sequence[int]) -> dict[str, np.ndarray]:
        T = len(word)
        # With BOS as the only prefix token, token positions are canonical keys already.
        return {"stack top": target_reference(self.lang.stack_top_positions(word))[1:], "uniform": _canonical_uniform(T),
                "previous token": _canonical_lookback(T, 1), "BOS": _canonical_prefix(T)}


class AutomatonComparison(_AfterBos):
    """Predict q_t at every position of a catalogue automaton's words (thesis §3.4.2)."""

    kind = "automaton"
    prefix_label, scored_positions = "prefix", "every position"

    def __init__(self, automaton: Semiautomaton, length: int = 16) -> None:
        self.automaton, self.length = automaton, int(length)
        self.task = AutomatonTask(automaton, length)
        a = automaton
        self.is_grid = a.states == tuple(str(q) for q in range(a.n_states)) and a.name.startswith("grid")
        self.resets = [s for s in range(a.n_symbols) if len(set(a.delta[s].tolist())) == 1]
        self.latent_names = ("state", *(("distance to the last boundary",) if self.is_grid else ()))
        # Look-backs by powers of two: the prefix scan's heads (Theorem 10) look back 2^j.
        self.lookbacks = [2 ** j for j in range(1, max(1, (self.length - 1).bit_length()))]
        self.reference_names = ("uniform", "previous token", *(f"look-back {k}" for k in self.lookbacks), "prefix",
                                *(("last boundary",) if self.is_grid else ()), *(("last reset",) if self.resets else ()))

    @property
    def title(self) -> str:
        return f"{self.automaton.name}, state at every position (T = {self.length})"

    def train_defaults(self) -> dict[str, Any]:
        return {"steps": 3000, "lr": 1e-3, "target_accuracy": 0.99}

    def constructions(self, names: Sequence[str] | None, seed: int) -> dict[str, Any]:
        from constructions import build

        out = {}
        for name in names or AUTOMATON_CONSTRUCTIONS:
            try:
                out[name] = build(name, self.automaton, self.length).to_hooked()
            except ConstructionError:
                if names:  # asked for by name: say why not
                    raise
        if not out:
            raise ConstructionError(f"no construction accepts {self.automaton.name}")
        return out

    def words(self, n: int, seed: int) -> np.ndarray:
        return step_rng(seed, 0, stream=2).integers(self.automaton.n_symbols, size=(n, self.length))

    def example_word(self, seed: int) -> np.ndarray:
        return self.words(1, seed + 1)[0][: min(self.length, 16)]

    def display_tokens(self, model, word: Sequence[int]) -> list[str]:
        from interp.viz import model_tokens

        return model_tokens(model, word)[1]

    def inputs(self, model, words: np.ndarray, with_latents: bool = True) -> ModelInputs:
        io = model.card.io
        words = np.atleast_2d(np.asarray(words, dtype=np.int64))
        P = len(io.prefix)
        tokens = np.concatenate([np.broadcast_to(np.asarray(io.prefix, dtype=np.int64), (len(words), P)),
                                 np.asarray(io.symbol_tokens, dtype=np.int64)[words]], axis=1)
        states = self.automaton.run(words)
        targets = np.zeros_like(tokens)
        targets[:, P:] = states
        mask = np.zeros(tokens.shape, dtype=bool)
        mask[:, P:] = True
        out = ModelInputs(tokens, targets, mask, mask, prefix=P)
        if with_latents:
            out.latents = {"state": (targets, mask)}
            if self.is_grid:
                last = np.array([last_boundary_positions(np.concatenate([[self.automaton.initial], row]),
                                                         self.automaton.n_states)[1:] for row in states])
                distance = np.zeros_like(tokens)
                distance[:, P:] = np.minimum(np.arange(1, words.shape[1] + 1) - last, BOUNDARY_DISTANCE_CAP)
                out.latents["distance to the last boundary"] = (distance, mask)
        return out

    def references(self, word: Sequence[int]) -> dict[str, np.ndarray]:
        word = np.asarray(word, dtype=np.int64)
        T = len(word)
        refs = {"uniform": _canonical_uniform(T), "previous token": _canonical_lookback(T, 1),
                **{f"look-back {k}": _canonical_lookback(T, k) for k in self.lookbacks}, "prefix": _canonical_prefix(T)}
        if self.is_grid:
            states = np.concatenate([[self.automaton.initial], self.automaton.run(word[None])[0]])
            refs["last boundary"] = target_reference(last_boundary_positions(states, self.automaton.n_states))[1:]
        if self.resets:
            is_reset = np.isin(word, self.resets)
            last = np.maximum.accumulate(np.where(is_reset, np.arange(1, T + 1), 0))
            refs["last reset"] = target_reference(np.concatenate([[0], last]))[1:]
        return refs


def _keys(sources: np.ndarray) -> np.ndarray:
    """Canonical one-hot rows for a word without prefix: query t → key 1 + sources[t]."""
    return target_reference(np.concatenate([[0], np.asarray(sources) + 1]))[1:]


class FlipflopComparison:
    """The flip-flop language FFL(p) (thesis §3.5): at every ``r``, predict the bit of the latest ``w``.

    Words are the model's tokens (w=0, r=1, i=2, "0"=3, "1"=4; no BOS): the first T − 1 symbols
    of an FFL(p) string of length T, which ends in ``r`` — the last read's answer follows from the
    word. Scored positions are the reads, as in training (the thesis's deterministic mode).
    """

    kind = "flipflop"
    prefix_label, scored_positions = "(no BOS)", "reads"
    latent_names = ("last written bit", "after w")
    reference_names = ("latest write", "latest w", "all writes", "previous token", "itself", "uniform")

    def __init__(self, task: FlipflopTask) -> None:
        self.task, self.length = task, task.length

    @property
    def title(self) -> str:
        return f"flip-flop language {self.task.name}, the bit after every r"

    def train_defaults(self) -> dict[str, Any]:
        return {"steps": 3000, "lr": 1e-3, "target_accuracy": 0.999}

    def constructions(self, names: Sequence[str] | None, seed: int) -> dict[str, Any]:
        from constructions.flipflop import build_ffl

        unknown = [n for n in (names or []) if n != "ffl"]
        if unknown:
            raise ConstructionError(f"the flip-flop language has one construction, ffl; unknown: {', '.join(unknown)}")
        return {"ffl": build_ffl(self.task, max(64, self.task.n_ctx)).to_hooked()}

    def words(self, n: int, seed: int) -> np.ndarray:
        return self.task.batch(step_rng(seed, 0, stream=2), n).tokens

    def train_words(self, step: int, seed: int) -> np.ndarray:
        """Fresh words for a mask-learning step (another stream than :meth:`words`)."""
        return self.task.batch(step_rng(seed + 1000, step, stream=3), 32).tokens

    def example_word(self, seed: int) -> np.ndarray:
        """A short string (≤ 19 tokens of FFL(0.4)) that writes both bits and reads at least three times."""
        short = FlipflopTask(0.4, min(20, self.length))
        for attempt in range(1000):
            word = short.batch(step_rng(seed, attempt, stream=4), 1).tokens[0]
            bits = word[1:][word[:-1] == 0]
            if len(set(bits.tolist())) == 2 and (word == 1).sum() >= 3:
                return word
        return word

    def display_tokens(self, model, word: Sequence[int]) -> list[str]:
        return [FlipflopTask.VOCAB[t] for t in word]

    def inputs(self, model, words: np.ndarray, with_latents: bool = True) -> ModelInputs:
        from interp.verify.ffl import read_targets

        tokens = np.atleast_2d(np.asarray(words, dtype=np.int64))
        written, reads = read_targets(tokens)
        out = ModelInputs(tokens, np.maximum(written, 0), reads, reads, prefix=0)
        if with_latents:
            after_w = np.zeros_like(tokens)
            after_w[:, 1:] = tokens[:, :-1] == 0
            # Not probed on a w itself: a write is under way there, and Prop. 3's layer 2 attends to
            # the (flagged) w rather than carry the old bit through it — only reads need the bit.
            out.latents = {"last written bit": (np.maximum(written - 3, 0), (written >= 0) & (tokens != 0)),
                           "after w": (after_w, np.ones(tokens.shape, dtype=bool))}
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
        return {"latest write": _keys(np.where(latest >= 0, latest, t)), "latest w": _keys(np.where(latest_w >= 0, latest_w, t)),
                "all writes": dense, "previous token": _keys(np.maximum(t - 1, 0)), "itself": _keys(t),
                "uniform": np.concatenate([np.zeros((T, 1)), uniform], axis=1)}


def comparison_for(task: str, *, dyck: tuple[int, int] = (2, 4), length: int | None = None,
                   ffl: float = 0.8) -> DyckComparison | AutomatonComparison | FlipflopComparison:
    """The adapter for ``interp compare TASK``: ``dyck``, ``ffl`` (FFL(``ffl``)) or a catalogue automaton's name."""
    from interp.tasks.catalogue import get_automaton

    if task == "dyck":
        return DyckComparison(Dyck(*dyck), length or 28)
    if task == "ffl":
        return FlipflopComparison(FlipflopTask(ffl, length or 64))
    return AutomatonComparison(get_automaton(task), length or 16)
