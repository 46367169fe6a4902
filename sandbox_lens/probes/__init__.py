"""Analyses that put constructed and trained circuits side by side.

* :mod:`sandbox_lens.probes.linear` — ridge linear probes on residual hooks (held-out accuracy per hook);
* :mod:`sandbox_lens.probes.attention` — reference patterns, per-head scores, Hungarian head matching;
* :mod:`sandbox_lens.probes.ablation` — zero/mean head ablation (others fixed) and greedy head pruning;
* :mod:`sandbox_lens.probes.masks` — learned hard-concrete head masks with an L0 penalty (others adapt);
* :mod:`sandbox_lens.probes.weight_mask` — Theorem 3 at toy scale: prune a random transformer into a construction;
* :mod:`sandbox_lens.probes.boundary` — the gridworld boundary-detector score;
* :mod:`sandbox_lens.probes.dyck` — stack-top mass, attention variation, balance violation.
"""
