"""Where a training step's time goes, beside the machine's matmul bound (``make bench``; alone:
``python benchmarks/step_profile.py [--steps N]``).

For the default twins (parity at T = 32, Dyck_{2,4} at N ≤ 28, FFL(0.8) at T = 64; default shapes and
settings, one torch thread) it times, step by step in one loop, the batch sampling, the forward pass with
the loss, the backward pass and the optimizer (clipping and AdamW); then the held-out evaluation and the
checkpoint that every ``eval_every`` steps adds (per step: their cost / eval_every); then
:func:`sandbox_lens.interp.train.train` itself over the same steps — the difference is the loop's own overhead (bar,
history, signal checks). The FLOPs of forward + backward come from ``torch.utils.flop_counter``; the bound is
the same machine's float32 matmul throughput measured on the step's own largest matmul shapes in the same run.

The phases are timed three times: through TransformerLens's own forward, with its LayerNorm fused
(:func:`sandbox_lens.interp.model.hooked.fused_layernorm`), and through the hand-written forward the training loop uses
(:func:`sandbox_lens.interp.model.fast.training_forward`; the table shows this one). Prints a Markdown table and, last,
``step profile: fused/unfused LayerNorm speed-up X.XX, hand-written/TransformerLens Y.YY, achieved/bound Z.ZZ``
(means over the twins: step-time ratios against TransformerLens's own forward with 95% bootstrap intervals over
the timed steps, and the training loop's FLOP rate over the matmul rate); writes ``reports/bench/step_profile.json``.
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
    t = time.perf_counter()
    f()
    return time.perf_counter() - t


MODES = ("transformer_lens", "fused_layernorm", "hand_written")


def step_phases(task, shape, config: TrainConfig, steps: int, mode: str) -> tuple[dict[str, float], list[float]]:
    """Seconds per step of each phase (medians), timed in one loop after 10 warm-up steps, and every timed step's
    batch-to-optimizer seconds (for the intervals). ``mode``: TransformerLens's own
    forward, the same with LayerNorm fused, or the hand-written forward sandbox_lens.interp.train.train runs
    (:func:`sandbox_lens.interp.model.fast.training_forward`, with LayerNorm fused wherever it falls back)."""
    model = build_twin(task, shape, config.seed)
    with contextlib.ExitStack() as stack:
        if mode in ("fused_layernorm", "hand_written"):
            stack.enter_context(fused_layernorm(model))
        if mode == "hand_written":
            stack.enter_context(training_forward(model))
        return _phases(model, task, config, steps)


def _phases(model, task, config: TrainConfig, steps: int) -> tuple[dict[str, float], list[float]]:
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=config.lr, weight_decay=config.weight_decay)
    times = {"batch": [], "forward": [], "backward": [], "optimizer": []}
    for s in range(10 + steps):
        t0 = time.perf_counter()
        batch = task.batch(step_rng(config.seed, s), config.batch)
        t1 = time.perf_counter()
        loss, _ = _loss(model, batch)
        t2 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        t3 = time.perf_counter()
        torch.nn.utils.clip_grad_norm_(params, config.clip)
        opt.step()
        t4 = time.perf_counter()
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
    return out, [sum(t) for t in zip(*times.values())]


def speedup(by_twin: list[dict], slow: str, fast: str, draws: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """The mean over the twins of step time under ``slow`` ÷ under ``fast`` (each the median of the timed steps
    plus the evaluation's and checkpoint's share of a step), and a 95% bootstrap interval over the timed steps of each (resampled
    independently; it covers the step-to-step noise of this run, not drift between runs)."""
    rng = np.random.default_rng(seed)

    def step(phases: dict, steps: np.ndarray) -> float:
        return float(np.median(steps)) + phases["evaluation"] + phases["checkpoint"]

    def mean_ratio(resample: bool) -> float:
        ratios = []
        for t in by_twin:
            (ps, ss), (pf, sf) = t[slow], t[fast]
            ss, sf = np.asarray(ss), np.asarray(sf)
            if resample:
                ss, sf = rng.choice(ss, len(ss)), rng.choice(sf, len(sf))
            ratios.append(step(ps, ss) / step(pf, sf))
        return float(np.mean(ratios))

    low, high = np.percentile([mean_ratio(True) for _ in range(draws)], [2.5, 97.5])
    return mean_ratio(False), float(low), float(high)


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
    n, t = 0, time.perf_counter()
    while time.perf_counter() - t < seconds:
        a @ b
        n += 1
    return n * 2 * tokens * shape.d_model * d_mlp / (time.perf_counter() - t)


def loop_seconds(task, shape, config: TrainConfig) -> float:
    """Seconds per step of sandbox_lens.interp.train.train itself (evaluations and checkpoints included)."""
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        train(task, shape, config, tmp, progress=False)
        return (time.perf_counter() - t) / config.steps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=200, help="steps timed per twin (a multiple of eval_every)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    rows, by_twin = [], []
    for label, make in TWINS.items():
        task = make()
        shape = default_shape(task)
        config = TrainConfig(steps=args.steps)
        timed = {m: step_phases(task, shape, config, min(args.steps, 100), m) for m in MODES}
        by_twin.append(timed)
        by_mode = {m: phases for m, (phases, _) in timed.items()}
        phases = by_mode["hand_written"]
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
                **{f"ms_step_{m}": 1e3 * sum(by_mode[m].values()) for m in MODES},
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
            f"{r['twin']}: a step through TransformerLens {r['ms_step_transformer_lens']:.2f} ms, with LayerNorm "
            f"fused {r['ms_step_fused_layernorm']:.2f} ms, hand-written {r['ms_step_hand_written']:.2f} ms"
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
