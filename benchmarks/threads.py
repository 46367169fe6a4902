"""torch CPU threads for sandbox-lens's small models (``make bench``; alone: ``python benchmarks/threads.py``).

The same training steps (the thesis's Dyck_{2,4} twin: 2 layers, 1 head, width 50, batch 32) and the
same forward passes (prefix_scan S5 at T = 256, batch 64) with 1 thread and with 2, alternating, in
one process: the ratio is what counts. Then the same with a busy neighbour (a second process spinning
one core), as on a shared 2-core machine. Prints seconds and the ratio 2 threads / 1 thread.
"""

from __future__ import annotations

import multiprocessing as mp
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from sandbox_lens.constructions.registry import build  # noqa: E402
from sandbox_lens.interp.model.hooked import to_hooked  # noqa: E402
from sandbox_lens.interp.model.run import exact_precision  # noqa: E402
from sandbox_lens.interp.tasks.batches import DyckTask, step_rng  # noqa: E402
from sandbox_lens.interp.tasks.catalogue import get_automaton  # noqa: E402
from sandbox_lens.interp.tasks.dyck import Dyck  # noqa: E402
from sandbox_lens.interp.train import build_twin, default_shape  # noqa: E402
from sandbox_lens.interp.train.loop import _loss  # noqa: E402


def _spin(stop) -> None:  # a busy neighbour on one core
    x = 0
    while not stop.is_set():
        x += 1


def train_steps(steps: int = 40) -> float:
    task = DyckTask(Dyck(2, 4), 28)
    model = build_twin(task, default_shape(task), 0)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    start = time.perf_counter()
    for step in range(steps):
        loss, _ = _loss(model, task.batch(step_rng(0, step), 32))
        opt.zero_grad()
        loss.backward()
        opt.step()
    return time.perf_counter() - start


def forwards(model, tokens, n: int = 3) -> float:
    x = torch.from_numpy(tokens)
    start = time.perf_counter()
    with exact_precision():
        for _ in range(n):
            model(x)
    return time.perf_counter() - start


def measure(label: str, rounds: int = 3) -> None:
    model = to_hooked(build("prefix_scan", get_automaton("S5"), 256))
    tokens = model.card.io.encode(np.random.default_rng(0).integers(model.card.io.n_symbols, size=(64, 256)))
    times: dict[tuple[str, int], list[float]] = {}
    for _ in range(rounds):
        for threads in (1, 2):
            torch.set_num_threads(threads)
            times.setdefault(("train", threads), []).append(train_steps())
            times.setdefault(("forward", threads), []).append(forwards(model, tokens))
    for what in ("train", "forward"):
        one, two = (statistics.median(times[(what, t)]) for t in (1, 2))
        print(
            f"  {label:18s} {what:8s} 1 thread {one:6.2f} s   2 threads {two:6.2f} s   ratio 2/1 {two / one:.2f}",
            flush=True,
        )


def main() -> None:
    print("torch threads: 40 Dyck training steps and 3 forward passes of prefix_scan S5 (T = 256, batch 64)")
    train_steps(2)  # warm-up
    measure("idle")
    stop = mp.Event()
    neighbour = mp.Process(target=_spin, args=(stop,), daemon=True)
    neighbour.start()
    try:
        measure("one core busy")
    finally:
        stop.set()
        neighbour.join()


if __name__ == "__main__":
    main()
