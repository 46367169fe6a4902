"""Verification throughput: the bare forward against TransformerLens's (``make bench``; alone:
``python benchmarks/verify_speed.py [--quick]``).

The same model, the same words, one thread: ``verify(..., forward="model")`` runs TransformerLens's
forward throughout, ``forward="bare"`` runs :mod:`sandbox_lens.interp.model.bare` after the cross-check (whose
TransformerLens run is counted in its time). Sampled words only (no exhaustive set), so positions/s
is the long-input throughput. The two are alternated and the median of the rounds is printed, with
the ratio bare / model measured in this run. Then the same for the probes' residual-stream caching
(:func:`sandbox_lens.interp.model.checked.residual_stream`, its one-sequence check counted). Last, a short
``interp verify`` as a whole command, in CPU seconds (its imports included): on a construction's weights without
TransformerLens (the default) and with ``--forward model`` (which builds and runs the TransformerLens model),
alternated. And last, the bare forward with each large, mostly-zero matrix kept sparse (the default) against the
same weights dense, on a prefix scan over 32 states (``memory32``, T = 64: 112 M dense parameters, 0.11% non-zero),
``verify`` of a construction's weights as ``interp verify`` runs it, alternated, in CPU seconds.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from sandbox_lens.constructions import build_model  # noqa: E402
from sandbox_lens.interp.model.checked import residual_stream  # noqa: E402
from sandbox_lens.interp.tasks.catalogue import get_automaton  # noqa: E402
from sandbox_lens.interp.verify import verify  # noqa: E402
from sandbox_lens.probes.linear import automaton_probe_data, residual_hooks  # noqa: E402

CASES = [  # (construction, automaton, T, sampled words); the cross-check takes 4 words at T = 1024
    ("prefix_scan", "S3", 1024, 40),
    ("krohn_rhodes", "S4", 1024, 40),
    ("modular_counter", "C5", 1024, 40),
    ("gridworld", "grid5", 1024, 40),
]
QUICK = [("prefix_scan", "S3", 256, 96), ("krohn_rhodes", "S4", 256, 96)]
#: the probes' residual-stream caching (every resid hook of every block), 64 words at T = 256
PROBE_CASES = [("prefix_scan", "S5", 256), ("krohn_rhodes", "S4", 256), ("gridworld", "grid5", 256)]


def timed(model, T: int, samples: int, forward: str) -> tuple[float, dict]:
    start = time.perf_counter()
    r = verify(model, length=T, samples=samples, exhaustive_upto=0, forward=forward)
    assert r.exact, (model.card.construction, r.mismatches)
    return time.perf_counter() - start, r.details["forward"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="two small cases, one round")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(1)
    cases, rounds = (QUICK, 1) if args.quick else (CASES, args.rounds)
    print(
        f"{'construction':28s} {'T':>5s} {'words':>5s} {'model pos/s':>12s} {'bare pos/s':>11s} {'ratio':>6s}  "
        "cross-check (positions, largest logit difference)"
    )
    for construction, automaton, T, samples in cases:
        model = build_model(construction, get_automaton(automaton), T)
        times: dict[str, list[float]] = {"model": [], "bare": []}
        for _ in range(rounds):
            for forward in ("model", "bare"):
                seconds, details = timed(model, T, samples, forward)
                times[forward].append(seconds)
        positions = samples * T
        model_rate, bare_rate = (positions / statistics.median(times[f]) for f in ("model", "bare"))
        print(
            f"{construction + ' ' + automaton:28s} {T:5d} {samples:5d} {model_rate:12,.0f} {bare_rate:11,.0f} "
            f"{bare_rate / model_rate:5.1f}x  {details['path']}, {details['cross_checked_positions']} positions, "
            f"{details['max_logit_difference']:.1e}",
            flush=True,
        )

    print(
        f"\n{'residual caching (probes)':28s} {'T':>5s} {'words':>5s} {'model pos/s':>12s} {'bare pos/s':>11s} {'ratio':>6s}"
    )
    for construction, automaton, T in PROBE_CASES[:1] if args.quick else PROBE_CASES:
        a = get_automaton(automaton)
        model = build_model(construction, a, T)
        tokens, _, _ = automaton_probe_data(model, a, a.sample(64, T, seed=0))
        hooks = residual_hooks(model.cfg.n_layers)
        times = {"model": [], "bare": []}
        for _ in range(max(rounds, 2)):
            for forward in ("model", "bare"):
                start = time.perf_counter()
                _, path = residual_stream(model, tokens, hooks, forward=forward)
                times[forward].append(time.perf_counter() - start)
                assert path == forward
        model_rate, bare_rate = (tokens.size / statistics.median(times[f]) for f in ("model", "bare"))
        print(
            f"{construction + ' ' + automaton:28s} {T:5d} {len(tokens):5d} {model_rate:12,.0f} {bare_rate:11,.0f} "
            f"{bare_rate / model_rate:5.1f}x",
            flush=True,
        )


#: the short check a user runs by hand, as a whole command
COMMAND = ["verify", "prefix_scan", "--automaton", "parity", "--length", "8", "--samples", "10"]


def command_cpu_seconds(extra: list[str]) -> float:
    """CPU seconds (user + system) of one ``python -m sandbox_lens.interp`` run of :data:`COMMAND` + ``extra``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-m", "sandbox_lens.interp", *COMMAND, *extra], check=True, capture_output=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def print_rounds(title: str, times: dict[str, list[float]], over: tuple[str, str], digits: int, what: str = "") -> None:
    """``title`` (``what`` was timed), each arm's median [min, max] CPU seconds, and arm ``over[0]``'s time over
    ``over[1]``'s per round, median [min, max] with ``digits`` decimals."""
    a, b = over
    ratios = sorted(x / y for x, y in zip(times[a], times[b]))
    print(f"\n{title} ({what}CPU seconds, median [min, max] over {len(times[a])} rounds)")
    for name, t in times.items():
        print(f"  {name}: {statistics.median(t):.2f} [{min(t):.2f}, {max(t):.2f}]")
    low, mid, high = ratios[0], statistics.median(ratios), ratios[-1]
    print(f"  {a.split()[-1]} / {b.split()[-1]}: {mid:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]", flush=True)


def command_times(rounds: int) -> None:
    times: dict[str, list[float]] = {"--forward bare ": [], "--forward model": []}
    command_cpu_seconds([])  # warm the file caches
    for _ in range(rounds):
        for forward in ("bare", "model"):
            times[f"--forward {forward:5s}"].append(command_cpu_seconds(["--forward", forward]))
    title = f"interp {' '.join(COMMAND)}"
    print_rounds(title, times, ("--forward bare ", "--forward model"), 2, what="whole command, ")


def sparse_times(rounds: int) -> None:
    """``verify`` of the prefix scan over 32 states on its sparse weights against the same weights dense (the
    dense model's arrays, every projection kept dense)."""
    from sandbox_lens.constructions import build
    from sandbox_lens.interp.model import bare

    spec = build("prefix_scan", get_automaton("memory32"), 64)
    least = bare.SPARSE_MIN_ENTRIES
    times: dict[str, list[float]] = {"sparse": [], "dense ": []}
    try:
        for _ in range(rounds):
            for kind in ("sparse", "dense"):
                bare.SPARSE_MIN_ENTRIES = least if kind == "sparse" else float("inf")
                start = time.process_time()
                r = verify(bare.BareModel(spec, sparse=kind == "sparse"), length=64, samples=10)
                times[f"{kind:6s}"].append(time.process_time() - start)
                assert r.exact
    finally:
        bare.SPARSE_MIN_ENTRIES = least
    print_rounds("verify prefix_scan memory32, T = 64, 10 samples", times, ("dense ", "sparse"), 1)


if __name__ == "__main__":
    main()
    command_times(3 if "--quick" in sys.argv else 7)
    sparse_times(1 if "--quick" in sys.argv else 3)
