"""Whole ``interp train --seeds`` commands, stacked against separate runs (``make bench``; alone:
``python benchmarks/stacked_seeds.py [--seeds 16] [--steps 300] [--repeats 3]``).

Per default twin (Dyck_{2,4} at N = 28, parity at T = 32), the same sweep two ways, each a fresh ``--out``: ``--stack
off`` (every run apart, the local pool of 2 processes) and stacked (``--stack auto`` where the rule stacks the twin,
``--stack 8`` where it does not, to show what the rule declines). Evaluation, checkpoints and process start-up are in
both. The arms alternate within each repeat; each command's CPU time (its processes' user + system) is read from the
kernel, and each ratio (separate / stacked) is taken within a repeat: median and range over the repeats. Prints one
line per twin and, last, ``stacked seeds: dyck X.XXx`` (the twin the rule stacks); writes
``reports/bench/stacked_seeds.json``.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TWINS = {
    "dyck": ["dyck", "--dyck", "2,4", "-T", "28"],
    "parity": ["automaton", "--automaton", "parity", "-T", "32"],
}


def _cpu(argv: list[str]) -> float:
    """CPU seconds (user + system) of the command and every process it started."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, cwd=ROOT, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=16)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from sandbox_lens.interp.tasks.batches import AutomatonTask, DyckTask
    from sandbox_lens.interp.tasks.catalogue import get_automaton
    from sandbox_lens.interp.tasks.dyck import Dyck
    from sandbox_lens.interp.train import TrainConfig, default_shape
    from sandbox_lens.interp.train.stacked import STACK_MACS, stack_size, step_macs

    tasks = {"dyck": DyckTask(Dyck(2, 4), 28), "parity": AutomatonTask(get_automaton("parity"), 32)}
    rows = []
    for name, spec in TWINS.items():
        task = tasks[name]
        config = TrainConfig(steps=args.steps, eval_every=100)
        chosen = stack_size(task, default_shape(task), config, args.seeds, 2, "auto")
        stacked_arm = "auto" if chosen > 1 else "8"
        base = [sys.executable, "-m", "sandbox_lens.interp", "--threads", "1", "train", *spec]
        base += ["--steps", str(args.steps), "--eval-every", "100", "--target", "none", "--workers", "2"]
        base += ["--seeds", f"0-{args.seeds - 1}"]
        cpu: dict[str, list[float]] = {"off": [], stacked_arm: []}
        for r in range(args.repeats):
            for arm in ("off", stacked_arm) if r % 2 == 0 else (stacked_arm, "off"):
                out = Path(tempfile.mkdtemp(prefix="stacked-seeds-"))
                try:
                    cpu[arm].append(_cpu([*base, "--stack", arm, "--out", str(out / "sweep")]))
                finally:
                    shutil.rmtree(out, ignore_errors=True)
        ratios = [a / b for a, b in zip(cpu["off"], cpu[stacked_arm])]
        row = {
            "twin": name,
            "step_macs": step_macs(task, default_shape(task), config),
            "rule_stacks": chosen,
            "stacked_arm": stacked_arm,
            "cpu_seconds": cpu,
            "ratio": {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios)},
        }
        rows.append(row)
        print(
            f"{name}: {args.seeds} seeds × {args.steps} steps, {row['step_macs']:.2g} multiply-adds a member-step "
            f"(rule: {'stack ' + str(chosen) if chosen > 1 else 'apart'}; threshold {STACK_MACS:.0e}); "
            f"separate {statistics.median(cpu['off']):.1f} CPU-s, --stack {stacked_arm} "
            f"{statistics.median(cpu[stacked_arm]):.1f}: {row['ratio']['median']:.2f}x "
            f"[{row['ratio']['min']:.2f}, {row['ratio']['max']:.2f}]",
            flush=True,
        )
    record = {"seeds": args.seeds, "steps": args.steps, "repeats": args.repeats, "rows": rows}
    path = ROOT / "reports" / "bench" / "stacked_seeds.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1) + "\n")
    print(f"stacked seeds: dyck {rows[0]['ratio']['median']:.2f}x")


if __name__ == "__main__":
    main()
