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
