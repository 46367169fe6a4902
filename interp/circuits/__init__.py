"""Circuits with a proof behind them: the ground truth a construction's weights imply, in levels, and
the causal analyses (activation, path and attribution patching, ACDC) scored against it.

:mod:`~interp.circuits.graph` (the residual graph), :mod:`~interp.circuits.truth` (the weights'
levels: structural, live, task-relevant), :mod:`~interp.circuits.levels` (the levels a metric, a
corruption and an ablation can see, and why each edge is absent), :mod:`~interp.circuits.pairs`
(counterfactual pairs and the task's metric), :mod:`~interp.circuits.patching` (the hook engine and
the methods), :mod:`~interp.circuits.acdc` (ACDC, reference and normalised),
:mod:`~interp.circuits.score` (AUROC, average precision, precision, recall, CPR, CMD),
:mod:`~interp.circuits.curves` (faithfulness over circuit sizes), :mod:`~interp.circuits.analyse`
(one command's analysis and its JSON), :mod:`~interp.circuits.draw` (the picture),
:mod:`~interp.circuits.exchange` (circuit files other tools read) and
:mod:`~interp.circuits.autocircuit` (auto-circuit's algorithms on these models, an optional extra).
"""
