"""UGS's circuit by its budget and its constants' rate (``python benchmarks/ugs_budget.py``).

UGS with optimal ablation (``--method ugs``) on the board's counter with the negatives (``--gridworld``: and the
gridworld's, slower), pair seeds 0–2, 32 pairs, resample ablation: at its defaults (300 Adam steps, learning rate 0.05, the constants' rate 1e-3 of their
size), at more steps and a larger rate (MIB's 0.15 for a small penalty), with the constants held at the senders' means
(rate 0: mean ablation) and learning ten times faster. Prints each setting's precision, recall, average precision and
open edges, the mean over the seeds. docs/circuits/README.md quotes the output.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from unittest import mock

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from leaderboard import families  # noqa: E402

from sandbox_lens.interp.circuits import masks  # noqa: E402
from sandbox_lens.interp.circuits.analyse import analyse  # noqa: E402
from sandbox_lens.interp.circuits.truth import ground_truth  # noqa: E402
from sandbox_lens.interp.model.hooked import to_hooked  # noqa: E402

BUDGETS = [(300, 0.05, 1e-3), (1000, 0.15, 1e-3), (300, 0.05, 0.0), (300, 0.05, 1e-2)]
SEEDS = (0, 1, 2)


def main() -> None:
    import argparse

    import torch

    ap = argparse.ArgumentParser()
    ap.add_argument("--gridworld", action="store_true", help="also the gridworld with negatives")
    wanted = ("modular_counter C3", "gridworld grid4") if ap.parse_args().gridworld else ("modular_counter C3",)

    torch.set_num_threads(1)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    print(f"UGS by budget, pair seeds {list(SEEDS)}, 32 pairs, resample ablation (commit {commit or 'unknown'}):")
    learn = masks.learn_ugs_masks
    for family in families():
        if not family.negatives or family.name not in wanted:
            continue
        spec = family.build()
        truth, model = ground_truth(spec), to_hooked(spec)
        for steps, lr, value_lr in BUDGETS:

            def budget(*args, steps=steps, lr=lr, value_lr=value_lr, **kw):
                return learn(*args, **{**kw, "steps": steps, "lr": lr, "value_lr": value_lr})

            with mock.patch.object(masks, "learn_ugs_masks", budget):
                runs = [analyse(model, "ugs", truth, pairs=32, seed=s, curve=False) for s in SEEDS]
            mean = {
                k: float(np.mean([r[key] for r in runs]))
                for k, key in (("precision", "edge_precision"), ("recall", "edge_recall"), ("ap", "average_precision"))
            }
            open_edges = float(np.mean([r["ugs"]["open"] for r in runs]))
            print(
                f"  {family.name + ' + negatives':32s} {steps:5d} steps, lr {lr:.2f}, constants' {value_lr:g}: precision {mean['precision']:.2f}, "
                f"recall {mean['recall']:.2f}, AP {mean['ap']:.2f}, open {open_edges:.1f} of {len(truth.graph.edges)} "
                f"(truth {len(runs[0]['ground_truth_edges'])})",
                flush=True,
            )


if __name__ == "__main__":
    main()
