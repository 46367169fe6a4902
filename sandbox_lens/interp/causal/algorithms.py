"""The rival algorithms a twin may run, registered like task kinds: one record each.

Every correct algorithm gives the same answers, so an interchange on the final state predicts the same
outputs under all of them; they differ in their *intermediate* variables, where those sit and which later
outputs read them (notes: algorithms-and-methods.md, table (a)). A record says, for one algorithm:

* its **variables** in computation order — each a variable of the task's high-level model
  (:mod:`sandbox_lens.interp.tasks.highlevel`, :mod:`sandbox_lens.interp.tasks.groupvars`) with the reading
  under which its counterfactuals are computed, and its **edges**: which later outputs an intervention on it
  reaches, by offset t − p from its position p, each tested on its own;
* whether its variables sit in **one block** (``anchored``: the counter's symbol is what the residual holds
  before the counting attention, its state right after it);
* the **construction** that builds it exactly (its card names the sites; ``interp train --align`` imposes
  it), where the project has one;
* when a task **cannot** have it (:meth:`Algorithm.refusal`: a cascade on a non-solvable group, a sign on a
  group without an odd permutation), in one line.

:func:`sandbox_lens.interp.causal.identify.identify` tests the records against a model; nothing else in the
package names an algorithm.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sandbox_lens.interp.errors import ConstructionError, SandboxError
from sandbox_lens.interp.tasks.groupvars import NOT_A_GROUP, permutation_group, sign_refusal
from sandbox_lens.interp.tasks.statevars import MAX_WINDOW_VALUES, GridVariables, state_variables, window_maps

__all__ = ["Edge", "Variable", "Algorithm", "ALGORITHMS", "algorithms_for", "resolve", "AlgorithmError"]


class AlgorithmError(SandboxError, ValueError):
    """A candidate algorithm that is unknown or that the model's task cannot have."""


@dataclass(frozen=True)
class Edge:
    """One edge of the algorithm's graph out of a variable at position p, as the outputs t it reaches through it:
    ``lo ≤ t − p ≤ hi`` (``hi`` None: every later position). ``child``: the variable it feeds at t, where the
    proof's graph has one path from the variable at p to each output that variable at t reaches, and only
    through it — the edge is then also tested by a path interchange (:mod:`sandbox_lens.interp.causal.paths`)."""

    title: str
    lo: int
    hi: int | None
    child: str | None = None

    def covers(self, offset: int) -> bool:
        """Whether an output at ``offset`` = t − p is reached through this edge."""
        return offset >= self.lo and (self.hi is None or offset <= self.hi)


@dataclass(frozen=True)
class Variable:
    """A variable of the algorithm: the high-level model's ``name`` read in ``mode``, its edges, and (for an
    anchored algorithm) where in the anchoring block it sits: ``"before"`` (the block's input) or ``"after"``
    (its attention's or MLP's output). ``determined``: the edges into it (exact offsets, from this algorithm's
    variables) are all its inputs, so setting them all from one source sets it to the source's value — tested by
    a joint interchange (:mod:`sandbox_lens.interp.causal.paths`)."""

    name: str
    mode: str = "parallel"
    edges: tuple[Edge, ...] = ()
    place: str = ""
    determined: bool = False

    @property
    def key(self) -> str:
        """The variable as results name it (the reading added where it is not the parallel one)."""
        return self.name if self.mode == "parallel" else f"{self.name} ({self.mode})"


@dataclass(frozen=True)
class Algorithm:
    """One registered algorithm (see the module docstring). ``variables(source, T)`` lists its variables for
    the task's source (an automaton, a Dyck language) at length T; ``refuse(source, T)`` says why the task
    cannot have it (None: it can)."""

    name: str
    title: str
    kind: str
    summary: str
    reference: str
    variables: Callable[[Any, int], tuple[Variable, ...]]
    refuse: Callable[[Any, int], str | None] = field(default=lambda source, T: None)
    construction: str | None = None
    anchored: bool = False

    def refusal(self, source: Any, T: int) -> str | None:
        """One line saying why a task with ``source`` at length ``T`` cannot have this algorithm; None if it can."""
        return self.refuse(source, T)


def _levels(T: int) -> int:
    """The prefix scan's levels at length T: ⌈log₂ T⌉ (at least 1)."""
    return max(1, math.ceil(math.log2(T))) if T > 1 else 1


def _windows(T: int) -> tuple[Variable, ...]:
    """The scan's window maps of levels 1 … L − 1: window l at p is read at p (level l + 1's own position) and
    at p + 2^l (its look-back)."""
    L = _levels(T)

    def up(l: int) -> str:
        return "state" if l + 1 == L else f"window{l + 1}"

    return tuple(
        Variable(
            f"window{l}",
            edges=(
                Edge(f"window{l} → {up(l)} at the same position", 0, 0, child=up(l)),
                Edge(f"window{l} → {up(l)} {2**l} positions later", 2**l, 2**l, child=up(l)),
            ),
            determined=l > 1,
        )
        for l in range(1, L)
    )


def _group(automaton: Any) -> tuple[Any, str | None]:
    """(the solvable plan of ``automaton``'s group, or None with the reason there is none)."""

    try:
        plan = permutation_group(automaton)
    except ConstructionError as e:
        return None, str(e).split(":")[0] + " (not a solvable group)"
    if plan is None:
        return None, NOT_A_GROUP.format(name=automaton.name)
    return plan, None


def _refuse_scan(automaton: Any, T: int) -> str | None:

    if window_maps(automaton) is None:
        return f"{automaton.name}'s window maps take more than {MAX_WINDOW_VALUES} values (its symbols' monoid)"
    if _levels(T) < 2:
        return f"at length {T} the scan has no intermediate window (it needs T ≥ 3)"
    return None


def _refuse_counter(automaton: Any, T: int) -> str | None:
    plan, why = _group(automaton)
    if plan is None:
        return why
    if plan.derived_length > 1:
        return f"{automaton.name}'s group is not abelian: no count of the symbols gives its state (cascade does)"
    return None


def _refuse_cascade(automaton: Any, T: int) -> str | None:
    plan, why = _group(automaton)
    if plan is None:
        return why
    if plan.derived_length < 2:
        return f"{automaton.name}'s group is abelian: its cascade is one level, the counter (use counter)"
    return None


def _refuse_parity(automaton: Any, T: int) -> str | None:

    why = sign_refusal(automaton)
    if why is not None:
        return why
    if automaton.n_states <= 2:
        return f"{automaton.name}'s sign is its state: parity first is the whole task"
    return _refuse_scan(automaton, T)


def _refuse_boundary(automaton: Any, T: int) -> str | None:

    if not any(isinstance(f, GridVariables) for f in state_variables(automaton)):
        return f"{automaton.name} is not a 1-D gridworld with a wall to detect"
    return None


def _cascade_variables(automaton: Any, T: int) -> tuple[Variable, ...]:
    plan, _ = _group(automaton)
    d = plan.derived_length
    return tuple(
        Variable(
            f"level{i}",
            edges=(Edge(f"level{i} → output at the same position", 0, 0),)
            + ((Edge(f"level{i} → level{i + 1}'s mixed input, read by every later count", 1, None),) if i < d else ()),
        )
        for i in range(1, d + 1)
    ) + (Variable("state"),)


#: Every registered algorithm, by name.
ALGORITHMS: dict[str, Algorithm] = {
    a.name: a
    for a in (
        Algorithm(
            "sequential",
            "sequential (recurrent update)",
            "automaton",
            "q_t = δ(q_{t−1}, σ_t) position by position: setting the state at p sets every later output",
            "Li, Guo & Andreas 2025 (sequential); an RNN's update",
            lambda a, T: (
                Variable("state", "recurrent", (Edge("state → next position's state", 1, 1, child="state"),)),
            ),
        ),
        Algorithm(
            "scan",
            "associative scan (prefix scan)",
            "automaton",
            "the window maps of 2^l symbols, each composed from two of the level below (Hillis–Steele)",
            "Theorem 10, Lemma 14; Li, Guo & Andreas 2025 (AA)",
            lambda a, T: _windows(T) + (Variable("state", determined=True),),
            _refuse_scan,
            construction="prefix_scan",
        ),
        Algorithm(
            "counter",
            "counter",
            "automaton",
            "one attention layer sums the symbols' exponents at every position, an MLP reads the count mod n",
            "Lemma 15",
            lambda a, T: (
                Variable(
                    "symbol",
                    edges=(Edge("symbol → count at every later position", 1, None, child="state"),),
                    place="before",
                ),
                Variable("state", place="after"),
            ),
            _refuse_counter,
            construction="modular_counter",
            anchored=True,
        ),
        Algorithm(
            "cascade",
            "Krohn–Rhodes cascade",
            "automaton",
            "counts along the derived series, each level's input mixed by the levels below",
            "Theorem 11 (Theorem 16, Lemmas 15, 17, 18)",
            _cascade_variables,
            _refuse_cascade,
            construction="krohn_rhodes",
        ),
        Algorithm(
            "parity_first",
            "parity first, then scan",
            "automaton",
            "the sign of the prefix first (a counter), then a scan resolves the state within its parity class",
            "Li, Guo & Andreas 2025 (PAA)",
            lambda a, T: (
                (Variable("sign", edges=(Edge("sign → output at the same position", 0, 0),)),)
                + _windows(T)
                + (Variable("state", determined=True),)
            ),
            _refuse_parity,
        ),
        Algorithm(
            "boundary",
            "boundary detector",
            "automaton",
            "the walk's displacement (a prefix sum), then the last wall it met; the state is their difference",
            "Theorem 12, Algorithm 1",
            lambda a, T: (Variable("displacement"), Variable("boundary"), Variable("state")),
            _refuse_boundary,
            construction="gridworld",
        ),
        Algorithm(
            "stack",
            "stack (depth, then top)",
            "dyck",
            "the depth by a count, then the type of the latest open bracket at that depth",
            "Theorem 1",
            lambda lang, T: (
                Variable("depth", edges=(Edge("depth → the top's lookup", 0, 0, child="top"),)),
                Variable("top"),
            ),
            construction="dyck",
        ),
        Algorithm(
            "depth_only",
            "depth only",
            "dyck",
            "the depth alone (decides may / must close, not the closing type)",
            "algorithms-and-methods notes (a); Wen et al. 2023",
            lambda lang, T: (Variable("depth"),),
        ),
    )
}


def algorithms_for(kind: str, source: Any, T: int) -> tuple[list[Algorithm], dict[str, str]]:
    """(the algorithms a task of ``kind`` with ``source`` at length ``T`` can have, {name: why not} for the
    rest of its kind's)."""
    ok, refused = [], {}
    for a in ALGORITHMS.values():
        if a.kind != kind:
            continue
        why = a.refusal(source, T)
        if why:
            refused[a.name] = why
        else:
            ok.append(a)
    return ok, refused


def resolve(spec: str | Sequence[str], kind: str, source: Any, T: int) -> tuple[list[Algorithm], dict[str, str]]:
    """The candidates ``spec`` asks for (``"all"`` or comma-separated names) on this task, with the refusals
    ``"all"`` skipped; raises :class:`AlgorithmError` naming what is possible for an unknown name, one of
    another task kind or one the task cannot have."""
    possible, refused = algorithms_for(kind, source, T)
    if isinstance(spec, str) and spec.strip() == "all":
        if not possible:
            raise AlgorithmError(
                f"no registered algorithm applies to this {kind} task ("
                + "; ".join(f"{k}: {v}" for k, v in refused.items())
                + ")"
            )
        return possible, refused
    names = [s.strip() for s in (spec.split(",") if isinstance(spec, str) else spec) if s.strip()]
    if not names:
        raise AlgorithmError("--candidates needs 'all' or algorithm names")
    can = ", ".join(a.name for a in possible) or "none"
    out = []
    for name in names:
        if name not in ALGORITHMS:
            raise AlgorithmError(
                f"unknown algorithm {name!r} (registered: {', '.join(ALGORITHMS)}; this task can have: {can})"
            )
        a = ALGORITHMS[name]
        if a.kind != kind:
            raise AlgorithmError(
                f"{name} is an algorithm for {a.kind} tasks, not this {kind} task (it can have: {can})"
            )
        if name in refused:
            raise AlgorithmError(f"{name} does not apply: {refused[name]} (this task can have: {can})")
        if a not in out:
            out.append(a)
    return out, {}
