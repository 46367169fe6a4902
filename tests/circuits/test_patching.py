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


def test_the_normaliser_ratio_is_how_much_higher_an_ablations_threshold_acts():
    """Zero ablation normalises against m(∅), every edge zeroed; the constant gadget sends that run far beyond the
    corrupted word (KL ratio above 2), so every effect is the word-scale effect divided by the ratio, exactly.
    Under resample the normaliser is the corrupted word's run: no ratio."""
    from dataclasses import replace

    from sandbox_lens.constructions.registry import build
    from sandbox_lens.interp.circuits.analyse import _prepare
    from sandbox_lens.interp.circuits.config import CircuitConfig
    from sandbox_lens.interp.circuits.truth import ground_truth
    from sandbox_lens.interp.model.hooked import to_hooked
    from sandbox_lens.interp.tasks.catalogue import get_automaton

    spec = build("modular_counter", get_automaton("C3"), 8, negatives="distractor,cancel,constant")
    model, truth = to_hooked(spec), ground_truth(spec)
    patcher, data, src = _prepare(model, truth, CircuitConfig(pairs=24, source="zero", seed=3))
    ratio = data.normaliser_ratio("kl")
    assert ratio > 2 and data.to_dict()["normaliser_ratio"]["kl"] == ratio
    word = replace(data, corrupt_kl=data.word_kl, corrupt_metric=data.word_metric)
    for edge in patcher.graph.edges[:6]:
        logits = patcher.run(data.clean, [edge], src)[0]
        for metric in ("kl", "logit_diff"):
            against_word = patcher.effect(word, logits, metric)
            assert patcher.effect(data, logits, metric) * data.normaliser_ratio(metric) == pytest.approx(
                against_word, abs=1e-9
            )
    _, resampled, _ = _prepare(model, truth, CircuitConfig(pairs=24, source="resample", seed=3))
    assert resampled.normaliser_ratio("kl") is None and resampled.normaliser_ratio("logit_diff") is None


def test_the_word_normaliser_undoes_the_zeroed_constant_gadgets_inflation():
    """Zero-ablating the constant gadget throws m(∅) about 100 times farther than the corrupted word at gain 200 (the
    counter), so ACDC's threshold prunes the circuit; normalised against the word's run it keeps all of it."""
    from sandbox_lens.constructions.registry import build
    from sandbox_lens.interp.circuits.analyse import analyse
    from sandbox_lens.interp.circuits.truth import ground_truth
    from sandbox_lens.interp.model.hooked import to_hooked
    from sandbox_lens.interp.tasks.catalogue import get_automaton

    spec = build("modular_counter", get_automaton("C3"), 8, negatives="distractor,cancel,constant", negative_gain=200.0)
    model, truth = to_hooked(spec), ground_truth(spec)
    ablated = analyse(model, "acdc", truth, source="zero", why_missed=0)
    word = analyse(model, "acdc", truth, source="zero", normaliser="word", why_missed=0)
    assert ablated["normaliser"] == "ablated" and word["normaliser"] == "word"
    assert ablated["pairs"]["normaliser_ratio"]["kl"] > 50  # m(∅) far beyond the word
    assert word["pairs"]["normaliser_ratio"]["kl"] is None  # the word's run is the normaliser
    assert ablated["edge_recall"] < 0.5 and word["edge_recall"] == 1.0
    assert word["ground_truth_edges"] == ablated["ground_truth_edges"]  # the same truth: only the yardstick moved
