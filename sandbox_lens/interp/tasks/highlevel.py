"""High-level causal models of each task kind, and what they predict under an interchange.

A high-level model names the task's **variables** at each word position p and how the scored
outputs depend on them; setting a variable at p to its value on a *source* word while running the
*base* word gives the counterfactual outputs an interchange intervention on a model site is scored
against (:mod:`sandbox_lens.interp.causal.interchange`). Only the outputs a model says the variable reaches are
scored, and only through the task's **readout** (the output classes the task compares: a Dyck
model's closing brackets, a flip-flop model's two bits).

* **automata** (:class:`StateModel`): the state ``S_p`` after reading position p, under two rival
  readings — ``parallel``: output p *is* S_p and no other output depends on it (a parallel count, a
  prefix scan's read-out); ``recurrent``: S_{t+1} = δ(S_t, σ_{t+1}), so setting S_p sets every later
  output too (the step-by-step update of an RNN).
* **Dyck** (:class:`DyckModel`, thesis §3.6, Theorem 1's proof): the ``depth`` d_p and the stack;
  the closing bracket allowed after position p closes ``stack_p[d_p]`` — the open bracket at the
  current depth. Setting ``depth`` to the source's d makes the output close the base's stack
  element at depth d (scored where 1 ≤ d ≤ the base's depth); setting ``top`` (the element at the
  current depth itself) makes it close the source's top.
* **flip-flop** (:class:`FFLModel`, §3.5): ``bit``, the latest written bit at p; a read at p
  repeats it. Pairs keep the reads where they are (the source is the base with every other
  instruction and bit redrawn), so the variable is compared read for read. Whether a write has been
  seen is no variable here: every string of FFL starts with one.

Each model draws its own word pairs (:meth:`HighLevel.pairs`) from the task's distribution.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from sandbox_lens.interp.errors import SandboxError
from sandbox_lens.interp.tasks.cascade import parse_cascade_json
from sandbox_lens.interp.tasks.ffl import ONE, ZERO, W, corrupt_ffl, read_targets, sample_ffl
from sandbox_lens.interp.tasks.kinds import resolve, task_kind
from sandbox_lens.interp.tasks.statevars import state_variables

__all__ = [
    "HighLevel",
    "StateModel",
    "DyckModel",
    "FFLModel",
    "MODES",
    "HighLevelError",
    "dyck_stacks",
    "high_level_of",
]

#: the rival readings of an automaton's state
MODES = ("parallel", "recurrent")


class HighLevelError(SandboxError, ValueError):
    """A variable, position or mode the high-level model does not have."""


class HighLevel:
    """A task's high-level causal model (see the module docstring); subclasses set :attr:`variables`,
    :attr:`modes` and the three methods."""

    #: the variables, the first the default
    variables: ClassVar[tuple[str, ...]] = ()
    #: the rival readings this kind has (the first the default)
    modes: ClassVar[tuple[str, ...]] = ("parallel",)
    #: what the kind is called in messages
    title: ClassVar[str] = ""
    #: the variables the outputs read out directly (a full swap after the last attention layer sets them
    #: trivially: :mod:`sandbox_lens.interp.causal.verdict`)
    read_out: ClassVar[tuple[str, ...]] = ()

    def __init__(self, mode: str = "parallel") -> None:
        if mode not in self.modes:
            raise HighLevelError(
                f"unknown high-level model {mode!r} for {self.title} (choose from {', '.join(self.modes)})"
            )
        self.mode = mode

    @classmethod
    def of_task(cls, task: Mapping[str, Any], mode: str = "parallel") -> HighLevel:
        """The model of a card's task dict."""
        raise NotImplementedError

    @classmethod
    def of_card(cls, card: Any, mode: str = "parallel") -> HighLevel:
        """The model of a model's card (its task; a kind may read more of the card)."""
        return cls.of_task(card.task, mode)

    #: output classes the task compares (the argmax is taken among them); None: every output
    readout: Sequence[int] | None = None

    def readout_labels(self, labels: np.ndarray) -> np.ndarray:
        """``labels`` (output classes) as indices among the :attr:`readout` classes (unchanged without a readout;
        a class outside the readout maps to 0 — such outputs are never scored)."""
        if self.readout is None:
            return labels
        index = np.zeros(max(self.readout) + 2, dtype=np.int64)
        index[list(self.readout)] = np.arange(len(self.readout))
        return index[np.clip(labels, 0, len(index) - 1)]

    def variable(self, name: str | None) -> str:
        """``name`` checked (None: the default variable)."""
        if name is None:
            return self.variables[0]
        if name not in self.variables:
            raise HighLevelError(
                f"the {self.title} high-level model has no variable {name!r} (it has: {', '.join(self.variables)})"
            )
        return name

    def pairs(self, n: int, length: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """``n`` (base, source) word pairs of ``length`` symbols from the task's distribution."""
        raise NotImplementedError

    def answers(self, words: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(labels, scored) ``[n, T]``: the task's answer after each position, and which positions it scores."""
        raise NotImplementedError

    def counterfactual(
        self, base: np.ndarray, source: np.ndarray, position: int, variable: str | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """(labels, scored): the outputs of ``base`` words with ``variable`` at ``position`` set to its value
        on ``source`` words, and which outputs the variable reaches in this model."""
        raise NotImplementedError

    def values(self, words: np.ndarray, variable: str | None = None) -> tuple[np.ndarray, np.ndarray, int]:
        """(values ``[n, T]`` as class indices, where they are defined, the number of classes): the variable
        itself after each position (what a probe for it is trained on)."""
        raise NotImplementedError

    def _check_position(self, base: np.ndarray, position: int) -> None:
        if not 0 <= position < base.shape[1]:
            raise HighLevelError(f"position {position} is outside words of length {base.shape[1]}")


def _not_observed(task: Mapping[str, Any]) -> None:
    """Refuse a twin trained on an observation of the state: the high-level models' outputs are the states."""
    if task.get("observe") is not None:
        raise HighLevelError(
            "this twin was trained on an observation of the state (--observe "
            f"{','.join(str(x) for x in task['observe'])}), not the state that the high-level models output"
        )


class StateModel(HighLevel):
    """An automaton's state at one position, under a ``parallel`` or ``recurrent`` reading, and the variables the
    constructions compute on the way where the automaton has them (:mod:`sandbox_lens.interp.tasks.statevars`: a cascade's
    levels, the prefix scan's window maps, a gridworld's displacement and last boundary)."""

    variables = read_out = ("state",)
    modes = MODES
    title = "automaton"

    def __init__(self, automaton: Any, mode: str = "parallel", cascade: Any = None) -> None:

        super().__init__(mode)
        self.automaton = automaton
        self.families = state_variables(automaton, cascade)
        self.variables = ("state",) + tuple(v for f in self.families for v in f.default)

    @classmethod
    def of_task(cls, task: Mapping[str, Any], mode: str = "parallel") -> StateModel:

        _not_observed(task)
        return cls(task_kind(task).source(task), mode)

    @classmethod
    def of_card(cls, card: Any, mode: str = "parallel") -> StateModel:
        """A ``krohn_rhodes`` model built from a cascade names its levels by that cascade."""

        _not_observed(card.task)
        cascade = (card.options or {}).get("cascade")
        cascade = parse_cascade_json(json.dumps(cascade), "the card's cascade") if cascade else None
        return cls(task_kind(card.task).source(card.task), mode, cascade)

    def variable(self, name: str | None) -> str:
        if name is None or name in self.variables or self._family(name) is not None:
            return self.variables[0] if name is None else name
        more = sorted({v for f in self.families for v in getattr(f, "names", ())} - set(self.variables))
        more += ["window<l> (l ≥ 1)"] if any(hasattr(f, "accepts") for f in self.families) else []
        raise HighLevelError(
            f"the {self.title} high-level model of {self.automaton.name} has no variable {name!r} "
            f"(it has: {', '.join(self.variables + tuple(more))})"
        )

    def _family(self, name: str) -> Any:
        for f in self.families:
            if name in getattr(f, "names", ()) or (hasattr(f, "accepts") and f.accepts(name)):
                return f
        return None

    def pairs(self, n: int, length: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """Independent words: uniform symbols, or legal ones where the automaton has illegal inputs (the Dyck stack)."""
        a = self.automaton
        if getattr(a, "feasible", None) is not None:
            return a.sample(n, length, rng), a.sample(n, length, rng)
        k = len(a.alphabet)
        return rng.integers(k, size=(n, length)), rng.integers(k, size=(n, length))

    def answers(self, words: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self.automaton.run(words), np.ones(words.shape, dtype=bool)

    def values(self, words: np.ndarray, variable: str | None = None) -> tuple[np.ndarray, np.ndarray, int]:
        name = self.variable(variable)
        if name != "state":
            return self._family(name).values(words, name)
        return self.automaton.run(words), np.ones(words.shape, dtype=bool), self.automaton.n_states

    def counterfactual(
        self, base: np.ndarray, source: np.ndarray, position: int, variable: str | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        name = self.variable(variable)
        self._check_position(base, position)
        if name != "state":
            return self._family(name).counterfactual(base, source, position, name, self.mode)
        n, T = base.shape
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


def dyck_stacks(words: np.ndarray, D: int) -> tuple[np.ndarray, np.ndarray]:
    """(depth ``[n, T]``, stack ``[n, T, D]``) after each bracket of legal Dyck prefixes (bracket 2i opens
    type i, 2i + 1 closes it): ``stack[:, t, d − 1]`` is the type open at depth d (−1 above the depth)."""
    words = np.asarray(words, dtype=np.int64)
    n, T = words.shape
    depth = np.zeros((n, T), dtype=np.int64)
    stack = np.full((n, T, max(D, 1)), -1, dtype=np.int64)
    cur = np.full((n, max(D, 1)), -1, dtype=np.int64)
    d = np.zeros(n, dtype=np.int64)
    rows = np.arange(n)
    for t in range(T):
        opens = words[:, t] % 2 == 0
        if np.any(opens & (d >= D)) or np.any(~opens & (d <= 0)):
            raise HighLevelError("not a legal Dyck prefix (too deep, or a close with nothing open)")
        cur[rows[opens], d[opens]] = words[opens, t] // 2
        d = d + np.where(opens, 1, -1)
        cur[rows[~opens], d[~opens]] = -1
        depth[:, t], stack[:, t] = d, cur
    return depth, stack


class DyckModel(HighLevel):
    """Bounded Dyck: the depth, and the open bracket at that depth (see the module docstring).

    ``depth`` is scored only after a *closing* bracket at p. The bracket at p is a key of its own
    attention: an open bracket given another depth becomes itself "the latest open bracket at that
    depth" for a stack-like head, and a second open bracket at one level for a cancelling (uniform)
    one, so the constructions' variants — all exact on real words — disagree there and the
    high-level model does not decide between them. A closing bracket's key is never attended to as
    an open one, so all variants agree. Changed outputs need a depth bound D ≥ 4 (depths at one
    position share their parity)."""

    variables = ("top", "depth")
    read_out = ("top",)
    title = "Dyck"

    def __init__(self, lang: Any, mode: str = "parallel") -> None:
        super().__init__(mode)
        self.lang = lang
        self.readout = tuple(range(1, 2 * lang.k, 2))  # the closing brackets

    @classmethod
    def of_task(cls, task: Mapping[str, Any], mode: str = "parallel") -> DyckModel:

        return cls(task_kind(task).source(task), mode)

    def pairs(self, n: int, length: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """Independent prefixes, half of them (where there are enough) chosen among 8n candidates for having an
        output that a ``depth`` interchange changes: at random, such pairs are rare (a close to depth d with a
        source at a depth of the same parity below it) and ``depth`` would be scored on a handful of outputs."""
        m = 8 * n
        base = self.lang.sample(m, length, seed=int(rng.integers(2**63)))
        source = self.lang.sample(m, length, seed=int(rng.integers(2**63)))
        depth, stack = dyck_stacks(base, self.lang.D)
        s_depth, _ = dyck_stacks(source, self.lang.D)
        d = s_depth
        rows, cols = np.nonzero((d > 0) & (d <= depth) & (base % 2 == 1))
        changed = np.zeros(m, dtype=bool)
        top = np.take_along_axis(stack, np.maximum(depth - 1, 0)[..., None], axis=2)[..., 0]
        changed[rows[stack[rows, cols, d[rows, cols] - 1] != top[rows, cols]]] = True
        informative = np.flatnonzero(changed)[: n // 2]
        rest = np.setdiff1d(np.arange(m), informative)[: n - len(informative)]
        take = rng.permutation(np.concatenate([informative, rest]))
        return base[take], source[take]

    def answers(self, words: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        depth, stack = dyck_stacks(words, self.lang.D)
        top = np.take_along_axis(stack, np.maximum(depth - 1, 0)[..., None], axis=2)[..., 0]
        return 2 * np.maximum(top, 0) + 1, depth > 0

    def values(self, words: np.ndarray, variable: str | None = None) -> tuple[np.ndarray, np.ndarray, int]:
        variable = self.variable(variable)
        depth, stack = dyck_stacks(words, self.lang.D)
        if variable == "depth":
            return depth, np.ones(words.shape, dtype=bool), self.lang.D + 1
        top = np.take_along_axis(stack, np.maximum(depth - 1, 0)[..., None], axis=2)[..., 0]
        return np.maximum(top, 0), depth > 0, self.lang.k

    def counterfactual(
        self, base: np.ndarray, source: np.ndarray, position: int, variable: str | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        variable = self.variable(variable)
        self._check_position(base, position)
        labels, _ = self.answers(base)
        depth, stack = dyck_stacks(base, self.lang.D)
        s_depth, s_stack = dyck_stacks(source, self.lang.D)
        p = position
        if variable == "top":
            ok = (depth[:, p] > 0) & (s_depth[:, p] > 0)
            new = s_stack[np.arange(len(base)), p, np.maximum(s_depth[:, p] - 1, 0)]
        else:  # depth: the base's element at the source's depth, read after a closing bracket (see the class)
            d = s_depth[:, p]
            ok = (d > 0) & (d <= depth[:, p]) & (base[:, p] % 2 == 1)
            new = stack[np.arange(len(base)), p, np.maximum(d - 1, 0)]
        labels = labels.copy()
        labels[ok, p] = 2 * new[ok] + 1
        scored = np.zeros(base.shape, dtype=bool)
        scored[ok, p] = True
        return labels, scored


class FFLModel(HighLevel):
    """The flip-flop language: the latest written bit, repeated at every read (see the module docstring); the
    ``recurrent`` rival carries the bit forward position by position, so setting it at p sets every read up to
    the next write (an RNN's reading; a transformer that looks back to the latest write rejects it)."""

    variables = read_out = ("bit",)
    modes = MODES
    title = "flip-flop"

    def __init__(self, p: float | Sequence[float] = 0.8, mode: str = "parallel") -> None:

        super().__init__(mode)
        self.p = float(p[0]) if isinstance(p, (list, tuple)) else float(p)
        self.readout = (ZERO, ONE)

    @classmethod
    def of_task(cls, task: Mapping[str, Any], mode: str = "parallel") -> FFLModel:
        return cls(task.get("p", 0.8), mode)

    def pairs(self, n: int, length: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:

        base = sample_ffl(self.p, n, length, rng)
        return base, corrupt_ffl(base, "resample", rng)

    def answers(self, words: np.ndarray) -> tuple[np.ndarray, np.ndarray]:

        written, reads = read_targets(words)
        return written, reads & (written >= 0)

    def values(self, words: np.ndarray, variable: str | None = None) -> tuple[np.ndarray, np.ndarray, int]:

        self.variable(variable)
        written, _ = read_targets(words)
        return np.maximum(written - ZERO, 0), written >= 0, 2

    def counterfactual(
        self, base: np.ndarray, source: np.ndarray, position: int, variable: str | None = None
    ) -> tuple[np.ndarray, np.ndarray]:

        self.variable(variable)
        self._check_position(base, position)
        labels, reads = self.answers(base)
        s_written, s_reads = self.answers(source)
        labels, scored = labels.copy(), np.zeros(base.shape, dtype=bool)
        if self.mode == "parallel":
            ok = reads[:, position] & s_reads[:, position]
            labels[ok, position] = s_written[ok, position]
            scored[ok, position] = True
            return labels, scored
        # recurrent: the bit is carried forward, so every read up to the base's next write repeats the source's
        bit, carried = s_written[:, position], s_written[:, position] >= 0
        for t in range(position, base.shape[1]):
            if t > position:
                carried &= base[:, t - 1] != W
            labels[carried, t] = np.where(reads[carried, t], bit[carried], labels[carried, t])
            scored[:, t] = carried & reads[:, t]
        return labels, scored


def high_level_of(model: Any, mode: str = "parallel") -> HighLevel:
    """The high-level model of ``model``'s task (its kind's ``high_level``); refuses a model without a card, one
    without a residual stream (the LSTM) and a kind that has no high-level model, in one line."""
    card = getattr(model, "card", None)
    if card is None:
        raise HighLevelError("causal alignment needs a sandbox-lens model (one with a card saying its task)")
    if not hasattr(model, "run_with_hooks") or not hasattr(model, "blocks"):
        raise HighLevelError(
            "causal alignment intervenes on a transformer's residual stream; this model has none "
            f"({getattr(card, 'options', {}).get('arch', type(model).__name__)})"
        )
    kind = card.task_kind
    if kind.high_level is None:
        raise HighLevelError(f"{kind.name} tasks have no high-level causal model")

    return resolve(kind.high_level).of_card(card, mode)
