"""The patching engine: batched path patching (from the receiver's block, edges side by side, unconnected
edges skipped) scores what one full pass per edge scores; runs that start at a later block give the
logits of runs from the tokens."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from circuit_families import FAMILIES, NEGATIVE_FAMILIES

from sandbox_lens.interp.circuits.effects import path_patching
from sandbox_lens.interp.circuits.pairs import make_pairs
from sandbox_lens.interp.circuits.patching import Patcher
from sandbox_lens.interp.circuits.truth import ground_truth
from sandbox_lens.interp.model.hooked import to_hooked

CASES = [
    "prefix_scan/S5",
    "gridworld/grid4",
    "dyck/balanced",
    "ffl",
    "krohn_rhodes/cascade",
    "modular_counter/C3+negatives",
]


@pytest.mark.parametrize("family", CASES)
@pytest.mark.parametrize("ablation", ["resample", "zero", "mean"])
def test_batched_path_patching_scores_what_one_pass_per_edge_scores(family, ablation):
    spec = {**FAMILIES, **NEGATIVE_FAMILIES}[family]()
    model = to_hooked(spec)
    patcher = Patcher(model, ground_truth(spec).graph)
    pairs = make_pairs(model, 12, seed=4)
    source = patcher.source(pairs, ablation)
    reference = path_patching(patcher, pairs, source=source, batched=False)
    batched = path_patching(patcher, pairs, source=source)
    np.testing.assert_allclose(batched, reference, rtol=0, atol=1e-6)
    skipped = ~patcher.connected()
    assert np.all(reference[skipped] == 0.0)  # what the receiver cannot read changes nothing, bit for bit


def test_a_run_from_a_later_block_gives_the_run_from_the_tokens():
    spec = FAMILIES["krohn_rhodes/S4"]()
    model = to_hooked(spec)
    patcher = Patcher(model, ground_truth(spec).graph)
    pairs = make_pairs(model, 8, seed=1)
    state = patcher.clean_state(pairs.clean)
    source = patcher.source(pairs)
    g = patcher.graph
    late = [e for e in g.edges if g.by_name[e.receiver].layer >= 2][:40]
    settings = [(late[:k], None) for k in (1, 5, 40)]
    full = patcher.run_many(pairs.clean, settings, source)
    started = patcher.run_many(pairs.clean, settings, source, state)
    assert patcher.start_layer(late) == 2
    torch.testing.assert_close(started, full, rtol=0, atol=1e-5 * float(full.abs().max()))
