"""The high-level graph by intervention: the patch engine equal to a plain interchange, the prefix scan's edges
exact at the proof's offsets by path interchange and its windows exact from their parents by joint interchange —
and both tests failing at offsets the proof does not have."""

import numpy as np
import pytest

import sandbox_lens as sl
from sandbox_lens.interp.causal.highlevel import high_level_of
from sandbox_lens.interp.causal.identify import _named
from sandbox_lens.interp.causal.interchange import Site, answer, interchange, source_activations, word_pairs
from sandbox_lens.interp.causal.paths import Patch, joint_counts, patched_answers, path_counts
from sandbox_lens.interp.model.device import on


@pytest.fixture(scope="module")
def scan():
    model = sl.load("prefix_scan", "C3", length=8)
    base, source = word_pairs(model, 48, seed=3)
    bases, sites = {}, {}
    for v in ("window1", "window2", "state"):
        named = _named(model, v)
        assert named, v
        label, hook, basis = named[0]
        bases[label] = (hook, basis)
        sites[v] = [label] * base.shape[1]
    return model, high_level_of(model), base, source, bases, sites


def test_one_patch_is_the_plain_interchange():
    model = sl.load("prefix_scan", "parity", length=6)
    base, source = word_pairs(model, 12, seed=1)
    P, T = len(model.card.io.prefix), base.shape[1]
    hook = "blocks.1.hook_resid_mid"
    acts = source_activations(model, source, [hook])
    tokens = on(model, model.card.io.encode(base))
    for p in range(T):
        patch = Patch(hook, None, None, on(model, np.arange(len(base))), P + p, acts[hook][:, P + p])
        got, _ = patched_answers(model, tokens, [patch], None)
        expected = answer(interchange(model, base, source, Site(hook, p))[:, P : P + T], None)
        assert np.array_equal(got, expected)


@pytest.mark.parametrize("parent, child, offset", [("window1", "window2", 2), ("window2", "state", 4)])
def test_a_scan_edge_by_path_interchange(scan, parent, child, offset):
    """Both edges of a window into the level above (same position, 2^l later) carry the parent's change exactly; an
    offset the proof has no edge for predicts no change at all (nothing is scored there)."""
    model, high, base, source, bases, sites = scan
    for o in (0, offset):
        exact = path_counts(model, high, base, source, parent, child, sites[parent], sites[child], (o,), bases)
        assert exact.outputs.sum() >= 50 and exact.rate == 1.0
    off = path_counts(model, high, base, source, parent, child, sites[parent], sites[child], (offset - 1,), bases)
    assert off.outputs.sum() == 0


def test_a_counter_fails_the_scans_edges():
    """The counter construction computes the state without the scan's windows: the scan's path-tested edges and
    joint windows fail there, beside the counter's own edge passing."""
    from sandbox_lens.interp.causal.identify import identify

    model = sl.load("modular_counter", "C3", length=8)
    r = identify(model, "scan,counter", pairs=48)
    rows = {c["algorithm"]: c for c in r["candidates"]}
    scan_tests = [e["path"] for v in rows["scan"]["variables"] for e in v["edges"] if "path" in e]
    scan_tests += [v["joint"] for v in rows["scan"]["variables"] if v["joint"]]
    assert len(scan_tests) == 6 and sum(t["status"] == "fails" for t in scan_tests) >= 4
    counter = [e["path"] for v in rows["counter"]["variables"] for e in v["edges"] if "path" in e]
    assert len(counter) == 1 and counter[0]["status"] == "passes" and counter[0]["iia"] == 1.0


def test_a_window_from_all_its_parents_at_once(scan):
    """Lemma 14: window2 at q is window1 at q composed with window1 at q − 2 — set both from a source and window2 is
    the source's; set window1 at q and q − 1 instead and it is not."""
    model, high, base, source, bases, sites = scan
    exact = joint_counts(model, high, base, source, "window2", [("window1", 0), ("window1", 2)], sites, bases)
    assert exact.outputs.sum() >= 50 and exact.rate == 1.0
    wrong = joint_counts(model, high, base, source, "window2", [("window1", 0), ("window1", 1)], sites, bases)
    assert wrong.outputs.sum() >= 50 and wrong.rate < 0.8


def test_bare_patches_answer_as_hooked_runs_do(scan, monkeypatch):
    """Path and joint interchanges run bare — every patch an edit of one forward from the embedding — count what
    hooked runs of the whole model count, word by word; on a twin's heads and components, the answers and the
    captured activations agree too (to float32 rounding)."""
    import torch

    from sandbox_lens.interp.causal import paths
    from sandbox_lens.interp.model.bare import bare_rest
    from sandbox_lens.interp.tasks.batches import AutomatonTask
    from sandbox_lens.interp.tasks.catalogue import get_automaton
    from sandbox_lens.interp.train import ModelShape, random_init

    model, high, base, source, bases, sites = scan
    bare = (
        path_counts(model, high, base, source, "window1", "window2", sites["window1"], sites["window2"], (2,), bases),
        joint_counts(model, high, base, source, "window2", [("window1", 0), ("window1", 2)], sites, bases),
    )
    with monkeypatch.context() as m:
        m.setattr(paths, "bare_rest", lambda _: None)
        hooked = (
            path_counts(
                model, high, base, source, "window1", "window2", sites["window1"], sites["window2"], (2,), bases
            ),
            joint_counts(model, high, base, source, "window2", [("window1", 0), ("window1", 2)], sites, bases),
        )
    for a, b in zip(bare, hooked):
        assert np.array_equal(a.hits, b.hits) and np.array_equal(a.outputs, b.outputs)
    twin = random_init(AutomatonTask(get_automaton("C3"), 8), ModelShape(n_layers=2, d_model=32, n_heads=2), 3)
    words, donors = word_pairs(twin, 16, seed=2)
    hooks = ["blocks.0.attn.hook_z", "blocks.0.hook_mlp_out", "blocks.1.hook_attn_out", "blocks.1.hook_resid_mid"]
    acts = source_activations(twin, donors, hooks)
    rows = on(twin, np.arange(16))
    P = len(twin.card.io.prefix)
    patches = [
        Patch(hooks[0], 1, None, rows, P + 2, acts[hooks[0]][:, P + 2, 1]),
        Patch(hooks[1], None, None, rows, P + 3, acts[hooks[1]][:, P + 3]),
        Patch(hooks[2], None, None, rows, P + 5, acts[hooks[2]][:, P + 5]),
    ]
    tokens = on(twin, twin.card.io.encode(words))
    got, seen = patched_answers(twin, tokens, patches, None, capture=hooks[2:], rest=bare_rest(twin))
    want, cached = patched_answers(twin, tokens, patches, None, capture=hooks[2:])
    assert np.array_equal(got, want)
    for h in hooks[2:]:
        scale = max(1.0, float(cached[h].abs().max()))
        assert float((seen[h] - cached[h]).abs().max()) <= 1e-5 * scale, h
    assert not torch.equal(seen[hooks[3]], source_activations(twin, words, [hooks[3]])[hooks[3]])  # the patches took
