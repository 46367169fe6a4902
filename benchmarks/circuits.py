"""Circuit methods against proofs (``make bench``; alone: ``python benchmarks/circuits.py [--pairs N] [--json F]``).

1. **Speed**: attribution patching against path patching over every edge of the 16-block prefix scan
   (parity, T = 256), same pairs, same process; the ratio is what counts (timings here are noisy).
2. **Scorecard**: each method × each construction at T = 16 (Dyck at 12): AUROC of the method's
   ranking against the task-relevant ground truth (edges; nodes for activation patching), precision
   and recall of its recovered circuit, that circuit's faithfulness (accuracy on the outputs the
   corruption changes; the full model's is 1) and wall time.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from constructions.registry import build  # noqa: E402
from interp.circuits.analyse import METHODS, analyse  # noqa: E402
from interp.circuits.pairs import make_pairs  # noqa: E402
from interp.circuits.patching import Patcher, path_patching  # noqa: E402
from interp.circuits.effects import attribution
from interp.circuits.truth import ground_truth  # noqa: E402
from interp.model.hooked import to_hooked  # noqa: E402
from interp.tasks.automata import Semiautomaton  # noqa: E402
from interp.tasks.cascade import load_cascade_file  # noqa: E402
from interp.tasks.catalogue import get_automaton  # noqa: E402
from interp.tasks.dyck import Dyck  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def random_automaton(seed: int = 7) -> Semiautomaton:
    rng = np.random.default_rng(seed)
    return Semiautomaton("random4x3", tuple(f"q{i}" for i in range(4)), ("a", "b", "c"), rng.integers(4, size=(3, 4)))


def scorecard_specs():
    cascade = load_cascade_file(ROOT / "examples" / "cascades" / "parity_flipflop_counter.json")
    return [
        ("prefix_scan S5", lambda: build("prefix_scan", get_automaton("S5"), 16)),
        ("prefix_scan random4x3", lambda: build("prefix_scan", random_automaton(), 16)),
        ("modular_counter C3", lambda: build("modular_counter", get_automaton("C3"), 16)),
        ("memory memory3", lambda: build("memory", get_automaton("memory3"), 16)),
        ("krohn_rhodes S4", lambda: build("krohn_rhodes", get_automaton("S4"), 16)),
        ("krohn_rhodes cascade", lambda: build("krohn_rhodes", cascade.automaton(), 16, cascade=cascade)),
        ("gridworld grid4", lambda: build("gridworld", get_automaton("grid4"), 16)),
        ("dyck stack (2,3)", lambda: build("dyck", Dyck(2, 3), 12, variant="stack")),
        ("dyck uniform (2,3)", lambda: build("dyck", Dyck(2, 3), 12, variant="uniform")),
        ("dyck balanced (2,3)", lambda: build("dyck", Dyck(2, 3), 12, variant="balanced")),
        ("ffl", lambda: build("ffl", None, 16)),
    ]


def _timed(fn, repeats: int = 1) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def speed(pairs: int, repeats: int = 3) -> dict:
    """Path patching over every edge of the 16-block prefix scan: one full forward pass per edge (the
    baseline) against batched path patching, and attribution patching beside both; same pairs, same run."""
    spec = build("prefix_scan", get_automaton("parity"), 256)
    model = to_hooked(spec)
    patcher = Patcher(model, ground_truth(spec).graph)
    data = make_pairs(model, pairs, seed=0)
    source = patcher.source(data)
    attribution(patcher, data)  # warm-up
    fast, _ = _timed(lambda: attribution(patcher, data), repeats)
    one_per_pass, reference = _timed(lambda: path_patching(patcher, data, source=source, batched=False))
    batched, scores = _timed(lambda: path_patching(patcher, data, source=source), repeats)
    connected = int(patcher.connected().sum())
    return {"construction": "prefix_scan parity T=256", "blocks": spec.n_layers, "edges": len(patcher.graph.edges),
            "connected_edges": connected, "pairs": pairs, "attribution_s": fast, "path_one_per_pass_s": one_per_pass,
            "path_batched_s": batched, "batched_speedup": one_per_pass / batched,
            "max_score_difference": float(np.abs(np.asarray(scores) - np.asarray(reference)).max()),
            "attribution_vs_batched_path": batched / fast}


def scorecard(pairs: int) -> list[dict]:
    rows = []
    for name, make in scorecard_specs():
        spec = make()
        truth = ground_truth(spec)
        model = to_hooked(spec)
        for method in METHODS:
            r = analyse(model, method, truth, pairs=pairs)
            rows.append({"construction": name, "method": method, "level": r["level"], "auroc": r.get("auroc"),
                         "precision": r["edge_precision"] if r["level"] == "edge" else r.get("node_precision"),
                         "recall": r["edge_recall"] if r["level"] == "edge" else r.get("node_recall"),
                         "faithfulness": r["faithfulness"], "faithfulness_kl": r["faithfulness_metrics"]["kl"],
                         "edges": len(truth.graph.edges), "relevant": len(truth.relevant),
                         "circuit_edges": len(r["circuit"]["edges"]), "seconds": r["wall_seconds"]})
            print(f"  {name:24s} {method:12s} AUROC {_f(rows[-1]['auroc'])}  P {_f(rows[-1]['precision'])}  "
                  f"R {_f(rows[-1]['recall'])}  faithful {rows[-1]['faithfulness']:.3f}  {rows[-1]['seconds']:.2f} s",
                  flush=True)
    return rows


def _f(x) -> str:
    return "  —  " if x is None else f"{x:.3f}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=64, help="counterfactual pairs per analysis (default 64)")
    ap.add_argument("--speed-pairs", type=int, default=8, help="pairs for the T = 256 speed comparison (default 8)")
    ap.add_argument("--json", metavar="FILE", help="also write every number to FILE")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    print("Path patching over every edge of the 16-block prefix scan: one pass per edge vs batched", flush=True)
    s = speed(args.speed_pairs)
    print(f"  {s['construction']}: {s['blocks']} blocks, {s['edges']} edges ({s['connected_edges']} connected), "
          f"{s['pairs']} pairs")
    print(f"  one full pass per edge {s['path_one_per_pass_s']:.1f} s; batched {s['path_batched_s']:.2f} s "
          f"-> {s['batched_speedup']:.1f}x (largest score difference {s['max_score_difference']:.1e})")
    print(f"  attribution patching {s['attribution_s']:.2f} s ({s['attribution_vs_batched_path']:.0f}x faster than "
          "batched path patching, and an estimate)")
    print(f"Scorecard ({args.pairs} pairs, default corruption, threshold 0.01; AUROC vs the task-relevant ground truth)")
    rows = scorecard(args.pairs)
    print("\n| construction | " + " | ".join(f"{m} AUROC" for m in METHODS) + " | ACDC faithfulness | ACDC P / R |")
    print("|---" * (len(METHODS) + 3) + "|")
    for name, _ in scorecard_specs():
        r = {x["method"]: x for x in rows if x["construction"] == name}
        print(f"| {name} | " + " | ".join(_f(r[m]["auroc"]).strip() for m in METHODS)
              + f" | {r['acdc']['faithfulness']:.3f} | {_f(r['acdc']['precision']).strip()} / {_f(r['acdc']['recall']).strip()} |")
    if args.json:
        Path(args.json).write_text(json.dumps({"speed": s, "scorecard": rows}, indent=1))


if __name__ == "__main__":
    main()
