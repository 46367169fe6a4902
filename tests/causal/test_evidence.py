"""sandbox_lens.interp.causal.evidence and .search on synthetic numbers: disjoint splits, intervals that resample
words (not outputs), stability, the readout basis and the two-stage choice."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sandbox_lens.interp.causal.evidence import (
    MIN_SPLIT,
    STABLE,
    Counts,
    rate_interval,
    readout_basis,
    split_pairs,
    stability,
    summary,
)
from sandbox_lens.interp.causal.highlevel import HighLevelError
from sandbox_lens.interp.causal.search import K_TOLERANCE, choose
from sandbox_lens.interp.stats import CONFIDENCE, wilson_interval


def test_three_disjoint_splits_and_a_refusal_below_the_minimum():
    base = np.arange(100).reshape(50, 2)
    splits = split_pairs(base, base + 1000)
    parts = [splits.fit[0], splits.select[0], splits.test[0]]
    assert sum(len(p) for p in parts) == 50 and splits.sizes() == {"fit": 16, "select": 17, "test": 17}
    seen = [set(map(tuple, p)) for p in parts]
    assert not (seen[0] & seen[1] or seen[0] & seen[2] or seen[1] & seen[2])
    assert all((s[1] == s[0] + 1000).all() for s in (splits.fit, splits.select, splits.test))  # pairs stay pairs
    with pytest.raises(HighLevelError, match=f"--pairs {3 * MIN_SPLIT}"):
        split_pairs(base[: 3 * MIN_SPLIT - 1], base[: 3 * MIN_SPLIT - 1])


def test_an_interval_over_words_is_wider_than_wilson_over_correlated_outputs():
    """Each word's 10 outputs all follow or all fail (one decision per word): the evidence is 60 words, not 600
    outputs. The word bootstrap matches a binomial over words; Wilson over the pooled outputs is ~3x narrower."""
    hits = np.repeat([10, 0], [36, 24])
    counts = Counts(hits, np.full(60, 10))
    lo, hi = rate_interval(counts)
    w_lo, w_hi = wilson_interval(360, 600)
    words_lo, words_hi = wilson_interval(36, 60)
    assert counts.rate == 0.6 and lo < 0.6 < hi
    assert (hi - lo) > 2.5 * (w_hi - w_lo)
    assert abs((hi - lo) - (words_hi - words_lo)) < 0.05
    assert rate_interval(Counts(np.zeros(5, int), np.zeros(5, int))) is None
    assert summary(counts, resamples=0)["interval"] is None


def test_stability_is_one_for_a_clear_effect_and_low_for_a_borderline_one():
    rng = np.random.default_rng(0)

    def counts(p, n=64):
        return Counts(rng.binomial(8, p, size=n), np.full(n, 8))

    def above(threshold):
        return lambda s: s["test"]["model"]["interval"][0] > threshold

    assert stability({"test": {"model": counts(0.99)}}, above(0.9)) == 1.0
    borderline = counts(0.93)
    edge = rate_interval(borderline)[0] - 1e-9  # the rule passes on all the words, by a hair
    assert stability({"test": {"model": borderline}}, above(edge)) < STABLE
    with pytest.raises(ValueError, match="different words"):
        stability({"test": [counts(0.5, 10), counts(0.5, 11)]}, above(0.5))


def test_the_choice_takes_the_best_hook_then_the_smallest_k_within_tolerance():
    candidates = [
        ("h0", 8, 0.5),
        ("h1", 8, 0.97),
        ("h2", 8, 0.97),
        ("h1", 1, 0.6),
        ("h1", 2, 0.98 - K_TOLERANCE),
        ("h1", 4, 0.98),
    ]
    assert choose(candidates, 8) == 4  # h1 (first on the tie), then k = 2: within the tolerance of k = 4's 0.98
    assert choose([("h0", 8, None), ("h1", 8, 0.1)], 8) == 1


def test_the_readout_basis_spans_the_unembedding_differences():
    from sandbox_lens.constructions import build_model
    from sandbox_lens.interp.causal.highlevel import high_level_of
    from sandbox_lens.interp.tasks.catalogue import get_automaton

    model = build_model("modular_counter", get_automaton("C3"), 8)
    basis = readout_basis(model, high_level_of(model))
    assert basis.shape[1] == 2  # three states: two differences
    assert np.allclose(basis.T @ basis, np.eye(2), atol=1e-6)
    w = model.W_U.detach().numpy().astype(np.float64)
    centred = w - w.mean(axis=1, keepdims=True)
    assert np.allclose(basis @ (basis.T @ centred), centred, atol=1e-4)  # every difference lies in its span


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 200),
    st.integers(1, 6),
    st.integers(0, 4),
    st.integers(0, 2**31 - 1),
)
def test_the_bootstrap_interval_is_the_pooled_rate_of_resampled_words(n, positions, seed, data_seed):
    """The interval counts each resample's draws once (cached per seed and size) and pools by integer products:
    the same numbers as indexing the words of each resample from the same stream, for any counts."""
    from sandbox_lens.interp.streams import Stream, rng

    g = np.random.default_rng(data_seed)
    outputs = g.integers(0, 4, size=(n, positions))
    hits = np.minimum(g.integers(0, 4, size=(n, positions)), outputs)
    counts = Counts(hits, outputs)
    if counts.rate is None:
        assert rate_interval(counts, seed) is None
        return
    index = rng(seed, Stream.CAUSAL_BOOTSTRAP).integers(0, n, size=(1000, n))
    k, m = hits.sum(1)[index].sum(-1), outputs.sum(1)[index].sum(-1)
    rates = (k / np.maximum(m, 1))[m > 0]
    alpha = (1 - CONFIDENCE) / 2
    assert rate_interval(counts, seed) == (float(np.quantile(rates, alpha)), float(np.quantile(rates, 1 - alpha)))


@pytest.mark.parametrize("which", ["twin", "counter"])
def test_a_residual_sites_counts_come_from_one_sweep_as_from_one_interchange_per_position(which, monkeypatch):
    """A subspace swapped at every position in turn: the batched sweep on the bare forward counts the same hits
    and changed outputs, word by word and position by position, as one hooked interchange per position."""
    from sandbox_lens.constructions.registry import build
    from sandbox_lens.interp.causal import evidence
    from sandbox_lens.interp.causal.highlevel import high_level_of
    from sandbox_lens.interp.causal.interchange import Site, subspace_basis, word_pairs
    from sandbox_lens.interp.model.hooked import to_hooked
    from sandbox_lens.interp.tasks.batches import AutomatonTask
    from sandbox_lens.interp.tasks.catalogue import get_automaton
    from sandbox_lens.interp.train import ModelShape, random_init

    if which == "twin":
        model = random_init(AutomatonTask(get_automaton("C3"), 8), ModelShape(n_layers=2, d_model=32, n_heads=2), 7)
        site = Site("blocks.1.hook_resid_mid", 0, np.linalg.qr(np.random.default_rng(2).standard_normal((32, 3)))[0])
    else:
        model = to_hooked(build("modular_counter", get_automaton("C3"), 8))
        site = Site("blocks.0.hook_resid_post", 0, subspace_basis(model, "state"))
    high = high_level_of(model)
    base, source = word_pairs(model, 40, seed=3, high=high)
    swept = evidence.site_counts(model, high, site, base, source)
    monkeypatch.setattr(evidence, "is_residual", lambda *_: False)
    one_by_one = evidence.site_counts(model, high, site, base, source)
    assert swept.outputs.sum() > 0
    assert np.array_equal(swept.hits, one_by_one.hits) and np.array_equal(swept.outputs, one_by_one.outputs)
