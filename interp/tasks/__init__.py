"""Floor 1 — what is true: automata, the catalogue, groups, cascades, Dyck, the flip-flop language,
and the training batches of each task. numpy (and sympy, lazily, for groups); no torch, no model."""
