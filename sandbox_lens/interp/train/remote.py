"""Sweeps on Ray, with or without a file system the workers share with the driver.

A Ray task never opens the driver's ``--out``. It trains in a scratch directory of its own node and ships
the run directory's files — after every checkpoint and at the end — to a small actor pinned to the
*driver's* node (:class:`RunFiles`), which writes them into ``--out`` atomically, file by file (a
checkpoint's weights carry their own metadata, so a half-shipped pair is still one consistent
checkpoint). A task starts by asking that actor for what ``--out`` already holds for its run, so a run
stopped part-way resumes from its last shipped checkpoint on whichever node the task lands — after an
interrupted sweep, or when Ray retries the task of a lost worker (``max_retries``). On a single machine
the result is the same as the local pool's, bit for bit.

The cluster is the one in ``RAY_ADDRESS`` (or a local runtime); an address that does not answer is refused
in one line before anything is written.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from sandbox_lens.interp.errors import SandboxError
from sandbox_lens.interp.files import atomic_write
from sandbox_lens.interp.progress import bar as progress_bar
from sandbox_lens.interp.tasks.kinds import task_from_dict
from sandbox_lens.interp.train.checkpoint import has_checkpoint
from sandbox_lens.interp.train.loop import train

__all__ = ["run_ray", "pack", "unpack", "RunFiles", "check_address", "MAX_RETRIES", "CONNECT_SECONDS"]

#: how often Ray starts a run again whose worker or node was lost
MAX_RETRIES = 3
#: how long the driver waits for a Ray address to answer
CONNECT_SECONDS = 20
#: files of a run directory that stay where they are (the writer's lock)
LOCAL_ONLY = (".lock",)


def pack(directory: Path) -> dict[str, bytes]:
    """Every file under ``directory`` (relative POSIX path → bytes), the lock and temporary files aside."""
    if not directory.is_dir():
        return {}
    return {
        p.relative_to(directory).as_posix(): p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if p.is_file() and p.name not in LOCAL_ONLY and not p.name.endswith(".tmp")
    }


def unpack(directory: Path, files: dict[str, bytes]) -> None:
    """Write ``files`` (from :func:`pack`) under ``directory``, each atomically; refuses paths that leave it."""
    root = directory.resolve()
    for name, data in files.items():
        target = (root / name).resolve()
        if root != target and root not in target.parents:
            raise SandboxError(f"a shipped run file {name!r} points outside its run directory")
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(target, data)


class RunFiles:
    """The driver-side end: runs on the driver's node (see :func:`run_ray`) and reads and writes ``--out``."""

    def __init__(self) -> None:
        self.shipped: dict[str, int] = {}

    def get(self, directory: str) -> dict[str, bytes]:
        """What the driver's run directory holds now (the start of a run, or the checkpoint to resume)."""
        return pack(Path(directory))

    def put(self, directory: str, files: dict[str, bytes]) -> int:
        """Write a run's files into the driver's run directory; how many times this run has shipped."""
        unpack(Path(directory), files)
        self.shipped[directory] = self.shipped.get(directory, 0) + 1
        return self.shipped[directory]


def ray_job(args: tuple) -> dict[str, Any]:
    """One run on a Ray worker: fetch the run directory from the driver, train in scratch space (resuming a
    checkpoint if one came), ship the files after every checkpoint and at the end; returns the metrics."""
    import ray
    import torch

    task_dict, shape, config, directory, init_spec, receiver = args
    torch.set_num_threads(1)
    die_after = int(os.environ.get("SANDBOX_LENS_TEST_LOSE_WORKER_AFTER", "0"))  # fault injection (tests only)
    with tempfile.TemporaryDirectory(prefix="sandbox-lens-run-") as scratch:
        run = Path(scratch) / "run"
        unpack(run, ray.get(receiver.get.remote(directory)))

        def ship() -> None:
            shipped = ray.get(receiver.put.remote(directory, pack(run)))
            if die_after and shipped == die_after:
                os._exit(1)  # the worker is lost after its checkpoint reached the driver

        metrics = train(
            task_from_dict(task_dict),
            shape,
            config,
            run,
            resume=has_checkpoint(run),
            progress=False,
            init_spec=init_spec,
            on_checkpoint=ship,
        )
        ray.get(receiver.put.remote(directory, pack(run)))
    return metrics


def _connect(num_cpus: int | None) -> bool:
    """Join the cluster in RAY_ADDRESS (or start a local runtime); True when this call started it."""
    import ray

    if ray.is_initialized():
        return False
    address = os.environ.get("RAY_ADDRESS")
    if not address:
        ray.init(
            address="local",
            include_dashboard=False,
            log_to_driver=False,
            logging_level="ERROR",
            num_cpus=num_cpus or os.cpu_count() or 1,
        )  # "local": a new runtime, never a stale cluster's
        return True
    check_address()  # Ray itself retries an address that does not answer for ever
    try:
        ray.init(address=address, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    except Exception as e:  # ConnectionError, TimeoutError, RuntimeError: all mean no cluster here
        raise SandboxError(
            f"RAY_ADDRESS={address} does not answer ({type(e).__name__}); start the cluster or "
            "unset RAY_ADDRESS for a local runtime"
        ) from None
    return True


def check_address() -> None:
    """Refuse, in one line, a ``RAY_ADDRESS`` ``host:port`` (or ``ray://host:port``) nothing listens on, within
    :data:`CONNECT_SECONDS`; unset, ``auto`` and ``local`` are Ray's own to resolve."""
    import socket

    address = os.environ.get("RAY_ADDRESS", "")
    if address in ("", "auto", "local"):
        return
    host, _, port = address.split("://", 1)[-1].rpartition(":")
    try:
        with socket.create_connection((host or "127.0.0.1", int(port)), timeout=CONNECT_SECONDS):
            pass
    except ValueError:
        raise SandboxError(f"RAY_ADDRESS={address} is not host:port (or ray://host:port, auto, local)") from None
    except OSError as e:
        raise SandboxError(
            f"RAY_ADDRESS={address} does not answer ({e.strerror or type(e).__name__}); start the "
            "cluster or unset RAY_ADDRESS for a local runtime"
        ) from None


def run_ray(jobs: list[tuple], progress: bool, desc: str, num_cpus: int | None) -> list[dict[str, Any]]:
    """The sweep's jobs ``(task dict, shape, config, run directory, init spec)`` as Ray tasks of one CPU each."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    started_here = _connect(num_cpus)
    try:
        here = NodeAffinitySchedulingStrategy(node_id=ray.get_runtime_context().get_node_id(), soft=False)
        receiver = ray.remote(num_cpus=0)(RunFiles).options(scheduling_strategy=here).remote()
        remote = ray.remote(num_cpus=1, max_retries=MAX_RETRIES)(ray_job)
        refs = [remote.remote((*job, receiver)) for job in jobs]
        results: dict[int, dict[str, Any]] = {}
        pending = {r: i for i, r in enumerate(refs)}
        with progress_bar(total=len(refs), disable=not progress, desc=desc, unit="run") as bar:
            while pending:
                done, _ = ray.wait(list(pending), num_returns=1)
                for r in done:
                    results[pending.pop(r)] = ray.get(r)
                    bar.update(1)
        return [results[i] for i in range(len(refs))]
    finally:
        if started_here:
            ray.shutdown()
