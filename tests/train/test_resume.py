"""Resume is exact: a run stopped by SIGINT, SIGTERM or SIGKILL at any step, then continued with
--resume, ends with the same bits as a run that was never stopped (weights, optimizer state, history)."""

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from run_checks import assert_same_run

from sandbox_lens.interp.tasks.batches import AutomatonTask
from sandbox_lens.interp.tasks.catalogue import get_automaton
from sandbox_lens.interp.train import ModelShape, TrainConfig, train

ROOT = Path(__file__).resolve().parents[2]
STEPS = 600
ARGV = [
    sys.executable,
    "-m",
    "sandbox_lens.interp",
    "train",
    "automaton",
    "--automaton",
    "parity",
    "-T",
    "8",
    "--layers",
    "1",
    "--d-model",
    "16",
    "--heads",
    "2",
    "--steps",
    str(STEPS),
    "--batch",
    "8",
    "--eval-every",
    "50",
    "--eval-size",
    "64",
    "--seeds",
    "3",
    "--target",
    "none",
]


def _stop_with(sig: signal.Signals, out: Path, after_step: int, resume: bool) -> int:
    """Start (or resume) the run, signal it somewhere past ``after_step``, check how it stopped; the step saved."""
    proc = subprocess.Popen(
        [*ARGV, "--out", str(out), *(["--resume"] if resume else [])],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    deadline = time.time() + 120
    while time.time() < deadline and _saved_step(out) <= after_step:
        time.sleep(0.02)
    time.sleep(random.Random(int(sig)).uniform(0.0, 0.3))  # between two evaluations, or during one
    os.kill(proc.pid, sig)
    _, err = proc.communicate(timeout=60)
    stopped_at = _saved_step(out)
    assert after_step < stopped_at < STEPS, "the run ended before the signal: lengthen it"
    if sig == signal.SIGKILL:
        assert proc.returncode == -signal.SIGKILL
    else:  # it finishes the step it is in, saves it and says so in one line
        assert proc.returncode == 128 + sig, err
        assert f"interrupted at step {stopped_at} of {STEPS}" in err and "--resume" in err
        assert "Traceback" not in err and err.count("\n") == 1
        assert not list(out.glob(".*.tmp")), "a temporary file was left behind"
    return stopped_at


def _saved_step(out: Path) -> int:
    try:
        return json.loads((out / "checkpoint.json").read_text())["step"]
    except (FileNotFoundError, json.JSONDecodeError):
        return 0


def test_a_run_stopped_by_sigint_sigterm_and_sigkill_resumes_to_the_same_bits(tmp_path):
    """One run, stopped three times at random steps (Ctrl-C, then SIGTERM, then SIGKILL) and resumed
    each time, against the same command left alone (run beside it)."""
    whole = subprocess.Popen(
        [*ARGV, "--out", str(tmp_path / "whole")],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    out, step = tmp_path / "stopped", 0
    for i, sig in enumerate((signal.SIGINT, signal.SIGTERM, signal.SIGKILL)):
        step = _stop_with(sig, out, step, resume=i > 0)
    r = subprocess.run([*ARGV, "--out", str(out), "--resume"], cwd=ROOT, capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
    assert not list(out.glob(".*.tmp")), "a write cut short by SIGKILL was not cleaned up on resume"
    assert whole.wait(timeout=120) == 0, whole.stderr.read()
    assert_same_run(tmp_path / "whole", out)


def test_a_kill_between_the_two_checkpoint_files_loses_nothing(tmp_path, monkeypatch):
    """The weights file carries its own metadata: dying before checkpoint.json is rewritten resumes
    from the newer weights, never from a mismatched pair."""
    import sandbox_lens.interp.train.checkpoint as training  # where checkpoints are written

    task = AutomatonTask(get_automaton("parity"), 8)
    shape, config = (
        ModelShape(n_layers=1, d_model=16, n_heads=2, d_mlp=32),
        TrainConfig(steps=30, batch=8, eval_every=10, eval_size=64, seed=5),
    )
    train(task, shape, config, tmp_path / "full", progress=False)
    writes, real = [], training.atomic_write

    def dies_before_the_second_checkpoints_json(path, data):
        writes.append(path.name)
        if path.name == "checkpoint.json" and writes.count("checkpoint.json") == 2:
            raise KeyboardInterrupt  # as if killed here
        real(path, data)

    monkeypatch.setattr(training, "atomic_write", dies_before_the_second_checkpoints_json)
    with pytest.raises(KeyboardInterrupt):
        train(task, shape, config, tmp_path / "cut", progress=False)
    monkeypatch.setattr(training, "atomic_write", real)
    assert json.loads((tmp_path / "cut" / "checkpoint.json").read_text())["step"] == 10  # the stale copy
    torn = tmp_path / "cut" / ".checkpoint.safetensors.x1y2.tmp"  # what a SIGKILL mid-write leaves
    torn.write_bytes(b"half a file")
    train(task, shape, config, tmp_path / "cut", resume=True, progress=False)
    assert not torn.exists()
    assert_same_run(tmp_path / "full", tmp_path / "cut")


def test_resuming_with_another_thread_count_warns(tmp_path):
    """Sums split across threads round differently, so bit-identity needs the same --threads: say so."""
    task = AutomatonTask(get_automaton("parity"), 8)
    shape = ModelShape(n_layers=1, d_model=16, n_heads=2, d_mlp=32)
    config = TrainConfig(steps=20, batch=8, eval_every=10, eval_size=64, seed=5)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        train(task, shape, TrainConfig(**{**config.__dict__, "max_minutes": 0.0}), tmp_path, progress=False)
        torch.set_num_threads(2)
        with pytest.warns(UserWarning, match="trained with 1 torch thread"):
            train(task, shape, config, tmp_path, resume=True, progress=False)
    finally:
        torch.set_num_threads(before)


def test_a_version_1_checkpoint_still_loads_and_resumes(tmp_path):
    """Checkpoints written before the metadata moved into the safetensors header: checkpoint.json
    holds it, with the whole file's sha256."""
    import hashlib

    from safetensors.torch import load, save

    from sandbox_lens.interp.train import load_trained

    task = AutomatonTask(get_automaton("parity"), 8)
    shape = ModelShape(n_layers=1, d_model=16, n_heads=2, d_mlp=32)
    config = TrainConfig(steps=20, batch=8, eval_every=10, eval_size=64, seed=5)
    train(task, shape, TrainConfig(**{**config.__dict__, "max_minutes": 0.0}), tmp_path / "v1", progress=False)
    weights, meta_path = tmp_path / "v1" / "checkpoint.safetensors", tmp_path / "v1" / "checkpoint.json"
    data = save(load(weights.read_bytes()))  # no header metadata
    weights.write_bytes(data)
    meta = json.loads(meta_path.read_text())
    meta.pop("tensors_sha256")
    meta_path.write_text(json.dumps(dict(meta, version=1, sha256=hashlib.sha256(data).hexdigest())))
    assert load_trained(tmp_path / "v1").card.construction == "trained"
    assert train(task, shape, config, tmp_path / "v1", resume=True, progress=False)["steps"] == 20
    train(task, shape, config, tmp_path / "whole", progress=False)
    assert_same_run(tmp_path / "whole", tmp_path / "v1")
