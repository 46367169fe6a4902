"""The high-level causal models of each task kind (:mod:`sandbox_lens.interp.tasks.highlevel`, where they live: they say
what is true of a task under an intervention, and training with an alignment loss reads them too).

:func:`high_level_of` here adds what only the causal floor can compute: a permutation automaton's group
coordinates (:mod:`sandbox_lens.interp.causal.groupvars`: the Krohn–Rhodes levels ``level<i>`` and the ``sign``),
which the rival algorithms name; like the window maps they are asked for by name, never aligned by default."""

from __future__ import annotations

import copy
import functools
from typing import Any

from sandbox_lens.interp.tasks.highlevel import (MODES, DyckModel, FFLModel, HighLevel, HighLevelError, StateModel,
                                                 dyck_stacks)
from sandbox_lens.interp.tasks.highlevel import high_level_of as _task_high_level

__all__ = ["HighLevel", "StateModel", "DyckModel", "FFLModel", "MODES", "HighLevelError", "dyck_stacks",
           "high_level_of"]


def high_level_of(model: Any, mode: str = "parallel") -> HighLevel:
    """The high-level model of ``model``'s task (:func:`sandbox_lens.interp.tasks.highlevel.high_level_of`: the same
    refusals), with a permutation automaton's group coordinates among its variables."""
    high = _task_high_level(model, mode)
    automaton = getattr(high, "automaton", None)
    if isinstance(high, StateModel) and automaton is not None:
        family = _group_family(automaton.name, automaton.delta.tobytes(), automaton)
        if family is not None:
            high = copy.copy(high)
            high.families = [*high.families, family]
    return high


@functools.lru_cache(maxsize=64)
def _group_family(name: str, delta: bytes, automaton: Any) -> Any:
    """The automaton's group coordinates, computed once per automaton (keyed by its name and table)."""
    from sandbox_lens.interp.causal.groupvars import group_variables

    return group_variables(automaton)
