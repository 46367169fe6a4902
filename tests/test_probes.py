"""Linear probes and head ablation / pruning on constructed (and trained) models."""

import numpy as np
import pytest

from constructions import build
from interp.catalogue import get_automaton
from interp.errors import VocabularyError
from probes.ablation import accuracy_with_ablation, greedy_prune, head_ablation, live_heads
from probes.linear import automaton_probe_data, probe_accuracy, residual_hooks


def test_probes_find_the_state_where_the_construction_writes_it():
    a = get_automaton("C3")
    model = build("modular_counter", a, 24).to_hooked()
    tokens, labels, mask = automaton_probe_data(model, a, a.sample(60, 24, seed=0))
    acc = probe_accuracy(model, tokens, labels, mask)
    assert list(acc) == residual_hooks(1)
    assert acc["blocks.0.hook_resid_post"] == 1.0  # the trapezoids write the one-hot state here
    assert acc["blocks.0.hook_resid_pre"] < 0.6  # before the count, only chance (1/3) plus luck


def test_probe_latent_and_bad_input():
    a = get_automaton("parity")
    model = build("modular_counter", a, 16).to_hooked()
    words = a.sample(30, 16, seed=1)
    tokens, labels, mask = automaton_probe_data(model, a, words, latent=lambda q: q == 0)
    assert set(np.unique(labels[mask])) <= {0, 1}
    with pytest.raises(VocabularyError):
        probe_accuracy(model, tokens[:2], labels[:2], mask[:2])
    with pytest.raises(VocabularyError):
        probe_accuracy(model, tokens, labels[:, :-1], mask)


def test_ablating_the_counting_head_drops_to_chance_and_pruning_keeps_essential_heads():
    a = get_automaton("parity")
    model = build("modular_counter", a, 32).to_hooked()
    tokens, labels, mask = automaton_probe_data(model, a, a.sample(80, 32, seed=2))
    result = head_ablation(model, tokens, labels, mask)
    assert result["baseline"] == 1.0
    assert abs(result["accuracy"][(0, 0)] - 0.5) < 0.1
    s3 = get_automaton("S3")
    scan = build("prefix_scan", s3, 16).to_hooked()
    tokens, labels, mask = automaton_probe_data(scan, s3, s3.sample(40, 16, seed=3))
    pruned = greedy_prune(scan, tokens, labels, mask, threshold=0.99)
    assert sorted(pruned["surviving"]) == sorted(live_heads(scan)) and pruned["accuracy"] == 1.0
    mean = accuracy_with_ablation(scan, tokens, labels, mask, [live_heads(scan)[0]], kind="mean")
    assert mean < 0.99
    with pytest.raises(VocabularyError):
        accuracy_with_ablation(scan, tokens, labels, mask, kind="shuffle")


def test_redundant_heads_are_pruned():
    """C2^3's counters are independent: with one coordinate's accuracy not required, pruning drops its head."""
    a = get_automaton("C2^3")
    model = build("krohn_rhodes", a, 16).to_hooked()
    tokens, labels, mask = automaton_probe_data(model, a, a.sample(60, 16, seed=4))
    assert len(live_heads(model)) == 3
    pruned = greedy_prune(model, tokens, labels, mask, threshold=0.4)
    assert len(pruned["surviving"]) < 3 and pruned["accuracy"] >= 0.4


def test_attention_references_scores_and_matching():
    from interp.viz import attention_patterns, model_tokens
    from probes.attention import (lookback_reference, match_heads, score_head, score_heads, target_reference,
                                  uniform_reference)

    s3 = get_automaton("S3")
    scan = build("prefix_scan", s3, 16).to_hooked()
    word = s3.sample(1, 16, seed=0)[0]
    ids, _ = model_tokens(scan, word)
    patterns = attention_patterns(scan, ids)
    n = len(ids)
    real = list(range(len(scan.card.io.prefix), n))
    refs = {f"back {2 ** l}": lookback_reference(n, 2 ** l) for l in range(4)} | {"uniform": uniform_reference(n)}
    scores = score_heads(patterns, refs, real)
    for layer, head in enumerate(sorted(patterns)):  # attention layer l looks back 2^l: perfect scores
        s = scores[head][f"back {2 ** layer}"]
        assert s["mass"] == pytest.approx(1.0) and s["argmax_agreement"] == 1.0 and s["tv_distance"] < 1e-6
        assert scores[head]["uniform"]["tv_distance"] > 0.5
    # matching a model with itself pairs every head with itself at distance 0
    pairs = match_heads(patterns, patterns, real)
    assert all(p["trained"] == p["constructed"] and p["tv_distance"] < 1e-9 for p in pairs)
    shuffled = dict(zip(reversed(list(patterns)), patterns.values()))
    assert {(p["trained"], p["constructed"]) for p in match_heads(shuffled, patterns, real)} == {
        (k, v) for k, v in zip(reversed(list(patterns)), patterns)}
    with pytest.raises(VocabularyError):
        target_reference([0, 2, 1])
    with pytest.raises(VocabularyError):
        score_head(np.eye(3), np.eye(4))


def test_compare_dyck_writes_a_self_contained_report(tmp_path):
    import json
    import re

    from interp.compare import compare_dyck

    report = compare_dyck(tmp_path, samples=40, train_steps=60, train_minutes=1.0, progress=False)
    page = report.read_text()
    assert page.startswith("<!DOCTYPE html>") and page.count("data:image/png;base64,") >= 6
    assert not re.search(r"<(script|img|link)[^>]+(src|href)=['\"]https?:", page)  # nothing loaded from outside
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert {"probes", "attention", "ablation", "pruning"} <= set(metrics)
    stack = "construction: stack"
    assert metrics["ablation"][stack]["baseline"] == 1.0
    assert max(metrics["ablation"][stack]["accuracy"].values()) < 0.5  # every constructed head is essential
    assert metrics["probes"][stack]["blocks.0.hook_resid_post"] == 1.0  # the depth is written by layer 1
    assert metrics["attention"][stack]["stack_top_mass_layer2"]["0"] > 0.999
    # a second run reuses the trained twin instead of training again
    before = (tmp_path / "twin" / "checkpoint.safetensors").stat().st_mtime_ns
    compare_dyck(tmp_path, samples=40, progress=False)
    assert (tmp_path / "twin" / "checkpoint.safetensors").stat().st_mtime_ns == before
