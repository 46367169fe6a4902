"""Which per-position truth items PEAP's first-order terms leave at zero (``python benchmarks/peap_terms.py``).

For each of the circuit board's construction families (without negatives), PEAP on pair seed 0 (32 pairs, resample
ablation): how many items of the per-position truth get a term under 10⁻⁷ in size — where the gradient vanishes, so
they tie last — beside PEAP's average precision over (edge, position) items and over (edge, query, key) items (keys
and values split by the queries that read them). docs/circuits/README.md quotes the output.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from leaderboard import families  # noqa: E402

from sandbox_lens.interp.circuits.analyse import analyse  # noqa: E402
from sandbox_lens.interp.circuits.truth import ground_truth  # noqa: E402
from sandbox_lens.interp.model.hooked import to_hooked  # noqa: E402

#: A term smaller than this counts as zero.
ZERO = 1e-7


def main() -> None:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    print(f"PEAP, pair seed 0, 32 pairs, resample ablation (commit {commit or 'unknown'}):")
    for family in families():
        if family.negatives or family.per_seed:
            continue
        spec = family.build()
        truth = ground_truth(spec)
        r = analyse(to_hooked(spec), "peap", truth, pairs=32, seed=0, curve=False)
        inside = r["position_scores"]["truth"]["edges"]
        sizes = [abs(r["edge_positions"][name][p]) for name, positions in inside.items() for p in positions]
        zero = int(np.sum(np.array(sizes) < ZERO))
        ap = r["position_scores"]["edges"]["average_precision"]
        crossing = r["position_scores"]["crossing"]
        print(
            f"  {family.name:22s} truth items {len(sizes):4d}, terms under 1e-7 {zero:4d} ({zero / len(sizes):.0%}); "
            f"AP over items {ap:.2f}; over (edge, query, key) items {crossing['average_precision']:.2f} "
            f"({crossing['positives']} of {crossing['edges']})"
        )


if __name__ == "__main__":
    main()
