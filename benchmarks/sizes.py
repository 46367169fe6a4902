"""How each construction's size grows with the length T (``make bench``; alone: ``python benchmarks/sizes.py``).

Built from the sparse specs (no dense weights, no forward pass): blocks, attention layers, d_model,
d_mlp and TransformerLens parameters at T = 64 … 4096, and the longest T each construction accepts.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sandbox_lens.constructions import build  # noqa: E402
from sandbox_lens.interp.errors import SandboxError  # noqa: E402
from sandbox_lens.interp.tasks.catalogue import get_automaton  # noqa: E402
from sandbox_lens.interp.tasks.dyck import Dyck  # noqa: E402

CASES = [  # (label, construction, task)
    ("prefix_scan S5", "prefix_scan", get_automaton("S5")),
    ("prefix_scan parity", "prefix_scan", get_automaton("parity")),
    ("modular_counter C5", "modular_counter", get_automaton("C5")),
    ("krohn_rhodes S4", "krohn_rhodes", get_automaton("S4")),
    ("krohn_rhodes grid5", "krohn_rhodes", get_automaton("grid5")),
    ("gridworld grid5", "gridworld", get_automaton("grid5")),
    ("dyck Dyck_{2,4}", "dyck", Dyck(2, 4)),
    ("ffl", "ffl", None),
]
LENGTHS = (64, 256, 1024, 4096)


def main() -> None:
    print(
        f"{'construction':22s} {'T':>5s} {'blocks':>6s} {'attn':>4s} {'d_model':>7s} {'d_mlp':>7s} {'parameters':>12s}"
    )
    for label, construction, task in CASES:
        for T in LENGTHS:
            start = time.perf_counter()
            try:
                spec = build(construction, task, T)
            except SandboxError as e:
                print(f"{label:22s} {T:5d}  refused: {e}")
                break
            s = spec.shape_summary()
            print(
                f"{label:22s} {T:5d} {s['n_layers']:6d} {s['attention_layers']:4d} {s['d_model']:7,d} "
                f"{s['d_mlp']:7,d} {spec.parameters:12,d}   ({time.perf_counter() - start:.1f} s)",
                flush=True,
            )


if __name__ == "__main__":
    main()
