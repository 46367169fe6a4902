"""Circuits with a proof behind them: the ground truth ties to behaviour, the methods find it, the CLI
works on constructions, automaton and cascade files and twins, and bad input gets one line."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import torch
from circuit_families import CASCADE, FAMILIES
from circuit_families import random_automaton as _random_automaton
from hypothesis import given, settings
from hypothesis import strategies as st

from sandbox_lens.constructions.registry import build
from sandbox_lens.interp.circuits.acdc import acdc
from sandbox_lens.interp.circuits.analyse import analyse
from sandbox_lens.interp.circuits.effects import attribution, faithfulness, node_patching, path_patching
from sandbox_lens.interp.circuits.pairs import CorruptionError, make_pairs
from sandbox_lens.interp.circuits.patching import Patcher
from sandbox_lens.interp.circuits.score import auroc, precision_recall
from sandbox_lens.interp.circuits.truth import ground_truth
from sandbox_lens.interp.model.hooked import to_hooked
from sandbox_lens.interp.tasks.catalogue import get_automaton
from sandbox_lens.interp.tasks.dyck import Dyck


def _split(truth):
    labels = truth.edge_labels("relevant")
    edges = truth.graph.edges
    return [e for e, y in zip(edges, labels) if y], [e for e, y in zip(edges, labels) if not y]


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_ground_truth_is_what_the_model_uses(family):
    """Patching every edge outside the task-relevant ground truth changes no output; patching every edge in
    it turns each output into the corrupted word's (accuracy 0 where the two words' answers differ)."""
    spec = FAMILIES[family]()
    truth = ground_truth(spec)
    model = to_hooked(spec)
    relevant, other = _split(truth)
    assert relevant and other
    assert set(relevant) <= set(truth.structural)
    assert not any(e.sender == "pos" for e in relevant), "a position code carries no word information"
    pairs = make_pairs(model, 48, seed=1)
    patcher = Patcher(model, truth.graph)
    source = patcher.source(pairs)
    with torch.inference_mode():
        clean = model(torch.from_numpy(pairs.clean))
        corrupt = model(torch.from_numpy(pairs.corrupt))
        kept = patcher.run(pairs.clean, other, source)[0]
        swapped = patcher.run(pairs.clean, relevant, source)[0]
    torch.testing.assert_close(kept, clean, rtol=0, atol=1e-6 * float(clean.abs().max()))
    torch.testing.assert_close(swapped, corrupt, rtol=0, atol=1e-6 * float(corrupt.abs().max()))
    assert pairs.accuracy(swapped) == 0.0 and pairs.accuracy(kept) == 1.0
    assert not model.cfg.use_attn_result and not model.cfg.use_split_qkv_input  # hooks restored


@settings(max_examples=6)
@given(n_states=st.integers(2, 5), n_symbols=st.integers(2, 3), seed=st.integers(0, 10_000))
def test_ground_truth_of_random_automata_ties_to_behaviour(n_states, n_symbols, seed):
    a = _random_automaton(n_states, n_symbols, seed)
    spec = build("prefix_scan", a, 4)
    truth = ground_truth(spec)
    model = to_hooked(spec)
    try:
        pairs = make_pairs(model, 24, seed=seed)
    except CorruptionError:  # e.g. an automaton whose state never depends on the word
        return
    patcher = Patcher(model, truth.graph)
    relevant, other = _split(truth)
    source = patcher.source(pairs)
    with torch.inference_mode():
        assert pairs.accuracy(patcher.run(pairs.clean, other, source)[0]) == 1.0
        assert pairs.accuracy(patcher.run(pairs.clean, relevant, source)[0]) == 0.0


def test_modular_counter_methods_recover_the_proof():
    """Lemma 15's counter: one head reads the symbol values, the MLP reads the head's sum, the logits
    the MLP's state. Path patching ranks those three edges first and ACDC keeps exactly them;
    attribution patching sees only the last: the MLP's ReLU staircase is flat where every clean input
    sits, so the gradient through it is zero although the real intervention flips the answer."""
    spec = build("modular_counter", get_automaton("C3"), 8)
    truth = ground_truth(spec)
    assert sorted(e.name for e in truth.relevant) == ["a0.0->m0", "embed->a0.0.v", "m0->logits"]
    model = to_hooked(spec)
    pairs = make_pairs(model, 48, seed=0)
    patcher = Patcher(model, truth.graph)
    labels = truth.edge_labels()
    pp = path_patching(patcher, pairs)
    ea, nodes = attribution(patcher, pairs)
    assert auroc(np.abs(pp), labels) == 1.0
    index = {e.name: i for i, e in enumerate(truth.graph.edges)}
    assert ea[index["m0->logits"]] > 0.5
    for upstream in ("embed->a0.0.v", "a0.0->m0"):
        assert ea[index[upstream]] == 0.0 and pp[index[upstream]] > 0.5
    result = acdc(patcher, pairs, 0.01)
    assert sorted(e.name for e in result.kept) == sorted(e.name for e in truth.relevant)
    f = faithfulness(patcher, pairs, result.kept)
    assert f["accuracy"] == 1.0 and abs(f["kl"] - 1.0) < 1e-6
    zero = node_patching(patcher, pairs, "zero")["nodes"]
    assert zero["a0.0"] > 0.3 and zero["m0"] > 0.3
    mean = node_patching(patcher, pairs, "mean")["nodes"]
    assert mean["pos"] == 0.0 and mean["a0.0"] > 0.3  # the position code is the same in every word


def test_acdc_is_faithful_on_the_prefix_scan_and_keeps_no_spurious_edge():
    spec = build("prefix_scan", get_automaton("S5"), 8)
    truth = ground_truth(spec)
    r = analyse(to_hooked(spec), "acdc", truth, pairs=32)
    assert r["faithfulness_metrics"]["kl"] >= 1.0 - r["threshold"] - 1e-6 and r["faithfulness"] == 1.0
    assert r["edge_precision"] == 1.0 and r["spurious"] == {}
    assert r["auroc"] > 0.9


def test_attribution_is_faster_than_path_patching_and_agrees_on_nodes():
    spec = build("prefix_scan", get_automaton("parity"), 32)
    r = analyse(to_hooked(spec), "attribution", ground_truth(spec), pairs=32, agreement=True)
    assert r["agreement"]["speedup_vs_path_patching"] > 3  # ≥ 10× at T = 256: `make bench`
    assert r["agreement"]["nodes_spearman_vs_activation_patching"] > 0.5


def test_ffl_bit_flip_cannot_see_the_write_detector():
    """Flipping a written bit leaves the writes where they were: the edges that find the latest write
    carry the same value in both strings, so no resampling method can see them. The ground truth says so
    (they leave the resample level as invisible) instead of counting them as ACDC's misses; resampling
    the instructions puts them back, and ACDC finds them."""
    spec = build("ffl", None, 16)
    truth = ground_truth(spec)
    model = to_hooked(spec)
    flip = analyse(model, "acdc", truth, pairs=48)
    detector = {"embed->a0.0.k", "embed->a0.0.v", "a0.0->m0", "m0->a1.0.k"}
    assert detector <= {e.name for e in truth.relevant}
    absent = flip["levels"]["edges"]
    assert all(absent[e]["absent"]["resample"] == "invisible" for e in detector)
    assert flip["missed"] == {} and flip["faithfulness"] == 1.0 and flip["edge_recall"] == 1.0
    fresh = analyse(model, "acdc", truth, pairs=48, corruption="resample")
    assert detector <= set(fresh["ground_truth_edges"])
    assert fresh["missed"] == {} and fresh["edge_precision"] == 1.0


def test_corruptions_stay_in_the_language():
    lang = Dyck(3, 4)
    model = to_hooked(build("dyck", lang, 14, variant="stack"))
    pairs = make_pairs(model, 40, seed=3)
    for w in model.card.io.decode(pairs.corrupt):
        lang.check(w)
        assert True
    assert (
        np.cumsum(np.where(model.card.io.decode(pairs.clean) % 2 == 0, 1, -1), 1)
        == np.cumsum(np.where(model.card.io.decode(pairs.corrupt) % 2 == 0, 1, -1), 1)
    ).all()
    from sandbox_lens.interp.tasks.ffl import R, read_targets

    model = to_hooked(build("ffl", None, 20))
    pairs = make_pairs(model, 40, seed=3)
    written, reads = read_targets(pairs.corrupt)
    data_after_read = np.roll(reads, 1, axis=1) & (np.arange(20) > 0)
    assert (pairs.corrupt[data_after_read] == written[data_after_read]).all()
    assert ((pairs.clean != pairs.corrupt).sum(1) >= 1).all() or True
    assert ((pairs.clean == R) == (pairs.corrupt == R)).all()


def test_corruptions_a_task_cannot_produce_are_refused():
    with pytest.raises(CorruptionError, match="cannot produce"):
        make_pairs(to_hooked(build("modular_counter", get_automaton("C3"), 8)), 8, corruption="bracket-type")
    with pytest.raises(CorruptionError, match="one bracket type"):
        make_pairs(to_hooked(build("dyck", Dyck(1, 3), 12, variant="stack")), 8)


def test_auroc_matches_the_mann_whitney_definition():
    assert auroc([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1]) == 0.75
    assert auroc([1, 1, 1], [0, 1, 1]) == 0.5
    assert auroc([1, 2], [1, 1]) is None
    assert precision_recall([1, 1, 0, 0], [1, 0, 1, 0]) == (0.5, 0.5)


@settings(max_examples=30)
@given(st.lists(st.tuples(st.floats(-5, 5), st.booleans()), min_size=2, max_size=40))
def test_auroc_of_reversed_scores_is_one_minus(items):
    s = [x for x, _ in items]
    y = [b for _, b in items]
    a, b = auroc(s, y), auroc([-x for x in s], y)
    if a is None:
        assert b is None
    else:
        assert abs(a + b - 1.0) < 1e-12 and 0.0 <= a <= 1.0


def test_cli_on_a_user_automaton_and_a_cascade_file(tmp_path, interp_run):
    import matplotlib

    backend_before = matplotlib.get_backend()
    path = tmp_path / "random.json"
    path.write_text(json.dumps(_random_automaton().to_dict()))
    code, _, err = interp_run(
        "circuit",
        "prefix_scan",
        "--automaton-file",
        str(path),
        "-T",
        "8",
        "--method",
        "path",
        "--pairs",
        "16",
        "--out",
        str(tmp_path / "a"),
    )
    assert code == 0, err
    data = json.loads((tmp_path / "a" / "circuit.json").read_text())
    assert data["ground_truth"]["relevant"] and 0.5 < data["auroc"] <= 1.0
    assert set(data["edges"]) == set(data["graph"]["edges"]) and "faithfulness" in data
    assert (tmp_path / "a" / "circuit.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert matplotlib.get_backend() == backend_before  # a notebook keeps its inline plots
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "sandbox_lens.interp",
            "--threads",
            "1",
            "circuit",
            "krohn_rhodes",
            "--cascade-file",
            str(CASCADE),
            "-T",
            "8",
            "--pairs",
            "16",
            "--json",
            "--out",
            str(tmp_path / "b"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    assert summary["method"] == "acdc" and summary["edge_precision"] == 1.0


def test_cli_on_a_saved_construction_and_a_twin(tmp_path, interp_run):
    assert interp_run("build", "memory", "--automaton", "flipflop", "-T", "8", "--out", str(tmp_path / "m"))[0] == 0
    code, _, err = interp_run(
        "circuit",
        "--model",
        str(tmp_path / "m"),
        "--method",
        "patching",
        "--per-position",
        "--pairs",
        "16",
        "--out",
        str(tmp_path / "mc"),
    )
    assert code == 0, err
    data = json.loads((tmp_path / "mc" / "circuit.json").read_text())
    assert data["level"] == "node" and data["node_auroc"] == 1.0 and len(data["per_position"]["a0.0"]) == 9
    code, _, err = interp_run(
        "train", "automaton", "--automaton", "parity", "-T", "8", "--steps", "30", "--out", str(tmp_path / "t")
    )
    assert code == 0, err
    code, _, err = interp_run(
        "circuit", "--run", str(tmp_path / "t"), "--method", "acdc", "--pairs", "16", "--out", str(tmp_path / "tc")
    )
    assert code == 0, err
    data = json.loads((tmp_path / "tc" / "circuit.json").read_text())
    assert "ground_truth" not in data and "auroc" not in data and data["circuit"]["edges"]
    code, _, err = interp_run("circuit", "--run", str(tmp_path / "t"), "--score", "--out", str(tmp_path / "x"))
    assert code == 2 and "twin has none" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize(
    "argv, message",
    [
        (["circuit", "modular_counter", "--automaton", "C3", "-T", "8", "--method", "magic"], "invalid choice"),
        (["circuit", "modular_counter", "--automaton", "C3", "-T", "8", "--corrupt", "bracket-type"], "cannot produce"),
        (["circuit", "dyck", "--dyck", "1,3", "-T", "8"], "one bracket type"),
        (
            [
                "circuit",
                "modular_counter",
                "--automaton",
                "C3",
                "-T",
                "8",
                "--method",
                "path",
                "--acdc-mode",
                "reference",
            ],
            "goes with --method acdc",
        ),
        (
            ["circuit", "modular_counter", "--automaton", "C3", "-T", "8", "--method", "attribution", "--metric", "kl"],
            "gradient is zero",
        ),
        (["circuit", "modular_counter", "--automaton", "C3", "-T", "8", "--threshold", "0"], "must be positive"),
        (["circuit", "modular_counter", "--automaton", "C3", "-T", "8", "--why-missed", "-1"], "--why-missed takes"),
        (["circuit", "modular_counter", "--automaton", "C3", "-T", "8", "--normaliser", "m0"], "invalid choice"),
        (["circuit", "modular_counter", "--automaton", "C3", "-T", "8", "--why-missed", "some"], "--why-missed takes"),
        (
            ["circuit", "modular_counter", "--automaton", "C3", "-T", "8", "--pairs", "0"],
            "argument --pairs: must lie in 1..100,000",
        ),
        (["circuit", "modular_counter", "--automaton", "C3"], "needs CONSTRUCTION and --length"),
        (["circuit", "modular_counter", "--automaton", "C3", "-T", "8", "--pair-length", "99"], "do not fit"),
        (["circuit", "--model", "/no/such/dir"], "no saved model"),
    ],
)
def test_cli_bad_input_is_one_line(tmp_path, interp_run, argv, message):
    code, _, err = interp_run(*argv, "--out", str(tmp_path / "o"))
    assert code == 2, err
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "o").exists()
