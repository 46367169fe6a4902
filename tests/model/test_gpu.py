"""On CUDA (``make test-gpu``; skipped without it): a twin trains on the GPU, its checkpoint resumes on the CPU
and the other way round to the same losses, a construction verifies exactly there, and the analysis commands
(circuit, align, experiment, population, compare) run there with the CPU's results. Never run in this
project's sessions (no GPU was lent); tests/contract/test_devices.py checks the same code from its source."""

from __future__ import annotations

import json
import os

import pytest
import torch

from sandbox_lens.interp.cli import main
from sandbox_lens.interp.model.device import ENV

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device: make test-gpu needs one"),
]
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


def _json_of(capsys, argv: list[str]) -> dict:
    capsys.readouterr()
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def _close(a, b, tol: float = 1e-3) -> bool:
    """The same numbers up to the devices' rounding (floats), the same everything else."""
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k], tol) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_close(x, y, tol) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, (int, float)):
        return abs(a - b) <= tol * max(1.0, abs(a))
    return a == b


def test_circuit_discovery_gives_the_same_scores_on_cuda(tmp_path, capsys):
    args = ["circuit", "modular_counter", "--automaton", "C3", "-T", "8", "--method", "acdc", "--pairs", "16", "--json"]
    cpu = _json_of(capsys, ["--device", "cpu", *args, "--out", str(tmp_path / "cpu")])
    gpu = _json_of(capsys, ["--device", "cuda", *args, "--out", str(tmp_path / "gpu")])
    assert gpu["auroc"] == cpu["auroc"] == 1.0


def test_alignment_gives_the_same_iia_on_cuda(tmp_path, capsys):
    assert main(["build", "modular_counter", "--automaton", "C3", "-T", "8", "--out", str(tmp_path / "counter")]) == 0
    args = ["align", "--model", str(tmp_path / "counter"), "--pairs", "64", "--k", "2", "--json"]
    cpu = _json_of(capsys, ["--device", "cpu", *args, "--out", str(tmp_path / "a-cpu")])
    gpu = _json_of(capsys, ["--device", "cuda", *args, "--out", str(tmp_path / "a-gpu")])
    assert gpu["variables"]["state"]["named_sites"] == cpu["variables"]["state"]["named_sites"]


def test_a_quick_experiment_runs_on_cuda(tmp_path):
    out = tmp_path / "parity"
    assert main(["--device", "cuda", "experiment", "parity-ood", "--quick", "--workers", "1", "--out", str(out)]) == 0
    assert (out / "results.json").exists() and (out / "report.html").exists()


def test_compare_and_population_run_on_cuda(tmp_path):
    sweep = tmp_path / "sweep"
    assert (
        main(
            [
                "--device",
                "cuda",
                "train",
                "automaton",
                "--automaton",
                "C3",
                "--length",
                "6",
                "--steps",
                "30",
                "--seeds",
                "0-1",
                "--out",
                str(sweep),
            ]
        )
        == 0
    )
    assert main(["--device", "cuda", "population", str(sweep), "--causal-pairs", "32"]) == 0
    assert (
        main(
            [
                "--device",
                "cuda",
                "compare",
                "C3",
                "--length",
                "6",
                "--population",
                str(sweep),
                "--out",
                str(tmp_path / "c"),
            ]
        )
        == 0
    )


def test_the_hook_free_twin_is_transformer_lens_twin_on_cuda(monkeypatch):
    """Drawn on the CPU and moved, as TransformerLens does: the same weights on the GPU as its model's."""
    from sandbox_lens.interp.model.hooked import backend

    if backend() != "HookedTransformer":
        pytest.skip("the hook-free twin stands in for TransformerLens 3.9's model")
    from sandbox_lens.interp.tasks.batches import DyckTask
    from sandbox_lens.interp.tasks.dyck import Dyck
    from sandbox_lens.interp.train import build_twin, default_shape

    monkeypatch.setenv(ENV, "cuda")
    task = DyckTask(Dyck(2, 4), 16)
    free, hooked = (build_twin(task, default_shape(task), 3, hook_free=h) for h in (True, False))
    assert type(free).__name__ == "HookFreeTransformer"
    for (name, a), b in zip(free.named_parameters(), dict(hooked.named_parameters()).values()):
        assert a.device.type == "cuda" and torch.equal(a, b), name
