"""Theorem 11: constant-depth simulators for solvable semiautomata (Krohn–Rhodes).

Three paths, chosen from the automaton (:func:`build_krohn_rhodes`):

* **group** (Theorem 16, Lemmas 15, 17, 18 and 18′): every symbol permutes the states. The
  derived series of the generated group is turned into levels of Lemma 15 counters
  (:mod:`sandbox_lens.constructions.solvable`); per level, one block counts (one head per cyclic factor,
  trapezoids to a one-hot prefix coordinate) and one MLP block "mixes" the level's input into
  the next level's input; a last lookup composes the transversals. 2d TL blocks for derived
  length d (1 for a cyclic group).
* **permutation-reset** (Lemma 20): every symbol is a permutation or a reset (constant map). The
  group part runs on the permutations (resets and BOS act as e); a Lemma 16 memory head in the
  last block fetches the group prefix and the reset target at the last reset (BOS is a reset to
  q0), and the lookup applies Φ(g_{≤t} g_{≤r}⁻¹) to the reset target (eq. 3.2).
* **cascade** (Definition 6, Lemma 21): an explicit :class:`sandbox_lens.interp.tasks.cascade.Cascade` of
  permutation-reset levels — given, known (the gridworlds), or, for any other solvable automaton, its
  holonomy decomposition (:mod:`sandbox_lens.interp.tasks.holonomy_cascade`). Each level is simulated as above on a one-hot input written by the
  previous wiring block; the wiring block's MLP computes φ^{(i+1)} from the earlier levels'
  states **before** σ_t, fetched by a previous-token head (the thesis's wiring reads the states
  after σ_t, erratum E19; ``as_printed="wiring"`` rebuilds that defect as a negative control).

Every discrete value lives in the residual stream as an exact one-hot (trapezoid and lookup
outputs are exactly 0 or 1), so errors never accumulate across levels. Depth does not depend on
T; only the counters' MLP width does (4((n−1)T+1) units per cyclic factor).

The files stack like the proof: :mod:`sandbox_lens.constructions.circuit` (the circuit being assembled),
:mod:`sandbox_lens.constructions.solvable` (derived series, abelian bases, transversals),
:mod:`sandbox_lens.constructions.permutation_reset` (Theorem 16, Lemma 20), :mod:`sandbox_lens.constructions.cascade_wiring`
(Lemma 21); this module only chooses the path.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING

from sandbox_lens.constructions.cascade_wiring import build_cascade, cascade_stages
from sandbox_lens.constructions.circuit import Circuit, finish
from sandbox_lens.constructions.permutation_reset import classify, simulate_component
from sandbox_lens.constructions.solvable import plan_solvable_group
from sandbox_lens.interp.budget import BudgetError
from sandbox_lens.interp.errors import AutomatonError, ConstructionError, LengthError
from sandbox_lens.interp.model.spec import ConstructionSpec, variable_site
from sandbox_lens.interp.tasks.automata import Semiautomaton
from sandbox_lens.interp.tasks.cascade import Cascade, known_cascade, load_cascade_file
from sandbox_lens.interp.tasks.groups import group_name, transformation_semigroup
from sandbox_lens.interp.tasks.holonomy_cascade import holonomy_cascade

if TYPE_CHECKING:
    from sandbox_lens.interp.tasks.cascade import Cascade

__all__ = ["build_krohn_rhodes", "classify", "describe_path", "cascade_stages", "MAX_LENGTH"]

#: Longest supported length: exact in float32 here (README, "Measured float32 limits": the largest
#: MLP pre-activation error at T = 4096 is 0.02 of the gadgets' tolerance of 1; make test-slow).
MAX_LENGTH = 4096


def build_krohn_rhodes(
    automaton: Semiautomaton, length: int, cascade: Cascade | str | Path | None = None, as_printed: str = ""
) -> ConstructionSpec:
    """Theorem 11: a constant-depth simulator for a solvable group, a permutation-reset automaton or a cascade.

    ``cascade`` (a :class:`~sandbox_lens.interp.tasks.cascade.Cascade` or the path of a cascade JSON file) is used
    instead of ``automaton`` when given; the 1-D gridworlds use their built-in flip-flop cascade.
    ``as_printed="wiring"`` rebuilds Lemma 21's printed wiring as a negative control.
    """
    if not 1 <= length <= MAX_LENGTH:
        raise LengthError(f"krohn_rhodes is verified for lengths 1..{MAX_LENGTH}, got {length}")
    if as_printed not in ("", "wiring"):
        raise ConstructionError(f"krohn_rhodes: as_printed must be wiring (or empty), got {as_printed!r}")
    wiring = "current" if as_printed == "wiring" else "previous"

    if isinstance(cascade, (str, Path)):
        cascade = load_cascade_file(cascade)
    if cascade is None:
        cascade = known_cascade(automaton)
    if cascade is None and _path(automaton) == "holonomy":
        cascade = _holonomy(automaton)
    if cascade is not None:
        if not isinstance(cascade, Cascade):
            raise ConstructionError("krohn_rhodes: cascade must be a Cascade or the path of a cascade JSON file")
        return build_cascade(cascade, length, wiring)
    perms, resets = _classify_or_refuse(automaton)
    c = Circuit(["BOS", *automaton.alphabet], length)
    plan = plan_solvable_group([automaton.transition_map(s) for s in perms], automaton.n_states, automaton.name)
    slots = [("tok", i) for i in range(automaton.n_symbols + 1)]
    state = simulate_component(c, automaton, slots, "", plan)
    path = "permutation-reset (Lemma 20)" if resets else "solvable group (Theorem 16 via Lemma 18′)"
    orders = [list(lv.orders) for lv in plan.levels]
    return finish(
        c,
        automaton,
        state,
        length,
        "Theorem 11: " + path,
        {
            "path": "permutation_reset" if resets else "group",
            "group_order": plan.order,
            "derived_length": plan.derived_length,
            "cyclic_factors": orders,
        },
        f"derived series quotients {orders}; counters with normaliser N = {c.N}",
        inert="L1.s0" if "L1.s0" in c.layout.names else None,
        variables=[] if resets else _level_sites(c, plan),
    )


def _level_sites(c: Circuit, plan) -> list[dict]:
    """Theorem 16's levels as card variables ``level<i>``: the one-hot prefix coordinate P^i (the counts of
    :func:`~sandbox_lens.constructions.permutation_reset.simulate_component`'s level i, written by block 2(i − 1);
    :mod:`sandbox_lens.interp.tasks.groupvars` reads the same coordinates). None for a cyclic group, whose
    single count is written straight into the state."""

    out = []
    for i, level in enumerate(plan.levels, start=1):
        spaces = [f"L{i}.P{j}" for j in range(len(level.orders))]
        if all(sp in c.layout.names for sp in spaces):
            out.append(
                variable_site(
                    f"level{i}",
                    2 * (i - 1),
                    "post",
                    spaces,
                    note=f"level {i}'s prefix coordinate P^{i} (Lemma 15's count, one-hot)",
                )
            )
    return out


def _path(automaton: Semiautomaton) -> str:
    """``group_or_reset`` where Theorem 16 / Lemma 20 apply (their constructions are smaller), else ``holonomy``
    for a solvable automaton; a non-solvable one is refused here, in one line."""
    try:
        classify(automaton)
        return "group_or_reset"
    except ConstructionError:
        _refuse_if_unsolvable(automaton)
        return "holonomy"


def _holonomy(automaton: Semiautomaton) -> Cascade:
    """The holonomy decomposition of ``automaton`` (:mod:`sandbox_lens.interp.tasks.holonomy_cascade`), its refusals as the
    construction's."""
    cascade, refusal = _decomposed(automaton)
    if refusal is not None:
        raise ConstructionError(refusal)
    return cascade


@functools.lru_cache(maxsize=8)
def _decomposed(automaton: Semiautomaton) -> tuple[Cascade | None, str | None]:
    """(the decomposition, None) or (None, why it is refused), once per automaton object (automata compare by
    identity): ``interp info`` names the path and then builds at two lengths, and a refusal past the limits
    costs seconds to reach."""

    try:
        return holonomy_cascade(automaton), None
    except (AutomatonError, BudgetError) as e:  # too large or not solvable: the construction does not apply
        return None, f"krohn_rhodes: {e}"


def describe_path(automaton: Semiautomaton) -> str:
    """One line: which Krohn–Rhodes path ``automaton`` takes, or why it is refused."""

    cascade = known_cascade(automaton)
    if cascade is not None:
        return f"cascade of {len(cascade.levels)} levels ({', '.join(lv.automaton.name for lv in cascade.levels)})"
    try:
        if _path(automaton) == "holonomy":
            c = _holonomy(automaton)
            sizes = [lv.automaton.n_states for lv in c.levels]
            return (
                f"holonomy cascade of {len(c.levels)} permutation-reset levels ({' × '.join(map(str, sizes))} "
                f"values; the holonomy decomposition)"
            )
    except ConstructionError as e:
        return f"refused: {e}"
    try:
        perms, resets = _classify_or_refuse(automaton)
        plan = plan_solvable_group([automaton.transition_map(s) for s in perms], automaton.n_states, automaton.name)
    except ConstructionError as e:
        return f"refused: {e}"
    series = " ⊳ ".join("×".join(f"Z{n}" for n in lv.orders) for lv in plan.levels) or "trivial group"
    kind = "permutation-reset, group" if resets else "group"
    return f"{kind} of order {plan.order}, derived-series quotients {series}"


def _classify_or_refuse(automaton: Semiautomaton) -> tuple[list[int], dict[int, int]]:
    """:func:`classify`, but an automaton that contains a non-solvable group is refused as such."""
    try:
        return classify(automaton)
    except ConstructionError:
        _refuse_if_unsolvable(automaton)
        raise


def _refuse_if_unsolvable(automaton: Semiautomaton) -> None:
    """Definition 8: a semiautomaton containing a non-solvable group has no constant-depth simulator here."""

    bad = [g for g in transformation_semigroup(automaton).maximal_subgroups if not g.is_solvable]
    if bad:
        g = max(bad, key=lambda g: int(g.order()))
        raise ConstructionError(
            f"{automaton.name!r} is not solvable: its transformation semigroup contains the group {group_name(g)} "
            f"(order {int(g.order())}), so Theorem 11's constant-depth construction does not apply; use prefix_scan "
            f"(Theorem 10, depth ⌈log2 T⌉) instead"
        )
