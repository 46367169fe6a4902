"""Checks on training run directories shared by the test packages."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import load_file


def assert_same_run(a: Path, b: Path) -> None:
    """Two runs end with the same bits: every checkpoint tensor (weights, optimizer state) and the evaluation
    history, wall-clock times aside."""
    x, y = load_file(a / "checkpoint.safetensors"), load_file(b / "checkpoint.safetensors")
    assert x.keys() == y.keys()
    differ = [k for k in x if not torch.equal(x[k], y[k])]
    assert not differ, f"{len(differ)} tensors differ, e.g. {differ[:3]}"
    ha, hb = (json.loads((d / "metrics.json").read_text())["history"] for d in (a, b))
    assert [{k: v for k, v in h.items() if k != "wall_seconds"} for h in ha] == \
           [{k: v for k, v in h.items() if k != "wall_seconds"} for h in hb]
