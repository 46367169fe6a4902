"""Populations of twins: a grid of settings × seeds, one run directory per cell, resumable, on a local
process pool or on Ray (whose workers need not see ``--out``: :mod:`sandbox_lens.interp.train.remote`).

A *cell* is one setting of the grid (``--grid lr=1e-3,3e-3 layers=1,2`` has four) trained with every
seed: ``OUT/<cell>/seed_<s>/`` (``OUT/seed_<s>/`` without a grid). Rerunning a sweep skips the runs
that finished (their ``metrics.json`` exists and was trained on the same task, shape and config),
resumes the ones that stopped part-way (from their checkpoint) and trains the rest, so a killed
sweep continues where it stopped. ``OUT/summary.json`` holds every run, per-cell figures and the
aggregate.

Every run uses one torch thread, whichever backend runs it: small models are fastest that way on a
loaded machine, and the weights do not depend on the backend (``--backend ray`` gives the same
summary as the local pool for the same seeds, times aside, with ``stack="off"``).

On the local pool, the seeds of a cell whose twin is small are trained as stacked ensembles
(:mod:`sandbox_lens.interp.train.stacked`; ``stack``: ``auto``, ``off`` or the most members a stack holds): the same
runs up to float rounding, each in its own directory, faster where a step's fixed cost dominates. A stopped
stack resumes as that stack.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import asdict, fields, replace
from pathlib import Path
from typing import Any

import numpy as np

from sandbox_lens.interp.errors import CheckpointError, Interrupted, OptionError, SandboxError
from sandbox_lens.interp.files import atomic_write, exclusive
from sandbox_lens.interp.jsonfile import read_json
from sandbox_lens.interp.progress import bar as progress_bar
from sandbox_lens.interp.settings import flag_of
from sandbox_lens.interp.tasks.kinds import task_from_dict
from sandbox_lens.interp.train.checkpoint import CKPT_META, METRICS, METRICS_SCHEMA, has_checkpoint
from sandbox_lens.interp.train.config import ModelShape, TrainConfig, run_identity
from sandbox_lens.interp.train.loop import train
from sandbox_lens.interp.train.remote import check_address, run_ray
from sandbox_lens.interp.train.stacked import STACK_MAX, settle, stack_size, train_stacked

__all__ = ["GRID_KEYS", "parse_grid", "cells", "check_stack", "run_sweep", "run_pool", "BACKENDS"]

BACKENDS = ("local", "ray")
#: Grid keys: ModelShape and TrainConfig fields, and the names of their `interp train` options
#: (``layers`` for n_layers, ``d-model`` for d_model, ...), read from the fields themselves.
ALIASES = {
    flag_of(f).lstrip("-"): f.name
    for cls in (ModelShape, TrainConfig)
    for f in fields(cls)
    if flag_of(f).lstrip("-") != f.name
}
SHAPE_KEYS = tuple(f.name for f in fields(ModelShape))
CONFIG_KEYS = tuple(f.name for f in fields(TrainConfig) if f.name != "seed")
GRID_KEYS = SHAPE_KEYS + CONFIG_KEYS


class SweepError(SandboxError, ValueError):
    """A grid or backend request that cannot be honoured."""


def _value(text: str) -> Any:
    if text.lower() == "none":
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def parse_grid(items: Sequence[str]) -> dict[str, list[Any]]:
    """``["lr=1e-3,3e-3", "layers=1,2"]`` → ``{"lr": [0.001, 0.003], "n_layers": [1, 2]}``."""
    grid: dict[str, list[Any]] = {}
    for item in items:
        key, sep, values = item.partition("=")
        key = ALIASES.get(key.strip(), key.strip().replace("-", "_"))
        if not sep or not values:
            raise SweepError(f"--grid takes KEY=V1,V2,...; got {item!r}")
        if key not in GRID_KEYS:
            raise SweepError(
                f"unknown grid key {item.partition('=')[0]!r} (known: {', '.join(GRID_KEYS)}; "
                f"short names: {', '.join(ALIASES)})"
            )
        if key in grid:
            raise SweepError(f"grid key {key} given twice")
        grid[key] = [_value(v.strip()) for v in values.split(",")]
    return grid


def _cell_name(setting: dict[str, Any]) -> str:
    return "_".join(f"{k}={v}" for k, v in setting.items()) or ""


def cells(
    shape: ModelShape, config: TrainConfig, grid: dict[str, list[Any]]
) -> list[tuple[str, dict, ModelShape, TrainConfig]]:
    """Every setting of the grid: (directory name, setting, shape, config); the settings are validated."""
    keys = list(grid)
    combos: list[dict[str, Any]] = [{}]
    for k in keys:
        combos = [{**c, k: v} for c in combos for v in grid[k]]
    out = []
    for setting in combos:
        try:
            s = replace(shape, **{k: v for k, v in setting.items() if k in SHAPE_KEYS})
            c = replace(config, **{k: v for k, v in setting.items() if k in CONFIG_KEYS})
        except (TypeError, ValueError) as e:
            raise SweepError(f"grid setting {_cell_name(setting)}: {e}") from None
        out.append((_cell_name(setting), setting, s, c))
    return out


def _job(args: tuple) -> dict[str, Any]:
    """One run, in whatever process the backend chose: one thread, resume if a checkpoint exists."""
    task_dict, shape, config, out, init_spec = args
    import torch

    torch.set_num_threads(1)
    out = Path(out)
    resume = has_checkpoint(out)
    return train(task_from_dict(task_dict), shape, config, out, resume=resume, progress=False, init_spec=init_spec)


def _unit(args: tuple) -> list[dict[str, Any]]:
    """A unit of the local pool: one run (:func:`_job`), or runs of one cell trained as one stack (resumed as that
    stack when their checkpoints name it); the metrics of each, in order."""
    kind, task_dict, shape, configs, outs, init_spec = args
    if kind == "run":
        return [_job((task_dict, shape, configs[0], outs[0], init_spec))]
    import torch

    torch.set_num_threads(1)
    resume = has_checkpoint(Path(outs[0]))
    return train_stacked(task_from_dict(task_dict), shape, configs, outs, resume=resume, init_spec=init_spec)


def _stacked_at(out: Path) -> tuple[tuple[int, ...], int] | None:
    """(the seeds stacked, the step) a run's checkpoint records; None for a single run's (or an unreadable one: it
    is resumed alone, which reads it properly)."""
    try:
        meta = read_json(out / CKPT_META, error=CheckpointError, what="checkpoint metadata")
    except (CheckpointError, FileNotFoundError):
        return None
    stack, step = meta.get("stack"), meta.get("step")
    if not isinstance(stack, list) or not all(isinstance(s, int) for s in stack) or not isinstance(step, int):
        return None
    return tuple(stack), step


def _units(
    plan: list[tuple], todo: list[int], task: Any, workers: int | None, stack: str
) -> list[tuple[str, list[int]]]:
    """The runs to train (indices into the plan) grouped into pool units, each ``("run", [i])`` or ``("stack",
    [i, ...])``: a stopped stack's runs together again (a stack of one included: it resumes as it was trained),
    other checkpointed runs alone, fresh runs of a cell in stacks of :func:`stack_size` members."""
    settle([plan[i][3] for i in todo])  # a checkpoint unit a kill cut short: finished or undone first
    units: list[tuple[str, list[int]]] = []
    fresh: dict[str, list[int]] = {}
    resumed: dict[tuple, list[int]] = {}
    for i in todo:
        name, _, _, directory, _, _ = plan[i]
        if not has_checkpoint(directory):
            fresh.setdefault(name, []).append(i)
            continue
        at = _stacked_at(directory)
        if at is None:
            units.append(("run", [i]))
        else:
            resumed.setdefault((name, *at), []).append(i)
    units += [("stack", runs) for runs in resumed.values()]
    cores = workers or os.cpu_count() or 1
    for runs in fresh.values():
        _, _, _, _, shape, config = plan[runs[0]]
        size = stack_size(task, shape, config, len(runs), cores, stack)
        count = math.ceil(len(runs) / size)  # stacks of nearly equal size
        chunks = [runs[k::count] for k in range(count)]
        units += [("run" if len(chunk) == 1 else "stack", chunk) for chunk in chunks]
    return units


def _finished(out: Path, task_dict: dict, shape: ModelShape, config: TrainConfig) -> dict[str, Any] | None:
    path = out / METRICS
    if not path.exists():
        return None
    try:
        m = read_json(path, METRICS_SCHEMA, error=CheckpointError, what="a run's metrics")
    except CheckpointError as e:  # written atomically: this is damage, not a killed run
        raise CheckpointError(
            f"{e}; it was damaged after it was written — delete it to recompute it from the run's checkpoint"
        ) from None
    recorded = run_identity(m.get("task"), m.get("shape", {}), m.get("config", {}))
    if recorded != run_identity(task_dict, shape, config):
        raise CheckpointError(f"{out} holds a run of another task, shape or config; use another --out")
    return m


def _die_with_parent(parent: int) -> None:
    """A pool worker's start: on Linux the kernel kills it when the sweep's process dies, however it dies (SIGKILL
    included), so no orphan trains on holding the directory's lock. Checkpoints are written atomically, so the rerun
    resumes each run from its last one (a gentler SIGTERM would stop the run, but leave the worker waiting for
    work from a parent that is gone)."""
    import ctypes
    import signal
    import sys

    if not sys.platform.startswith("linux"):  # pragma: no cover - elsewhere an orphan finishes its run
        return
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # pragma: no cover - no prctl in this libc
        return
    if os.getppid() != parent:  # the parent died before the call above
        os.kill(os.getpid(), signal.SIGKILL)


#: In a pool worker: whether it is running a job (a signal then stops the job; an idle worker lets it pass).
_BUSY = False


class _Busy:
    """``fn`` as a pool job, marking the worker busy while it runs (picklable: ``fn`` is a module-level function)."""

    def __init__(self, fn: Callable[[Any], Any]) -> None:
        self.fn = fn

    def __call__(self, job: Any) -> Any:
        global _BUSY
        _BUSY = True
        try:
            return self.fn(job)
        finally:
            _BUSY = False


def _worker_start(parent: int) -> None:
    """A pool worker's start: killed with the parent (:func:`_die_with_parent`); Ctrl-C and SIGTERM, which reach
    every process of the group, stop a running job as they stop a run alone (the training loop checkpoints), and pass
    over an idle worker without a traceback (the parent, which got them too, shuts the pool down)."""
    import signal

    def stop(signum: int, frame: Any) -> None:
        if _BUSY:
            raise Interrupted(signum, "interrupted" if signum == signal.SIGINT else "terminated")

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    _die_with_parent(parent)


def run_pool(
    fn: Callable[[Any], Any], jobs: Sequence[Any], workers: int | None, progress: bool, desc: str, unit: str = "run"
) -> list[Any]:
    """``fn`` on every job, in order, in a pool of ``workers`` processes (None: the CPU cores; never more than the
    jobs; one: in this process), each worker killed with the parent (:func:`_die_with_parent`); on Ctrl-C or a
    failed job no queued job starts. ``fn`` must be a module-level function (it is pickled) and set its own
    threads."""
    workers = max(1, min(workers or (os.cpu_count() or 1), len(jobs)))
    if workers == 1:
        return [fn(j) for j in progress_bar(jobs, disable=not progress, desc=desc, unit=unit)]
    from concurrent.futures import ProcessPoolExecutor

    pool = ProcessPoolExecutor(max_workers=workers, initializer=_worker_start, initargs=(os.getpid(),))
    try:
        results = list(
            progress_bar(pool.map(_Busy(fn), jobs), total=len(jobs), disable=not progress, desc=desc, unit=unit)
        )
    except BaseException:  # Ctrl-C or a failed run: start no queued run (the running ones checkpoint and stop)
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    return results


def check_stack(stack: str) -> None:
    """``stack`` is ``auto``, ``off`` or a number of members from 1 to :data:`STACK_MAX` (as ``--stack`` reads it)."""
    if stack in ("auto", "off") or (stack.isdigit() and 1 <= int(stack) <= STACK_MAX):
        return
    raise OptionError(f"--stack takes auto, off or a number of members from 1 to {STACK_MAX}; got {stack!r}")


def _ray_ready() -> None:
    """Ray is installed and RAY_ADDRESS, if set, answers: checked before anything is written."""
    try:
        import ray  # noqa: F401
    except ImportError:
        raise SweepError("--backend ray needs Ray: pip install 'sandbox-lens[ray]' (or pip install ray)") from None

    check_address()


def _run_ray(jobs: list[tuple], progress: bool, desc: str, num_cpus: int | None) -> list[dict[str, Any]]:
    """The same jobs as Ray tasks of one CPU each, shipping their files to the driver (:mod:`sandbox_lens.interp.train.remote`)."""

    return run_ray([(t, s, c, str(Path(d).resolve()), i) for t, s, c, d, i in jobs], progress, desc, num_cpus)


def _figures(runs: list[dict[str, Any]]) -> dict[str, Any]:
    best = [r["best_accuracy"] for r in runs]
    final = [r["final_accuracy"] for r in runs]
    return {
        "best_accuracy": max(best),
        "median_best_accuracy": float(np.median(best)),
        "mean_best_accuracy": float(np.mean(best)),
        "best_final_accuracy": max(final),
        "median_final_accuracy": float(np.median(final)),
        "best_seed": runs[int(np.argmax(best))]["seed"],
        "runs_at_target": sum(r["stopped_by"] == "target" for r in runs),
    }


def run_sweep(
    task,
    shape: ModelShape,
    config: TrainConfig,
    out: str | Path,
    seeds: Sequence[int],
    grid: dict[str, list[Any]] | None = None,
    backend: str = "local",
    workers: int | None = None,
    progress: bool = True,
    init_spec: Any = None,
    stack: str = "auto",
) -> dict[str, Any]:
    """Train every (cell, seed) that has not finished; write and return ``OUT/summary.json``.

    ``stack`` (the local pool): ``auto`` trains the seeds of a cell whose twin is small as stacked ensembles
    (:func:`~sandbox_lens.interp.train.stacked.stack_size`), ``off`` every run apart, a number at most that many
    members per stack wherever runs can be stacked."""
    if backend not in BACKENDS:
        raise SweepError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    check_stack(stack)
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise SweepError(f"--out {out} is a file")
    seeds = list(dict.fromkeys(int(s) for s in seeds))
    if not seeds:
        raise SweepError("a sweep needs at least one seed")
    if has_checkpoint(out) or (out / METRICS).is_file():
        raise SweepError(
            f"{out} holds a single training run; a sweep writes seed_*/ directories beside nothing else "
            "(choose another --out)"
        )
    settings = cells(shape, config, grid or {})
    task_dict = task.to_dict()
    plan = []  # (cell name, setting, seed, directory, shape, config)
    for name, setting, s, c in settings:
        for seed in seeds:
            plan.append(
                (
                    name,
                    setting,
                    seed,
                    out / name / f"seed_{seed}" if name else out / f"seed_{seed}",
                    s,
                    replace(c, seed=seed),
                )
            )
    done = {i: _finished(d, task_dict, s, c) for i, (_, _, _, d, s, c) in enumerate(plan)}
    todo = [i for i, m in done.items() if m is None]
    if backend == "ray" and todo:
        _ray_ready()
    out.mkdir(parents=True, exist_ok=True)
    with exclusive(out):
        jobs = [(task_dict, plan[i][4], plan[i][5], str(plan[i][3]), init_spec) for i in todo]
        stacks: list[list[int]] = []  # the seeds trained together now, per stack
        desc = f"{len(todo)} of {len(plan)} runs"
        if jobs:
            if backend == "ray":
                for i, r in zip(todo, _run_ray(jobs, progress, desc, workers)):
                    done[i] = r
            else:
                units = _units(plan, todo, task, workers, stack)
                work = [
                    (kind, task_dict, plan[u[0]][4], [plan[i][5] for i in u], [str(plan[i][3]) for i in u], init_spec)
                    for kind, u in units
                ]
                unit_of = "stack" if any(len(u) > 1 for _, u in units) else "run"
                stacks = [[plan[i][2] for i in u] for kind, u in units if kind == "stack"]
                for (_, u), rs in zip(units, run_pool(_unit, work, workers, progress, desc, unit=unit_of)):
                    for i, r in zip(u, rs):
                        done[i] = r
        keep = ("seed", "final_accuracy", "best_accuracy", "steps", "stopped_by", "wall_seconds", "minutes_to_best")
        runs = [{"cell": plan[i][0], **plan[i][1], **{k: done[i][k] for k in keep}} for i in range(len(plan))]
        per_cell = []
        for name, setting, _, _ in settings:
            mine = [r for r in runs if r["cell"] == name]
            per_cell.append({"cell": name, "setting": setting, **_figures(mine)})
        summary = {
            "task": task_dict,
            "task_name": task.name,
            "seeds": seeds,
            "grid": grid or {},
            "shape": asdict(shape),
            "config": {k: v for k, v in asdict(config).items() if k != "seed"},
            **_figures(runs),
            "cells": per_cell,
            "runs": runs,
            "trained_now": len(todo),
            "stacked_now": stacks,
        }
        atomic_write(out / "summary.json", (json.dumps(summary, indent=1) + "\n").encode())
        return summary
