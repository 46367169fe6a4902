"""GIM (sandbox_lens.interp.circuits.gim): each backward rule does what it says and nothing else; with every rule off
it is attribution patching; the forward pass is the model's; as a method it runs on the bare engine only."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from circuit_families import FAMILIES, layernorm_twin

from sandbox_lens.interp.circuits.analyse import analyse
from sandbox_lens.interp.circuits.bare import BarePatcher
from sandbox_lens.interp.circuits.config import MethodError
from sandbox_lens.interp.circuits.effects import attribution
from sandbox_lens.interp.circuits.gim import (
    GIM,
    Rules,
    backward_rules,
    gim_attribution,
    scaled_gradient,
    tempered_softmax,
)
from sandbox_lens.interp.circuits.pairs import make_pairs
from sandbox_lens.interp.circuits.truth import ground_truth
from sandbox_lens.interp.model.hooked import to_hooked

PLAIN = Rules(temperature=1.0, qk=1.0, v=1.0, freeze_norm=False)


def test_the_tempered_softmax_is_softmax_forward_and_softmax_at_x_over_t_backward():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 5, 5, generator=g, dtype=torch.float64)
    x = x.masked_fill(torch.ones(5, 5, dtype=torch.bool).triu(1), float("-inf"))
    up = torch.randn(3, 5, 5, generator=g, dtype=torch.float64)
    for t in (1.0, 2.0, 5.0):
        xr = x.clone().requires_grad_(True)
        out = tempered_softmax(xr, t)
        torch.testing.assert_close(out, torch.softmax(x, -1), rtol=0, atol=0)
        (grad,) = torch.autograd.grad(out, xr, up)
        y = (x / t).requires_grad_(True)
        (expected,) = torch.autograd.grad(torch.softmax(y, -1), y, up)  # softmax's Jacobian at x / T
        torch.testing.assert_close(grad, expected, rtol=1e-12, atol=1e-12)
        assert float(grad[torch.isinf(x)].abs().max()) == 0.0  # masked scores get nothing


def test_a_scaled_gradient_is_the_identity_forward():
    x = torch.arange(4.0, requires_grad=True)
    y = scaled_gradient(x, 0.25)
    assert torch.equal(y, x.detach())
    (grad,) = torch.autograd.grad((y * torch.tensor([1.0, 2.0, 3.0, 4.0])).sum(), x)
    assert torch.equal(grad, torch.tensor([0.25, 0.5, 0.75, 1.0]))


@pytest.mark.parametrize("family", ["gridworld/grid4", "prefix_scan/S5"])
def test_with_every_rule_off_it_is_attribution_patching_and_the_forward_is_the_models(family):
    spec = FAMILIES[family]()
    truth, model = ground_truth(spec), to_hooked(spec)
    patcher = BarePatcher(model, truth.graph)
    data = make_pairs(model, 16, seed=2)
    src = patcher.source(data)
    plain_edges, plain_nodes = attribution(patcher, data, src)
    edges, nodes = gim_attribution(patcher, data, src, rules=PLAIN)
    np.testing.assert_allclose(edges, plain_edges, rtol=0, atol=1e-5)
    assert all(abs(nodes[k] - plain_nodes[k]) < 1e-5 for k in nodes)
    with backward_rules(patcher, GIM):
        outputs, _, _ = patcher.gradients(data.clean, data.logit_diff)
    assert patcher.rules is None  # restored
    clean = patcher.clean_state(data.clean).outputs
    for name, x in outputs.items():
        torch.testing.assert_close(x, clean[name], rtol=0, atol=1e-5)


def test_gim_on_a_twin_with_layernorm_changes_only_the_gradient(tmp_path):
    """A twin (LayerNorm, two heads a block): GIM's estimates differ from attribution's, and freezing the norm's
    scale alone already changes them."""
    twin = layernorm_twin(tmp_path / "t")
    patcher = BarePatcher(twin)
    data = make_pairs(twin, 16, seed=0)
    src = patcher.source(data)
    plain, _ = attribution(patcher, data, src)
    gim, _ = gim_attribution(patcher, data, src)
    assert np.abs(gim - plain).max() > 1e-3
    frozen, _ = gim_attribution(patcher, data, src, rules=Rules(1.0, 1.0, 1.0, True))
    assert np.abs(frozen - plain).max() > 1e-4  # the norm's scale carries gradient in a twin


def test_gim_is_a_method_on_the_bare_engine():
    spec = FAMILIES["gridworld/grid4"]()
    truth, model = ground_truth(spec), to_hooked(spec)
    r = analyse(model, "gim", truth, pairs=16)
    assert r["engine"] == "BarePatcher" and r["method"] == "gim" and 0.0 <= r["auroc"] <= 1.0


def test_gim_is_refused_on_the_hook_engine():
    spec = FAMILIES["gridworld/grid4"]()
    truth, model = ground_truth(spec), to_hooked(spec)
    with pytest.raises(MethodError, match="bare engine"):
        analyse(model, "gim", truth, pairs=16, engine="hooks")
