"""Ray without a shared file system (sandbox_lens.interp.train.remote): a worker node that cannot see the driver's --out
trains the sweep, resumes a run stopped part-way from the driver's checkpoint, survives losing its worker
after a checkpoint, and leaves --out exactly as the local pool does."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from run_checks import assert_same_run
from safetensors.torch import load_file

from sandbox_lens.interp.errors import SandboxError
from sandbox_lens.interp.tasks.batches import DyckTask
from sandbox_lens.interp.tasks.dyck import Dyck
from sandbox_lens.interp.train import ModelShape, TrainConfig, train
from sandbox_lens.interp.train.remote import pack, unpack
from sandbox_lens.interp.train.sweep import run_sweep

TINY = ModelShape(n_layers=1, d_model=8, n_heads=1)
FEW = TrainConfig(steps=24, batch=4, eval_every=6, eval_size=16, warmup=2)
TASK = DyckTask(Dyck(1, 2), 8)


class _Stop(Exception):
    pass


def _stopped_run(out: Path, config: TrainConfig) -> None:
    """A run stopped right after its first checkpoint, as a killed sweep leaves it."""

    def stop() -> None:
        raise _Stop()

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as every sweep run: resume is bit-exact with the same thread count
    try:
        with pytest.raises(_Stop):
            train(TASK, TINY, config, out, progress=False, on_checkpoint=stop)
    finally:
        torch.set_num_threads(threads)


def _same_run(a: Path, b: Path) -> None:
    assert_same_run(a, b)
    assert load_file(a / "model.safetensors").keys() == load_file(b / "model.safetensors").keys()


def test_pack_and_unpack_round_trip_and_stay_inside(tmp_path):
    (tmp_path / "a" / "sub").mkdir(parents=True)
    (tmp_path / "a" / "x.json").write_text("{}")
    (tmp_path / "a" / "sub" / "y.bin").write_bytes(b"\0\1")
    (tmp_path / "a" / ".lock").write_text("1")
    files = pack(tmp_path / "a")
    assert files == {"sub/y.bin": b"\0\1", "x.json": b"{}"}  # the writer's lock stays behind
    unpack(tmp_path / "b", files)
    assert pack(tmp_path / "b") == files
    with pytest.raises(SandboxError, match="outside its run directory"):
        unpack(tmp_path / "c", {"../escape": b""})
    assert not (tmp_path / "escape").exists()


def _can_hide(path: Path) -> bool:
    if shutil.which("unshare") is None:
        return False
    r = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c", f"mount -t tmpfs none {path}"],
        capture_output=True,
        check=False,
    )
    return r.returncode == 0


@pytest.fixture
def hidden_cluster(tmp_path):
    """A Ray head in this process with no CPUs (so every run goes elsewhere) and a second node, 2 CPUs, in its
    own mount namespace where ``tmp_path`` is an empty tmpfs: its workers cannot see the driver's files. The
    node loses each run's worker once, right after the run's first checkpoint reached the driver."""
    ray = pytest.importorskip("ray")
    hidden = tmp_path / "driver"
    hidden.mkdir()
    if not _can_hide(hidden):
        pytest.skip("this machine does not allow a mount namespace (unshare -m): no node can be hidden from --out")
    if ray.is_initialized():
        ray.shutdown()
    ray.init(address="local", num_cpus=0, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    gcs = ray.get_runtime_context().gcs_address
    ray_bin = Path(sys.executable).with_name("ray")
    env = {**os.environ, "SANDBOX_LENS_TEST_LOSE_WORKER_AFTER": "1", "RAY_USAGE_STATS_ENABLED": "0"}
    node = subprocess.Popen(
        [
            "unshare",
            "-m",
            "--propagation",
            "private",
            "sh",
            "-c",
            f"mount -t tmpfs none {hidden} && exec {ray_bin} start --address={gcs} --num-cpus=2 --block",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.time() + 90
        while ray.cluster_resources().get("CPU", 0) < 2:
            assert time.time() < deadline and node.poll() is None, "the second Ray node did not join"
            time.sleep(0.5)
        yield ray, hidden
    finally:
        ray.shutdown()
        os.killpg(node.pid, 9)  # the node's raylet and workers share its session: a test node, stopped at once
        node.wait(timeout=30)


def test_a_sweep_on_a_node_that_cannot_see_out_resumes_and_matches_the_local_pool(hidden_cluster, tmp_path):
    ray, hidden = hidden_cluster
    out = hidden / "sweep"
    _stopped_run(out / "seed_0", replace(FEW, seed=0))  # stopped part-way: the remote run must resume it
    assert ray.get(ray.remote(num_cpus=1)(os.path.exists).remote(str(out))) is False  # the node sees nothing
    summary = run_sweep(TASK, TINY, FEW, out, [0, 1], backend="ray", progress=False)
    run_sweep(TASK, TINY, FEW, tmp_path / "local", [0, 1], workers=1, progress=False, stack="off")
    assert summary["trained_now"] == 2 and [r["steps"] for r in summary["runs"]] == [24, 24]
    for s in (0, 1):
        _same_run(out / f"seed_{s}", tmp_path / "local" / f"seed_{s}")
    assert not list(out.rglob("*.tmp"))


@pytest.mark.parametrize(
    "address, message",
    [("127.0.0.1:9", "does not answer"), ("nonsense", "is not host:port"), ("ray://127.0.0.1:9", "does not answer")],
)
def test_a_ray_address_that_does_not_answer_is_one_line_and_writes_nothing(tmp_path, address, message):
    pytest.importorskip("ray")
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "sandbox_lens.interp",
            "train",
            "dyck",
            "--dyck",
            "1,2",
            "--steps",
            "2",
            "--seeds",
            "0-1",
            "--backend",
            "ray",
            "--out",
            str(tmp_path / "r"),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "RAY_ADDRESS": address},
        timeout=120,
        check=False,
    )
    assert r.returncode == 2 and message in r.stderr and r.stderr.count("\n") == 1, r.stderr
    assert not (tmp_path / "r").exists()
