"""The causal analyses' default effort, in a module that imports nothing, so that the command line can state the
defaults in its help without loading the analyses."""

__all__ = ["DAS_STEPS", "SITE_DAS_STEPS"]

#: Optimiser steps of each DAS fit of ``interp align`` (:func:`sandbox_lens.interp.causal.align.align`), which
#: fits a few hooks and k per variable.
DAS_STEPS = 200
#: Optimiser steps of each DAS site of the identification (``interp align --candidates … --das``,
#: :mod:`sandbox_lens.interp.causal.fitted`): half of :data:`DAS_STEPS`, as it fits one subspace per variable at
#: every residual site.
SITE_DAS_STEPS = 100
