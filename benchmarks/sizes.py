"""How each construction's size grows with the length T (``make bench``; alone: ``python benchmarks/sizes.py``).

Built from the sparse specs (no dense weights, no forward pass): blocks, attention layers, d_model,
d_mlp and TransformerLens parameters at T = 64 … 4096, and the longest T each construction accepts.

Then the prefix scan against the number of states |Q| (``memory<n>``, T = 64): its dense parameters, the
non-zeros the bare forward keeps (:func:`sandbox_lens.interp.model.bare.sparse_state`: each MLP as its units'
entries), and the widths Theorem 10 states.
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
STATES = (4, 8, 16, 32, 64)


def nonzeros(spec) -> int:
    """The numbers :func:`sandbox_lens.interp.model.bare.sparse_state` stores that are not zero: the embeddings',
    the attention's and each MLP unit's reads, writes and biases (counted from the spec, nothing dense built)."""
    import numpy as np

    from sandbox_lens.interp.model.hooked import attention_arrays

    n = sum(int(np.count_nonzero(a)) for a in (spec.W_E, spec.W_pos, spec.W_U, spec.b_U))
    for l, block in enumerate(spec.blocks):
        n += sum(int(np.count_nonzero(a)) for a in attention_arrays(spec, l).values())
        if block.mlp is not None:
            w_in, b_in, w_out, b_out = block.mlp.entries()
            n += w_in.shape[1] + w_out.shape[1] + int(np.count_nonzero(b_in)) + int(np.count_nonzero(b_out))
    return n


def states() -> None:
    """The prefix scan's size against |Q| at T = 64."""
    print(
        f"\n{'prefix_scan, T = 64':22s} {'|Q|':>4s} {'d_model':>7s} {'d_mlp':>7s} {'parameters':>14s} {'non-zeros':>10s}"
        f" {'share':>7s}   Thm 10: MLP width |Q|² + |Q|"
    )
    for n in STATES:
        spec = build("prefix_scan", get_automaton(f"memory{n}"), 64)
        s, dense, kept = spec.shape_summary(), spec.parameters, nonzeros(spec)
        print(
            f"{'':22s} {n:4d} {s['d_model']:7,d} {s['d_mlp']:7,d} {dense:14,d} {kept:10,d} {kept / dense:7.2%}"
            f"   {n * n + n:,}",
            flush=True,
        )


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
    states()


if __name__ == "__main__":
    main()
