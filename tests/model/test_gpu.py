"""On CUDA (``make test-gpu``; skipped without it): a twin trains on the GPU, its checkpoint resumes on the CPU
and the other way round to the same losses, and a construction verifies exactly there."""

from __future__ import annotations

import json
import os

import pytest
import torch

from interp.cli import main
from interp.model.device import ENV

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device: make test-gpu needs one")]
TRAIN = ["train", "dyck", "--dyck", "1,2", "--eval-every", "10", "--target", "none"]


def _history(run) -> list[float]:
    return [round(h["loss"], 4) for h in json.loads((run / "metrics.json").read_text())["history"]]


@pytest.mark.parametrize("first, then", [("cuda", "cpu"), ("cpu", "cuda")])
def test_a_run_moves_between_devices(tmp_path, first, then):
    whole, split = tmp_path / "whole", tmp_path / "split"
    assert main(["--device", first, *TRAIN, "--steps", "40", "--out", str(whole)]) == 0
    assert main(["--device", first, *TRAIN, "--steps", "40", "--out", str(split), "--max-minutes", "0"]) in (0,)
    assert main(["--device", then, *TRAIN, "--steps", "40", "--out", str(split), "--resume"]) == 0
    a, b = _history(whole), _history(split)
    assert len(a) == len(b) and max(abs(x - y) for x, y in zip(a, b)) < 1e-2  # devices round differently
    assert ENV not in os.environ


def test_a_construction_verifies_on_cuda(capsys):
    assert main(["--device", "cuda", "verify", "prefix_scan", "--automaton", "S5", "--length", "256"]) == 0
