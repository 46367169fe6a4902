"""MIB's CPR and CMD as its evaluator computes them: the circuits EAP-IG's ``apply_topn`` + ``prune`` keep, and the
areas MIB's ``evaluate_area_under_curve`` gives, on a committed fixture (tests/data/make_mib_fixture.py wrote it
with EAP-IG and MIB's own code); EAP-IG files imported with their sign and their input node."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import sandbox_lens as sl
from sandbox_lens.interp.circuits.bare import patcher_for
from sandbox_lens.interp.circuits.exchange import CircuitFileError, read_circuit, to_eap_ig
from sandbox_lens.interp.circuits.mib import CompleteGraph, complete_edge_count, mib_curve, mib_edge
from sandbox_lens.interp.circuits.pairs import make_pairs
from sandbox_lens.interp.circuits.score import MIB_PERCENTAGES, areas
from sandbox_lens.interp.circuits.truth import ground_truth_of_model

FIXTURE = json.loads((Path(__file__).parents[1] / "data" / "mib_fixture.json").read_text())
CASES = {f"{c['construction']}:{c['source']}": c for c in FIXTURE["cases"]}
# Both sides run float32 models; the metric is a mean logit difference of order 1–10, so f agrees to ~1e-6 relative.
TOL = 1e-5


def test_the_complete_graph_has_eap_igs_edge_count():
    assert complete_edge_count(12, 12) == 32491  # GPT-2 small: MIB's circuits/ioi-eap-ig.json
    assert complete_edge_count(1, 1) == 8
    for L, H in ((1, 1), (2, 3), (4, 2)):
        g = CompleteGraph(L, H)
        assert len(g.edge_names) == complete_edge_count(L, H) == int(g.real.sum())


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_circuit_kept_at_each_size_is_eap_igs(name):
    case = CASES[name]
    model = sl.load(case["construction"], case["source"], length=case["length"], **case["options"])
    g = CompleteGraph(model.cfg.n_layers, model.cfg.n_heads)
    assert case["complete_edges"] == len(g.edge_names)
    matrix = np.zeros(g.real.shape)
    for edge, score in case["scores"].items():
        matrix[g.index(edge)] = score
    names = {g.index(n): n for n in g.edge_names}
    for ranking in ("signed", "absolute"):
        for p, expected in zip(FIXTURE["percentages"], case["kept"][ranking]):
            kept = g.topn(matrix, int(p * len(g.edge_names)), ranking == "absolute")
            assert sorted(names[tuple(ij)] for ij in np.argwhere(kept)) == expected, (ranking, p)


@pytest.mark.parametrize("name", sorted(n for n, c in CASES.items() if "mib" in c))
def test_cpr_and_cmd_are_mibs_numbers(name):
    case = CASES[name]
    model = sl.load(case["construction"], case["source"], length=case["length"], **case["options"])
    graph = ground_truth_of_model(model).graph
    patcher = patcher_for(model, graph)
    pairs = make_pairs(model, case["pairs"], seed=case["seed"])
    signed = [case["scores"][mib_edge(e)] if mib_edge(e) else 0.0 for e in graph.edges]
    curve = mib_curve(patcher, pairs, signed, patcher.source(pairs, "resample"))
    mib = case["mib"]
    np.testing.assert_allclose(curve["signed"]["faithfulness"], mib["signed"]["faithfulness"], atol=TOL)
    np.testing.assert_allclose(curve["absolute"]["faithfulness"], mib["absolute"]["faithfulness"], atol=TOL)
    assert curve["cpr"] == pytest.approx(mib["signed"]["cpr"], abs=TOL)
    assert curve["cmd"] == pytest.approx(mib["absolute"]["cmd"], abs=TOL)
    assert curve["complete_edges"] == case["complete_edges"]


def test_the_areas_have_mibs_closed_form():
    """f = 0 below 100 % scores CPR 0.25 and CMD 0.749 (the weights of the 10 sizes sum to 0.999)."""
    f = [0.0] * 9 + [1.0]
    assert areas(MIB_PERCENTAGES, f)["cpr"] == pytest.approx(0.25)
    assert areas(MIB_PERCENTAGES, f)["cmd"] == pytest.approx(0.749)


@pytest.fixture(scope="module")
def counter():
    model = sl.load("modular_counter", "C3", length=8, negatives="distractor,cancel,constant")
    return model, ground_truth_of_model(model).graph


def _eap_file(tmp_path, model, graph, scores, sign=None):
    data = to_eap_ig(graph, scores, np.asarray(scores) > 0.5, model.cfg)
    if sign is None:
        data.pop("score_sign")
    else:
        data["score_sign"] = sign
    path = tmp_path / "c.eap-ig.json"
    path.write_text(json.dumps(data))
    return path


def test_an_eap_ig_file_written_with_loss_false_ranks_the_right_way_round_when_its_sign_is_given(tmp_path, counter):
    model, graph = counter
    important = np.linspace(1.0, 0.1, len(graph.edges))
    metric_signed = -important  # EAP-IG's loss=False: important edges lower the metric, so score negative
    path = _eap_file(tmp_path, model, graph, metric_signed)
    with pytest.raises(CircuitFileError, match="give --sign loss .* or --sign metric"):
        read_circuit(path, graph)
    rank, _, settings, signed = read_circuit(path, graph, "metric")
    inputs = np.array([mib_edge(e) is not None for e in graph.edges])
    np.testing.assert_allclose(rank[inputs], important[inputs])
    assert settings["score_sign"] == "metric" and np.array_equal(signed[inputs], rank[inputs])
    assert np.isnan(rank[~inputs]).all()  # pos edges: EAP-IG has no node for them
    with pytest.raises(CircuitFileError, match="contradicts"):
        read_circuit(_eap_file(tmp_path, model, graph, metric_signed, sign="loss"), graph, "metric")


def test_eap_igs_input_node_is_the_token_embedding_only(tmp_path, counter):
    model, graph = counter
    scores = np.array([1.0 if e.sender == "pos" else 0.0 for e in graph.edges])
    data = to_eap_ig(graph, scores, scores > 0.5, model.cfg)
    assert all(v["score"] == 0.0 and not v["in_graph"] for k, v in data["edges"].items() if k.startswith("input->"))
    path = tmp_path / "pos.eap-ig.json"
    path.write_text(json.dumps(data))
    rank, chosen, _, _ = read_circuit(path, graph)
    assert not chosen.any() and np.isnan(rank[[e.sender == "pos" for e in graph.edges]]).all()


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda d: d.update(score_sign="upside-down"), "score_sign: 'upside-down' is not one of"),
        (
            lambda d: d["edges"].__setitem__("input->logits", {"score": True, "in_graph": False}),
            "input->logits/score: True is not of type 'number'",
        ),
        (
            lambda d: d["edges"].__setitem__("input->logits", {"score": 1.0, "in_graph": 1}),
            "input->logits/in_graph: 1 is not of type 'boolean'",
        ),
    ],
)
def test_a_malformed_eap_ig_file_is_refused_in_one_line(tmp_path, counter, edit, message):
    model, graph = counter
    data = to_eap_ig(graph, np.zeros(len(graph.edges)), np.zeros(len(graph.edges), dtype=bool), model.cfg)
    edit(data)
    path = tmp_path / "bad.eap-ig.json"
    path.write_text(json.dumps(data))
    with pytest.raises(CircuitFileError, match=message):
        read_circuit(path, graph)


def test_sign_goes_with_an_eap_ig_file_only(tmp_path, counter, interp_run):
    model, graph = counter
    own = tmp_path / "own.json"
    from sandbox_lens.interp.circuits.exchange import to_sandbox_lens

    own.write_text(json.dumps(to_sandbox_lens(graph, np.zeros(len(graph.edges)), np.zeros(len(graph.edges)))))
    with pytest.raises(CircuitFileError, match="--sign applies to EAP-IG files"):
        read_circuit(own, graph, "metric")
    code, _, err = interp_run(
        "circuit", "modular_counter", "--automaton", "C3", "-T", "8", "--sign", "metric", "--out", str(tmp_path / "o")
    )
    assert code == 2 and "--sign goes with interp circuit score" in err and not (tmp_path / "o").exists()


def test_each_distinct_circuit_of_the_curve_runs_once_and_gives_what_it_gives_alone(counter):
    """Scores of one sign keep the same circuit under both rankings, and the smallest sizes keep none: every circuit
    is run once, and each size's f is the one a run of its circuit alone gives (float32: TOL)."""
    model, graph = counter
    patcher = patcher_for(model, graph)
    pairs = make_pairs(model, 16, seed=0)
    source = patcher.source(pairs, "resample")
    scores = np.linspace(1.0, 2.0, len(graph.edges))  # all positive: signed and absolute rankings agree
    copies: list[frozenset] = []
    run_many = patcher.run_many

    def counting(tokens, settings, src, *rest):
        copies.extend(frozenset(edges) for edges, _ in settings)
        return run_many(tokens, settings, src, *rest)

    patcher.run_many = counting
    curve = mib_curve(patcher, pairs, scores, source)
    patcher.run_many = run_many
    assert len(copies) == len(set(copies)) < 2 * len(MIB_PERCENTAGES) + 2
    assert curve["signed"] == curve["absolute"]
    g = CompleteGraph(model.cfg.n_layers, model.cfg.n_heads)
    matrix = np.zeros(g.real.shape)
    where = {}
    for e, s in zip(graph.edges, scores):
        if mib_edge(e) is not None:
            matrix[g.index(mib_edge(e))] = s
            where[e] = g.index(mib_edge(e))
    value = {}
    for patched in ([], list(where)):
        value[len(patched)] = pairs.value(patcher.run(pairs.clean, patched, source)[0], "logit_diff")
    full, empty = value[0], value[len(where)]
    for n, f in zip(curve["edges"], curve["signed"]["faithfulness"]):
        kept = g.topn(matrix, n, False)
        patched = [e for e in where if not kept[where[e]]]
        alone = pairs.value(patcher.run(pairs.clean, patched, source)[0], "logit_diff")
        assert f == pytest.approx((alone - empty) / (full - empty), abs=TOL)
