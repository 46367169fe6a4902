"""`dilution` (Proposition 4): the QK scaling scales every score, the bound's check holds on the constructions and
catches a σ that is too small, and the failure and growth rules read the rows they are given."""

import numpy as np
import pytest
import torch

from sandbox_lens.interp.experiments import dilution
from sandbox_lens.interp.model.checked import residual_stream
from sandbox_lens.interp.model.run import attention_patterns


@pytest.fixture(scope="module")
def ffl64():
    return dilution._model("ffl", 64)


def _scores(model, tokens):
    """The second block's scores, from its residual stream and its weights (as ``measure`` computes them)."""
    stream, _ = residual_stream(model, tokens, ["blocks.1.hook_resid_pre"], forward="model")
    x = torch.as_tensor(stream["blocks.1.hook_resid_pre"]).double()
    W_Q, W_K, scale = dilution._query_keys(model)[1]
    return (x @ torch.from_numpy(W_Q[0])) @ (x @ torch.from_numpy(W_K[0])).transpose(1, 2) / scale


def test_scaling_the_queries_scales_every_score(ffl64):
    """The scaled model attends by softmax(factor × the original scores): its own pattern, read at its hook."""
    tokens, _, _ = dilution.strings("ffl", 3, 64, np.random.default_rng(0))
    half = dilution.scaled_qk(ffl64, 0.25)
    pattern = torch.from_numpy(attention_patterns(half, tokens, [(1, 0)])[(1, 0)])
    future = torch.ones(64, 64, dtype=torch.bool).triu(1)
    expected = torch.softmax((0.25 * _scores(ffl64, tokens)).masked_fill(future, float("-inf")), -1)
    # scores up to ~1e3 rounded in float32 before the softmax: weights agree to ~1e-4
    assert torch.allclose(pattern, expected, atol=1e-3)
    assert half.card is ffl64.card
    # σ_max of the bilinear form scales with it (float32 weights, float64 norm)
    assert np.allclose(4 * dilution.head_bounds(half)[1], dilution.head_bounds(ffl64)[1], rtol=1e-6)


def test_the_constructions_are_exact_and_never_break_the_bound(ffl64):
    for name in dilution.CONSTRUCTIONS:
        model = ffl64 if name == "ffl" else dilution._model(name, 64)
        m = dilution.measure(model, *dilution.strings(name, 4, 64, np.random.default_rng(1)), batch=2)
        assert m["violations"] == 0 and m["queries"] > 0 and max(m["errors"]) == 0.0
        assert m["sigma"] > 0.5 * np.log(63)  # the bound leaves room for sharp attention at k = 0


def test_a_sigma_too_small_is_caught(ffl64, monkeypatch):
    """The check can fail: with σ understated tenfold, scores leave [−σ, σ] and weights exceed the bound."""
    true = dilution.head_bounds(ffl64)
    monkeypatch.setattr(dilution, "head_bounds", lambda model, qk=None: [s / 10 for s in true])
    m = dilution.measure(ffl64, *dilution.strings("ffl", 2, 64, np.random.default_rng(2)), batch=2)
    assert m["violations"] > 0


def test_failure_is_the_largest_scale_with_an_error():
    rows = [
        {"k": 0, "scale": 1.0, "errors": [0.0, 0.0]},
        {"k": 1, "scale": 0.5, "errors": [0.0, 0.2]},
        {"k": 2, "scale": 0.25, "errors": [0.5, 0.5]},
    ]
    assert dilution.failure(rows)["k"] == 1
    assert dilution.failure(rows[:1]) is None
