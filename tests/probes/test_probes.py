"""Linear probes and head ablation / pruning on constructed (and trained) models."""

import numpy as np
import pytest

from sandbox_lens.constructions import build
from sandbox_lens.interp.errors import VocabularyError
from sandbox_lens.interp.model.hooked import to_hooked
from sandbox_lens.interp.model.run import live_heads
from sandbox_lens.interp.streams import Stream
from sandbox_lens.interp.tasks.catalogue import get_automaton
from sandbox_lens.probes.ablation import accuracy_with_ablation, greedy_prune, head_ablation
from sandbox_lens.probes.linear import automaton_probe_data, probe_accuracy, residual_hooks


def test_probes_find_the_state_where_the_construction_writes_it():
    a = get_automaton("C3")
    model = to_hooked(build("modular_counter", a, 24))
    tokens, labels, mask = automaton_probe_data(model, a, a.sample(60, 24, seed=0))
    acc = probe_accuracy(model, tokens, labels, mask)
    assert list(acc) == residual_hooks(1)
    assert acc["blocks.0.hook_resid_post"] == 1.0  # the trapezoids write the one-hot state here
    assert acc["blocks.0.hook_resid_pre"] < 0.6  # before the count, only chance (1/3) plus luck


def test_probe_latent_and_bad_input():
    a = get_automaton("parity")
    model = to_hooked(build("modular_counter", a, 16))
    words = a.sample(30, 16, seed=1)
    tokens, labels, mask = automaton_probe_data(model, a, words, latent=lambda q: q == 0)
    assert set(np.unique(labels[mask])) <= {0, 1}
    with pytest.raises(VocabularyError):
        probe_accuracy(model, tokens[:2], labels[:2], mask[:2])
    with pytest.raises(VocabularyError):
        probe_accuracy(model, tokens, labels[:, :-1], mask)


def test_ablating_the_counting_head_drops_to_chance_and_pruning_keeps_essential_heads():
    a = get_automaton("parity")
    model = to_hooked(build("modular_counter", a, 32))
    tokens, labels, mask = automaton_probe_data(model, a, a.sample(80, 32, seed=2))
    result = head_ablation(model, tokens, labels, mask)
    assert result["baseline"] == 1.0
    assert abs(result["accuracy"][(0, 0)] - 0.5) < 0.1
    s3 = get_automaton("S3")
    scan = to_hooked(build("prefix_scan", s3, 16))
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
    model = to_hooked(build("krohn_rhodes", a, 16))
    tokens, labels, mask = automaton_probe_data(model, a, a.sample(60, 16, seed=4))
    assert len(live_heads(model)) == 3
    pruned = greedy_prune(model, tokens, labels, mask, threshold=0.4)
    assert len(pruned["surviving"]) < 3 and pruned["accuracy"] >= 0.4


def test_attention_references_scores_and_matching():
    from sandbox_lens.interp.model.run import attention_patterns
    from sandbox_lens.probes.attention import (
        lookback_reference,
        match_heads,
        score_head,
        score_heads,
        target_reference,
        uniform_reference,
    )

    s3 = get_automaton("S3")
    scan = to_hooked(build("prefix_scan", s3, 16))
    word = s3.sample(1, 16, seed=0)[0]
    patterns = {head: p[0] for head, p in attention_patterns(scan, scan.card.io.encode(word)).items()}
    n = len(scan.card.io.prefix) + len(word)
    real = list(range(len(scan.card.io.prefix), n))
    refs = {f"back {2**l}": lookback_reference(n, 2**l) for l in range(4)} | {"uniform": uniform_reference(n)}
    scores = score_heads(patterns, refs, real)
    for layer, head in enumerate(sorted(patterns)):  # attention layer l looks back 2^l: perfect scores
        s = scores[head][f"back {2**layer}"]
        assert s["mass"] == pytest.approx(1.0) and s["argmax_agreement"] == 1.0 and s["tv_distance"] < 1e-6
        assert scores[head]["uniform"]["tv_distance"] > 0.5
    # matching a model with itself pairs every head with itself at distance 0
    pairs = match_heads(patterns, patterns, real)
    assert all(p["trained"] == p["constructed"] and p["tv_distance"] < 1e-9 for p in pairs)
    shuffled = dict(zip(reversed(list(patterns)), patterns.values()))
    assert {(p["trained"], p["constructed"]) for p in match_heads(shuffled, patterns, real)} == {
        (k, v) for k, v in zip(reversed(list(patterns)), patterns)
    }
    with pytest.raises(VocabularyError):
        target_reference([0, 2, 1])
    with pytest.raises(VocabularyError):
        score_head(np.eye(3), np.eye(4))


def _automaton_batches(model, a, T):
    def batches(step):
        return automaton_probe_data(model, a, a.sample(32, T, seed=100 + step))

    return batches


def test_learned_head_masks_keep_essential_heads_unless_the_penalty_outweighs_them():
    from sandbox_lens.probes.masks import learn_head_masks

    a = get_automaton("C3")
    model = to_hooked(build("modular_counter", a, 12))
    ev = automaton_probe_data(model, a, a.sample(200, 12, seed=1))
    kept = learn_head_masks(model, _automaton_batches(model, a, 12), ev, sparsity=0.01, steps=60)
    assert kept["surviving"] == [(0, 0)] and kept["accuracy_masked"] == 1.0
    closed = learn_head_masks(model, _automaton_batches(model, a, 12), ev, sparsity=1000.0, steps=60)
    assert closed["surviving"] == [] and closed["accuracy_masked"] < 0.5  # 3 states: chance-like
    assert kept["accuracy_intact"] == 1.0
    before = {k: v.clone() for k, v in model.state_dict().items()}
    learn_head_masks(model, _automaton_batches(model, a, 12), ev, steps=3)
    assert all((before[k] == v).all() for k, v in model.state_dict().items())  # learned on a copy
    with pytest.raises(VocabularyError):
        learn_head_masks(model, _automaton_batches(model, a, 12), ev, sparsity=-1.0)


def test_weight_mask_prunes_a_random_network_towards_a_construction():
    import torch

    from sandbox_lens.probes.weight_mask import RandomShape, learn_weight_mask, random_transformer

    a = get_automaton("parity")
    target = to_hooked(build("modular_counter", a, 8))
    large = random_transformer(target.cfg.d_vocab, target.cfg.d_vocab_out, 9, RandomShape(2, 32, 2, 64), seed=0)
    weights = {k: v.clone() for k, v in large.state_dict().items()}
    ev = automaton_probe_data(target, a, a.sample(100, 8, seed=5))
    r = learn_weight_mask(
        target,
        large,
        lambda s: automaton_probe_data(target, a, a.sample(32, 8, seed=s))[0],
        ev,
        keep=0.3,
        steps=150,
        lr=0.05,
    )
    assert abs(r["kept_fraction"] - 0.3) < 1e-3 and r["target_accuracy"] == 1.0
    assert r["trace"][-1]["kl"] < 0.5 * r["trace"][0]["kl"]  # the mask learns (weights never move)
    assert all(torch.equal(weights[k], v) for k, v in large.state_dict().items())
    with pytest.raises(VocabularyError):
        learn_weight_mask(target, large, lambda s: ev[0], ev, keep=0.0)


def test_logistic_probe_reads_a_state_stored_along_one_direction():
    """The prefix scan keeps q + 1 in one coordinate; least squares on one-hot targets cannot
    separate many classes on a line ("masking"), softmax regression can."""
    a = get_automaton("grid5")
    model = to_hooked(build("prefix_scan", a, 8))
    tokens, labels, mask = automaton_probe_data(model, a, a.sample(120, 8, seed=6))
    last = [residual_hooks(model.cfg.n_layers)[-1]]
    logistic = probe_accuracy(model, tokens, labels, mask, hooks=last)[last[0]]
    ridge = probe_accuracy(model, tokens, labels, mask, hooks=last, method="ridge")[last[0]]
    assert logistic >= 0.99 > ridge
    with pytest.raises(VocabularyError):
        probe_accuracy(model, tokens, labels, mask, method="svm")


def test_corollary3_two_prunings_share_one_identical_matrix():
    from sandbox_lens.constructions.dyck import build_dyck
    from sandbox_lens.interp.tasks.batches import DyckTask, step_rng
    from sandbox_lens.interp.tasks.dyck import Dyck
    from sandbox_lens.probes.weight_mask import RandomShape, learn_weight_masks, random_transformer

    lang = Dyck(2, 4)
    task = DyckTask(lang, 16)
    stack, uniform = (to_hooked(build_dyck(lang, 32, v)) for v in ("stack", "uniform"))
    large = random_transformer(stack.cfg.d_vocab, stack.cfg.d_vocab_out, 16, RandomShape(2, 32, 2, 64), seed=1)
    ev = task.batch(step_rng(0, 0, Stream.HELD_OUT), 40)
    r = learn_weight_masks(
        [stack, uniform],
        large,
        lambda s: task.batch(step_rng(0, s), 16).tokens,
        (ev.tokens, ev.targets, ev.score_mask),
        steps=25,
        shared=["blocks.1.attn.W_K"],
    )
    assert r["shared_identical"] and 0.0 < r["other_masks_jaccard"] < 1.0  # the rest of the prunings differ
    assert len(r["targets"]) == 2 and all(t["target_accuracy"] == 1.0 for t in r["targets"])
    with pytest.raises(VocabularyError, match="not a weight matrix"):
        learn_weight_masks(
            [stack], large, lambda s: ev.tokens, (ev.tokens, ev.targets, ev.score_mask), shared=["blocks.9.attn.W_K"]
        )
