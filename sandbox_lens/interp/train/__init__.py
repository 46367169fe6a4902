"""Train HookedTransformers on the same tasks as the constructions: seeded, resumable, replicated.

* :mod:`~sandbox_lens.interp.train.config` — :class:`ModelShape` (layers, width, heads, LayerNorm or none,
  learned / sinusoidal / no positional embedding, or the LSTM baseline) and :class:`TrainConfig`;
* :mod:`~sandbox_lens.interp.train.twin` — :func:`build_twin` for a task, started from a construction's weights
  and partly frozen, and :func:`load_trained`, which gives a run's model back with a ``card`` so the
  probes and visualisers work on it like on a construction;
* :mod:`~sandbox_lens.interp.train.loop` — :func:`train` (AdamW, warm-up and decay, clipping, online batches that are
  a pure function of (seed, step), held-out evaluation, early stop, a time budget, checkpoints at every
  evaluation and on SIGINT / SIGTERM; ``resume=True`` ends with the same bits as an uninterrupted run);
* :mod:`~sandbox_lens.interp.train.adopt` — :func:`adopt`: a model trained elsewhere (plain TransformerLens) given
  the card every analysis reads; :func:`load_adopted` from a state dict and its config on disk;
* :mod:`~sandbox_lens.interp.train.checkpoint` — the one-file checkpoint format and resume;
* :mod:`~sandbox_lens.interp.train.regularise` — dropout, attention sharpening, the moving average, the Dyck
  balance penalty; :mod:`~sandbox_lens.interp.train.sweep` — several seeds and a grid of settings, on a local
  process pool or Ray.

A run directory holds ``checkpoint.safetensors`` (model and optimizer state, with task, shape, config,
step and history in its header: one atomic file, so a kill at any instant leaves a whole checkpoint;
what ``resume`` reads) + ``checkpoint.json`` (a readable copy of the header), ``model.safetensors`` +
``model.json`` (a transformer's final weights, config and card in :mod:`sandbox_lens.interp.model.saved`'s format, no
optimizer state) and ``metrics.json`` (task, final_accuracy, best_accuracy, steps, wall_seconds, seed,
history).
"""

from __future__ import annotations

import importlib
from typing import Any

#: where each public name lives; loaded on first use, so `interp --help` and the config stay light
_WHERE = {
    "METRICS": "checkpoint",
    "has_checkpoint": "checkpoint",
    "MAX_N_CTX": "config",
    "ModelShape": "config",
    "TrainConfig": "config",
    "run_identity": "config",
    "evaluate": "loop",
    "train": "loop",
    "build_twin": "twin",
    "default_shape": "twin",
    "load_trained": "twin",
    "open_model": "twin",
    "random_init": "twin",
    "adopt": "adopt",
    "load_adopted": "adopt",
    "task_defaults": "twin",
    "kept_models": "loop",
}

__all__ = [
    "ModelShape",
    "TrainConfig",
    "build_twin",
    "random_init",
    "adopt",
    "load_adopted",
    "train",
    "load_trained",
    "default_shape",
    "evaluate",
    "task_defaults",
    "has_checkpoint",
    "open_model",
    "run_identity",
    "METRICS",
    "MAX_N_CTX",
    "kept_models",
]


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(f"sandbox_lens.interp.train.{_WHERE[name]}"), name)
    raise AttributeError(f"module 'sandbox_lens.interp.train' has no attribute {name!r}")
