"""The bare patching engine (no hooks, any TransformerLens version) against the hook engine: the same
clean state, the same patched runs, the same scores — to rounding — on every family, and it is the
default where it runs."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from circuit_families import FAMILIES, NEGATIVE_FAMILIES, layernorm_twin

from sandbox_lens.interp.circuits import patches as patches_module
from sandbox_lens.interp.circuits.analyse import analyse
from sandbox_lens.interp.circuits.bare import BarePatcher, patcher_for
from sandbox_lens.interp.circuits.effects import attribution, node_patching, path_patching
from sandbox_lens.interp.circuits.pairs import make_pairs
from sandbox_lens.interp.circuits.patches import Patches
from sandbox_lens.interp.circuits.patching import Patcher
from sandbox_lens.interp.circuits.truth import ground_truth
from sandbox_lens.interp.model.hooked import to_hooked

ALL = {**FAMILIES, **NEGATIVE_FAMILIES}
#: Dyck's balanced variant reads MLP units whose pre-activation is exactly on the ReLU's kink (0): whether
#: the gradient there is 0 or 1 is decided by rounding, so attribution may differ between the engines, and a
#: rounding error that lands a patched pre-activation just above 0 grows through the next layers. (The
#: counters' staircases have kinks too: EAP-IG's interpolated inputs can land on them, so it is compared at
#: m = 1, the clean point, only.)
KINKED = {"dyck/balanced"}


@pytest.mark.parametrize("family", sorted(ALL))
def test_the_engines_agree(family):
    """Clean state, patched runs, path and node patching, and attribution's edge *and node* estimates (a head's
    output once left the bare engine's gradient path: every head's node attribution was 0)."""
    spec = ALL[family]()
    truth, model = ground_truth(spec), to_hooked(spec)
    hooks, bare = Patcher(model, truth.graph), BarePatcher(model, truth.graph)
    pairs = make_pairs(model, 12, seed=3)
    a, b = hooks.clean_state(pairs.clean), bare.clean_state(pairs.clean)
    scale = max(float(x.abs().max()) for x in a.resid)
    for x, y in zip(a.resid, b.resid):
        torch.testing.assert_close(y, x, rtol=0, atol=(1e-4 if family in KINKED else 2e-6) * scale)
    for ablation in ("resample", "mean"):
        sh, sb = hooks.source(pairs, ablation), bare.source(pairs, ablation)
        edges = truth.graph.edges
        settings = [(edges[i::5], None) for i in range(5)] + [([edges[-1]], np.arange(pairs.clean.shape[1]) % 2 == 0)]
        lh, lb = hooks.run_many(pairs.clean, settings, sh), bare.run_many(pairs.clean, settings, sb)
        tolerance = (1e-3 if family in KINKED else 1e-5) * float(lh.abs().max())
        torch.testing.assert_close(lb, lh, rtol=0, atol=tolerance)
        np.testing.assert_allclose(
            path_patching(bare, pairs, source=sb), path_patching(hooks, pairs, source=sh), rtol=0, atol=2e-5
        )
        nh, nb = node_patching(hooks, pairs, ablation)["nodes"], node_patching(bare, pairs, ablation)["nodes"]
        assert all(abs(nh[k] - nb[k]) < 2e-5 for k in nh)
        if family not in KINKED:
            (eh, nh), (eb, nb) = attribution(hooks, pairs, sh), attribution(bare, pairs, sb)
            np.testing.assert_allclose(eb, eh, rtol=0, atol=1e-4)
            assert all(abs(nh[k] - nb[k]) < 1e-4 for k in nh), "node attributions (heads included) agree"


@pytest.mark.parametrize("family", ["modular_counter/C3+negatives", "prefix_scan/S5", "gridworld/grid4+negatives"])
def test_dense_and_sparse_patches_agree_with_the_hooks(family, monkeypatch):
    """Copies that patch most edges (a circuit's faithfulness run) take the dense product, copies that patch one
    (path patching) the per-sender gathers; forced either way, both match the hook engine, masks included."""
    spec = ALL[family]()
    truth, model = ground_truth(spec), to_hooked(spec)
    hooks = Patcher(model, truth.graph)
    pairs = make_pairs(model, 12, seed=5)
    edges, T = truth.graph.edges, pairs.clean.shape[1]
    settings = [([e for j, e in enumerate(edges) if j % 4 != i], None) for i in range(4)]
    settings += [(edges, np.arange(T) % 3 == 0), ([edges[0]], None)]
    expected = hooks.run_many(pairs.clean, settings, hooks.source(pairs, "resample"))
    tolerance = 1e-5 * float(expected.abs().max())
    like = torch.zeros(len(pairs.clean), T, model.cfg.d_model)
    for dense, which in ((0, "sparse"), (10**9, "dense")):
        monkeypatch.setattr(patches_module, "DENSE", dense)
        bare = BarePatcher(model, truth.graph)
        patches = Patches(torch, truth.graph, settings, {}, {}, like)
        assert (patches.dense if which == "dense" else patches.sparse) and not (
            patches.sparse if which == "dense" else patches.dense
        )
        got = bare.run_many(pairs.clean, settings, bare.source(pairs, "resample"))
        torch.testing.assert_close(got, expected, rtol=0, atol=tolerance, msg=which)
    monkeypatch.undo()
    assert Patches(torch, truth.graph, settings, {}, {}, like).dense  # at the default: many edges per copy
    path = Patches(torch, truth.graph, [([e], None) for e in edges], {}, {}, like)
    assert path.sparse and not path.dense  # one edge per copy, as path patching runs them


def test_a_clean_state_is_kept_for_the_same_tokens_only():
    spec = FAMILIES["modular_counter/C3"]()
    bare = BarePatcher(to_hooked(spec), ground_truth(spec).graph)
    pairs = make_pairs(bare.model, 8, seed=1)
    first = bare.clean_state(pairs.clean)
    assert bare.clean_state(pairs.clean.copy()) is first  # the same values, another array
    assert bare.clean_state(pairs.corrupt) is not first
    bare.clean_state(pairs.corrupt[::-1].copy())  # a third batch pushes out the oldest
    assert bare.clean_state(pairs.clean) is not first
    outputs = bare.outputs(pairs.clean)
    outputs.clear()  # a caller's dict, not the kept state's
    assert bare.outputs(pairs.clean)


def test_the_bare_engine_is_the_default_and_scores_alike():
    spec = NEGATIVE_FAMILIES["gridworld/grid4+negatives"]()
    truth, model = ground_truth(spec), to_hooked(spec)
    assert type(patcher_for(model)) is BarePatcher and type(patcher_for(model, engine="hooks")) is Patcher
    a = analyse(model, "acdc", truth, pairs=16, engine="hooks")
    b = analyse(model, "acdc", truth, pairs=16)
    assert b["engine"] == "BarePatcher" and a["engine"] == "Patcher"
    assert a["circuit"] == b["circuit"] and a["auroc"] == pytest.approx(b["auroc"], abs=1e-9)


def test_a_constructions_weights_patch_on_hooks_as_on_the_bare_engine():
    """The circuit command holds a construction as its bare weights (BareModel); the hook engine patches their
    TransformerLens model, built for it, and finds the bare engine's circuit (it raised an AttributeError once)."""
    from sandbox_lens.interp.model.bare import BareModel

    spec = NEGATIVE_FAMILIES["gridworld/grid4+negatives"]()
    weights, truth = BareModel(spec, sparse=False, bare_calls=True), ground_truth(spec)
    a = analyse(weights, "path", truth, pairs=16, engine="hooks")
    b = analyse(weights, "path", truth, pairs=16)
    assert (a["engine"], b["engine"]) == ("Patcher", "BarePatcher")
    assert a["circuit"] == b["circuit"] and a["auroc"] == pytest.approx(b["auroc"], abs=1e-6)


def test_the_engines_agree_on_a_twin_with_layernorm(tmp_path):
    """Twins have LayerNorm (the constructions have none): each head's, MLP's and the logits' own input is
    normalised after its patch, in both engines."""
    twin = layernorm_twin(tmp_path / "t")
    assert twin.cfg.normalization_type == "LN"
    hooks = Patcher(twin)
    bare = BarePatcher(twin, hooks.graph)
    pairs = make_pairs(twin, 16, seed=0)
    np.testing.assert_allclose(
        path_patching(bare, pairs, source=bare.source(pairs)),
        path_patching(hooks, pairs, source=hooks.source(pairs)),
        rtol=0,
        atol=1e-5,
    )
    (eb, nb), (eh, nh) = attribution(bare, pairs), attribution(hooks, pairs)
    np.testing.assert_allclose(eb, eh, rtol=0, atol=1e-5)
    assert any(abs(v) > 1e-3 for k, v in nh.items() if k.startswith("a")), "a head's own attribution is not lost"
    assert all(abs(nh[k] - nb[k]) < 1e-5 for k in nh)


@pytest.mark.parametrize(
    "family", ["prefix_scan/S5", "gridworld/grid4+negatives", "dyck/stack", "krohn_rhodes/cascade"]
)
def test_gated_runs_are_patched_runs(family):
    """Learned edge masks train through ``run_gated``: gates at 0 on a set of edges (1 elsewhere) is the run
    that patches exactly those edges, all gates at 1 the clean run; a fractional gate delivers that share
    of its sender (a per-edge oracle, the sum written edge by edge)."""
    spec = ALL[family]()
    truth, model = ground_truth(spec), to_hooked(spec)
    bare = BarePatcher(model, truth.graph)
    pairs = make_pairs(model, 8, seed=1)
    source, edges = bare.source(pairs, "resample"), truth.graph.edges
    clean = bare.run_many(pairs.clean, [([], None)], source)[0]
    scale = float(clean.abs().max())
    torch.testing.assert_close(
        bare.run_gated(pairs.clean, source, torch.ones(len(edges))), clean, rtol=0, atol=1e-6 * scale
    )
    for picked in (range(0, len(edges), 3), range(len(edges))):
        keep = torch.ones(len(edges))
        keep[list(picked)] = 0
        patched = bare.run_many(pairs.clean, [([edges[i] for i in picked], None)], source)[0]
        torch.testing.assert_close(bare.run_gated(pairs.clean, source, keep), patched, rtol=0, atol=1e-5 * scale)
    keep = torch.rand(len(edges), generator=torch.Generator().manual_seed(0))
    incoming: dict = {}
    for i, e in enumerate(edges):
        incoming.setdefault((e.receiver, e.channel), []).append((i, e.sender))
    embed, pos = bare._embed(pairs.clean)
    current = {"embed": embed, "pos": pos}

    def inputs(receiver, channel, x):
        items = incoming.get((receiver, channel), [])
        return x + sum((1 - keep[i]) * (source[s] - current[s]) for i, s in items) if items else x

    oracle = bare._forward(embed + pos, 0, inputs, {n.name for n in truth.graph.senders}, current)
    torch.testing.assert_close(bare.run_gated(pairs.clean, source, keep), oracle, rtol=0, atol=1e-5 * scale)
    # gates per word ([edges, batch, positions], UGS's): each word's run is its own gates' run
    per_word = torch.rand(len(edges), len(pairs.clean), generator=torch.Generator().manual_seed(1))
    both = bare.run_gated(pairs.clean, source, per_word[:, :, None].expand(-1, -1, pairs.clean.shape[1]))
    for b in (0, len(pairs.clean) - 1):
        alone = bare.run_gated(pairs.clean[b : b + 1], {k: v[b : b + 1] for k, v in source.items()}, per_word[:, b])
        torch.testing.assert_close(both[b : b + 1], alone, rtol=0, atol=1e-5 * scale)
