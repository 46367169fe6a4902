"""AtP* (sandbox_lens.interp.circuits.atp_star): its QK fix is exact where the rest of the model is linear and
recovers what a pinned softmax hides from attribution; GradDrop cuts one block's gradient at a time; as a method it
runs end to end on the bare engine and is refused on the hook engine."""

from __future__ import annotations

import numpy as np
import pytest
from circuit_families import FAMILIES

from sandbox_lens.constructions import build
from sandbox_lens.interp.circuits.analyse import analyse
from sandbox_lens.interp.circuits.atp_star import atp_star
from sandbox_lens.interp.circuits.bare import BarePatcher
from sandbox_lens.interp.circuits.config import MethodError
from sandbox_lens.interp.circuits.effects import attribution, path_patching
from sandbox_lens.interp.circuits.pairs import make_pairs
from sandbox_lens.interp.circuits.truth import ground_truth
from sandbox_lens.interp.model.hooked import to_hooked
from sandbox_lens.interp.tasks.catalogue import get_automaton


def _setup(spec, n=32):
    truth, model = ground_truth(spec), to_hooked(spec)
    patcher = BarePatcher(model, truth.graph)
    data = make_pairs(model, n, seed=1)
    return truth, model, patcher, data, patcher.source(data, "resample")


def test_the_qk_fix_is_exact_through_a_pinned_softmax():
    """The cancelling heads are read by the unembedding alone, so past their outputs the model is linear: AtP*'s
    estimate of every query and key edge into them is path patching's effect (to float32 rounding), at the default
    sharpness and with the softmax pinned (10³), where attribution's key estimate vanishes and its query estimate
    explodes."""
    for sharpness in (8.0, 1000.0):
        spec = build("modular_counter", get_automaton("C3"), 8, negatives="cancel", negative_sharpness=sharpness)
        truth, _, patcher, data, src = _setup(spec)
        edges = truth.graph.edges
        qk = [i for i, e in enumerate(edges) if e.channel in ("q", "k")]
        exact = path_patching(patcher, data, source=src)
        naive, _ = attribution(patcher, data, src)
        found = atp_star(patcher, data, src)
        assert len(qk) >= 4 and max(abs(exact[i]) for i in qk) > 0.05
        np.testing.assert_allclose(found["estimate"][qk], exact[qk], rtol=0, atol=1e-5)
        if sharpness == 1000.0:
            keys = [i for i in qk if edges[i].channel == "k" and abs(exact[i]) > 0.05]
            queries = [i for i in qk if edges[i].channel == "q" and abs(exact[i]) > 0.05]
            assert keys and all(abs(naive[i]) < 1e-3 * abs(exact[i]) for i in keys)
            assert queries and all(abs(naive[i]) > 100 * abs(exact[i]) for i in queries)
        # off the query and key channels the estimate is attribution's own
        rest = [i for i in range(len(edges)) if i not in set(qk)]
        np.testing.assert_allclose(found["estimate"][rest], naive[rest], rtol=0, atol=1e-6)


def test_graddrop_cuts_one_blocks_gradient_at_a_time():
    """``gradients(drop=l)``: the values are the clean run's; no gradient reaches block l's inputs through its
    own writes; the logits' input gradient is untouched, and so is every receiver's after block l."""
    truth, _, patcher, data, _ = _setup(FAMILIES["prefix_scan/S5"](), n=8)
    outputs, senders, receivers = patcher.gradients(data.clean, data.logit_diff)
    for drop in range(patcher.L):
        out_l, send_l, recv_l = patcher.gradients(data.clean, data.logit_diff, drop=drop)
        for name, x in outputs.items():
            assert np.array_equal(out_l[name].numpy(), x.numpy())
        for (receiver, channel), grad in recv_l.items():
            layer = truth.graph.by_name[receiver].layer
            full = receivers[(receiver, channel)]
            if layer == drop:
                assert grad is None or float(grad.abs().max()) == 0.0
            elif layer > drop and full is not None:
                np.testing.assert_array_equal(grad.numpy(), full.numpy())


def test_graddrop_scores_average_the_passes_that_can_reach_an_edge():
    """A multi-block model: an edge into a block is scored over the L − 1 passes that keep its block, one into
    the logits over all L; the score is at least as large as the plain one wherever no drop changes the edge's
    gradient (the last block's edges)."""
    truth, _, patcher, data, src = _setup(FAMILIES["prefix_scan/S5"](), n=16)
    with_drop, without = atp_star(patcher, data, src), atp_star(patcher, data, src, graddrop=False)
    last = patcher.L - 1
    for i, e in enumerate(truth.graph.edges):
        if truth.graph.by_name[e.receiver].layer == last:  # only its own block's drop changes it, and is left out
            assert with_drop["score"][i] == pytest.approx(without["score"][i], rel=1e-6, abs=1e-9)
    assert np.all(with_drop["score"] >= 0) and np.array_equal(with_drop["estimate"], without["estimate"])


def test_atp_star_is_a_method_on_the_bare_engine():
    spec = build("modular_counter", get_automaton("C3"), 8, negatives="cancel", negative_sharpness=1000.0)
    truth, model = ground_truth(spec), to_hooked(spec)
    r = analyse(model, "atp-star", truth, pairs=16)
    eap = analyse(model, "attribution", truth, pairs=16)
    assert r["engine"] == "BarePatcher" and r["method"] == "atp-star" and 0.0 <= r["auroc"] <= 1.0
    assert r["nodes"] == pytest.approx(eap["nodes"], abs=1e-6)  # nodes: plain attribution


def test_atp_star_is_refused_on_the_hook_engine():
    spec = FAMILIES["modular_counter/C3"]()
    truth, model = ground_truth(spec), to_hooked(spec)
    with pytest.raises(MethodError, match="runs on the bare engine"):
        analyse(model, "atp-star", truth, pairs=16, engine="hooks")
