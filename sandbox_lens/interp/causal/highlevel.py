"""The high-level causal models of each task kind (:mod:`sandbox_lens.interp.tasks.highlevel`, where they live: they say
what is true of a task under an intervention, and training with an alignment loss reads them too)."""

from sandbox_lens.interp.tasks.highlevel import (
    MODES,
    DyckModel,
    FFLModel,
    HighLevel,
    HighLevelError,
    StateModel,
    dyck_stacks,
    high_level_of,
)

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
