"""The methods beyond patching: EAP-IG (m = 1 is attribution patching; more steps cross the counter's
ReLU staircase) and the two baselines (random scores; activation magnitude, which the negatives trap)."""

from __future__ import annotations

import numpy as np
from circuit_families import FAMILIES, NEGATIVE_FAMILIES

from sandbox_lens.interp.circuits.analyse import analyse
from sandbox_lens.interp.circuits.effects import attribution, path_patching
from sandbox_lens.interp.circuits.pairs import make_pairs
from sandbox_lens.interp.circuits.patching import Patcher
from sandbox_lens.interp.circuits.truth import ground_truth
from sandbox_lens.interp.model.hooked import to_hooked


def _setup(spec, n=24):
    truth, model = ground_truth(spec), to_hooked(spec)
    patcher = Patcher(model, truth.graph)
    return truth, model, patcher, make_pairs(model, n, seed=2)


def test_eap_ig_with_one_step_is_attribution_patching():
    truth, model, patcher, pairs = _setup(FAMILIES["gridworld/grid4"]())
    for ablation in ("resample", "zero"):
        source = patcher.source(pairs, ablation)
        eap, nodes = attribution(patcher, pairs, source)
        ig, ig_nodes = attribution(patcher, pairs, source, steps=1)
        assert np.array_equal(eap, ig) and nodes == ig_nodes


def test_eap_ig_crosses_the_staircase_that_stops_attribution():
    """Lemma 15's counter: the gradient through the MLP's staircase is zero at every clean input, so EAP
    gives the two edges into the MLP nothing; integrating along the way from the corrupted input finds
    them, as path patching does."""
    truth, model, patcher, pairs = _setup(FAMILIES["modular_counter/C3"]())
    index = {e.name: i for i, e in enumerate(truth.graph.edges)}
    upstream = [index["embed->a0.0.v"], index["a0.0->m0"]]
    exact = path_patching(patcher, pairs)
    one, _ = attribution(patcher, pairs, steps=1)
    many, _ = attribution(patcher, pairs, steps=8)
    assert np.all(one[upstream] == 0.0) and np.all(exact[upstream] > 0.5)
    assert np.all(np.abs(many[upstream] - exact[upstream]) < 0.2)
    r = analyse(model, "eap-ig", truth, pairs=24, steps=8)
    assert r["steps"] == 8 and r["auroc"] == 1.0 and r["edge_recall"] == 1.0


def test_baselines_are_reproducible_and_the_magnitude_one_falls_for_the_negatives():
    spec = NEGATIVE_FAMILIES["modular_counter/C3+negatives"]()
    truth, model = ground_truth(spec), to_hooked(spec)
    a = analyse(model, "random", truth, pairs=16, seed=5)
    b = analyse(model, "random", truth, pairs=16, seed=5)
    c = analyse(model, "random", truth, pairs=16, seed=6)
    assert a["ranking"] == b["ranking"] != c["ranking"]
    magnitude = analyse(model, "magnitude", truth, pairs=16)
    cancelled = set(truth.flow.cancelled)
    assert magnitude["edge_precision"] < 0.5
    assert any(e.split("->")[0] in cancelled for e in magnitude["spurious"])
    path = analyse(model, "path", truth, pairs=16)
    assert path["auroc"] > magnitude["auroc"]


def test_learned_edge_masks_keep_the_counter_and_need_the_bare_engine():
    import pytest

    from sandbox_lens.interp.circuits.config import MethodError

    spec = FAMILIES["modular_counter/C3"]()
    truth, model = ground_truth(spec), to_hooked(spec)
    r = analyse(model, "masks", truth, pairs=24)
    assert r["edge_recall"] == 1.0 and r["faithfulness"] == 1.0 and r["masks"]["open"] == len(r["circuit"]["edges"])
    assert r["auroc"] > 0.9
    again = analyse(model, "masks", truth, pairs=24)
    assert again["ranking"] == r["ranking"]  # seeded noise
    with pytest.raises(MethodError, match="masks runs on the bare engine only"):
        analyse(model, "masks", truth, pairs=8, engine="hooks")


def test_learned_edge_masks_on_minibatches_measure_the_same_kl():
    """A step on drawn pairs measures what pairs.kl_full measures: drawing every pair gives the full batch's KL for the
    same gates (float32 rounding apart), and every gate open gives 0 (the masks' default trains on 5 pairs a step)."""
    from sandbox_lens.interp.circuits.bare import BarePatcher
    from sandbox_lens.interp.circuits.masks import MASK_DEFAULTS, learn_edge_masks
    from sandbox_lens.interp.circuits.pairs import make_pairs

    spec = FAMILIES["modular_counter/C3"]()
    model = to_hooked(spec)
    patcher = BarePatcher(model)
    pairs = make_pairs(model, 12, seed=0)
    src = patcher.source(pairs, "resample")
    first = {"init_log_alpha": 0.0, "steps": 1}  # half-open gates; the first step's KL, before any update

    def kl(batch, **kw):
        return learn_edge_masks(patcher, pairs, src, batch=batch, **(first | kw))["trace"][0]["kl"]

    whole = kl(None)
    assert whole > 0.01
    assert abs(kl(len(pairs.clean)) - whole) <= 1e-5 * whole
    assert abs(kl(100) - whole) <= 1e-5 * whole  # more than there are: every pair
    assert kl(3) != whole
    assert kl(None, init_log_alpha=8.0) < 1e-6
    assert MASK_DEFAULTS["batch"] == 5


def test_ugs_masks_sample_in_their_window_and_keep_the_counter():
    """UGS's sampler: 1 below p − w/2, 0 above p + w/2, linear between, with ∂mask/∂θ = w inside the window; the
    method keeps the counter whole (its circuit faithful, every truth edge open), seeded, on the bare engine only."""
    import pytest
    import torch

    from sandbox_lens.interp.circuits.config import MethodError
    from sandbox_lens.interp.circuits.masks import ugs_sample

    torch.manual_seed(0)
    theta = torch.tensor([0.0, 2.0, -2.0], requires_grad=True)
    p = torch.sigmoid(theta.detach())
    w = p * (1 - p)
    draws = ugs_sample(theta.detach(), 4000)
    assert draws.shape == (3, 4000) and torch.all((draws >= 0) & (draws <= 1))
    # P(mask = 1) = p − w/2 and the mean is p, up to the sampling error of 4000 draws (≤ 4 standard errors)
    assert torch.all(((draws == 1).double().mean(1) - (p - w / 2)).abs() < 4 * (0.25 / 4000) ** 0.5)
    assert torch.all((draws.mean(1) - p).abs() < 4 * (0.25 / 4000) ** 0.5)
    torch.manual_seed(1)
    m = ugs_sample(theta)[:, 0]
    m.sum().backward()
    inside = (m > 0) & (m < 1)
    assert torch.allclose(theta.grad[inside], w[inside], rtol=1e-5) and torch.all(theta.grad[~inside] == 0)

    spec = FAMILIES["modular_counter/C3"]()
    truth, model = ground_truth(spec), to_hooked(spec)
    r = analyse(model, "ugs", truth, pairs=24)
    assert r["edge_recall"] == 1.0 and r["faithfulness"] == 1.0 and r["ugs"]["open"] == len(r["circuit"]["edges"])
    assert 0 < r["ugs"]["constants_moved"]["max"] < 1  # the constants moved from the mean, not away from the scale
    assert analyse(model, "ugs", truth, pairs=24)["ranking"] == r["ranking"]
    with pytest.raises(MethodError, match="ugs runs on the bare engine only"):
        analyse(model, "ugs", truth, pairs=8, engine="hooks")


def test_the_masks_defaults_are_their_functions_defaults():
    """MASK_DEFAULTS and UGS_DEFAULTS (what the docs quote) are what learn_edge_masks and learn_ugs_masks run with."""
    import inspect

    from sandbox_lens.interp.circuits.masks import MASK_DEFAULTS, UGS_DEFAULTS, learn_edge_masks, learn_ugs_masks

    for defaults, fn in ((MASK_DEFAULTS, learn_edge_masks), (UGS_DEFAULTS, learn_ugs_masks)):
        params = inspect.signature(fn).parameters
        assert {k: params[k].default for k in defaults} == defaults
