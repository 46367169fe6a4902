"""A trained twin's imposed circuit as a ground truth in levels: the edges between imposed nodes, narrowed per
ablation by what the twin's activations let the ablation change, each edge outside with its reason; and such a
twin as a leaderboard family."""

from __future__ import annotations

import pytest

from sandbox_lens.constructions.registry import build
from sandbox_lens.interp.circuits.imposed import (
    carries_circuit,
    imposed_nodes,
    imposed_truth,
    off_circuit_effect,
    off_circuit_effects_alone,
    twins_markdown,
)
from sandbox_lens.interp.circuits.leaderboard import Family, Setting, run_leaderboard
from sandbox_lens.interp.circuits.levels import levels_of
from sandbox_lens.interp.circuits.pairs import make_pairs
from sandbox_lens.interp.circuits.patching import Patcher
from sandbox_lens.interp.errors import SandboxError
from sandbox_lens.interp.model.hooked import to_hooked
from sandbox_lens.interp.tasks.catalogue import get_automaton
from sandbox_lens.interp.train import open_model


@pytest.fixture(scope="module")
def twin(tmp_path_factory):
    from sandbox_lens.interp.cli import main

    out = tmp_path_factory.mktemp("twin") / "c3"
    argv = "train automaton --automaton C3 --length 6 --layers 2 --heads 2 --d-model 16 --steps 40"
    assert main([*argv.split(), "--align", "modular_counter", "--strict-on", "outputs", "--out", str(out)]) in (0, None)
    return open_model(out)


def test_the_imposed_truth_is_the_edges_between_imposed_nodes_in_levels(twin):
    truth = imposed_truth(twin)
    on = imposed_nodes(twin.card.options["alignment"])
    assert truth.imposed and truth.to_dict()["imposed"]
    assert set(truth.structural) == {e for e in truth.graph.edges if e.sender in on and e.receiver in on}
    pairs = make_pairs(twin, 16, seed=0)
    levels = levels_of(truth, Patcher(twin, truth.graph), pairs)
    for e in truth.graph.edges:
        if e.sender not in on or e.receiver not in on:
            assert {levels.why_absent(e, lv) for lv in ("structural", "resample", "zero")} == {"not-imposed"}
        elif e.sender == "pos":  # the same positions in the clean and the corrupted word; nonzero, and constant
            assert levels.why_absent(e, "resample") == "invisible" and levels.why_absent(e, "zero") is None
            assert levels.why_absent(e, "mean") == "mean-on-data"
        elif e.sender == "embed":
            assert all(levels.why_absent(e, lv) is None for lv in ("resample", "zero", "mean"))
    assert levels.members["resample"] < set(truth.structural)


def test_a_twin_family_on_the_leaderboard_and_its_off_circuit_effect(twin):
    board = run_leaderboard(
        [Family("C3 twin", lambda seed: (imposed_truth(twin), twin), twin=True)],
        ["path", "random"],
        [Setting()],
        [0, 1],
        pairs=8,
    )
    assert [r["method"] for r in board["rows"]] == ["path", "random"]
    assert all(r["twin"] and r["level"] == "resample" for r in board["rows"])
    effect = off_circuit_effect(twin, pairs=16)
    assert -10 < effect < 10


def test_each_off_circuit_node_alone_is_its_own_resample(twin):
    """One effect per head and MLP outside the imposed circuit, each that node's outgoing edges resampled alone: the
    same number the patcher gives for that node's edges."""
    from sandbox_lens.interp.circuits.bare import patcher_for

    alone = off_circuit_effects_alone(twin, pairs=16)
    on = imposed_nodes(twin.card.options["alignment"])
    patcher = patcher_for(twin)
    assert set(alone) == {n.name for n in patcher.graph.senders} - on == {"a0.1", "a1.0", "a1.1", "m1"}
    data = make_pairs(twin, 16, seed=0)
    edges = [e for e in patcher.graph.edges if e.sender == "m1"]
    logits = patcher.run(data.clean, edges, patcher.source(data, "resample"))[0]
    assert alone["m1"] == pytest.approx(float(patcher.effect(data, logits, "logit_diff")), abs=1e-5)


def test_a_construction_has_no_imposed_circuit():
    model = to_hooked(build("modular_counter", get_automaton("C3"), 6))
    with pytest.raises(SandboxError, match="needs a twin trained with `interp train --align`"):
        imposed_truth(model)


def test_a_twin_counts_only_at_its_targets_and_with_nothing_outside_its_circuit():
    assert carries_circuit(0.99, 0.97, 0.01, 0.95)
    assert carries_circuit(0.99, 0.97, -0.049, 0.95)  # either sign: resampling may also help the metric
    assert not carries_circuit(0.99, 0.97, 0.05, 0.95)  # the off-circuit nodes move the logits
    assert not carries_circuit(0.94, 0.97, 0.0, 0.95) and not carries_circuit(0.99, 0.94, 0.0, 0.95)
    assert not carries_circuit(0.99, None, 0.0, 0.95)  # no imposed site measured
    # off-circuit nodes that matter alone and cancel together: the joint effect passes, one node alone does not
    assert carries_circuit(0.99, 0.97, 0.03, 0.95, alone={"a1.0": 0.04, "m1": -0.01})
    assert not carries_circuit(0.99, 0.97, 0.03, 0.95, alone={"a1.0": -0.07, "m1": 0.23})
    assert carries_circuit(0.99, 0.97, 0.03, 0.95, alone={})  # nothing off the circuit


def test_the_twins_table_says_which_count_and_why_not(twin):
    board = run_leaderboard(
        [Family("C3 twin", lambda seed: (imposed_truth(twin), twin), twin=True)], ["path"], [Setting()], [0], pairs=8
    )
    rows = [
        {
            "population": "C3 twin",
            "seed": 0,
            "accuracy": 1.0,
            "steps": 40,
            "imposed_iia_min": 0.99,
            "off_circuit_effect": 0.01,
            "counted": True,
        },
        {
            "population": "C3 twin",
            "seed": 1,
            "accuracy": 1.0,
            "steps": 40,
            "imposed_iia_min": None,
            "off_circuit_effect": 0.3,
            "counted": False,
        },
    ]
    settings = {"pairs": 8, "threshold": 0.01, "reached": 0.95, "off_circuit": 0.05, "interval": "t", "seconds": "cpu"}
    text = twins_markdown({"settings": settings, "twins": rows, "rows": board["rows"]})
    assert "| C3 twin | 0 | 1.000 | 40 | 0.990 | 0.010 | — | yes |" in text
    assert "| C3 twin | 1 | 1.000 | 40 | — | 0.300 | — | no |" in text
    rows[1]["off_circuit_alone"] = {"a1.0": 0.02, "m1": -0.23}
    text = twins_markdown({"settings": settings, "twins": rows, "rows": board["rows"]})
    assert "| C3 twin | 1 | 1.000 | 40 | — | 0.300 | -0.230 (m1) | no |" in text
    assert "or any one head or MLP outside it alone" in text
    assert "| C3 twin | path | resample" in text
    assert "No twin counts" in twins_markdown({"settings": settings, "twins": rows[1:], "rows": []})
