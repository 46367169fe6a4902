"""Populations at the hardware's limit: separate runs against stacked ensembles (``make bench``; alone:
``python benchmarks/populations.py [--steps N] [--sizes 2,8] [--repeats 3]``).

The same model-steps five ways, each in 2 processes of one torch thread (2 cores), training steps only (no
evaluation or checkpoints), default twins (parity at T = 32, Dyck_{2,4} at N ≤ 28):

* **pool** — each process trains its share of the members one after another as ``interp train --seeds`` does: the
  training loop's hand-written forward (:func:`sandbox_lens.interp.model.fast.training_forward`, LayerNorm fused);
* **handwritten** — the same, one member at a time, through :func:`stacked_forward` (a hand-written forward
  with batched matmuls, fused LayerNorm and fused causal attention) with E = 1: what the kernels alone give;
* **vmap** — each process's share stacked (``torch.func.stack_module_state``) and run once under
  ``torch.func.vmap`` over TransformerLens's forward;
* **stacked** — each process's share stacked and run through :func:`stacked_forward` (batched matmuls over
  the ensemble dimension), one AdamW over the stacked weights;
* **lockstep** — what stacking would be if each member kept a single run's state (its own TransformerLens model
  and AdamW, checkpointable as one): the parameters stacked afresh every step into :func:`stacked_forward`.

Each member keeps its own initialisation and data stream; AdamW is element-wise, so one optimizer over stacked
weights is E independent ones. Every measurement is repeated (arms interleaved) and each ratio is taken against
the pool measured beside it: median and range over the repeats. The hand-written forward is first checked
against TransformerLens's logits. Prints model-steps/s and ratios per twin and ensemble size and, last,
``populations: ensemble/pool X.XX`` (per twin the best ensemble arm and size, median ratio; mean over the
twins); writes ``reports/bench/populations.json``.
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
    from sandbox_lens.interp.tasks.batches import AutomatonTask, DyckTask
    from sandbox_lens.interp.tasks.catalogue import get_automaton
    from sandbox_lens.interp.tasks.dyck import Dyck

    return AutomatonTask(get_automaton("parity"), 32) if name == "parity" else DyckTask(Dyck(2, 4), 28)


def _pool_worker(name: str, members: list[int], steps: int) -> float:
    """Seconds for ``members`` single runs of ``steps`` steps, one after another."""
    import torch

    from sandbox_lens.interp.model.fast import training_forward
    from sandbox_lens.interp.model.hooked import fused_layernorm
    from sandbox_lens.interp.tasks.batches import step_rng
    from sandbox_lens.interp.train import build_twin, default_shape
    from sandbox_lens.interp.train.loop import _loss

    torch.set_num_threads(1)
    task = _task(name)
    t = time.perf_counter()
    for seed in members:
        model = build_twin(task, default_shape(task), seed)
        opt = torch.optim.AdamW(list(model.parameters()), lr=1e-3)
        with fused_layernorm(model), training_forward(model):
            for s in range(steps):
                loss, _ = _loss(model, task.batch(step_rng(seed, s), 32))
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
    return time.perf_counter() - t


def _stacked_batch(task, members: list[int], step: int):
    """(tokens, loss mask, targets), each ``[E, batch, T]``: every member's own batch of ``step``."""
    import torch

    from sandbox_lens.interp.tasks.batches import step_rng

    batches = [task.batch(step_rng(seed, step), 32) for seed in members]
    return tuple(
        torch.stack([torch.from_numpy(getattr(b, f)) for b in batches]) for f in ("tokens", "loss_mask", "targets")
    )


def _member_losses(logits, mask, targets):
    """The sum over members of each member's own mean loss (so each gets a single run's gradient)."""
    import torch

    per_token = torch.nn.functional.cross_entropy(logits[mask], targets[mask], reduction="none")
    return sum(x.mean() for x in per_token.split(mask.flatten(1).sum(1).tolist()))


def _ensemble_worker(name: str, members: list[int], steps: int) -> float:
    """Seconds for ``members`` trained stacked for ``steps`` steps."""
    import torch
    from torch.func import functional_call, stack_module_state, vmap

    from sandbox_lens.interp.model.hooked import fused_layernorm
    from sandbox_lens.interp.train import build_twin, default_shape

    torch.set_num_threads(1)
    task = _task(name)
    t = time.perf_counter()
    models = [build_twin(task, default_shape(task), seed) for seed in members]
    base = copy.deepcopy(models[0])
    params, buffers = stack_module_state(models)
    opt = torch.optim.AdamW(list(params.values()), lr=1e-3)

    def forward(p, b, tokens):
        return functional_call(base, (p, b), (tokens,))

    with fused_layernorm(base):
        for s in range(steps):
            tokens, mask, targets = _stacked_batch(task, members, s)
            loss = _member_losses(vmap(forward)(params, buffers, tokens), mask, targets)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    return time.perf_counter() - t


def stacked_forward(p: dict, tokens, cfg):
    """The package's stacked forward (:func:`sandbox_lens.interp.model.fast.stacked_forward`, what ``interp train
    --seeds`` stacks with)."""
    from sandbox_lens.interp.model.fast import stacked_forward as forward

    return forward(p, tokens, cfg)


def _stacked_worker(name: str, members: list[int], steps: int) -> float:
    """Seconds for ``members`` trained through :func:`stacked_forward` (all of them stacked; one member each
    when called per member — the hand-written forward without the stacking)."""
    import torch
    from torch.func import stack_module_state

    from sandbox_lens.interp.train import build_twin, default_shape

    torch.set_num_threads(1)
    task = _task(name)
    t = time.perf_counter()
    models = [build_twin(task, default_shape(task), seed) for seed in members]
    cfg = models[0].cfg
    params, _ = stack_module_state(models)
    trained = [v for v in params.values() if v.requires_grad]
    opt = torch.optim.AdamW(trained, lr=1e-3)
    for s in range(steps):
        tokens, mask, targets = _stacked_batch(task, members, s)
        logits = stacked_forward(params, tokens, cfg)
        loss = _member_losses(logits, mask, targets)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return time.perf_counter() - t


def _lockstep_worker(name: str, members: list[int], steps: int) -> float:
    """Seconds for ``members`` trained in lockstep: each keeps its own TransformerLens model and AdamW (the
    single-run state, checkpointable as one), and every step stacks their parameters (differentiably) into
    one :func:`stacked_forward`, whose backward fills each member's own gradients."""
    import torch

    from sandbox_lens.interp.train import build_twin, default_shape

    torch.set_num_threads(1)
    task = _task(name)
    t = time.perf_counter()
    models = [build_twin(task, default_shape(task), seed) for seed in members]
    cfg = models[0].cfg
    opts = [torch.optim.AdamW(list(m.parameters()), lr=1e-3) for m in models]
    names = [n for n, _ in models[0].named_parameters()]
    for s in range(steps):
        params = {n: torch.stack(ps) for n, ps in zip(names, zip(*(list(m.parameters()) for m in models)))}
        tokens, mask, targets = _stacked_batch(task, members, s)
        logits = stacked_forward(params, tokens, cfg)
        loss = _member_losses(logits, mask, targets)
        for opt in opts:
            opt.zero_grad(set_to_none=True)
        loss.backward()
        for opt in opts:
            opt.step()
    return time.perf_counter() - t


def _stacked_singles_worker(name: str, members: list[int], steps: int) -> float:
    """The hand-written forward one member at a time (E = 1), members one after another."""
    return sum(_stacked_worker(name, [m], steps) for m in members)


def check_stacked_forward(name: str, members: int = 3) -> float:
    """The largest |logit difference| between :func:`stacked_forward` and each TransformerLens twin."""
    import torch
    from torch.func import stack_module_state

    from sandbox_lens.interp.tasks.batches import step_rng
    from sandbox_lens.interp.train import build_twin, default_shape

    task = _task(name)
    models = [build_twin(task, default_shape(task), seed) for seed in range(members)]
    params, _ = stack_module_state(models)
    tokens = torch.stack([torch.from_numpy(task.batch(step_rng(seed, 0), 8).tokens) for seed in range(members)])
    cfg = models[0].cfg
    with torch.no_grad():
        ours = stacked_forward(params, tokens, cfg)
        return max(float((ours[i] - m(tokens[i], return_type="logits")).abs().max()) for i, m in enumerate(models))


def _two_processes(worker, name: str, members: int, steps: int) -> float:
    """Model-steps per second of ``members`` members split over 2 processes."""
    halves = [list(range(0, members, 2)), list(range(1, members, 2))]
    with mp.get_context("fork").Pool(2) as pool:
        seconds = pool.starmap(worker, [(name, h, steps) for h in halves])
    return members * steps / max(seconds)


ARMS = {
    "pool": _pool_worker,
    "handwritten": _stacked_singles_worker,
    "vmap": _ensemble_worker,
    "stacked": _stacked_worker,
    "lockstep": _lockstep_worker,
}
STACKED = ("handwritten", "vmap", "stacked", "lockstep")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=60, help="steps per member")
    ap.add_argument("--sizes", default="2,8", help="ensemble sizes per process, comma-separated")
    ap.add_argument("--repeats", type=int, default=3, help="repeats of every measurement (the ratios' ranges)")
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    for name in TWINS:
        diff = check_stacked_forward(name)
        assert diff < 1e-4, f"the hand-written forward differs from TransformerLens's by {diff} on {name}"
        print(f"{name}: hand-written stacked forward = TransformerLens's to {diff:.1e}", flush=True)
    rows = []
    for name in TWINS:
        for e in sizes:
            members = 2 * e
            rates: dict[str, list[float]] = {arm: [] for arm in ARMS}
            for _ in range(args.repeats):  # arms interleaved, so drift in the machine's speed hits each alike
                for arm, worker in ARMS.items():
                    rates[arm].append(_two_processes(worker, name, members, args.steps))
            row = {
                "twin": name,
                "ensemble_per_process": e,
                "members": members,
                **{f"{arm}_model_steps_per_s": r for arm, r in rates.items()},
            }
            for arm in STACKED:  # per repeat, against the pool measured beside it
                ratios = [a / b for a, b in zip(rates[arm], rates["pool"])]
                row[f"{arm}_ratio"] = {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios)}
            rows.append(row)
            print(
                f"{name}: {members} members, E = {e} per process: pool {statistics.median(rates['pool']):.1f} "
                f"model-steps/s; "
                + ", ".join(
                    f"{arm} {row[f'{arm}_ratio']['median']:.2f}x [{row[f'{arm}_ratio']['min']:.2f}, "
                    f"{row[f'{arm}_ratio']['max']:.2f}]"
                    for arm in STACKED
                ),
                flush=True,
            )
    ensembles = ("vmap", "stacked", "lockstep")  # the arms that train members together

    def best_ratio(r: dict) -> float:
        return max(r[f"{arm}_ratio"]["median"] for arm in ensembles)

    ratio = statistics.mean(max(best_ratio(r) for r in rows if r["twin"] == t) for t in TWINS)
    out = ROOT / "reports" / "bench" / "populations.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    from sandbox_lens.interp.files import atomic_write

    atomic_write(out, json.dumps({"steps": args.steps, "repeats": args.repeats, "rows": rows}, indent=1).encode())
    print(f"populations: ensemble/pool {ratio:.2f}")


if __name__ == "__main__":
    main()
