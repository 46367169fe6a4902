"""Circuit methods: speed, and how EAP-IG's steps must grow (``make bench``; alone:
``python benchmarks/circuits.py [--speed-pairs N] [--json F]``). The scores are in the leaderboard
(``make leaderboard``, docs/circuits/leaderboard.md).

1. **Speed**: path patching over every edge of the 16-block prefix scan (parity, T = 256): one full
   forward pass per edge (the baseline), batched on TransformerLens hooks, batched on the bare engine;
   attribution patching beside them. Same pairs, same process; the ratios are what count.
2. **EAP-IG on the counter's staircase**: Lemma 15's modular counter (C3) at T = 8 … 256: the fewest
   integration steps m (powers of two) at which EAP-IG's scores of the two edges into the MLP come
   within 0.1 of path patching's (m = 1, attribution patching, gives them 0).
3. **Whole commands**: ``interp circuit prefix_scan --automaton S5 -T 16 --method attribution`` against the same
   with ``--method path``, each a fresh process (imports, building, scoring and writing included), alternated over
   five rounds, in CPU seconds of the child: the ratio per round, its median and range; then the same at the
   16-block parity scan (T = 256, five rounds), where the methods' own costs, not the shared ones, decide.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sandbox_lens.constructions.registry import build  # noqa: E402
from sandbox_lens.interp.circuits.effects import attribution, path_patching  # noqa: E402
from sandbox_lens.interp.circuits.pairs import make_pairs  # noqa: E402
from sandbox_lens.interp.circuits.patching import Patcher  # noqa: E402
from sandbox_lens.interp.circuits.truth import ground_truth  # noqa: E402
from sandbox_lens.interp.model.hooked import to_hooked  # noqa: E402
from sandbox_lens.interp.tasks.catalogue import get_automaton  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def _timed(fn, repeats: int = 1) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def speed(pairs: int, repeats: int = 3) -> dict:
    """Path patching over every edge of the 16-block prefix scan, three ways, and attribution; same pairs."""
    from sandbox_lens.interp.circuits.bare import BarePatcher

    spec = build("prefix_scan", get_automaton("parity"), 256)
    model = to_hooked(spec)
    graph = ground_truth(spec).graph
    hooks, bare = Patcher(model, graph), BarePatcher(model, graph)
    data = make_pairs(model, pairs, seed=0)
    source = hooks.source(data)
    attribution(bare, data)  # warm-up
    fast, _ = _timed(lambda: attribution(bare, data), repeats)
    one_per_pass, reference = _timed(lambda: path_patching(hooks, data, source=source, batched=False))
    batched, on_hooks = _timed(lambda: path_patching(hooks, data, source=source))
    bare_s, on_bare = _timed(lambda: path_patching(bare, data, source=bare.source(data)), repeats)
    return {
        "construction": "prefix_scan parity T=256",
        "blocks": spec.n_layers,
        "edges": len(graph.edges),
        "connected_edges": int(hooks.connected().sum()),
        "pairs": pairs,
        "attribution_s": fast,
        "path_one_per_pass_s": one_per_pass,
        "path_batched_hooks_s": batched,
        "path_batched_bare_s": bare_s,
        "hooks_speedup": one_per_pass / batched,
        "bare_speedup": one_per_pass / bare_s,
        "max_difference_hooks": float(np.abs(np.asarray(on_hooks) - reference).max()),
        "max_difference_bare": float(np.abs(np.asarray(on_bare) - reference).max()),
    }


def staircase(lengths=(8, 32, 128, 256), pairs: int = 32, within: float = 0.1) -> list[dict]:
    """The fewest EAP-IG steps that recover the counter's edges into its MLP, per length and corruption: one
    symbol changed moves the count by a step or two, an independent word by about √T."""
    from sandbox_lens.interp.circuits.bare import BarePatcher

    rows = []
    for T, corruption in ((T, c) for T in lengths for c in ("symbol", "resample")):
        spec = build("modular_counter", get_automaton("C3"), T)
        model = to_hooked(spec)
        graph = ground_truth(spec).graph
        patcher = BarePatcher(model, graph)
        data = make_pairs(model, pairs, corruption, seed=0)
        upstream = [graph.index[e] for e in graph.edges if e.name in ("embed->a0.0.v", "a0.0->m0")]
        exact = path_patching(patcher, data)[upstream]
        found = None
        for m in (1, 2, 4, 8, 16, 32, 64, 128, 256):
            scores = attribution(patcher, data, steps=m)[0][upstream]
            if np.all(np.abs(scores - exact) <= within):
                found = m
                break
        rows.append(
            {
                "T": T,
                "corruption": corruption,
                "mlp_units": int(spec.d_mlp),
                "path_patching": exact.tolist(),
                "steps_needed": found,
            }
        )
    return rows


#: the whole commands of section 3, less their --method
COMMAND = ["circuit", "prefix_scan", "--automaton", "S5", "-T", "16"]
LARGE = ["circuit", "prefix_scan", "--automaton", "parity", "-T", "256"]


def command_cpu_seconds(method: str, command: list[str] = COMMAND) -> tuple[float, float]:
    """CPU seconds (user + system) of one ``python -m sandbox_lens.interp`` run of ``command`` with ``method``,
    and the method's own CPU seconds within it (its ``circuit.json``)."""
    with tempfile.TemporaryDirectory() as out:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run(
            [sys.executable, "-m", "sandbox_lens.interp", "--threads", "1", *command, "--method", method, "--out", out],
            check=True,
            capture_output=True,
        )
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        own = json.loads((Path(out) / "circuit.json").read_text())["cpu_seconds"]
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), own


def commands(rounds: int = 5, command: list[str] = COMMAND) -> dict:
    """Section 3: the attribution command against the path-patching one, alternated."""
    command_cpu_seconds("attribution", command)  # warm the file caches
    times: dict[str, list[float]] = {"attribution": [], "path": []}
    own: dict[str, list[float]] = {"attribution": [], "path": []}
    for _ in range(rounds):
        for method in ("attribution", "path"):
            whole, alone = command_cpu_seconds(method, command)
            times[method].append(whole)
            own[method].append(alone)
    ratios = sorted(a / p for a, p in zip(times["attribution"], times["path"]))
    print(f"interp {' '.join(command)} --method M (whole command, CPU seconds, median [min, max] over {rounds} rounds)")
    for method, t in times.items():
        print(
            f"  {method:11s}: {statistics.median(t):.2f} [{min(t):.2f}, {max(t):.2f}]; the method itself "
            f"{statistics.median(own[method]):.3f}"
        )
    print(f"  attribution / path: {statistics.median(ratios):.2f} [{ratios[0]:.2f}, {ratios[-1]:.2f}]", flush=True)
    return {"seconds": times, "method_seconds": own, "ratios": ratios}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--speed-pairs", type=int, default=8, help="pairs for the T = 256 speed comparison (default 8)")
    ap.add_argument("--json", metavar="FILE", help="also write every number to FILE")
    ap.add_argument("--only-commands", action="store_true", help="only section 3 (the whole commands)")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    if args.only_commands:
        record = {"commands": commands(), "commands_large": commands(5, LARGE)}
        if args.json:
            Path(args.json).write_text(json.dumps(record, indent=1))
        return
    print("Path patching over every edge of the 16-block prefix scan: one pass per edge vs batched", flush=True)
    s = speed(args.speed_pairs)
    print(
        f"  {s['construction']}: {s['blocks']} blocks, {s['edges']} edges ({s['connected_edges']} connected), "
        f"{s['pairs']} pairs"
    )
    print(
        f"  one full pass per edge {s['path_one_per_pass_s']:.1f} s; batched on hooks {s['path_batched_hooks_s']:.2f} s "
        f"({s['hooks_speedup']:.1f}x); batched on the bare engine {s['path_batched_bare_s']:.2f} s "
        f"({s['bare_speedup']:.1f}x); largest score differences {s['max_difference_hooks']:.1e} / "
        f"{s['max_difference_bare']:.1e}"
    )
    print(f"  attribution patching (bare) {s['attribution_s']:.2f} s")
    print("EAP-IG steps needed to cross the modular counter's ReLU staircase (within 0.1 of path patching)", flush=True)
    rows = staircase()
    for r in rows:
        print(
            f"  T = {r['T']:4d} ({r['mlp_units']} MLP units), {r['corruption']:8s}: m = {r['steps_needed'] or '> 256'}"
        )
    whole = commands()
    large = commands(5, LARGE)
    if args.json:
        record = {"speed": s, "staircase": rows, "commands": whole, "commands_large": large}
        Path(args.json).write_text(json.dumps(record, indent=1))


if __name__ == "__main__":
    main()
