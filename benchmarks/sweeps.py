"""Sweep throughput (``make bench``; alone: ``python benchmarks/sweeps.py [--runs N]``).

The same runs (a small Dyck_{1,2} model, every run from scratch) through :func:`sandbox_lens.interp.train.sweep.run_sweep`
three ways in one process, so the ratios compare like with like on this machine at this moment:
the local pool with 1 worker, with 2 workers, and Ray tasks on a local runtime of 2 CPUs. Prints
runs per minute and the ratios 2 workers / 1 worker and Ray / local pool (2 each). Imports are
warmed up first (the local pool forks a warm process); Ray's figure includes starting its runtime and
its workers' imports, as a user's first sweep would.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sandbox_lens.interp.tasks.batches import DyckTask  # noqa: E402
from sandbox_lens.interp.tasks.dyck import Dyck  # noqa: E402
from sandbox_lens.interp.train import ModelShape, TrainConfig  # noqa: E402
from sandbox_lens.interp.train.sweep import run_sweep  # noqa: E402


def timed(backend: str, workers: int, runs: int, steps: int) -> tuple[float, dict]:
    task = DyckTask(Dyck(1, 2), 12)
    shape = ModelShape(n_layers=1, d_model=16, n_heads=1)
    config = TrainConfig(steps=steps, batch=16, eval_every=steps, eval_size=64, warmup=5)
    with tempfile.TemporaryDirectory() as d:
        start = time.perf_counter()
        summary = run_sweep(
            task,
            shape,
            config,
            Path(d),
            list(range(runs)),
            backend=backend,
            workers=workers,
            progress=False,
            stack="off",  # the pool and the backends, run for run (stacking: benchmarks/stacked_seeds.py)
        )
        return time.perf_counter() - start, summary


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=8)
    ap.add_argument("--steps", type=int, default=100)
    args = ap.parse_args()
    timed("local", 1, 1, 5)  # warm-up: imports (TransformerLens) happen once, outside every timing
    rows = {}
    for label, backend, workers in (
        ("local, 1 worker", "local", 1),
        ("local, 2 workers", "local", 2),
        ("ray, 2 CPUs", "ray", 2),
    ):
        try:
            seconds, _ = timed(backend, workers, args.runs, args.steps)
        except Exception as e:  # e.g. Ray missing: report it, keep the other lines
            print(f"{label:18s} skipped: {e}")
            continue
        rows[label] = seconds
        print(
            f"{label:18s} {args.runs} runs of {args.steps} steps in {seconds:6.1f} s = {60 * args.runs / seconds:6.1f} runs/min"
        )
    if "local, 1 worker" in rows and "local, 2 workers" in rows:
        print(f"speed-up of 2 workers over 1: {rows['local, 1 worker'] / rows['local, 2 workers']:.2f}x")
    if "ray, 2 CPUs" in rows and "local, 2 workers" in rows:
        print(f"Ray / local pool (2 each), time ratio: {rows['ray, 2 CPUs'] / rows['local, 2 workers']:.2f}")
    print(json.dumps({k: round(v, 2) for k, v in rows.items()}))


if __name__ == "__main__":
    main()
