"""Where a training step's time goes, beside the machine's matmul bound (``make bench``; alone:
``python benchmarks/step_profile.py [--steps N]``).

For the default twins (parity at T = 32, Dyck_{2,4} at N ≤ 28, FFL(0.8) at T = 64; default shapes and
settings, one torch thread) it times, step by step in one loop, the batch sampling, the forward pass with
the loss, the backward pass and the optimizer (clipping and AdamW); then the held-out evaluation and the
checkpoint that every ``eval_every`` steps adds (per step: their cost / eval_every); then
:func:`sandbox_lens.interp.train.train` itself over the same steps — the difference is the loop's own overhead (bar,
history, signal checks). The FLOPs of forward + backward come from ``torch.utils.flop_counter``; the bound is
the same machine's float32 matmul throughput measured on the step's own largest matmul shapes in the same run.

The phases are timed (CPU time) through the hand-written forward the training loop uses
(:func:`sandbox_lens.interp.model.fast.training_forward`; the table shows this one). Then the three ways a step can
run — TransformerLens's own forward, the same with its LayerNorm fused
(:func:`sandbox_lens.interp.model.hooked.fused_layernorm`), and the hand-written forward — are compared **interleaved**:
each on its own model and optimizer, they take turns of ``--turn`` steps for ``--rounds`` rounds (the order rotating
each round), and each round gives one ratio of median step CPU times (batch to optimizer), so load that comes and
goes falls on all three alike. Prints a Markdown table and, last, ``step profile: fused/unfused LayerNorm speed-up
X.XX [lo, hi], hand-written/TransformerLens Y.YY [lo, hi], achieved/bound Z.ZZ`` (ratios: the mean over the twins,
median and [min, max] over the rounds; achieved/bound: the training loop's FLOP rate over the matmul rate);
writes ``reports/bench/step_profile.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from sandbox_lens.interp.files import atomic_write  # noqa: E402
from sandbox_lens.interp.model.fast import training_forward  # noqa: E402
from sandbox_lens.interp.model.hooked import fused_layernorm  # noqa: E402
from sandbox_lens.interp.streams import Stream  # noqa: E402
from sandbox_lens.interp.tasks.batches import AutomatonTask, DyckTask, FFLTask, step_rng  # noqa: E402
from sandbox_lens.interp.tasks.catalogue import get_automaton  # noqa: E402
from sandbox_lens.interp.tasks.dyck import Dyck  # noqa: E402
from sandbox_lens.interp.train import TrainConfig, build_twin, default_shape, train  # noqa: E402
from sandbox_lens.interp.train.checkpoint import save_checkpoint  # noqa: E402
from sandbox_lens.interp.train.loop import _loss, evaluate  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TWINS = {
    "parity, T = 32": lambda: AutomatonTask(get_automaton("parity"), 32),
    "Dyck_{2,4}, N ≤ 28": lambda: DyckTask(Dyck(2, 4), 28),
    "FFL(0.8), T = 64": lambda: FFLTask(0.8, 64),
}


def _timed(f) -> float:
    t = time.process_time()
    f()
    return time.process_time() - t


MODES = ("transformer_lens", "fused_layernorm", "hand_written")


def _as_trained(model, mode: str, stack: contextlib.ExitStack):
    """``model`` set up to run its steps as ``mode`` says, until ``stack`` closes."""
    if mode in ("fused_layernorm", "hand_written"):
        stack.enter_context(fused_layernorm(model))
    if mode == "hand_written":
        stack.enter_context(training_forward(model))
    return model


def _stepper(model, task, config: TrainConfig):
    """``step(s)``: one training step (batch ``s``, forward with the loss, backward, clipping, AdamW) on ``model``."""
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=config.lr, weight_decay=config.weight_decay)

    def step(s: int) -> None:
        loss, _ = _loss(model, task.batch(step_rng(config.seed, s), config.batch))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, config.clip)
        opt.step()

    return step


def interleaved_steps(task, shape, config: TrainConfig, rounds: int, turn: int) -> dict[str, list[float]]:
    """Per mode, the median CPU seconds of a step in each round: the modes take turns of ``turn`` steps (the order
    rotating each round), each on its own model and optimizer after 10 warm-up steps."""
    out: dict[str, list[float]] = {m: [] for m in MODES}
    with contextlib.ExitStack() as stack:
        steppers = {
            m: _stepper(_as_trained(build_twin(task, shape, config.seed), m, stack), task, config) for m in MODES
        }
        done = dict.fromkeys(MODES, 0)
        for m in MODES:
            for _ in range(10):
                steppers[m](done[m])
                done[m] += 1
        for r in range(rounds):
            for m in MODES[r % 3 :] + MODES[: r % 3]:
                times = []
                for _ in range(turn):
                    times.append(_timed(lambda: steppers[m](done[m])))
                    done[m] += 1
                out[m].append(statistics.median(times))
    return out


def step_phases(task, shape, config: TrainConfig, steps: int) -> dict[str, float]:
    """CPU seconds per step of each phase (medians) of the hand-written forward sandbox_lens.interp.train.train runs,
    timed in one loop after 10 warm-up steps, and the evaluation's and checkpoint's share of a step."""
    with contextlib.ExitStack() as stack:
        return _phases(_as_trained(build_twin(task, shape, config.seed), "hand_written", stack), task, config, steps)


def _phases(model, task, config: TrainConfig, steps: int) -> dict[str, float]:
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=config.lr, weight_decay=config.weight_decay)
    times = {"batch": [], "forward": [], "backward": [], "optimizer": []}
    for s in range(10 + steps):
        t0 = time.process_time()
        batch = task.batch(step_rng(config.seed, s), config.batch)
        t1 = time.process_time()
        loss, _ = _loss(model, batch)
        t2 = time.process_time()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        t3 = time.process_time()
        torch.nn.utils.clip_grad_norm_(params, config.clip)
        opt.step()
        t4 = time.process_time()
        if s >= 10:
            for k, v in zip(times, (t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
                times[k].append(v)
    out = {k: statistics.median(v) for k, v in times.items()}
    out["evaluation"] = (
        statistics.median(_timed(lambda: evaluate(model, task, config.eval_size, config.seed)) for _ in range(3))
        / config.eval_every
    )
    with tempfile.TemporaryDirectory() as tmp:
        out["checkpoint"] = (
            statistics.median(_timed(lambda: save_checkpoint(Path(tmp), model, opt, {"step": 0})) for _ in range(3))
            / config.eval_every
        )
    return out


def speedup(by_twin: list[dict[str, list[float]]], slow: str, fast: str) -> tuple[float, float, float]:
    """Step time under ``slow`` ÷ under ``fast``, the mean over the twins, one per round (the two measured in the
    same round): the median over the rounds and their [min, max]."""
    per_round = [float(np.mean([t[slow][r] / t[fast][r] for t in by_twin])) for r in range(len(by_twin[0][slow]))]
    return statistics.median(per_round), min(per_round), max(per_round)


def step_flops(task, shape, config: TrainConfig) -> int:
    """FLOPs of one step's forward and backward passes (torch's flop counter: matmuls and attention)."""
    from torch.utils.flop_counter import FlopCounterMode

    model = build_twin(task, shape, config.seed)
    batch = task.batch(step_rng(config.seed, 0, Stream.HELD_OUT), config.batch)
    with FlopCounterMode(display=False) as counter:
        loss, _ = _loss(model, batch)
        loss.backward()
    return int(counter.get_total_flops())


def matmul_rate(task, shape, config: TrainConfig, seconds: float = 0.5) -> float:
    """FLOP/s of float32 matmuls of the step's largest shape (tokens × d_model @ d_model × d_mlp)."""
    tokens = config.batch * task.n_ctx
    d_mlp = shape.d_mlp or 4 * shape.d_model
    a, b = torch.randn(tokens, shape.d_model), torch.randn(shape.d_model, d_mlp)
    for _ in range(5):
        a @ b
    n, t = 0, time.process_time()
    while time.process_time() - t < seconds:
        a @ b
        n += 1
    return n * 2 * tokens * shape.d_model * d_mlp / (time.process_time() - t)


def loop_seconds(task, shape, config: TrainConfig) -> float:
    """CPU seconds per step of sandbox_lens.interp.train.train itself (evaluations and checkpoints included)."""
    with tempfile.TemporaryDirectory() as tmp:
        t = time.process_time()
        train(task, shape, config, tmp, progress=False)
        return (time.process_time() - t) / config.steps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=200, help="steps timed per twin (a multiple of eval_every)")
    ap.add_argument("--rounds", type=int, default=9, help="rounds of the interleaved comparison")
    ap.add_argument("--turn", type=int, default=20, help="steps each way takes per round")
    args = ap.parse_args()
    torch.set_num_threads(1)
    rows, by_twin = [], []
    for label, make in TWINS.items():
        task = make()
        shape = default_shape(task)
        config = TrainConfig(steps=args.steps)
        timed = interleaved_steps(task, shape, config, args.rounds, args.turn)
        by_twin.append(timed)
        phases = step_phases(task, shape, config, min(args.steps, 100))
        total = loop_seconds(task, shape, config)
        flops = step_flops(task, shape, config)
        bound = matmul_rate(task, shape, config)
        rows.append(
            {
                "twin": label,
                "parameters": sum(p.numel() for p in build_twin(task, shape).parameters()),
                "mflop_per_step": flops / 1e6,
                "ms_per_step": 1e3 * total,
                **{f"ms_{k}": 1e3 * v for k, v in phases.items()},
                "ms_overhead": 1e3 * (total - sum(phases.values())),
                "achieved_gflops": flops / (sum(phases[k] for k in ("forward", "backward"))) / 1e9,
                "step_gflops": flops / total / 1e9,
                "matmul_gflops": bound / 1e9,
                **{f"ms_step_{m}": 1e3 * statistics.median(timed[m]) for m in MODES},
            }
        )
    cols = [
        "ms_per_step",
        "ms_batch",
        "ms_forward",
        "ms_backward",
        "ms_optimizer",
        "ms_evaluation",
        "ms_checkpoint",
        "ms_overhead",
        "mflop_per_step",
        "achieved_gflops",
        "step_gflops",
        "matmul_gflops",
    ]
    print("| twin | params | " + " | ".join(c.replace("ms_", "ms ").replace("_", " ") for c in cols) + " |")
    print("|---|---|" + "---|" * len(cols))
    for r in rows:
        print(f"| {r['twin']} | {r['parameters']:,} | " + " | ".join(f"{r[c]:.2f}" for c in cols) + " |")
    for r in rows:
        print(
            f"{r['twin']}: a step (batch to optimizer, CPU ms, median over the rounds) through TransformerLens "
            f"{r['ms_step_transformer_lens']:.2f}, with LayerNorm fused {r['ms_step_fused_layernorm']:.2f}, "
            f"hand-written {r['ms_step_hand_written']:.2f}"
        )
    ratio = statistics.mean(r["step_gflops"] / r["matmul_gflops"] for r in rows)
    fused = speedup(by_twin, "transformer_lens", "fused_layernorm")
    fast = speedup(by_twin, "transformer_lens", "hand_written")
    over_fused = speedup(by_twin, "fused_layernorm", "hand_written")
    out = ROOT / "reports" / "bench" / "step_profile.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(
        out,
        json.dumps(
            {
                "threads": 1,
                "steps": args.steps,
                "rounds": args.rounds,
                "turn": args.turn,
                "rows": rows,
                "speedups": {
                    "fused_over_transformer_lens": fused,
                    "hand_written_over_transformer_lens": fast,
                    "hand_written_over_fused": over_fused,
                },
            },
            indent=1,
        ).encode(),
    )
    print(f"hand-written over fused LayerNorm: {over_fused[0]:.2f} [{over_fused[1]:.2f}, {over_fused[2]:.2f}]")
    print(
        f"step profile: fused/unfused LayerNorm speed-up {fused[0]:.2f} [{fused[1]:.2f}, {fused[2]:.2f}], "
        f"hand-written/TransformerLens {fast[0]:.2f} [{fast[1]:.2f}, {fast[2]:.2f}], achieved/bound {ratio:.2f}"
    )


if __name__ == "__main__":
    main()
