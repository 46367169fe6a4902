"""`interp train --align CONSTRUCTION`: the imposed correspondence read from the construction's card, the
interchange-intervention and strictness losses, the card of the twin it trains, and bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest

from sandbox_lens.interp.causal.impose import correspondence
from sandbox_lens.interp.tasks.batches import AutomatonTask, DyckTask, FFLTask
from sandbox_lens.interp.tasks.catalogue import get_automaton
from sandbox_lens.interp.tasks.dyck import Dyck
from sandbox_lens.interp.train import ModelShape


def test_the_correspondence_follows_the_constructions_card():
    c3 = correspondence("modular_counter", AutomatonTask(get_automaton("C3"), 8), ModelShape(n_layers=2, n_heads=2))
    assert c3["variables"] == [
        {
            "variable": "state",
            "hook": "blocks.0.hook_resid_post",
            "dims": [0, 3],
            "construction_site": "state @ blocks.0.hook_resid_post",
        }
    ]
    assert c3["circuit"] == {"heads": [[0, 0]], "mlps": [0], "off_heads": [[0, 1], [1, 0], [1, 1]], "off_mlps": [1]}
    dyck = correspondence("dyck", DyckTask(Dyck(2, 4), 12), ModelShape(n_layers=2, n_heads=2, d_model=50))
    assert [(v["variable"], v["hook"], v["dims"]) for v in dyck["variables"]] == [
        ("top", "blocks.1.hook_resid_post", [0, 8]),
        ("depth", "blocks.0.hook_resid_mid", [8, 9]),
    ]
    assert dyck["circuit"]["heads"] == [[0, 0], [1, 0]] and dyck["circuit"]["off_mlps"] == []
    ffl = correspondence("ffl", FFLTask(0.8, 16), ModelShape(n_layers=3, n_heads=1))
    assert ffl["variables"][0]["hook"] == "blocks.1.hook_resid_post" and ffl["circuit"]["off_mlps"] == [2]


def test_an_aligned_twin_records_what_was_imposed(tmp_path, interp_run):
    code, _, err = interp_run(
        "train",
        "automaton",
        "--automaton",
        "C3",
        "--length",
        "6",
        "--layers",
        "2",
        "--heads",
        "2",
        "--d-model",
        "16",
        "--steps",
        "60",
        "--eval-every",
        "20",
        "--align",
        "modular_counter",
        "--out",
        tmp_path / "a",
    )
    assert code == 0, err
    metrics = json.loads((tmp_path / "a" / "metrics.json").read_text())
    assert metrics["config"]["alignment"]["construction"] == "modular_counter"
    history = [h["train_loss"] for h in metrics["history"] if "train_loss" in h]
    assert history[-1] < history[0]  # task + IIT + strictness, together, go down
    from sandbox_lens.interp.causal.align import align
    from sandbox_lens.interp.train import open_model

    last = metrics["history"][-1]  # every evaluation logs the imposed sites' held-out IIA and the IIT loss
    assert set(last["imposed_iia"]) == {"state"} and last["iit_loss"] >= 0 and last["strict_loss"] >= 0
    assert last["strict_held_out"] >= 0  # and the strictness loss on the held-out pairs
    assert all("imposed_iia" in h for h in metrics["history"])
    twin = open_model(tmp_path / "a")
    assert twin.card.variables[0]["dims"] == [0, 3] and "imposed by --align" in twin.card.variables[0]["note"]
    # 60 steps do not reach the imposed IIA: the card says the site was imposed, not that it carries the state
    reached = last["imposed_iia"]["state"] is not None and last["imposed_iia"]["state"] >= 0.95
    assert twin.card.variables[0]["role"] == ("carries" if reached else "imposed")
    assert f"held-out IIA {last['imposed_iia']['state']:.3f}" in twin.card.variables[0]["note"]
    r = align(twin, pairs=32, ks=(1,), das_steps=5)
    named = r["variables"]["state"]["model"]["named_sites"]
    assert named[0]["site"] == "state: dims 0–2 @ blocks.0.hook_resid_post" and named[0]["outputs"] > 0
    assert 0 <= r["imposed"]["ablated_accuracy"] <= 1 and r["imposed"]["circuit"]["off_mlps"] == [1]


@pytest.mark.slow
def test_aligned_twins_carry_their_imposed_variables_and_nothing_else_matters(tmp_path, interp_run):
    """The acceptance numbers: IIA ≥ 0.95 at the imposed site on held-out pairs; resampling every off-circuit
    head and MLP costs at most 2 points of accuracy."""
    from sandbox_lens.interp.causal.align import align
    from sandbox_lens.interp.train import open_model

    code, _, err = interp_run(
        "train",
        "automaton",
        "--automaton",
        "C3",
        "--length",
        "8",
        "--layers",
        "2",
        "--heads",
        "2",
        "--d-model",
        "32",
        "--steps",
        "3000",
        "--target",
        "none",
        "--align",
        "modular_counter",
        "--out",
        tmp_path / "c3",
    )
    assert code == 0, err
    r = align(open_model(tmp_path / "c3"), pairs=256, ks=(2,), das_steps=20)
    assert r["variables"]["state"]["model"]["named_sites"][0]["iia"] >= 0.95
    assert r["imposed"]["drop"] <= 0.02, r["imposed"]


def test_every_variable_per_step_swaps_each_imposed_variable(monkeypatch):
    """``every_variable``: one forward per imposed variable, each hooked at its own site; with one variable it is
    the turn-taking loss exactly (the same pairs and positions)."""
    import torch

    from sandbox_lens.interp.train import align as align_module
    from sandbox_lens.interp.train import random_init

    task, shape = AutomatonTask(get_automaton("C3"), 6), ModelShape(n_layers=6, n_heads=2, d_model=32)
    model = random_init(task, shape, 0)
    scan = correspondence("prefix_scan", task, shape)
    assert len(scan["variables"]) == 3
    counter = correspondence("modular_counter", task, shape)
    forwards: list[list[str]] = []
    run = align_module.run_with_hooks

    def spy(model, tokens, fwd_hooks, **kwargs):
        forwards.append([name for name, _ in fwd_hooks])
        return run(model, tokens, fwd_hooks=fwd_hooks, **kwargs)

    monkeypatch.setattr(align_module, "run_with_hooks", spy)
    with torch.no_grad():
        one = align_module.aligned_losses(model, task, counter, 0, 5, 16)
        assert one == align_module.aligned_losses(model, task, counter, 0, 5, 16, every_variable=True)
        forwards.clear()
        iit, strict = align_module.aligned_losses(model, task, scan, 0, 5, 16, every_variable=True)
        every = list(forwards)
        forwards.clear()
        turns = align_module.aligned_losses(model, task, scan, 0, 5, 16)
    assert torch.isfinite(iit) and float(iit) != float(turns[0]) and float(strict) == float(turns[1])
    # the source run, one swap per variable at its own hook, the strictness run; in turns a single swap
    assert [f for f in every[1:-1]] == [[v["hook"]] for v in scan["variables"]]
    assert len(forwards) == 3 and forwards[1] == [scan["variables"][5 % 3]["hook"]]


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--align", "dyck"], "models the dyck task, not this automaton task"),
        (["--align", "magic"], "unknown construction"),
        (["--align", "modular_counter:uniform"], "only dyck has variants"),
        (["--align", "modular_counter", "--arch", "lstm"], "an LSTM has none"),
        (["--iit-weight", "2"], "belong to --align"),
        (["--align-target", "0.9"], "belong to --align"),
        (["--iit-variables", "all"], "belong to --align"),
        (["--strict-on", "outputs"], "belong to --align"),
        (["--strict-target", "0.01"], "belong to --align"),
        (["--strict-nodes", "subsets"], "belong to --align"),
        (["--align", "modular_counter", "--strict-nodes", "some"], "argument --strict-nodes: invalid choice"),
        (["--align", "modular_counter", "--strict-target", "-1"], "argument --strict-target: must lie in 0..1,000"),
        (["--align", "modular_counter", "--strict-target", "nan"], "--strict-target"),
        (["--align", "modular_counter", "--strict-on", "logits"], "argument --strict-on: invalid choice"),
        (["--align", "modular_counter", "--iit-variables", "some"], "argument --iit-variables: invalid choice"),
        (["--align", "modular_counter", "--iit-variables", "graph"], "has no edge between two of its imposed"),
        (["--align", "modular_counter", "--align-target", "0"], "align_target must be in (0, 1]"),
        (["--align", "modular_counter", "--strict-weight", "-1"], "argument --strict-weight: must lie in 0..1,000,000"),
        (["--align", "modular_counter", "--d-model", "2", "--heads", "1"], "the twin has d_model = 2"),
        (["--align", "modular_counter", "--seeds", "0-1", "--grid", "heads=1,2"], "a --grid over n_heads"),
    ],
)
def test_bad_alignments_are_one_line(tmp_path, interp_run, monkeypatch, argv, message):
    monkeypatch.chdir(tmp_path)
    code, _, err = interp_run(
        "train", "automaton", "--automaton", "C3", "--length", "6", "--steps", "2", *argv, "--out", "X"
    )
    assert code == 2 and len(err.strip().splitlines()) == 1 and message in err and "Traceback" not in err, err
    assert not (tmp_path / "X").exists()


def test_a_twin_too_shallow_for_the_construction_is_refused(tmp_path, interp_run, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = interp_run(
        "train", "ffl", "--length", "8", "--layers", "1", "--steps", "2", "--align", "ffl", "--out", "X"
    )
    assert code == 2 and "has 2 blocks: the twin needs at least as many" in err and not (tmp_path / "X").exists(), err


def test_circuit_methods_are_scored_against_the_imposed_circuit(tmp_path, interp_run):
    """`interp circuit --run` on an aligned twin scores the method against the imposed nodes; the board
    gives every method's numbers over pair seeds with intervals."""
    from sandbox_lens.interp.circuits.imposed import imposed_board
    from sandbox_lens.interp.train import open_model

    code, _, err = interp_run(
        "train",
        "automaton",
        "--automaton",
        "C3",
        "--length",
        "6",
        "--layers",
        "2",
        "--heads",
        "2",
        "--d-model",
        "16",
        "--steps",
        "40",
        "--align",
        "modular_counter",
        "--out",
        tmp_path / "a",
    )
    assert code == 0, err
    code, out, err = interp_run(
        "circuit", "--run", tmp_path / "a", "--method", "acdc", "--pairs", "16", "--json", "--out", tmp_path / "c"
    )
    assert code == 0, err
    imposed = json.loads(out)["imposed"]
    assert (
        imposed["imposed_nodes"] == ["a0.0", "embed", "logits", "m0", "pos"] and imposed["edges"] > imposed["positives"]
    )
    # and scored like a construction, at its ablation's level of the imposed truth (the position edges left out)
    saved = json.loads((tmp_path / "c" / "circuit.json").read_text())
    assert saved["ground_truth_level"] == "resample" and (tmp_path / "c" / "ground-truth" / "resample.json").is_file()
    assert not any(e.startswith("pos->") for e in saved["ground_truth_edges"])
    assert 0 < len(saved["ground_truth_edges"]) < imposed["positives"]
    assert imposed["auroc"] is None or 0 <= imposed["auroc"] <= 1
    board = imposed_board(open_model(tmp_path / "a"), ["acdc", "random", "attribution"], [0, 1], pairs=16)
    assert [r["method"] for r in board["rows"]] == ["acdc", "random", "attribution"]
    assert all(
        r["auroc"]["interval"] is None or r["auroc"]["interval"][0] <= r["auroc"]["mean"] <= r["auroc"]["interval"][1]
        for r in board["rows"]
    )


def test_imposed_iia_by_position_adds_up_to_the_whole():
    """``imposed_iia``'s per-position rows: one per position, their outputs summing to the total and their hits to
    the pooled IIA."""
    from sandbox_lens.interp.train import random_init
    from sandbox_lens.interp.train.align import imposed_iia

    task, shape = AutomatonTask(get_automaton("C3"), 6), ModelShape(n_layers=2, n_heads=2, d_model=16)
    r = imposed_iia(random_init(task, shape, 0), task, correspondence("modular_counter", task, shape), 0, pairs=16)
    rows = r["state"]["by_position"]
    assert len(rows) == 6 and sum(p["outputs"] for p in rows) == r["state"]["outputs"] > 0
    hits = sum(p["iia"] * p["outputs"] for p in rows if p["outputs"])
    assert abs(hits / r["state"]["outputs"] - r["state"]["iia"]) < 1e-12


def test_the_graph_imposes_the_algorithms_edges_by_path_interchange(monkeypatch):
    """``--iit-variables graph``: the correspondence names the scan's edges between imposed variables (Lemma 14:
    window l at p feeds window l + 1 at p and at p + 2^l); each edge adds a path interchange to the loss (two
    forwards: the parent patched and the child's coordinates taken, then the child set), and the loss has a
    gradient."""
    import torch

    from sandbox_lens.interp.train import align as align_module
    from sandbox_lens.interp.train import align_graph, random_init

    task, shape = AutomatonTask(get_automaton("C3"), 6), ModelShape(n_layers=6, n_heads=2, d_model=32)
    graph = correspondence("prefix_scan", task, shape, edges=True)
    assert graph["edges"] == [
        {"parent": "window1", "child": "window2", "offset": 0},
        {"parent": "window1", "child": "window2", "offset": 2},
        {"parent": "window2", "child": "state", "offset": 0},
        {"parent": "window2", "child": "state", "offset": 4},
    ]
    assert graph["joints"] == [
        {"child": "window2", "parents": [["window1", 0], ["window1", 2]]},
        {"child": "state", "parents": [["window2", 0], ["window2", 4]]},
    ]
    assert "edges" not in correspondence("prefix_scan", task, shape)
    model = random_init(task, shape, 0)
    forwards: list[list[str]] = []
    run = align_module.run_with_hooks

    def spy(model, tokens, fwd_hooks, **kwargs):
        forwards.append(sorted(name for name, _ in fwd_hooks))
        return run(model, tokens, fwd_hooks=fwd_hooks, **kwargs)

    monkeypatch.setattr(align_module, "run_with_hooks", spy)
    monkeypatch.setattr(align_graph, "run_with_hooks", spy)
    iit, _ = align_module.aligned_losses(model, task, graph, 0, 5, 16, every_variable=True)
    hooks = {v["variable"]: v["hook"] for v in graph["variables"]}
    # source run, one swap per variable, then per edge: parent patched + child read, child set; then one joint
    # interchange per determined variable (its parents' hooks); strictness last
    edge_forwards = forwards[1 + 3 : 1 + 3 + 2 * len(graph["edges"])]
    assert forwards[1 + 3 + 2 * len(graph["edges"]) : -1] == [[hooks["window1"]], [hooks["window2"]]]
    for e, (first, second) in zip(graph["edges"], zip(edge_forwards[::2], edge_forwards[1::2])):
        assert first == sorted({hooks[e["parent"]], hooks[e["child"]]}) and second == [hooks[e["child"]]]
    iit.backward()
    assert torch.isfinite(iit) and model.blocks[2].attn.W_V.grad.abs().sum() > 0


def test_the_held_out_edge_iia_is_the_identifications_path_interchange():
    """The edge and joint IIA an aligned run logs are the path and joint interchanges
    :mod:`sandbox_lens.interp.causal.paths` scores: the same pairs and the imposed coordinates as the sites give the
    same hits and outputs."""
    import numpy as np

    from sandbox_lens.interp.causal.paths import joint_counts, path_counts
    from sandbox_lens.interp.streams import Stream, rng
    from sandbox_lens.interp.tasks.highlevel import StateModel
    from sandbox_lens.interp.train import random_init
    from sandbox_lens.interp.train.align import edge_name, imposed_iia, joint_name

    task, shape = AutomatonTask(get_automaton("S3"), 6), ModelShape(n_layers=6, n_heads=2, d_model=32)
    graph = correspondence("prefix_scan", task, shape, edges=True)
    model = random_init(task, shape, 3)
    got = imposed_iia(model, task, graph, 0, pairs=24)
    high = StateModel.of_task(task.to_dict())
    base, source = high.pairs(24, 6, rng(0, Stream.ALIGN_HELD_OUT))
    eye = np.eye(shape.d_model)
    by = {v["variable"]: v for v in graph["variables"]}
    bases = {name: (v["hook"], eye[:, v["dims"][0] : v["dims"][1]]) for name, v in by.items()}
    for e in graph["edges"]:
        counts = path_counts(
            model,
            high,
            base,
            source,
            e["parent"],
            e["child"],
            [e["parent"]] * 6,
            [e["child"]] * 6,
            [e["offset"]],
            bases,
        )
        mine = got[edge_name(e)]
        assert mine["outputs"] == int(counts.outputs.sum()) > 0
        assert mine["iia"] == pytest.approx(int(counts.hits.sum()) / int(counts.outputs.sum()))
    for j in graph["joints"]:
        parents = [(u, o) for u, o in j["parents"]]
        counts = joint_counts(model, high, base, source, j["child"], parents, {u: [u] * 6 for u in by}, bases)
        mine = got[joint_name(j)]
        assert mine["outputs"] == int(counts.outputs.sum()) > 0
        assert mine["iia"] == pytest.approx(int(counts.hits.sum()) / int(counts.outputs.sum()))


def test_strictness_on_the_outputs_is_the_kl_from_the_unablated_run():
    """``--strict-on outputs``: the KL between the base run and the run with every off-circuit head and MLP
    resampled — exactly 0 when the off-circuit nodes write nothing, positive when they do, and its gradient reaches
    the off-circuit weights (what teaches them to move no logit)."""
    import torch

    from sandbox_lens.interp.train import random_init
    from sandbox_lens.interp.train.align import aligned_losses, readout_kl

    task, shape = AutomatonTask(get_automaton("C3"), 6), ModelShape(n_layers=2, n_heads=2, d_model=16)
    counter = correspondence("modular_counter", task, shape)
    model = random_init(task, shape, 0)
    _, strict = aligned_losses(model, task, counter, 0, 3, 16, strict_on="outputs")
    assert float(strict.detach()) > 0
    strict.backward()
    assert float(model.blocks[1].mlp.W_out.grad.abs().max()) > 0  # block 1's MLP is off the counter's circuit
    with torch.no_grad():
        for l, h in counter["circuit"]["off_heads"]:
            model.blocks[l].attn.W_O[h] = 0
        for l in counter["circuit"]["off_mlps"]:
            model.blocks[l].mlp.W_out.zero_()
            model.blocks[l].mlp.b_out.zero_()
        _, strict = aligned_losses(model, task, counter, 0, 3, 16, strict_on="outputs")
    assert abs(float(strict)) < 1e-6
    same = torch.randn(4, 6, 5)
    assert float(readout_kl(same, same, np.ones((4, 6), dtype=bool), type("H", (), {"readout": None}))) == 0


@pytest.mark.parametrize(
    "last,strict_target,stops",
    [
        ({"accuracy": 0.995, "imposed_iia_min": 0.99, "strict_held_out": 0.004}, None, True),
        ({"accuracy": 0.995, "imposed_iia_min": 0.99, "strict_held_out": 0.004}, 0.002, False),
        ({"accuracy": 0.995, "imposed_iia_min": 0.99, "strict_held_out": 0.002}, 0.002, True),
        ({"accuracy": 0.995, "imposed_iia_min": 0.90, "strict_held_out": 0.0}, 0.002, False),
        ({"accuracy": 0.90, "imposed_iia_min": 0.99, "strict_held_out": 0.0}, 0.002, False),
        ({"accuracy": 0.995, "imposed_iia_min": 0.99, "strict_held_out": None}, 0.002, True),  # nothing off circuit
    ],
)
def test_a_strictness_target_holds_the_stop_until_the_held_out_strictness_reaches_it(last, strict_target, stops):
    from sandbox_lens.interp.train import TrainConfig
    from sandbox_lens.interp.train.loop import _reached

    c3 = correspondence("modular_counter", AutomatonTask(get_automaton("C3"), 8), ModelShape(n_layers=2, n_heads=2))
    config = TrainConfig(target_accuracy=0.99, alignment=c3, align_target=0.95, strict_target=strict_target)
    assert _reached(last, config) is stops


def test_the_held_out_strictness_is_measured_on_fixed_pairs_and_none_with_nothing_off_the_circuit():
    from sandbox_lens.interp.train.align import held_out_strictness
    from sandbox_lens.interp.train.twin import build_twin

    task = AutomatonTask(get_automaton("C3"), 6)
    wide = ModelShape(n_layers=2, n_heads=2, d_model=16)
    model = build_twin(task, wide, seed=0)
    c3 = correspondence("modular_counter", task, wide)
    first = held_out_strictness(model, task, c3, seed=0, strict_on="outputs")
    assert first is not None and first >= 0 and held_out_strictness(model, task, c3, 0, "outputs") == first
    assert held_out_strictness(model, task, c3, seed=0, strict_on="answers") > 0  # cross-entropy on the answers
    whole = {**c3, "circuit": {**c3["circuit"], "off_heads": [], "off_mlps": []}}
    assert held_out_strictness(model, task, whole, seed=0, strict_on="outputs") is None


def test_strictness_over_subsets_resamples_each_off_circuit_node_in_its_own_rows():
    """With ``rows``, an off-circuit head or MLP takes the source run's value in its chosen rows only: every row
    chosen is the plain resample, none chosen the unablated run, and a mix follows each row's choice."""
    import torch

    from sandbox_lens.interp.model.run import run_with_hooks
    from sandbox_lens.interp.train.align import _subsets, off_circuit_hooks, resample_hooks
    from sandbox_lens.interp.train.twin import build_twin

    task = AutomatonTask(get_automaton("C3"), 6)
    shape = ModelShape(n_layers=2, n_heads=2, d_model=16)
    model = build_twin(task, shape, seed=0)
    circuit = correspondence("modular_counter", task, shape)["circuit"]
    g = np.random.default_rng(0)
    base = torch.from_numpy(g.integers(1, 3, size=(8, 7)))
    source = torch.from_numpy(g.integers(1, 3, size=(8, 7)))
    _, cache = model.run_with_cache(source, names_filter=off_circuit_hooks(circuit))
    saved = {h: cache[h] for h in off_circuit_hooks(circuit)}

    def run(rows):
        return run_with_hooks(model, base, fwd_hooks=resample_hooks(circuit, saved, rows), return_type="logits")

    names = ["a0.1", "a1.0", "a1.1", "m1"]
    everywhere, nowhere = run(None), run_with_hooks(model, base, fwd_hooks=[], return_type="logits")
    torch.testing.assert_close(run({n: np.ones(8, bool) for n in names}), everywhere)
    torch.testing.assert_close(run({n: np.zeros(8, bool) for n in names}), nowhere)
    half = np.arange(8) < 4
    mixed = run({n: half for n in names})
    torch.testing.assert_close(mixed[:4], everywhere[:4])
    torch.testing.assert_close(mixed[4:], nowhere[4:])
    drawn = _subsets(circuit, 256, np.random.default_rng(1))
    assert set(drawn) == set(names) and all(0.4 < m.mean() < 0.6 for m in drawn.values())
