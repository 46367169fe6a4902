"""auto-circuit's algorithms on this project's models (the optional extra; ``make test-auto-circuit``
builds .venv-ac and runs this file there): its edge attribution agrees with this project's to a
constant on the same pairs, its ACDC's circuit scores and round-trips like a method of ours, and its
graph maps onto ours edge for edge. Without the extra, the methods are refused in one line."""

from __future__ import annotations

import importlib.util
import json
from dataclasses import replace

import numpy as np
import pytest

from sandbox_lens.constructions import build_model
from sandbox_lens.interp.circuits.pairs import make_pairs
from sandbox_lens.interp.tasks.catalogue import get_automaton

INSTALLED = importlib.util.find_spec("auto_circuit") is not None
needs = pytest.mark.skipif(not INSTALLED, reason="auto-circuit is an optional extra (make test-auto-circuit)")
BUILD = ["prefix_scan", "--automaton", "S3", "-T", "8", "-O", "negatives=distractor,cancel,constant"]


@pytest.mark.skipif(INSTALLED, reason="auto-circuit is installed here")
def test_without_the_extra_the_methods_are_refused_in_one_line(tmp_path, interp_run):
    code, _, err = interp_run("circuit", *BUILD, "--method", "auto-circuit:acdc", "--out", tmp_path / "X")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "pip install 'sandbox-lens[auto-circuit]'" in err, err
    assert not (tmp_path / "X").exists()


@needs
def test_its_edge_attribution_is_ours_up_to_a_constant_on_the_same_pairs():
    """EAP, read at the last position: auto-circuit's mask gradient and this project's attribution are the
    same linear estimate; ``Resid Start->X`` is ``embed->X`` plus ``pos->X``."""
    from sandbox_lens.interp.circuits.autocircuit import prune_scores
    from sandbox_lens.interp.circuits.bare import patcher_for
    from sandbox_lens.interp.circuits.effects import attribution
    from sandbox_lens.interp.circuits.exchange import auto_circuit_names

    model = build_model("prefix_scan", get_automaton("S3"), 8)
    patcher = patcher_for(model, None, "auto")
    raw = make_pairs(model, 32, None, None, 3)
    last = np.zeros_like(raw.affected)
    last[:, -1] = raw.read[:, -1] & raw.affected[:, -1]
    assert last.sum() >= 8
    data = replace(raw, affected=last)  # this project's metric read where auto-circuit reads it
    ours, _ = attribution(patcher, data, patcher.source(data, "resample"), steps=1)
    theirs, _, info = prune_scores(model, patcher.graph, "eap", data)
    assert info["pairs_kept"] == last.sum()
    names = auto_circuit_names(patcher.graph)
    a = np.array([abs(sum(ours[i] for i in idx)) for idx in names.values()])
    b = np.array([theirs[idx[0]] for idx in names.values()])
    scale = float(a @ b / (a @ a))
    assert scale > 0 and np.abs(a).max() > 0
    np.testing.assert_allclose(b, scale * a, rtol=1e-3, atol=1e-5 * b.max())


@needs
def test_its_acdc_scores_and_round_trips_like_a_method_of_ours(tmp_path, interp_run):
    code, out, err = interp_run(
        "circuit", *BUILD, "--method", "auto-circuit:acdc", "--pairs", "32", "--out", tmp_path / "a", "--json"
    )
    assert code == 0, err
    run = json.loads((tmp_path / "a" / "circuit.json").read_text())
    summary = json.loads(out)
    assert run["auto_circuit"]["algorithm"] == "ACDC" and run["auto_circuit"]["pairs_kept"] > 0
    assert run["ground_truth_level"] == "resample" and 0 < summary["circuit_edges"] < summary["graph_edges"]
    assert summary["auroc"] is not None and 0.5 < summary["auroc"] <= 1
    # the circuit is what its ACDC never pruned: those edges share the top of the ranking, and only they
    rank = dict(zip(run["graph"]["edges"], run["ranking"]))
    top = max(v for v in rank.values() if v is not None)
    assert {e for e, v in rank.items() if v == top} == set(run["circuit"]["edges"])
    code, out, err = interp_run(
        "circuit",
        "score",
        *BUILD,
        "--circuit-file",
        tmp_path / "a" / "circuit.edges.json",
        "--out",
        tmp_path / "s",
        "--json",
    )
    assert code == 0, err
    scored = json.loads(out)
    for key in ("auroc", "average_precision", "edge_precision", "edge_recall", "cpr", "cmd", "faithfulness"):
        assert scored[key] == pytest.approx(summary[key], abs=1e-12), key


@needs
def test_a_ranking_has_no_circuit_of_its_own(tmp_path, interp_run):
    code, out, err = interp_run(
        "circuit", *BUILD, "--method", "auto-circuit:random", "--pairs", "16", "--out", tmp_path / "r", "--json"
    )
    assert code == 0, err
    summary = json.loads(out)
    assert summary["faithfulness"] is None and summary["edge_precision"] is None and summary["circuit_edges"] == 0
    assert summary["cpr"] is not None and summary["auroc"] is not None
    assert (tmp_path / "r" / "circuit.png").stat().st_size > 10_000


@needs
def test_its_graph_maps_onto_ours_edge_for_edge():
    """Every auto-circuit edge names an edge of ours or touches a padded head / empty MLP (all-zero weights,
    not a node here), and each of those is scored 0 by attribution."""
    from sandbox_lens.interp.circuits.autocircuit import _patchable, load
    from sandbox_lens.interp.circuits.exchange import auto_circuit_names
    from sandbox_lens.interp.circuits.graph import Graph

    load()
    model = build_model("modular_counter", get_automaton("C3"), 8)
    graph = Graph.of_model(model)
    ours = auto_circuit_names(graph)
    theirs = {e.name for e in _patchable(model).edges}
    assert set(ours) <= theirs
    padded = theirs - set(ours)
    nodes = {n.name for n in graph.nodes}
    for name in padded:
        ends = name.replace(".Q", "").replace(".K", "").replace(".V", "").split("->")
        assert any(_ours(end) not in nodes for end in ends), name


def _ours(node: str) -> str:
    if node in ("Resid Start", "Resid End"):
        return "embed" if node == "Resid Start" else "logits"
    if node.startswith("MLP "):
        return "m" + node[4:]
    return "a" + node[1:]
