"""The algebra behind the Krohn–Rhodes constructions (derived series, abelian coordinates, transversals):
:mod:`sandbox_lens.interp.tasks.solvable`, on the task floor, where the high-level models read the same
coordinates (:mod:`sandbox_lens.interp.tasks.groupvars`). Re-exported here for the constructions."""

from sandbox_lens.interp.tasks.solvable import (
    MAX_GROUP_ORDER,
    AbelianLevel,
    Map,
    SolvablePlan,
    abelian_basis,
    cycle_notation,
    inverse,
    plan_solvable_group,
    power,
)

__all__ = [
    "Map",
    "AbelianLevel",
    "SolvablePlan",
    "plan_solvable_group",
    "abelian_basis",
    "inverse",
    "power",
    "cycle_notation",
    "MAX_GROUP_ORDER",
]
