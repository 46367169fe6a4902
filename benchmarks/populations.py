"""Populations at the hardware's limit: separate runs against stacked ensembles (``make bench``; alone:
``python benchmarks/populations.py [--steps N] [--sizes 2,4,8]``).

The same model-steps both ways, in 2 processes of one torch thread each (2 cores): **pool** — each process
trains its share of the members one after another, as ``interp train --seeds`` does; **ensemble** — each
process trains its share stacked, the weights of E same-shape members given an ensemble dimension with
``torch.func.stack_module_state`` and the forward and backward run once under ``torch.func.vmap`` (each member
its own initialisation and data stream; AdamW is element-wise, so one optimizer over the stacked weights is E
independent ones). Both sides run LayerNorm fused, as ``interp.train.train`` does. Training steps only (no
evaluation or checkpoints), default twins (parity at T = 32, Dyck_{2,4} at N ≤ 28).

Prints model-steps/s per twin and ensemble size and, last, ``populations: ensemble/pool X.XX`` (the best
ensemble size's ratio, mean over the twins); writes ``reports/bench/populations.json``.
"""

from __future__ import annotations

import argparse
import copy
import json
import multiprocessing as mp
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

ROOT = Path(__file__).resolve().parent.parent
TWINS = ("parity", "dyck")


def _task(name: str):
    from interp.tasks.batches import AutomatonTask, DyckTask
    from interp.tasks.catalogue import get_automaton
    from interp.tasks.dyck import Dyck

    return AutomatonTask(get_automaton("parity"), 32) if name == "parity" else DyckTask(Dyck(2, 4), 28)


def _pool_worker(name: str, members: list[int], steps: int) -> float:
    """Seconds for ``members`` single runs of ``steps`` steps, one after another."""
    import torch

    from interp.model.hooked import fused_layernorm
    from interp.tasks.batches import step_rng
    from interp.train import build_model, default_shape
    from interp.train.loop import _loss

    torch.set_num_threads(1)
    task = _task(name)
    t = time.perf_counter()
    for seed in members:
        model = build_model(task, default_shape(task), seed)
        opt = torch.optim.AdamW(list(model.parameters()), lr=1e-3)
        with fused_layernorm(model):
            for s in range(steps):
                loss, _ = _loss(model, task.batch(step_rng(seed, s), 32))
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
    return time.perf_counter() - t


def _ensemble_worker(name: str, members: list[int], steps: int) -> float:
    """Seconds for ``members`` trained stacked for ``steps`` steps."""
    import torch
    from torch.func import functional_call, stack_module_state, vmap

    from interp.model.hooked import fused_layernorm
    from interp.tasks.batches import step_rng
    from interp.train import build_model, default_shape

    torch.set_num_threads(1)
    task = _task(name)
    t = time.perf_counter()
    models = [build_model(task, default_shape(task), seed) for seed in members]
    base = copy.deepcopy(models[0])
    params, buffers = stack_module_state(models)
    opt = torch.optim.AdamW(list(params.values()), lr=1e-3)

    def forward(p, b, tokens):
        return functional_call(base, (p, b), (tokens,))

    with fused_layernorm(base):
        for s in range(steps):
            batches = [task.batch(step_rng(seed, s), 32) for seed in members]
            tokens = torch.stack([torch.from_numpy(b.tokens) for b in batches])
            mask = torch.stack([torch.from_numpy(b.loss_mask) for b in batches])
            targets = torch.stack([torch.from_numpy(b.targets) for b in batches])
            logits = vmap(forward)(params, buffers, tokens)
            per_token = torch.nn.functional.cross_entropy(logits[mask], targets[mask], reduction="none")
            counts = mask.flatten(1).sum(1)
            loss = sum(x.mean() for x in per_token.split(counts.tolist()))  # each member's own mean loss
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    return time.perf_counter() - t


def _two_processes(worker, name: str, members: int, steps: int) -> float:
    """Model-steps per second of ``members`` members split over 2 processes."""
    halves = [list(range(0, members, 2)), list(range(1, members, 2))]
    with mp.get_context("fork").Pool(2) as pool:
        seconds = pool.starmap(worker, [(name, h, steps) for h in halves])
    return members * steps / max(seconds)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=100, help="steps per member")
    ap.add_argument("--sizes", default="2,4,8", help="ensemble sizes per process, comma-separated")
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    rows = []
    for name in TWINS:
        for e in sizes:
            members = 2 * e
            pool = _two_processes(_pool_worker, name, members, args.steps)
            ens = _two_processes(_ensemble_worker, name, members, args.steps)
            rows.append({"twin": name, "ensemble_per_process": e, "members": members, "pool_model_steps_per_s": pool,
                         "ensemble_model_steps_per_s": ens, "ratio": ens / pool})
            print(f"{name}: {members} members, E = {e} per process: pool {pool:.1f} model-steps/s, ensemble "
                  f"{ens:.1f} ({ens / pool:.2f}x)", flush=True)
    best = statistics.mean(max(r["ratio"] for r in rows if r["twin"] == t) for t in TWINS)
    out = ROOT / "reports" / "bench" / "populations.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    from interp.files import atomic_write

    atomic_write(out, json.dumps({"steps": args.steps, "rows": rows}, indent=1).encode())
    print(f"populations: ensemble/pool {best:.2f}")


if __name__ == "__main__":
    main()
