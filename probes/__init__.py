"""Analyses that put constructed and trained circuits side by side.

* :mod:`probes.boundary` — the gridworld boundary-detector score of attention heads.

Linear probes, attention-pattern comparison, ablation and pruning come with the comparison
work (issue 7).
"""
