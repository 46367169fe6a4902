"""How long a full causal section takes (``make bench``; alone: ``python benchmarks/causal.py``).

Two 2-layer twins are trained here (C3 at T = 8, 400 steps at most; Dyck_{2,4} at N = 16, 600 steps at
most), then ``sandbox_lens.interp.causal.align.align`` runs with its defaults on each — per variable, the scan over every
residual hook and position, position-shared DAS at every hook and over k = 1, 2, 4, 8 with their
random-subspace controls, the random-init null (scan and DAS) and the construction beside it (its scan,
named sites and DAS at them) — on one thread. The issue's budget is 2 CPU-minutes per twin.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

BUDGET = 180.0  # issue 42: a causal section of a 2-layer twin within 3 CPU-minutes


def _one(task, shape, steps, construction, tmp: Path) -> tuple[dict, dict, float, float]:
    from sandbox_lens.interp.causal.align import align, nulls_of
    from sandbox_lens.interp.train import TrainConfig, load_trained, train

    t0 = time.process_time()
    metrics = train(task, shape, TrainConfig(steps=steps, seed=0), tmp / "twin", progress=False)
    trained = time.process_time() - t0
    twin = load_trained(tmp / "twin")
    t0 = time.process_time()
    result = align(twin, constructions={construction.card.construction: construction}, null=nulls_of(twin, 0))
    return metrics, result, trained, time.process_time() - t0


def _f(x: float | None) -> str:
    return "—" if x is None else f"{x:.3f}"


def main() -> None:
    import torch

    from sandbox_lens.constructions.registry import build
    from sandbox_lens.interp.model.hooked import to_hooked
    from sandbox_lens.interp.tasks.batches import AutomatonTask, DyckTask
    from sandbox_lens.interp.tasks.catalogue import get_automaton
    from sandbox_lens.interp.tasks.dyck import Dyck
    from sandbox_lens.interp.train import ModelShape

    torch.set_num_threads(1)
    cases = [
        (
            "C3, T = 8",
            AutomatonTask(get_automaton("C3"), 8),
            ModelShape(n_layers=2, d_model=64, n_heads=2),
            400,
            to_hooked(build("modular_counter", get_automaton("C3"), 8)),
        ),
        (
            "Dyck_{2,4}, N = 16",
            DyckTask(Dyck(2, 4), 16),
            ModelShape(n_layers=2, d_model=50, n_heads=1, d_mlp=50),
            600,
            to_hooked(build("dyck", Dyck(2, 4), 15)),
        ),
    ]
    worst = 0.0
    for title, task, shape, steps, construction in cases:
        with tempfile.TemporaryDirectory() as tmp:
            metrics, result, trained, seconds = _one(task, shape, steps, construction, Path(tmp))
        worst = max(worst, seconds)
        name = construction.card.construction
        for variable, v in result["variables"].items():
            c = v["constructions"][name]
            print(
                f"causal section of a 2-layer {title} twin (accuracy {metrics['final_accuracy']:.3f}, trained in "
                f"{trained:.0f} CPU-s), {variable}: DAS chosen at {v['model']['das']['hook']}, test IIA "
                f"{_f((v['model']['das']['chosen'] or {'test': {'iia': None}})['test']['iia'])} "
                f"(nulls up to {_f(v['null']['das']['iia'])}); full swaps: "
                f"{c['verdict']['verdict']}; DAS: {c['das_verdict']['verdict']}"
            )
        print(f"  {title}: {seconds:.1f} CPU-s for the whole section (budget {BUDGET:.0f})")
    print(f"causal: slowest/budget {worst / BUDGET:.2f}")


if __name__ == "__main__":
    main()
