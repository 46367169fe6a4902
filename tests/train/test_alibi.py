"""Twins with ALiBi's recency bias (``--pos alibi``): no position embedding, −m·(query − key) on every head's
scores with Press et al.'s slopes, inputs longer than the training length, saved and loaded as they were."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sandbox_lens.interp.errors import ConstructionError
from sandbox_lens.interp.model.hooked import backend, new_model
from sandbox_lens.interp.model.run import attention_patterns
from sandbox_lens.interp.tasks.batches import AutomatonTask
from sandbox_lens.interp.tasks.catalogue import get_automaton
from sandbox_lens.interp.train import ModelShape, TrainConfig, build_twin, load_trained, train

needs_39 = pytest.mark.skipif(backend() != "HookedTransformer", reason="ALiBi needs TransformerLens 3.9")


@needs_39
def test_an_alibi_twin_has_no_positions_and_a_recency_bias_of_slope_one_half_on_its_first_head():
    import torch

    task = AutomatonTask(get_automaton("parity"), 8)
    model = build_twin(task, ModelShape(n_layers=1, n_heads=8, positional="alibi", n_ctx=64), seed=0)
    assert model.cfg.positional_embedding_type == "alibi" and not model.pos_embed.W_pos.requires_grad
    assert float(model.pos_embed.W_pos.abs().max()) == 0.0
    with torch.no_grad():  # equal scores: the bias alone decides
        model.blocks[0].attn.W_Q.zero_()
        model.blocks[0].attn.b_Q.zero_()
    tokens = np.ones((1, 40), dtype=np.int64)  # longer than the training length
    p = attention_patterns(model, tokens, [(0, 0), (0, 7)])
    q = 30
    # float32 softmax: a ratio of neighbours to a few ulps
    assert p[(0, 0)][0, q, q - 1] / p[(0, 0)][0, q, q] == pytest.approx(math.exp(-0.5), rel=1e-5)
    assert p[(0, 7)][0, q, q - 1] / p[(0, 7)][0, q, q] == pytest.approx(math.exp(-(2.0**-8)), rel=1e-5)


@needs_39
def test_an_alibi_twin_trains_saves_and_loads_with_its_bias(tmp_path):
    import torch

    task = AutomatonTask(get_automaton("parity"), 6)
    shape = ModelShape(n_layers=1, n_heads=8, positional="alibi", n_ctx=32)
    train(task, shape, TrainConfig(steps=20, eval_every=10, target_accuracy=None), tmp_path / "run", progress=False)
    model = load_trained(tmp_path / "run")
    assert model.cfg.positional_embedding_type == "alibi"
    assert model.card.options["positional"] == "alibi"
    tokens = torch.as_tensor(np.random.default_rng(0).integers(1, 3, size=(4, 30)))  # five times the training length
    with torch.inference_mode():
        assert torch.isfinite(model(tokens)).all()


def test_the_bridge_refuses_alibi_in_one_line(monkeypatch, tmp_path):
    """On TransformerLens 4.x (the back end patched here) the model builder refuses an ALiBi config and the scratchpad
    experiment refuses before writing anything (the parse-time refusal of --pos alibi: tests/cli/test_bridge_refusals.py)."""
    from sandbox_lens.interp.experiments import ExperimentError, get_experiment, run_experiment
    from sandbox_lens.interp.model import hooked

    monkeypatch.setattr(hooked, "backend", lambda: "TransformerBridge")
    cfg = {"n_layers": 1, "d_model": 8, "n_ctx": 4, "d_head": 4, "n_heads": 2, "d_mlp": 8, "d_vocab": 3}
    with pytest.raises(ConstructionError, match="ALiBi"):
        new_model({**cfg, "d_vocab_out": 2, "act_fn": "relu", "dtype": "float32", "positional_embedding_type": "alibi"})
    with pytest.raises(ExperimentError, match="ALiBi"):
        run_experiment(get_experiment("scratchpad"), tmp_path / "e", quick=True, options={})
    assert not (tmp_path / "e").exists()
