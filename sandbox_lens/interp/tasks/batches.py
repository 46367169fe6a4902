"""Training tasks: token batches, targets and the accuracy each task is judged by.

* :class:`AutomatonTask` — thesis §3.4.2: predict q_t at every position of BOS + σ_1..σ_T
  (token 1 + σ, as the constructions read them), freshly sampled words, token-level accuracy.
* :class:`DyckTask` — next-token language modelling of Dyck_{k,D} prefixes (loss at every
  position); accuracy is the thesis's: the bracket at positions whose target is a closing bracket.
* :class:`FFLTask` — flip-flop language modelling FFL(T, p) (flipflop.md §1): sequences of
  (instruction, data) pairs over {w, r, i, 0, 1}; loss and accuracy at the reads (the token after r).

The variants the later experiments train — copying, a stack's top, a scratchpad — are in
:mod:`sandbox_lens.interp.tasks.variants`.

A batch at training step s is a pure function of (seed, s), so an interrupted run resumes on
exactly the batches it would have seen.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sandbox_lens.interp.errors import AutomatonError
from sandbox_lens.interp.streams import Stream, rng
from sandbox_lens.interp.tasks import ffl
from sandbox_lens.interp.tasks.automata import Semiautomaton
from sandbox_lens.interp.tasks.dyck import Dyck

__all__ = [
    "Batch",
    "TokenLayout",
    "AutomatonTask",
    "SUPERVISION",
    "DyckTask",
    "FFLTask",
    "step_rng",
]


@dataclass
class Batch:
    """One training or evaluation batch: input tokens, target classes, and the masks of the positions that enter the
    loss and the accuracy."""

    tokens: np.ndarray  # [B, n] input token ids
    targets: np.ndarray  # [B, n] target class per position
    loss_mask: np.ndarray  # [B, n] positions that enter the loss
    score_mask: np.ndarray  # [B, n] positions the accuracy is measured on


@dataclass(frozen=True)
class TokenLayout:
    """How a training task's inputs are tokens: ``prefix`` (e.g. BOS), the token of each input symbol,
    the names of the input tokens and of the outputs (a twin's card is made from it)."""

    prefix: tuple[int, ...]
    symbol_tokens: tuple[int, ...]
    input_names: list[str]
    output_names: list[str]


#: what an automaton task's loss and accuracy read: the state after every symbol, or after the last one only
SUPERVISION = ("every", "final", "powers")


def step_rng(seed: int, step: int, stream: Stream = Stream.TRAIN_BATCHES) -> np.random.Generator:
    """The generator of ``stream`` (:class:`sandbox_lens.interp.streams.Stream`; default: the training batches) for
    run seed ``seed`` at training step ``step``."""
    return rng(seed, stream, step)


class AutomatonTask:
    """Simulating a semiautomaton: BOS + a word of ``length`` symbols, the state after every symbol as the target.

    Args:
        automaton: the semiautomaton (``get_automaton("S5")``).
        length: the word length trained on.
        supervision: ``"every"`` (default): the loss and the accuracy read the state after every symbol;
            ``"final"``: only the state after the last one (final-state supervision; the targets of the other
            positions are still in the batch, for analyses); ``"powers"``: the states after 1, 2, 4, … symbols and
            after the last (a mixture of 1-, 2-, 4-, …, T-fold compositions, each supervised on its final state).
        probs: the training words' symbol distribution, one probability per symbol (default uniform; where some
            inputs are illegal, the weights of the walk over the legal ones), e.g. the flip-flop automaton with
            p(⊥) = 0.9 as ``(0.05, 0.05, 0.9)``.
        observe: an observation of the state, one label per state (labels 0..m − 1, at least two used): the twin
            is trained on the label of the state, not the state (the thesis's indirect supervision, §3.4.5.2.1),
            e.g. C4's "is the count 0 mod 4" as ``(1, 0, 0, 0)``.
        periodic: ``(word, share)``: each training word is, with probability ``share``, ``word`` (symbol indices)
            repeated from its start, and otherwise drawn from the symbol law — the thesis's (abab)* laws are
            ``((0, 1), 1.0)`` and ``((0, 1), 0.5)`` on the ``abab`` automaton (Fig. 3.18)."""

    kind = "automaton"

    def __init__(
        self,
        automaton: Semiautomaton,
        length: int,
        supervision: str = "every",
        probs: Sequence[float] | None = None,
        observe: Sequence[int] | None = None,
        periodic: tuple[Sequence[int], float] | None = None,
    ) -> None:
        if length < 1:
            raise AutomatonError("the training length must be ≥ 1")
        if supervision not in SUPERVISION:
            raise AutomatonError(f"supervision must be one of {', '.join(SUPERVISION)}, got {supervision!r}")
        if probs is not None:
            p = np.asarray(probs, dtype=np.float64)
            if p.shape != (automaton.n_symbols,) or not np.isfinite(p).all() or (p < 0).any():
                raise AutomatonError(
                    f"the symbol distribution needs {automaton.n_symbols} non-negative numbers (one per symbol of "
                    f"{automaton.name}), got {list(probs)}"
                )
            if not np.isclose(p.sum(), 1.0, atol=1e-6):
                raise AutomatonError(f"the symbol distribution must sum to 1, got {p.sum():g}")
            probs = tuple(float(x) for x in p)
        self.automaton, self.length, self.supervision = automaton, int(length), supervision
        self.probs: tuple[float, ...] | None = probs
        self.observe: tuple[int, ...] | None = None if observe is None else check_observation(observe, automaton)
        self.periodic = None if periodic is None else check_periodic(periodic, automaton, self.length)

    @property
    def name(self) -> str:
        final = {"every": "", "final": ", final state only", "powers": ", states after 1, 2, 4, … symbols"}[
            self.supervision
        ]
        law = "" if self.probs is None else ", Pr[σ] = " + "/".join(f"{p:g}" for p in self.probs)
        seen = "" if self.observe is None else ", observed as " + "".join(str(x) for x in self.observe)
        if self.periodic is not None:
            word = "".join(self.automaton.alphabet[i] for i in self.periodic[0])
            law += f", ({word})* with probability {self.periodic[1]:g}"
        return f"{self.automaton.name} (T={self.length}{final}{law}{seen})"

    d_vocab = property(lambda self: self.automaton.n_symbols + 1)
    d_vocab_out = property(lambda self: self.automaton.n_states if self.observe is None else max(self.observe) + 1)
    n_ctx = property(lambda self: self.length + 1)

    def batch(self, rng: np.random.Generator, size: int) -> Batch:
        # legal words only where some inputs are illegal
        words = self.automaton.sample(size, self.length, rng, self.probs)
        if self.periodic is not None:  # drawn after the words: the symbol law's words are those without the option
            pattern, p = self.periodic
            chosen = rng.random(size) < p
            words[chosen] = np.resize(np.asarray(pattern, dtype=np.int64), self.length)
        states = self.automaton.run(words)
        if self.observe is not None:  # the label of each state, not the state
            states = np.asarray(self.observe, dtype=np.int64)[states]
        tokens = np.concatenate([np.zeros((size, 1), dtype=np.int64), words + 1], axis=1)
        targets = np.concatenate([np.zeros((size, 1), dtype=np.int64), states], axis=1)
        mask = np.ones_like(tokens, dtype=bool)
        mask[:, 0] = False
        if self.supervision != "every":
            mask[:, :-1] = False
        if self.supervision == "powers":  # position t holds the state after t symbols (BOS at 0)
            mask[:, supervised_powers(self.length)] = True
        return Batch(tokens, targets, mask, mask)

    def to_dict(self) -> dict[str, Any]:
        d = {"kind": self.kind, "automaton": self.automaton.to_dict(), "length": self.length}
        if self.supervision != "every":  # the default is not written: older cards and run hashes keep their bits
            d["supervision"] = self.supervision
        if self.probs is not None:  # likewise the uniform law
            d["probs"] = list(self.probs)
        if self.observe is not None:  # and the state itself
            d["observe"] = list(self.observe)
        if self.periodic is not None:  # and words from the symbol law alone
            d["periodic"] = {"word": list(self.periodic[0]), "share": self.periodic[1]}
        return d

    def token_layout(self) -> TokenLayout:
        outputs = list(self.automaton.states) if self.observe is None else [str(i) for i in range(self.d_vocab_out)]
        return TokenLayout(
            (0,), tuple(range(1, self.automaton.n_symbols + 1)), ["BOS", *self.automaton.alphabet], outputs
        )


def supervised_powers(length: int) -> list[int]:
    """The positions ``"powers"`` supervision reads in a word of ``length`` symbols: 1, 2, 4, … and ``length``."""
    out = [1 << i for i in range(length.bit_length()) if 1 << i <= length]
    return sorted({*out, length})


def check_observation(observe: Sequence[int], automaton: Semiautomaton) -> tuple[int, ...]:
    """An observation map of ``automaton``'s states, checked: one integer label per state, labels 0..m − 1 with
    every one used and m ≥ 2 (a one-label observation says nothing)."""
    labels = tuple(observe)
    if len(labels) != automaton.n_states or not all(isinstance(x, (int, np.integer)) and x >= 0 for x in labels):
        raise AutomatonError(
            f"an observation of {automaton.name} needs one label (0, 1, …) for each of its {automaton.n_states} "
            f"states, got {list(observe)}"
        )
    if sorted(set(labels)) != list(range(max(labels) + 1)) or max(labels) < 1:
        raise AutomatonError(
            f"an observation's labels must be 0..m − 1, each used, with at least two of them; got {list(labels)}"
        )
    return tuple(int(x) for x in labels)


def check_periodic(periodic: Any, automaton: Semiautomaton, length: int) -> tuple[tuple[int, ...], float]:
    """``(word, share)`` checked: a non-empty word of the alphabet's symbol indices (legal throughout, repeated to
    ``length``, where some inputs are illegal) and a share in (0, 1] (one-line errors)."""
    try:
        pattern, share = periodic
        word = tuple(int(x) for x in pattern)
        p = float(share)
    except (TypeError, ValueError):
        raise AutomatonError(f"a periodic word law is (word, share), got {periodic!r}") from None
    if not word or any(not 0 <= x < automaton.n_symbols for x in word):
        raise AutomatonError(
            f"the periodic word needs one or more symbols of {automaton.name}'s alphabet "
            f"({', '.join(automaton.alphabet)}), got {list(word)}"
        )
    if not (np.isfinite(p) and 0 < p <= 1):
        raise AutomatonError(f"the periodic word's share must be in (0, 1], got {share!r}")
    if automaton.feasible is not None:
        q = automaton.initial
        for t, x in enumerate(np.resize(np.asarray(word), length)):
            if not automaton.feasible[x, q]:
                raise AutomatonError(f"the periodic word, repeated, reads an illegal symbol of {automaton.name} at {t}")
            q = int(automaton.delta[x, q])
    return word, p


def observed(task: Mapping[str, Any]) -> tuple[int, ...] | None:
    """The observation map of a task's description (``task.to_dict()``), or None where the twin predicts states."""
    obs = task.get("observe")
    return None if obs is None else tuple(int(x) for x in obs)


class DyckTask:
    """Next-token prediction of bounded Dyck prefixes of up to ``length`` brackets (thesis §3.6).

    Args:
        lang: the language (``Dyck(2, 4)``).
        length: the longest prefix, in brackets."""

    kind = "dyck"

    def __init__(self, lang: Dyck, length: int = 28) -> None:
        if length < 2:
            raise AutomatonError("Dyck training needs length ≥ 2")
        self.lang, self.length = lang, int(length)

    @property
    def name(self) -> str:
        return f"{self.lang.name} next-token (N={self.length})"

    d_vocab = property(lambda self: self.lang.n_brackets + 1)
    d_vocab_out = property(lambda self: self.lang.n_brackets)
    n_ctx = property(lambda self: self.length)

    def batch(self, rng: np.random.Generator, size: int) -> Batch:
        words = self.lang.sample(size, self.length, seed=int(rng.integers(2**63)))
        tokens = np.concatenate([np.zeros((size, 1), dtype=np.int64), words[:, :-1] + 1], axis=1)
        targets = words
        return Batch(tokens, targets, np.ones_like(tokens, dtype=bool), targets % 2 == 1)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "k": self.lang.k, "D": self.lang.D, "q": self.lang.q, "length": self.length}

    def token_layout(self) -> TokenLayout:
        names = self.lang.bracket_names
        return TokenLayout((0,), tuple(range(1, self.lang.n_brackets + 1)), ["BOS", *names], list(names))

    @property
    def contrastive_room(self) -> int:
        """Positions the balance regulariser (eq. 3.40) puts before an input: up to D matched pairs."""
        return 2 * self.lang.D


class FFLTask:
    """Language modelling of FFL(T, p) (:mod:`sandbox_lens.interp.tasks.ffl`); loss and accuracy at the reads.

    Args:
        p: the probability of an ignore instruction; a list is a mixture of training distributions, each
            string drawing its p uniformly from it (the thesis's fix for glitches: FFL(0.9), FFL(0.98) and
            FFL(0.1) mixed).
        length: the string length.
    """

    kind = "ffl"
    VOCAB = ffl.VOCAB

    def __init__(self, p: float | Sequence[float] = 0.8, length: int = 64) -> None:
        if length < 4 or length % 2:
            raise AutomatonError(f"flip-flop sequences have an even length ≥ 4, got {length}")
        ps = [float(x) for x in p] if isinstance(p, (list, tuple)) else [float(p)]  # type: ignore[arg-type]
        if not ps:
            raise AutomatonError("a mixture of flip-flop distributions needs at least one p")
        self.ps = tuple(ffl.check_p(x) for x in ps)
        self.p: float | tuple[float, ...] = self.ps[0] if len(self.ps) == 1 else self.ps
        self.length = int(length)

    @property
    def name(self) -> str:
        return f"FFL({'|'.join(f'{x:g}' for x in self.ps)}) (T={self.length})"

    d_vocab = property(lambda self: len(ffl.VOCAB))
    d_vocab_out = property(lambda self: len(ffl.VOCAB))
    n_ctx = property(lambda self: self.length - 1)

    def sequences(self, rng: np.random.Generator, size: int) -> np.ndarray:
        if len(self.ps) == 1:
            return ffl.sample_strings(self.ps[0], size, self.length, rng)
        which = rng.integers(len(self.ps), size=size)
        out = np.empty((size, self.length), dtype=np.int64)
        for i, p in enumerate(self.ps):
            rows = np.flatnonzero(which == i)
            if len(rows):
                out[rows] = ffl.sample_strings(p, len(rows), self.length, rng)
        return out

    def batch(self, rng: np.random.Generator, size: int) -> Batch:
        seq = self.sequences(rng, size)
        tokens, targets = seq[:, :-1], seq[:, 1:]
        reads = tokens == ffl.R
        return Batch(tokens, targets, reads, reads)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "p": self.ps[0] if len(self.ps) == 1 else list(self.ps), "length": self.length}

    def token_layout(self) -> TokenLayout:
        return TokenLayout((), tuple(range(len(ffl.VOCAB))), list(ffl.VOCAB), list(ffl.VOCAB))
