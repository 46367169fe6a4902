"""What training with an alignment loss costs (``make bench``; alone: ``python benchmarks/aligned.py``).

The same 2-layer, 2-head C3 twin (T = 8) trained on one thread for 300 and for 600 steps (the difference is
the cost of 300 steps, without building, evaluating and saving): plainly, and with
``--align modular_counter`` (interchange-intervention and strictness losses: one source run and two
intervened base runs per step beside the task's). Prints the CPU-seconds per step of each and, last,
``aligned: step ratio X.XX`` (aligned / plain, measured in this run).
"""

from __future__ import annotations

import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

STEPS = 300


def main() -> None:
    import torch

    from sandbox_lens.interp.causal.impose import correspondence
    from sandbox_lens.interp.tasks.batches import AutomatonTask
    from sandbox_lens.interp.tasks.catalogue import get_automaton
    from sandbox_lens.interp.train import ModelShape, TrainConfig, train

    torch.set_num_threads(1)
    task = AutomatonTask(get_automaton("C3"), 8)
    shape = ModelShape(n_layers=2, d_model=32, n_heads=2)
    plain = TrainConfig(steps=STEPS, eval_every=10 * STEPS, target_accuracy=None, seed=0)
    aligned = replace(plain, alignment=correspondence("modular_counter", task, shape))
    per_step = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, config in (("plain", plain), ("aligned", aligned)):  # warm-up: first calls pay one-off costs
            train(task, shape, replace(config, steps=20), Path(tmp) / f"warm-{name}", progress=False)
        for name, config in (("plain", plain), ("aligned", aligned)):
            cost = []
            for steps in (STEPS, 2 * STEPS):  # the difference leaves out building, evaluating and saving
                t0 = time.process_time()
                train(task, shape, replace(config, steps=steps), Path(tmp) / f"{name}-{steps}", progress=False)
                cost.append(time.process_time() - t0)
            per_step[name] = (cost[1] - cost[0]) / STEPS
            print(f"{name:8s} C3 twin (2 layers × 2 heads, d = 32, T = 8): {1000 * per_step[name]:.1f} CPU-ms per step")
    print(f"aligned: step ratio {per_step['aligned'] / per_step['plain']:.2f}")


if __name__ == "__main__":
    main()
