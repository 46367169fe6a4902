"""sandbox_lens.interp.model.hooked.fused_layernorm: the training loop's fused LayerNorm computes TransformerLens's function,
steps with it end at the same weights up to float rounding, and it steps aside whenever a LayerNorm hook is used."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from run_checks import assert_same_training_path  # noqa: E402

from sandbox_lens.interp.model.hooked import fused_layernorm  # noqa: E402
from sandbox_lens.interp.tasks.batches import AutomatonTask, DyckTask, step_rng  # noqa: E402
from sandbox_lens.interp.tasks.catalogue import get_automaton  # noqa: E402
from sandbox_lens.interp.tasks.dyck import Dyck  # noqa: E402
from sandbox_lens.interp.train import build_twin, default_shape  # noqa: E402

TASKS = [AutomatonTask(get_automaton("parity"), 16), DyckTask(Dyck(2, 4), 16)]


def _is_tl3(model) -> bool:
    return any(type(m).__name__ == "LayerNorm" and hasattr(m, "hook_scale") for m in model.modules())


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.kind)
def test_the_fused_forward_is_transformer_lens_s(task):
    model = build_twin(task, default_shape(task), 0)
    if not _is_tl3(model):
        pytest.skip("TransformerLens 3.9's LayerNorm only")
    tokens = torch.from_numpy(task.batch(step_rng(0, 0), 16).tokens)
    with torch.no_grad():
        plain = model(tokens)
        with fused_layernorm(model):
            assert all("forward" in m.__dict__ for m in model.modules() if type(m).__name__ == "LayerNorm")
            fused = model(tokens)
            cached, cache = model.run_with_cache(tokens)  # hooks on hook_scale: TransformerLens's own forward runs
        assert not any("forward" in m.__dict__ for m in model.modules())  # restored
    assert torch.allclose(plain, fused, atol=1e-5, rtol=0)
    assert "blocks.0.ln1.hook_scale" in cache and torch.equal(cached, plain)


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.kind)
def test_steps_with_the_fused_layernorm_follow_the_same_path(task):
    """The first gradient agrees to float rounding and 30 AdamW steps keep the same losses."""
    assert_same_training_path(task, lambda: build_twin(task, default_shape(task), 0), fused_layernorm)
