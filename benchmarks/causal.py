"""How long a full causal section takes (``make bench``; alone: ``python benchmarks/causal.py``).

A 2-layer twin of C3 at T = 8 is trained here (400 steps at most), then ``interp.causal.align.align``
runs with its defaults — the scan over every residual hook and position, DAS at k = 1, 2, 4, 8 with
their random-subspace controls, the random-init null and the modular counter beside it — on one thread.
The issue's budget is 2 CPU-minutes.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> None:
    import torch

    from constructions.registry import build
    from interp.causal.align import align
    from interp.model.hooked import to_hooked
    from interp.tasks.batches import AutomatonTask
    from interp.tasks.catalogue import get_automaton
    from interp.train import ModelShape, TrainConfig, load_trained, random_init, train

    torch.set_num_threads(1)
    task = AutomatonTask(get_automaton("C3"), 8)
    shape = ModelShape(n_layers=2, d_model=64, n_heads=2)
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.process_time()
        metrics = train(task, shape, TrainConfig(steps=400, seed=0), Path(tmp) / "twin", progress=False)
        trained = time.process_time() - t0
        twin = load_trained(Path(tmp) / "twin")
    construction = to_hooked(build("modular_counter", get_automaton("C3"), 8))
    t0 = time.process_time()
    result = align(twin, constructions={"modular_counter": construction}, null=random_init(task, shape, 0))
    seconds = time.process_time() - t0
    best = max(result["das"]["k"], key=lambda d: d["iia"]["iia"] or 0)
    print(f"causal section of a 2-layer C3 twin (accuracy {metrics['final_accuracy']:.3f}, trained in {trained:.0f} "
          f"CPU-s): {seconds:.1f} CPU-s (budget 120) — first sites {result['model']['first_sites']}; "
          f"best DAS k = {best['k']}: IIA {best['iia']['iia']:.3f} (random {best['random_subspace']['iia']:.3f}); "
          f"verdict: {result['constructions']['modular_counter']['verdict']['verdict']}")


if __name__ == "__main__":
    main()
