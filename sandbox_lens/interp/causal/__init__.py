"""Causal alignment of a model to a construction's high-level model: interchange interventions, IIA and
distributed alignment search (Geiger et al.).

:mod:`~sandbox_lens.interp.causal.highlevel` (the high-level models and their counterfactual labels),
:mod:`~sandbox_lens.interp.causal.interchange` (sites, interchange interventions, IIA with intervals),
:mod:`~sandbox_lens.interp.causal.das` (learned k-dimensional orthogonal subspaces),
:mod:`~sandbox_lens.interp.causal.evidence` (fit / select / test splits, intervals over base words, the readout
baseline, stability), :mod:`~sandbox_lens.interp.causal.search` (DAS fitted, chosen and reported on disjoint
splits, the nulls searched the same way), :mod:`~sandbox_lens.interp.causal.verdict` (the rules),
:mod:`~sandbox_lens.interp.causal.align` (all of it, per variable).
"""
