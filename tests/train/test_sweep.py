"""Sweeps: a grid × seeds, one run per cell, resumable, on a local pool or on Ray, same figures."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sandbox_lens.interp.cli import main
from sandbox_lens.interp.errors import CheckpointError
from sandbox_lens.interp.tasks.batches import DyckTask
from sandbox_lens.interp.tasks.dyck import Dyck
from sandbox_lens.interp.train import ModelShape, TrainConfig
from sandbox_lens.interp.train.sweep import parse_grid, run_sweep

ROOT = Path(__file__).resolve().parents[2]
TINY = ModelShape(n_layers=1, d_model=8, n_heads=1)
FEW = TrainConfig(steps=12, batch=4, eval_every=6, eval_size=16, warmup=2)
TASK = DyckTask(Dyck(1, 2), 8)


def _no_times(summary: dict) -> dict:
    """A summary without what depends on the machine's speed."""

    def strip(x):
        if isinstance(x, dict):
            return {
                k: strip(v)
                for k, v in x.items()
                if "seconds" not in k and "minutes" not in k and k not in ("trained_now", "stacked_now")
            }
        if isinstance(x, list):
            return [strip(v) for v in x]
        return x

    return strip(summary)


def test_a_grid_trains_one_run_per_cell_and_seed(tmp_path):
    grid = parse_grid(["lr=0.001,0.003", "layers=1,2"])
    assert grid == {"lr": [0.001, 0.003], "n_layers": [1, 2]}
    s = run_sweep(TASK, TINY, FEW, tmp_path, [0, 1], grid=grid, workers=1, progress=False)
    assert len(s["cells"]) == 4 and len(s["runs"]) == 8 and s["trained_now"] == 8
    assert (tmp_path / "lr=0.001_n_layers=2" / "seed_1" / "metrics.json").exists()
    cell = next(c for c in s["cells"] if c["cell"] == "lr=0.003_n_layers=1")
    assert cell["setting"] == {"lr": 0.003, "n_layers": 1}
    assert cell["best_accuracy"] == max(r["best_accuracy"] for r in s["runs"] if r["cell"] == cell["cell"])
    again = run_sweep(TASK, TINY, FEW, tmp_path, [0, 1], grid=grid, workers=1, progress=False)
    assert again["trained_now"] == 0 and _no_times(again) == _no_times(s)  # finished runs are skipped
    with pytest.raises(CheckpointError, match="another task, shape or config"):
        run_sweep(
            TASK,
            TINY,
            FEW.__class__(**{**FEW.__dict__, "batch": 8}),
            tmp_path,
            [0, 1],
            grid=grid,
            workers=1,
            progress=False,
        )


def test_a_killed_sweep_trains_only_the_missing_runs(tmp_path):
    """SIGKILL in the middle of a sweep, then the same command: finished runs are kept, the rest resume."""
    argv = [
        sys.executable,
        "-m",
        "sandbox_lens.interp",
        "train",
        "dyck",
        "--dyck",
        "1,2",
        "-T",
        "8",
        "--layers",
        "1",
        "--d-model",
        "8",
        "--heads",
        "1",
        "--steps",
        "400",
        "--batch",
        "4",
        "--eval-every",
        "20",
        "--eval-size",
        "16",
        "--seeds",
        "0-3",
        "--workers",
        "1",
        "--stack",
        "off",  # one run after another (a killed stack: tests/train/test_stacked.py)
        "--out",
        str(tmp_path),
    ]
    proc = subprocess.Popen(
        argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    deadline = time.time() + 120
    while time.time() < deadline and not (tmp_path / "seed_1" / "checkpoint.json").exists():
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    finished = {s for s in range(4) if (tmp_path / f"seed_{s}" / "metrics.json").exists()}
    assert 0 in finished and 3 not in finished
    before = {s: (tmp_path / f"seed_{s}" / "metrics.json").read_bytes() for s in finished}
    r = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["trained_now"] == 4 - len(finished) and len(summary["runs"]) == 4
    assert all((tmp_path / f"seed_{s}" / "metrics.json").read_bytes() == b for s, b in before.items())


def test_ray_and_the_local_pool_give_the_same_summary(tmp_path):
    pytest.importorskip("ray")
    local = run_sweep(TASK, TINY, FEW, tmp_path / "local", [0, 1], workers=2, progress=False)
    ray = run_sweep(TASK, TINY, FEW, tmp_path / "ray", [0, 1], backend="ray", workers=2, progress=False)  # 2 CPUs
    assert _no_times(ray) == _no_times(local)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--grid", "colour=red,blue"], "unknown grid key 'colour'"),
        (["--grid", "lr"], "KEY=V1,V2"),
        (["--grid", "layers=1,0"], "layers, d_model and heads must be ≥ 1"),
        (["--grid", "pos=spiral"], "positional must be one of"),
    ],
)
def test_bad_grids_are_refused_in_one_line(tmp_path, capsys, argv, message):
    code = main(["train", "dyck", "--dyck", "1,2", "--seeds", "0-1", "--out", str(tmp_path / "x"), *argv])
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("\n") == 1
    assert not (tmp_path / "x").exists()  # nothing written


def test_ray_without_ray_installed_is_a_one_line_error(tmp_path):
    probe = (
        "import sys; sys.modules['ray'] = None; from sandbox_lens.interp.cli import main; "
        f"sys.exit(main(['train', 'dyck', '--dyck', '1,2', '--steps', '2', '--seeds', '0-1', "
        f"'--backend', 'ray', '--out', {str(tmp_path / 'r')!r}]))"
    )
    r = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=False)
    assert r.returncode == 2 and "needs Ray" in r.stderr and "Traceback" not in r.stderr


def test_population_analyses_of_a_sweep(tmp_path, capsys):
    """Per cell: attention variation between seeds beside the exact random baseline, the references
    heads match, and the probes' spread."""
    from sandbox_lens.interp.compare.population import population
    from sandbox_lens.probes.dyck import random_attention_baseline

    grid = parse_grid(["layers=1,2"])
    run_sweep(TASK, TINY, FEW, tmp_path, [0, 1, 2], grid=grid, workers=1, progress=False)
    result = population(tmp_path, samples=16, out=tmp_path / "population.json")
    assert set(result["cells"]) == {"n_layers=1", "n_layers=2"}
    two = result["cells"]["n_layers=2"]
    assert two["seeds"] == [0, 1, 2] and set(two["attention_variation"]) == {"L0H0", "L1H0"}
    v = two["attention_variation"]["L1H0"]
    assert v["pairs"] == 3 and v["min"] <= v["mean"] <= v["max"]
    assert two["random_baseline"] == random_attention_baseline(two["positions"])
    assert sum(r["heads"] for r in two["best_reference"]["L0H0"].values()) == 3
    assert set(two["probes"]) == {"depth", "stack-top type"} and len(two["probes"]["depth"]["per_seed"]) == 3
    assert json.loads((tmp_path / "population.json").read_text()) == json.loads(json.dumps(result))
    assert main(["population", str(tmp_path / "nothing")]) == 2
    assert "no training runs" in capsys.readouterr().err


def test_a_pool_job_stopped_by_a_signal_reaches_the_parent_as_itself():
    """A worker's run stopped by Ctrl-C raises Interrupted with two arguments; it must pickle back to the parent (it
    used to fail to unpickle there, and the parent saw a BrokenProcessPool with a traceback)."""
    import pickle
    import signal

    from sandbox_lens.interp.errors import Interrupted

    back = pickle.loads(pickle.dumps(Interrupted(signal.SIGINT, "interrupted at step 3; --resume continues it")))
    assert (
        isinstance(back, Interrupted) and back.signum == signal.SIGINT and str(back).endswith("--resume continues it")
    )
