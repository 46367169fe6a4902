"""Per-position ground truth, tied to the proofs and to behaviour: the prefix scan's routes are Theorem 10's
look-backs; gating every (edge, position) outside the truth to its ablation leaves the read outputs exact on every
family, level and corruption; the truth's items matter; position-scoring methods are scored against it."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from circuit_families import BACKUP_FAMILIES, FAMILIES, NEGATIVE_FAMILIES, layernorm_twin

from sandbox_lens.constructions.registry import build
from sandbox_lens.interp.circuits.analyse import analyse
from sandbox_lens.interp.circuits.bare import BarePatcher
from sandbox_lens.interp.circuits.crossing import crossing_terms
from sandbox_lens.interp.circuits.effects import attribution
from sandbox_lens.interp.circuits.levels import LevelError, levels_of
from sandbox_lens.interp.circuits.pairs import make_pairs
from sandbox_lens.interp.circuits.patching import Patcher, ablated_pairs
from sandbox_lens.interp.circuits.positions import POSITION_LEVELS, position_truth
from sandbox_lens.interp.circuits.truth import ground_truth
from sandbox_lens.interp.model.hooked import to_hooked
from sandbox_lens.interp.model.run import exact_precision
from sandbox_lens.interp.tasks.catalogue import get_automaton


def _setup(spec, corruption=None, n=32, seed=1):
    truth = ground_truth(spec)
    model = to_hooked(spec)
    pairs = make_pairs(model, n, corruption, seed=seed)
    patcher = BarePatcher(model, truth.graph)
    return truth, pairs, patcher, levels_of(truth, patcher, pairs)


def _gated(patcher, pairs, level, keep):
    with exact_precision():
        logits = patcher.run_gated(
            pairs.clean, patcher.source(pairs, level), torch.as_tensor(keep, dtype=torch.float32)
        )
    read = torch.as_tensor(np.asarray(pairs.read))
    return logits[..., torch.as_tensor(pairs.outputs)][read]


def test_prefix_scan_routes_are_theorem_10s_look_backs():
    """Thesis layer l (block 2(l − 1)) routes each read query t to t − 2^(l−1), and nowhere else."""
    truth, pairs, patcher, lv = _setup(build("prefix_scan", get_automaton("S5"), 16))
    pt = position_truth(lv, "resample", patcher, pairs)
    heads = [n for n in truth.graph.nodes if n.kind == "head"]
    assert [n.layer for n in heads] == [0, 2, 4, 6]
    for n in heads:
        offset = 2 ** (n.layer // 2)
        for t in pt.read:
            assert pt.routes[n.name][t] == [t - offset], (n.name, t)
    assert pt.word_routed == []


@pytest.mark.parametrize("family", sorted(FAMILIES) + sorted(NEGATIVE_FAMILIES) + sorted(BACKUP_FAMILIES))
def test_outside_the_position_truth_the_read_outputs_stay_exact(family):
    spec = {**FAMILIES, **NEGATIVE_FAMILIES, **BACKUP_FAMILIES}[family]()
    for corruption in to_hooked(spec).card.task_kind.corruptions:
        truth, pairs, patcher, lv = _setup(spec, corruption)
        for level in POSITION_LEVELS:
            if not lv.members[level]:
                continue
            pt = position_truth(lv, level, patcher, pairs)
            full = _gated(patcher, pairs, level, np.ones(len(truth.graph.edges)))
            kept = _gated(patcher, pairs, level, pt.edges)
            torch.testing.assert_close(
                kept, full, rtol=0, atol=1e-5 * float(full.abs().max()), msg=lambda m: f"{level}/{corruption}: {m}"
            )
            # every position an edge is kept at lies where the edge is in the node-level truth
            inside = np.array([e in lv.members[level] for e in truth.graph.edges])
            assert not pt.edges[~inside].any()


def test_the_truths_items_matter():
    """Ablating the last look-back head's value at the positions it routes to changes answers; ablating it
    everywhere else changes none: the truth is not every position."""
    truth, pairs, patcher, lv = _setup(build("prefix_scan", get_automaton("S5"), 8))
    pt = position_truth(lv, "resample", patcher, pairs)
    last = max((n for n in truth.graph.nodes if n.kind == "head"), key=lambda n: n.layer).name
    rows = [i for i, e in enumerate(truth.graph.edges) if e.receiver == last and e.channel == "v" and pt.edges[i].any()]
    assert rows
    full = _gated(patcher, pairs, "resample", np.ones(len(truth.graph.edges)))
    outside = np.ones_like(pt.edges)
    outside[rows] = pt.edges[rows]  # the head's value kept at its routes only
    assert torch.equal(_gated(patcher, pairs, "resample", outside).argmax(-1), full.argmax(-1))
    routed = np.ones_like(pt.edges)
    routed[rows] = ~pt.edges[rows]  # ... and ablated at them
    assert not torch.equal(_gated(patcher, pairs, "resample", routed).argmax(-1), full.argmax(-1))
    assert pt.edges.sum() < pt.edges[[i for i, e in enumerate(truth.graph.edges) if e in lv.members["resample"]]].size


def test_refusals():
    truth, pairs, patcher, lv = _setup(FAMILIES["modular_counter/C3"]())
    with pytest.raises(LevelError, match="defined at"):
        position_truth(lv, "read", patcher, pairs)
    truth.imposed = True
    with pytest.raises(LevelError, match="imposed truth is per node"):
        position_truth(lv, "resample", patcher, pairs)


def test_peap_is_eaps_terms_per_position():
    """Summed over positions, PEAP's per-position terms are attribution patching's edge effects (float32 sums)."""
    spec = FAMILIES["krohn_rhodes/cascade"]()
    model = to_hooked(spec)
    patcher = BarePatcher(model)
    raw = make_pairs(model, 32, seed=0)
    src = patcher.source(raw, "resample")
    pairs = ablated_pairs(patcher, raw, "resample", src)
    per, _ = attribution(patcher, pairs, src, per_position=True)
    whole, _ = attribution(patcher, pairs, src)
    assert per.shape == (len(patcher.graph.edges), pairs.clean.shape[1])
    np.testing.assert_allclose(per.sum(1), whole, rtol=0, atol=1e-6 * max(1.0, float(np.abs(whole).max())))


def _crossing_model(model_of, tmp_path):
    if model_of == "layernorm twin":
        return layernorm_twin(tmp_path / "t")
    return to_hooked({**FAMILIES, **NEGATIVE_FAMILIES}[model_of]())


@pytest.mark.parametrize("model_of", ["prefix_scan/S5+negatives", "dyck/stack+negatives", "layernorm twin"])
def test_peaps_crossing_terms_sum_over_queries_to_its_per_position_terms(model_of, tmp_path):
    """A key or value edge's (query, key) terms, summed over the queries, are its per-position term at the key: on
    constructions with the negatives (no LayerNorm; their gadgets have gradients at keys and values) and on a twin
    with LayerNorm."""
    model = _crossing_model(model_of, tmp_path)
    patcher = BarePatcher(model)
    pairs = make_pairs(model, 16, seed=0)
    src = patcher.source(pairs, "resample")
    per, _ = attribution(patcher, pairs, src, per_position=True)
    crossing = crossing_terms(patcher, pairs, src)
    kv = [i for i, e in enumerate(patcher.graph.edges) if e.channel in "kv"]
    assert sorted(crossing) == kv and kv
    T = pairs.clean.shape[1]
    for i in kv:
        assert crossing[i].shape == (T, T) and not np.triu(crossing[i], 1).any()
    summed = np.array([crossing[i].sum(0) for i in kv])
    scale = max(float(np.abs(per[kv]).max()), 1e-3)
    # the per-position terms come from float32 gradients summed over batch × d_model (≈ 10⁴ terms: √n·ε ≈ 10⁻⁵)
    np.testing.assert_allclose(summed, per[kv], rtol=0, atol=1e-4 * scale)
    assert np.abs(per[kv]).max() > 1e-3  # not a comparison of zeros
    # PEAP computes the clean gradients once for both: the same numbers, not just close ones
    grads = patcher.gradients(pairs.clean, pairs.logit_diff)
    assert np.array_equal(attribution(patcher, pairs, src, per_position=True, clean_gradients=grads)[0], per)
    shared = crossing_terms(patcher, pairs, src, grads)
    assert all(np.array_equal(shared[i], crossing[i]) for i in kv)
    with pytest.raises(ValueError, match="one step"):
        attribution(patcher, pairs, src, steps=2, clean_gradients=grads)


@pytest.mark.parametrize("model_of", ["prefix_scan/S5+negatives", "layernorm twin"])
def test_the_hook_engine_splits_by_query_as_the_bare_engine_does(model_of, tmp_path):
    """The crossing terms come from the engine's gradients and clean residuals: the hook engine's are the bare
    engine's to float32 rounding (1e-4 of the largest term, as above)."""
    model = _crossing_model(model_of, tmp_path)
    bare, hooks = BarePatcher(model), Patcher(model)
    pairs = make_pairs(model, 16, seed=0)
    a = crossing_terms(bare, pairs, bare.source(pairs, "resample"))
    b = crossing_terms(hooks, pairs, hooks.source(pairs, "resample"))
    assert sorted(a) == sorted(b)
    scale = max(float(max(np.abs(t).max() for t in a.values())), 1e-3)
    for i in a:
        np.testing.assert_allclose(b[i], a[i], rtol=0, atol=1e-4 * scale)


def test_long_words_are_not_split_by_query_and_say_so():
    """Past 64 positions PEAP keeps its per-position scores and says why it made no (query, key) split."""
    spec = build("prefix_scan", get_automaton("parity"), 48)
    truth, model = ground_truth(spec), to_hooked(spec)
    peap = analyse(model, "peap", truth, pairs=4, curve=False)
    assert peap["edge_crossing_strongest"].startswith("not split by query: words of 80 positions")
    assert "crossing" not in peap["position_scores"] and "edges" in peap["position_scores"]


def test_attention_the_split_cannot_recompute_is_not_split():
    """The split recomputes a standard causal softmax: a model with other attention (ALiBi) is named, not split."""
    from types import SimpleNamespace

    from sandbox_lens.interp.circuits.crossing import not_split

    alibi = SimpleNamespace(cfg=SimpleNamespace(positional_embedding_type="alibi"))
    assert "positional_embedding_type = 'alibi'" in not_split(alibi, 8)
    assert not_split(SimpleNamespace(cfg=SimpleNamespace()), 64) is None and "65 positions" in not_split(
        SimpleNamespace(cfg=SimpleNamespace()), 65
    )


@pytest.mark.parametrize("family", ["prefix_scan/S5", "dyck/stack+negatives"])
def test_the_crossing_truth_splits_the_per_position_truth_by_the_queries_that_use_the_head(family):
    """A key or value edge's (query, key) truth: taken over its queries, its per-position truth; never a key after
    its query; only at queries where the head's own output is in the truth."""
    truth, pairs, patcher, lv = _setup({**FAMILIES, **NEGATIVE_FAMILIES}[family]())
    pt = position_truth(lv, "resample", patcher, pairs)
    g = truth.graph
    used = pt.node_labels()
    for i, e in enumerate(g.edges):
        if e.channel in "kv":
            np.testing.assert_array_equal(pt.crossing[i].any(0), pt.edges[i])
            assert not np.triu(pt.crossing[i], 1).any()
            assert not pt.crossing[i][~used[e.receiver]].any(), e.name
    assert pt.to_dict()["crossing_positives"] == sum(int(c.sum()) for c in pt.crossing.values()) > 0


def test_position_scoring_methods_are_scored_per_position():
    spec = FAMILIES["modular_counter/C3"]()
    truth, model = ground_truth(spec), to_hooked(spec)
    peap = analyse(model, "peap", truth, pairs=32, curve=False)
    scores = peap["position_scores"]
    assert scores["scored"] and scores["edges"]["positives"] == sum(len(p) for p in scores["truth"]["edges"].values())
    assert 0.0 <= scores["edges"]["auroc"] <= 1.0
    # (edge, query, key) items: a key's or value's split by its queries, every other edge's per position as before
    rest = sum(len(p) for name, p in scores["truth"]["edges"].items() if not name.endswith((".k", ".v")))
    assert scores["crossing"]["positives"] == scores["truth"]["crossing_positives"] + rest
    assert scores["truth"]["crossing_positives"] > 0
    assert 0.0 <= scores["crossing"]["auroc"] <= 1.0 and peap["edge_crossing_strongest"]
    nodes = analyse(model, "patching", truth, pairs=32, curve=False, per_position=True)["position_scores"]["nodes"]
    assert nodes["auroc"] == 1.0  # the counter's one head and its inputs, at the positions they are used
    assert "position_scores" not in analyse(model, "attribution", truth, pairs=32, curve=False)


def test_peap_misses_what_the_counters_staircase_hides_and_patching_finds():
    """The counter's head and its input reach the answer only through the staircase MLP, whose gradient is 0 on the
    data: PEAP scores every position of them 0, node patching per position finds every one."""
    spec = build("modular_counter", get_automaton("C3"), 8)
    truth, model = ground_truth(spec), to_hooked(spec)
    peap = analyse(model, "peap", truth, pairs=32, curve=False)
    inside = peap["position_scores"]["truth"]["edges"]
    for name in ("embed->a0.0.v", "a0.0->m0"):
        assert inside[name] and not any(peap["edge_positions"][name])
    patching = analyse(model, "patching", truth, pairs=32, curve=False, per_position=True)
    used = {n: set() for n in ("embed", "a0.0")}
    for name, positions in inside.items():
        sender = name.split("->")[0]
        if sender in used:
            used[sender] |= set(positions)
    for node, positions in used.items():
        assert all(abs(patching["per_position"][node][p]) > 0.01 for p in positions), node


def test_the_per_position_picture(tmp_path, interp_run):
    """interp circuit draws circuit.positions.png for a method scored per position, and names it; not for path."""
    code, out, err = interp_run(
        "circuit", "modular_counter", "--automaton", "C3", "-T", "8", "--method", "peap", "--pairs", "16",
        "--out", str(tmp_path / "p"),
    )  # fmt: skip
    assert code == 0, err
    assert (tmp_path / "p" / "circuit.positions.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "circuit.positions.png" in out and "per position, (edge, position) items" in out
    assert "per (edge, query, key)" in out
    code, out, err = interp_run(
        "circuit", "modular_counter", "--automaton", "C3", "-T", "8", "--method", "path", "--pairs", "16",
        "--out", str(tmp_path / "p"),
    )  # fmt: skip
    assert code == 0, err
    assert "circuit.positions.png" not in out  # the earlier picture stays, and is not claimed
