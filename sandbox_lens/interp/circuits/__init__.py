"""Circuits with a proof behind them: the ground truth a construction's weights imply, in levels, and
the causal analyses (activation, path and attribution patching, ACDC) scored against it.

:mod:`~sandbox_lens.interp.circuits.graph` (the residual graph), :mod:`~sandbox_lens.interp.circuits.truth` (the weights'
levels: structural, live, task-relevant), :mod:`~sandbox_lens.interp.circuits.levels` (the levels a metric, a
corruption and an ablation can see, and why each edge is absent), :mod:`~sandbox_lens.interp.circuits.pairs`
(counterfactual pairs and the task's metric), :mod:`~sandbox_lens.interp.circuits.patching` (the hook engine and
the methods), :mod:`~sandbox_lens.interp.circuits.acdc` (ACDC, reference and normalised),
:mod:`~sandbox_lens.interp.circuits.score` (AUROC, average precision, precision, recall, CPR, CMD),
:mod:`~sandbox_lens.interp.circuits.mib` (MIB's faithfulness areas, as its evaluator computes them), :mod:`~sandbox_lens.interp.circuits.analyse`
(one command's analysis and its JSON), :mod:`~sandbox_lens.interp.circuits.draw` (the picture),
:mod:`~sandbox_lens.interp.circuits.exchange` (circuit files other tools read) and
:mod:`~sandbox_lens.interp.circuits.autocircuit` (auto-circuit's algorithms on these models, an optional extra).
"""
