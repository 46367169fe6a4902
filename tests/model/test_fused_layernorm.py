"""interp.model.hooked.fused_layernorm: the training loop's fused LayerNorm computes TransformerLens's function,
steps with it end at the same weights up to float rounding, and it steps aside whenever a LayerNorm hook is used."""

from __future__ import annotations

import contextlib

import pytest

torch = pytest.importorskip("torch")

from interp.model.hooked import fused_layernorm  # noqa: E402
from interp.tasks.batches import AutomatonTask, DyckTask, step_rng  # noqa: E402
from interp.tasks.catalogue import get_automaton  # noqa: E402
from interp.tasks.dyck import Dyck  # noqa: E402
from interp.train import build_model, default_shape  # noqa: E402
from interp.train.loop import _loss  # noqa: E402

TASKS = [AutomatonTask(get_automaton("parity"), 16), DyckTask(Dyck(2, 4), 16)]


def _is_tl3(model) -> bool:
    return any(type(m).__name__ == "LayerNorm" and hasattr(m, "hook_scale") for m in model.modules())


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.kind)
def test_the_fused_forward_is_transformer_lens_s(task):
    model = build_model(task, default_shape(task), 0)
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
    """The first gradient agrees to float rounding and 30 AdamW steps keep the same losses. (Weights are not
    compared entry by entry: Adam normalises each update, so a parameter whose gradient is rounding noise
    moves by ±lr either way.)"""
    runs = []
    for fused in (False, True):
        model = build_model(task, default_shape(task), 0)
        params = [p for p in model.parameters() if p.requires_grad]
        opt = torch.optim.AdamW(params, lr=1e-3)
        losses, first = [], None
        with fused_layernorm(model) if fused else contextlib.nullcontext():
            for step in range(30):
                loss, _ = _loss(model, task.batch(step_rng(0, step), 16))
                opt.zero_grad(set_to_none=True)
                loss.backward()
                first = first if first is not None else torch.cat([p.grad.flatten() for p in params])
                losses.append(float(loss.detach()))
                opt.step()
        runs.append((first, torch.tensor(losses)))
    (g0, l0), (g1, l1) = runs
    assert (g0 - g1).norm() <= 1e-5 * g0.norm()
    assert (l0 - l1).abs().max() < 1e-3 and (l0[-1] < l0[0])
