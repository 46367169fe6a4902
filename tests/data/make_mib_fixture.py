"""Writes ``tests/data/mib_fixture.json``: MIB's own numbers for :mod:`sandbox_lens.interp.circuits.mib` to match.

Not part of the suite (it needs EAP-IG's and MIB's source, which are not dependencies). Run once, by hand:

    python tests/data/make_mib_fixture.py EAP_IG_SRC MIB_CIRCUIT_TRACK_DIR [EAP_IG_COMMIT MIB_COMMIT]

with EAP_IG_SRC the ``src`` folder of a checkout of hannamw/EAP-IG and MIB_CIRCUIT_TRACK_DIR the
``MIB_circuit_track`` folder of hannamw/MIB-circuit-track. For each case it writes a score file in EAP-IG's format
(every complete-graph edge a distinct score, some negative, so no tie decides a cut), the edges EAP-IG's
``Graph.apply_topn(n, absolute)`` keeps at each of MIB's sizes, and — where the model has every head and MLP of
its shape, so that the complete graph is this project's graph — the CPR, CMD and faithfulness curves that MIB's
``evaluate_area_under_curve`` gives on this project's counterfactual pairs and metric (its patching on
TransformerLens hooks; ``tokenize_plus`` replaced by the token ids, there being no tokenizer).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch

OUT = Path(__file__).with_name("mib_fixture.json")
CASES = [
    {
        "construction": "modular_counter",
        "source": "C3",
        "length": 8,
        "options": {"negatives": "distractor,cancel,constant"},
        "evaluate": True,
    },
    {"construction": "dyck", "source": "2,3", "length": 8, "options": {}, "evaluate": True},
    {
        "construction": "gridworld",
        "source": "grid4",
        "length": 8,
        "options": {"negatives": "distractor,cancel,constant"},
        "evaluate": False,
    },
]
PAIRS, SEED = 32, 0


def main(eap_src: str, mib_dir: str, *labels: str) -> None:
    sys.path[:0] = [eap_src, mib_dir]
    import eap.evaluate as ev
    from eap.graph import Graph

    def tokens_as_given(model, tokens, max_length=None):  # the pairs are token ids already
        return tokens, torch.ones_like(tokens), torch.full((len(tokens),), tokens.shape[1]), tokens.shape[1]

    ev.tokenize_plus = tokens_as_given
    import evaluation as mib  # MIB_circuit_track/evaluation.py

    def evaluate_graph(*args, optimal_ablation_path=None, **kwargs):  # MIB passes an argument EAP-IG HEAD lacks
        return ev.evaluate_graph(*args, **kwargs)

    mib.evaluate_graph = evaluate_graph

    import sandbox_lens as sl
    from sandbox_lens.interp.circuits.bare import patcher_for
    from sandbox_lens.interp.circuits.effects import path_patching
    from sandbox_lens.interp.circuits.mib import CompleteGraph, mib_edge
    from sandbox_lens.interp.circuits.pairs import make_pairs
    from sandbox_lens.interp.circuits.score import MIB_PERCENTAGES
    from sandbox_lens.interp.circuits.truth import ground_truth_of_model

    rng = np.random.default_rng(20261126)
    cases = []
    for case in CASES:
        model = sl.load(case["construction"], case["source"], length=case["length"], **case["options"])
        graph = ground_truth_of_model(model).graph
        pairs = make_pairs(model, PAIRS, seed=SEED)
        patcher = patcher_for(model, graph)
        effects = path_patching(patcher, pairs)
        complete = CompleteGraph(model.cfg.n_layers, model.cfg.n_heads)
        scores = {name: 0.0 for name in complete.edge_names}
        for e, v in zip(graph.edges, effects):
            if mib_edge(e) is not None:
                scores[mib_edge(e)] = float(v)
        # distinct scores everywhere (a tie at a cut is decided by an unstable argsort there), signs kept
        jitter = rng.permutation(len(scores)) * 1e-6 + 1e-6
        scores = {
            name: v + (jitter[i] if v >= 0 else -jitter[i]) * (1 if v != 0 else rng.choice([-1, 1]))
            for i, (name, v) in enumerate(scores.items())
        }
        g = Graph.from_model(
            {
                "n_layers": model.cfg.n_layers,
                "n_heads": model.cfg.n_heads,
                "parallel_attn_mlp": False,
                "d_model": model.cfg.d_model,
            }
        )
        for name, v in scores.items():
            g.edges[name].score = v
        N = len(g.edges)
        kept = {}
        for absolute in (False, True):
            kept["absolute" if absolute else "signed"] = []
            for p in MIB_PERCENTAGES:
                g.apply_topn(int(p * N), absolute, prune=True)
                kept["absolute" if absolute else "signed"].append(sorted(n for n, e in g.edges.items() if e.in_graph))
        entry = {
            **{k: case[k] for k in ("construction", "source", "length", "options")},
            "pairs": PAIRS,
            "seed": SEED,
            "complete_edges": N,
            "scores": scores,
            "kept": kept,
        }
        if case["evaluate"]:
            model.set_use_attn_result(True)
            model.set_use_split_qkv_input(True)
            model.set_use_hook_mlp_in(True)
            clean = torch.as_tensor(pairs.clean)
            corrupt = torch.as_tensor(pairs.corrupt)

            def metric(logits, clean_logits, input_lengths, label):
                return pairs.logit_diff(logits.double()).reshape(1)

            loader = [(clean, corrupt, None)]
            entry["mib"] = {}
            for absolute in (False, True):
                _, area_under, area_from_1, _, f = mib.evaluate_area_under_curve(
                    model, g, loader, metric, quiet=True, absolute=absolute
                )
                entry["mib"]["absolute" if absolute else "signed"] = {
                    "cpr": area_under,
                    "cmd": area_from_1,
                    "faithfulness": [float(x) for x in f],
                }
        cases.append(entry)
    commits = {}
    for i, (name, path) in enumerate((("eap_ig", eap_src), ("mib_circuit_track", mib_dir))):
        commits[name] = (
            labels[i]
            if len(labels) > i
            else subprocess.run(
                ["git", "-C", path, "rev-parse", "--short", "HEAD"], capture_output=True, text=True
            ).stdout.strip()
            or "unknown"
        )
    OUT.write_text(
        json.dumps(
            {
                "made_by": "tests/data/make_mib_fixture.py",
                "commits": commits,
                "percentages": list(MIB_PERCENTAGES),
                "cases": cases,
            },
            indent=1,
        )
        + "\n"
    )
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main(*sys.argv[1:])
