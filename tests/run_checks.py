"""Checks on training runs shared by the test packages."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import load_file


def assert_same_run(a: Path, b: Path) -> None:
    """Two runs end with the same bits: every checkpoint tensor (weights, optimizer state) and the evaluation
    history, wall-clock times aside."""
    x, y = load_file(a / "checkpoint.safetensors"), load_file(b / "checkpoint.safetensors")
    assert x.keys() == y.keys()
    differ = [k for k in x if not torch.equal(x[k], y[k])]
    assert not differ, f"{len(differ)} tensors differ, e.g. {differ[:3]}"
    ha, hb = (json.loads((d / "metrics.json").read_text())["history"] for d in (a, b))
    assert [{k: v for k, v in h.items() if k != "wall_seconds"} for h in ha] == [
        {k: v for k, v in h.items() if k != "wall_seconds"} for h in hb
    ]


def assert_same_training_path(task, make_model, within) -> None:
    """30 AdamW steps of a model from ``make_model()`` run as they are and inside ``within(model)`` (a context
    that changes how the forward is computed, not what): the first gradient agrees to 10⁻⁵ of its norm and the
    losses to 10⁻³. Weights are not compared entry by entry: Adam normalises each update, so a parameter whose
    gradient is rounding noise moves by ±lr either way."""
    import contextlib

    from sandbox_lens.interp.tasks.batches import step_rng
    from sandbox_lens.interp.train.loop import _loss

    runs = []
    for changed in (False, True):
        model = make_model()
        params = [p for p in model.parameters() if p.requires_grad]
        opt = torch.optim.AdamW(params, lr=1e-3)
        losses, first = [], None
        with within(model) if changed else contextlib.nullcontext():
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
