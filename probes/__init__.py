"""Analyses that put constructed and trained circuits side by side (probes, attention
comparison, ablation, pruning). Populated by the comparison work (issue 7); nothing here yet."""
