"""Circuits with a proof behind them: the ground truth a construction's weights imply, and the causal
analyses (activation, path and attribution patching, ACDC-style discovery) scored against it.

:mod:`~interp.circuits.graph` (the residual graph), :mod:`~interp.circuits.truth` (ground truth),
:mod:`~interp.circuits.pairs` (counterfactual pairs and the task's metric),
:mod:`~interp.circuits.patching` (the hook engine and the methods), :mod:`~interp.circuits.score`
(AUROC, precision, recall), :mod:`~interp.circuits.analyse` (one command's analysis and its JSON),
:mod:`~interp.circuits.draw` (the picture).
"""
