"""Causal alignment of a model to a construction's high-level model: interchange interventions, IIA and
distributed alignment search (Geiger et al.).

:mod:`~sandbox_lens.interp.causal.highlevel` (the high-level models and their counterfactual labels),
:mod:`~sandbox_lens.interp.causal.interchange` (sites, interchange interventions, IIA with intervals),
:mod:`~sandbox_lens.interp.causal.das` (learned k-dimensional orthogonal subspaces).
"""
