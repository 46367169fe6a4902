"""Floor 1 — what is true: automata, the catalogue, groups, cascades, Dyck, the flip-flop language,
the training batches and evaluation shifts of each task, and the task-kind registry
(:mod:`sandbox_lens.interp.tasks.kinds`). numpy (and sympy, lazily, for groups); no torch, no model."""
