"""Analyses that put constructed and trained circuits side by side.

* :mod:`probes.linear` — ridge linear probes on residual hooks (held-out accuracy per hook);
* :mod:`probes.attention` — reference patterns, per-head scores, Hungarian head matching;
* :mod:`probes.ablation` — zero/mean head ablation (others fixed) and greedy head pruning;
* :mod:`probes.masks` — learned hard-concrete head masks with an L0 penalty (others adapt);
* :mod:`probes.weight_mask` — Theorem 3 at toy scale: prune a random transformer into a construction;
* :mod:`probes.boundary` — the gridworld boundary-detector score;
* :mod:`probes.dyck` — stack-top mass, attention variation, balance violation.
"""
