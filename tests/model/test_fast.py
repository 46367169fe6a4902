"""sandbox_lens.interp.model.fast: the training loop's hand-written forward computes TransformerLens's function (logits and
gradients to float rounding, the same losses over 30 AdamW steps), steps aside whenever a hook is attached or
other arguments are given, runs a copy made inside the block on the copy's own weights, and is restored after."""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")

from run_checks import assert_same_training_path  # noqa: E402

from sandbox_lens.interp.model.fast import covers, fast_forward, training_forward  # noqa: E402
from sandbox_lens.interp.tasks.batches import AutomatonTask, DyckTask, FFLTask, step_rng  # noqa: E402
from sandbox_lens.interp.tasks.catalogue import get_automaton  # noqa: E402
from sandbox_lens.interp.tasks.dyck import Dyck  # noqa: E402
from sandbox_lens.interp.train import build_twin, default_shape  # noqa: E402
from sandbox_lens.interp.train.config import ModelShape  # noqa: E402

TASKS = [AutomatonTask(get_automaton("parity"), 16), DyckTask(Dyck(2, 4), 16), FFLTask(0.8, 16)]


def _model(task, **shape):
    model = build_twin(task, ModelShape(**{**default_shape(task).__dict__, **shape}), 0)
    if not covers(model):
        pytest.skip("the hand-written forward covers TransformerLens 3.9's HookedTransformer")
    return model


@pytest.mark.parametrize("shape", [{}, {"normalization": "none", "n_heads": 2}], ids=["default", "no-LN-2-heads"])
@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.kind)
def test_the_hand_written_forward_is_transformer_lens_s(task, shape):
    model = _model(task, **shape)
    tokens = torch.from_numpy(task.batch(step_rng(0, 0), 16).tokens)
    with torch.no_grad():
        plain = model(tokens)
        assert torch.allclose(fast_forward(model, tokens), plain, atol=1e-5, rtol=0)
        with training_forward(model):
            assert "forward" in model.__dict__
            assert torch.allclose(model(tokens), plain, atol=1e-5, rtol=0)
            cached, cache = model.run_with_cache(tokens)  # hooks attached: TransformerLens's own forward
            resid = model(tokens, stop_at_layer=1)  # other arguments: TransformerLens's own forward
            assert resid.shape[-1] == model.cfg.d_model
        assert "forward" not in model.__dict__  # restored
    assert torch.equal(cached, plain) and "blocks.0.hook_resid_pre" in cache


def test_a_copy_made_inside_the_block_runs_on_its_own_weights():
    """The moving average evaluates a deep copy of the model made while training: it must not run the original."""
    task = TASKS[0]
    model = _model(task)
    tokens = torch.from_numpy(task.batch(step_rng(0, 0), 8).tokens)
    with torch.no_grad(), training_forward(model):
        twin = copy.deepcopy(model)
        for p in twin.parameters():
            p.mul_(0.5)
        assert torch.allclose(twin(tokens), fast_forward(twin, tokens)) and not torch.allclose(
            twin(tokens), model(tokens)
        )


def test_models_it_does_not_cover_are_left_as_they_are():
    from sandbox_lens.interp.train.config import ModelShape

    lstm = build_twin(TASKS[0], ModelShape(n_layers=1, d_model=16, n_heads=1, arch="lstm", hidden=16), 0)
    assert not covers(lstm)
    with training_forward(lstm):
        assert "forward" not in lstm.__dict__


@pytest.mark.parametrize("task", TASKS[:2], ids=lambda t: t.kind)
def test_steps_with_the_hand_written_forward_follow_the_same_path(task):
    """The first gradient agrees to float rounding and 30 AdamW steps keep the same losses."""
    assert_same_training_path(task, lambda: _model(task), training_forward)
