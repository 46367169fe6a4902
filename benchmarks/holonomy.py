"""The holonomy decomposition's sizes and exactness (``make bench``; alone: ``python benchmarks/holonomy.py``).

For each example — the flip-flop, Grid_n for n = 3…9, the Dyck_{2,3} stack automaton, the car on a circle,
C3 with resets, the docs' JSON automaton — the decomposition's levels and components, and the ``krohn_rhodes``
transformer built *through the holonomy cascade* at T = 64 and T = 1024: blocks, attention layers and
parameters beside the prefix scan's (Theorem 10), and exactness at T = 1024 in float32 (every word up to a
small length and 200 random words). The depth must not grow from T = 64 to T = 1024.

Prints a Markdown table and, last, ``holonomy: exact N/N, depth constant N/N``; writes
``reports/bench/holonomy.json``.
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sandbox_lens.constructions.krohn_rhodes import build_krohn_rhodes  # noqa: E402
from sandbox_lens.constructions.prefix_scan import build_prefix_scan  # noqa: E402
from sandbox_lens.interp.files import atomic_write  # noqa: E402
from sandbox_lens.interp.model.hooked import parameter_count  # noqa: E402
from sandbox_lens.interp.tasks.automata import parse_automaton_json  # noqa: E402
from sandbox_lens.interp.tasks.cascade import load_cascade_file  # noqa: E402
from sandbox_lens.interp.tasks.catalogue import get_automaton  # noqa: E402
from sandbox_lens.interp.tasks.holonomy import holonomy_skeleton  # noqa: E402
from sandbox_lens.interp.tasks.holonomy_cascade import holonomy_cascade  # noqa: E402
from sandbox_lens.interp.verify import verify  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TOY = (
    '{"name": "toy", "states": ["a", "b"], "alphabet": ["x", "y"], '
    '"delta": {"x": ["b", "a"], "y": ["a", "a"]}, "initial": "a"}'
)


def examples() -> list:
    out = [get_automaton("flipflop")] + [get_automaton(f"grid{n}") for n in range(3, 10)]
    out += [
        get_automaton("dyck2-depth3"),
        load_cascade_file(ROOT / "examples/cascades/car_on_a_circle.json").automaton(),
        get_automaton("C3+resets"),
        parse_automaton_json(TOY),
    ]
    return out


def main() -> None:
    rows = []
    for a in examples():
        t0 = time.perf_counter()
        h = holonomy_skeleton(a)
        cascade = holonomy_cascade(a, h)
        row = {
            "automaton": a.name,
            "states": a.n_states,
            "levels": h.levels,
            "components": len(h.components),
            "level_values": [lv.automaton.n_states for lv in cascade.levels],
        }
        for T in (64, 1024):
            spec = build_krohn_rhodes(a, T, cascade=cascade)
            scan = build_prefix_scan(a, T)
            row[f"blocks_{T}"] = len(spec.blocks)
            row[f"attention_{T}"] = sum(1 for b in spec.blocks if b.heads)
            row[f"params_{T}"] = parameter_count(spec)
            row[f"scan_blocks_{T}"] = len(scan.blocks)
            row[f"scan_params_{T}"] = parameter_count(scan)
            if T == 1024:
                upto = max(1, min(8, int(math.log(2000) / math.log(max(2, a.n_symbols)))))
                r = verify(spec, exhaustive_upto=upto, samples=200, seed=0)
                row["exact_1024"] = bool(r.accuracy == 1.0)
                row["checked_1024"] = int(r.checked)
        row["seconds"] = time.perf_counter() - t0
        rows.append(row)
        print(
            f"{a.name}: {row['levels']} levels, blocks {row['blocks_64']} -> {row['blocks_1024']}, "
            f"exact at 1024: {row['exact_1024']} ({row['seconds']:.0f} s)",
            file=sys.stderr,
            flush=True,
        )
    print(
        "| automaton | |Q| | levels | components | level values | blocks (attention) T=64 / 1024 | "
        "params T=64 / 1024 | prefix scan blocks / params T=1024 | exact at T=1024 |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['automaton']} | {r['states']} | {r['levels']} | {r['components']} | "
            f"{'×'.join(map(str, r['level_values']))} | {r['blocks_64']} ({r['attention_64']}) / {r['blocks_1024']} "
            f"({r['attention_1024']}) | {r['params_64']:,} / {r['params_1024']:,} | {r['scan_blocks_1024']} / "
            f"{r['scan_params_1024']:,} | {'yes' if r['exact_1024'] else 'NO'} ({r['checked_1024']:,} positions) |"
        )
    out = ROOT / "reports" / "bench" / "holonomy.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(out, json.dumps(rows, indent=1).encode())
    exact = sum(r["exact_1024"] for r in rows)
    constant = sum(r["blocks_64"] == r["blocks_1024"] for r in rows)
    print(f"holonomy: exact {exact}/{len(rows)}, depth constant {constant}/{len(rows)}")


if __name__ == "__main__":
    main()
