"""Hard (argmax) attention at evaluation: each row one-hot on its largest score, ties sharing the weight; the same
weights otherwise, and every function that takes a model takes the wrapped one."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from sandbox_lens.interp.evaluate import evaluate, ffl_shifts, skyline
from sandbox_lens.interp.model.run import _argmax_pattern, hard_attention, predict
from sandbox_lens.interp.tasks.batches import FFLTask
from sandbox_lens.interp.train import ModelShape, random_init


def test_argmax_rows_are_one_hot_and_ties_share_the_weight():
    pattern = torch.tensor([[[[0.7, 0.2, 0.1], [0.4, 0.4, 0.2], [1 / 3, 1 / 3, 1 / 3]]]], device="cpu")
    hard = _argmax_pattern(pattern, None)
    expected = torch.tensor([[[[1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [1 / 3, 1 / 3, 1 / 3]]]], device="cpu")
    assert torch.allclose(hard, expected, atol=1e-7)


def test_uniform_attention_is_its_own_hard_attention():
    """W_Q = W_K = 0: every score in a row ties, so hard attention (ties shared) is the softmax's uniform row and the
    logits agree to float32 rounding."""
    twin = random_init(FFLTask(0.8, 16), ModelShape(n_layers=2, n_heads=2, d_model=32), seed=3)
    with torch.no_grad():
        for block in twin.blocks:
            for p in (block.attn.W_Q, block.attn.W_K, block.attn.b_Q, block.attn.b_K):
                p.zero_()
    tokens = twin.card.io.encode(np.random.default_rng(0).integers(0, 4, size=(8, 15)))
    soft = twin(torch.tensor(tokens, device="cpu"), return_type="logits")
    hard = hard_attention(twin)(torch.tensor(tokens, device="cpu"), return_type="logits")
    assert torch.allclose(soft, hard, atol=1e-5)


def test_hard_attention_changes_a_random_twin_and_keeps_the_flip_flop_construction_exact():
    twin = random_init(FFLTask(0.8, 32), ModelShape(n_layers=2, n_heads=2, d_model=32), seed=0)
    hard = hard_attention(twin)
    assert hard.cfg is twin.cfg and hard.card is twin.card  # the wrapped model's, for every caller
    words = np.random.default_rng(1).integers(0, 4, size=(16, 31))
    soft_logits = twin(torch.tensor(twin.card.io.encode(words), device="cpu"), return_type="logits")
    hard_logits = hard(torch.tensor(twin.card.io.encode(words), device="cpu"), return_type="logits")
    assert not torch.allclose(soft_logits, hard_logits, atol=1e-3)
    assert predict(hard, words).shape == (16, 31)
    exact = skyline(twin, 64)
    rows = evaluate({"exact": hard_attention(exact)}, ffl_shifts(64, (0.8, 0.98)), samples=100, seed=0)
    assert all(r["read_errors"] == 0 and r["scored"] > 0 for r in rows)  # Proposition 3's heads are already sharp


def test_hard_attention_refuses_a_model_without_attention():
    from sandbox_lens.interp.errors import ModelKindError
    from sandbox_lens.interp.train import default_shape

    task = FFLTask(0.8, 16)
    with pytest.raises(ModelKindError, match="hard attention"):
        hard_attention(random_init(task, default_shape(task, "lstm"), seed=0))


def test_interp_evaluate_takes_hard_attention(tmp_path, interp_run):
    from sandbox_lens.interp.model.saved import save_model

    twin = random_init(FFLTask(0.8, 16), ModelShape(n_layers=1, n_heads=1, d_model=16), seed=0)
    save_model(twin, tmp_path / "m")
    code, out, err = interp_run(
        "evaluate", "--model", tmp_path / "m", "--attention", "hard", "--length", "16", "--samples", "20", "--json"
    )
    assert code == 0, err
    result = json.loads(out)
    assert result["attention"] == "hard" and all(r["model"].endswith("(hard attention)") for r in result["rows"])
    code, _, err = interp_run("evaluate", "--model", tmp_path / "m", "--attention", "sharp")
    assert code == 2 and err.count("\n") == 1


def test_a_hard_attention_model_copies_without_recursing():
    import copy

    twin = random_init(FFLTask(0.8, 16), ModelShape(n_layers=1, n_heads=1, d_model=16), seed=0)
    clone = copy.deepcopy(hard_attention(twin))
    assert clone.cfg.n_layers == 1 and clone.model is not twin
