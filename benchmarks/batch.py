"""Small commands, one process each against one `interp batch` (``make bench``; alone:
``python benchmarks/batch.py [--rounds R] [--commands N]``).

N small verifications (`verify prefix_scan --automaton parity --length 8 --samples 10`, the issue's example, and
its C3 sibling, alternating) run as N processes, then as one `interp batch` of the same N lines; the two arms
alternate for R rounds. Each arm's cost is the CPU time of its child processes (user + system, from
``getrusage(RUSAGE_CHILDREN)``), so other work on the machine does not enter it. Printed: per round the CPU
seconds per command of each arm and their ratio, then the median ratio with the range over rounds. A command's
import cost alone is printed beside them (`python -X importtime` of the CLI's verify path is the breakdown).

Then a short training command (`train automaton --automaton parity --length 8 --steps 5`) as a whole process, in
child CPU time, its two arms alternating for R rounds: as `interp train` runs it (a hook-free twin, TransformerLens
never imported) and with the twin built as TransformerLens's ``HookedTransformer`` (what every run did before; the
same bits, ``tests/model/test_hook_free.py``). Printed: each arm's median [min, max] and the ratio per round.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = [
    "verify prefix_scan --automaton parity --length 8 --samples 10",
    "verify prefix_scan --automaton C3 --length 8 --samples 10",
]


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _run(argv: list[str]) -> float:
    """CPU seconds the child process ``python -m sandbox_lens.interp ARGV`` spent (it must exit 0)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SANDBOX_LENS_QUIET": "1"}
    before = _children_cpu()
    done = subprocess.run(
        [sys.executable, "-m", "sandbox_lens.interp", "--quiet", *argv], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return _children_cpu() - before


TRAIN = "train automaton --automaton parity --length 8 --steps 5".split()
#: the same command with the twin built as TransformerLens's model (the hook-free twin switched off)
HOOKED = (
    "import sys; import sandbox_lens.interp.train.twin as twin; twin.hook_free_possible = lambda shape: False; "
    "from sandbox_lens.interp.cli import main; sys.exit(main(sys.argv[1:]))"
)


def _run_code(code: str, argv: list[str]) -> float:
    """CPU seconds of ``python -c CODE ARGV`` (it must exit 0)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SANDBOX_LENS_QUIET": "1"}
    before = _children_cpu()
    done = subprocess.run([sys.executable, "-c", code, "--quiet", *argv], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return _children_cpu() - before


def train_start(rounds: int) -> None:
    """A short `interp train`, hook-free (as it runs) against the twin built by TransformerLens."""
    times: dict[str, list[float]] = {"hook-free": [], "TransformerLens": []}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(rounds):
            times["hook-free"].append(_run([*TRAIN, "--out", f"{tmp}/free{r}"]))
            times["TransformerLens"].append(_run_code(HOOKED, [*TRAIN, "--out", f"{tmp}/hooked{r}"]))
    ratios = sorted(a / b for a, b in zip(times["hook-free"], times["TransformerLens"]))
    print(f"\ninterp {' '.join(TRAIN)} (whole command, CPU seconds, median [min, max] over {rounds} rounds)")
    for name, t in times.items():
        print(f"  {name:15s}: {statistics.median(t):.2f} [{min(t):.2f}, {max(t):.2f}]")
    print(f"  hook-free / TransformerLens: {statistics.median(ratios):.2f} [{ratios[0]:.2f}, {ratios[-1]:.2f}]")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--commands", type=int, default=10)
    args = parser.parse_args()
    lines = [COMMANDS[i % len(COMMANDS)] for i in range(args.commands)]
    with tempfile.TemporaryDirectory() as tmp:
        batch = Path(tmp) / "commands.txt"
        batch.write_text("\n".join(lines) + "\n")
        imports = _run(["list"])  # a command that runs no model: mostly the interpreter and the CLI's imports
        print(f"{args.commands} commands per arm, {args.rounds} rounds alternating; CPU seconds per command")
        print(f"{'round':>5s} {'separate':>9s} {'batch':>7s} {'ratio':>6s}")
        ratios = []
        for r in range(args.rounds):
            separate = sum(_run(line.split()) for line in lines) / len(lines)
            together = _run(["batch", str(batch)]) / len(lines)
            ratios.append(separate / together)
            print(f"{r + 1:5d} {separate:9.2f} {together:7.2f} {ratios[-1]:6.2f}")
    print(
        f"batch: separate/batch CPU per command {statistics.median(ratios):.2f} "
        f"[{min(ratios):.2f}, {max(ratios):.2f}] over {args.rounds} rounds; `interp list` alone {imports:.2f} CPU-s"
    )
    train_start(max(args.rounds, 5))


if __name__ == "__main__":
    main()
