"""Circuits other tools read: the three export formats, `interp circuit score` reproducing the run that
wrote a file, and bad circuit files refused in one line with nothing written."""

from __future__ import annotations

import json

import jsonschema
import numpy as np
import pytest
from circuit_families import NEGATIVE_FAMILIES

from sandbox_lens.interp.circuits.exchange import SCHEMA, CircuitFileError, read_circuit, to_auto_circuit, to_eap_ig
from sandbox_lens.interp.circuits.truth import ground_truth
from sandbox_lens.interp.model.hooked import to_hooked

BUILD = ["modular_counter", "--automaton", "C3", "-T", "8", "-O", "negatives=distractor,cancel,constant"]
SAME = ("auroc", "average_precision", "edge_precision", "edge_recall", "cpr", "cmd", "faithfulness", "circuit_edges")


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """One path-patching run on the counter with negatives, zero ablation, 24 pairs, seed 3."""
    from sandbox_lens.interp.cli import main

    out = tmp_path_factory.mktemp("run")
    main(
        [
            "circuit",
            *BUILD,
            "--method",
            "path",
            "--ablation",
            "zero",
            "--pairs",
            "24",
            "--seed",
            "3",
            "--out",
            str(out / "a"),
            "--json",
        ]
    )
    return out / "a"


def test_a_run_writes_every_format_and_the_ground_truth(written):
    own = json.loads((written / "circuit.edges.json").read_text())
    jsonschema.validate(own, SCHEMA)
    assert own["settings"] == {
        "method": "path",
        "ablation": "zero",
        "pairs": 24,
        "corruption": "symbol",
        "seed": 3,
        "pair_length": None,
        "threshold": 0.01,
    }
    eap = json.loads((written / "circuit.eap-ig.json").read_text())
    L, H = eap["cfg"]["n_layers"], eap["cfg"]["n_heads"]
    upstream, expected = 1, 0  # the complete graph: every earlier node to each head's q, k, v, each MLP, the logits
    for _ in range(L):
        expected, upstream = expected + 3 * H * upstream, upstream + H
        expected, upstream = expected + upstream, upstream + 1
    assert len(eap["edges"]) == expected + upstream
    assert "input->a0.h0<q>" in eap["edges"] and "m0->logits" in eap["edges"]
    ac = json.loads((written / "circuit.auto-circuit.json").read_text())
    assert "Resid Start->A0.0.V" in ac["edges"] and "MLP 0->Resid End" in ac["edges"]
    levels = {p.name for p in (written / "ground-truth").iterdir()}
    assert {"zero.json", "zero.eap-ig.json", "resample.json", "structural.json"} <= levels
    jsonschema.validate(json.loads((written / "ground-truth" / "zero.json").read_text()), SCHEMA)


def test_scoring_the_exported_file_gives_the_numbers_of_the_run(written, tmp_path, interp_run):
    code, out, err = interp_run(
        "circuit",
        "score",
        *BUILD,
        "--circuit-file",
        str(written / "circuit.edges.json"),
        "--out",
        str(tmp_path / "s"),
        "--json",
    )
    assert code == 0, err
    scored = json.loads(out)
    run = json.loads((written / "circuit.json").read_text())
    assert scored["ground_truth_level"] == run["ground_truth_level"] == "zero"
    for key in SAME:
        mine = (
            run["curve"][key]
            if key in ("cpr", "cmd")
            else (len(run["circuit"]["edges"]) if key == "circuit_edges" else run[key])
        )
        assert scored[key] == pytest.approx(mine, abs=1e-12), key


def test_the_other_formats_read_back_onto_the_graph(written):
    spec = NEGATIVE_FAMILIES["modular_counter/C3+negatives"]()
    graph = ground_truth(spec).graph
    scores, chosen, _, signed = read_circuit(written / "circuit.edges.json", graph)
    positional = np.array([e.sender == "pos" for e in graph.edges])
    # EAP-IG's input is the token embedding: embed->X comes back exactly, pos->X unscored and out of the circuit
    s2, c2, saved, signed2 = read_circuit(written / "circuit.eap-ig.json", graph)
    assert np.array_equal(c2[~positional], chosen[~positional]) and not c2[positional].any()
    assert np.isnan(s2[positional]).all() and saved["score_sign"] == "loss"
    assert saved["unscored_positional_edges"] == [e.name for e in graph.edges if e.sender == "pos"]
    both = ~positional & ~np.isnan(signed)
    np.testing.assert_allclose(s2[both], signed[both], rtol=1e-12)
    np.testing.assert_array_equal(signed2, s2)
    # auto-circuit's Resid Start is both embeddings: it stands for both, its score the larger
    s3, c3, _, _ = read_circuit(written / "circuit.auto-circuit.json", graph)
    merged = np.array([e.sender in ("embed", "pos") for e in graph.edges])
    assert np.array_equal(c3[~merged], chosen[~merged]) and np.all(c3[merged] >= chosen[merged])
    both = ~merged & ~np.isnan(scores)
    np.testing.assert_allclose(s3[both], scores[both], rtol=1e-12)
    model = to_hooked(spec)
    assert to_eap_ig(graph, scores, chosen, model.cfg)["cfg"]["n_heads"] == model.cfg.n_heads
    assert to_auto_circuit(graph, scores, chosen)["in_graph"]


@pytest.mark.parametrize(
    "content,message",
    [
        ('{"edges": ', "malformed JSON"),
        ('{"edges": {"a": ' + "9" * 5000 + "}}", "a number of 5000 characters"),
        ("[" * 10000 + "]" * 10000, "too deep to be a circuit file"),
        (
            '{"format": "sandbox-lens/circuit", "version": 1, "edges": {}, "settings": {"pairs": "many"}}',
            "settings/pairs: 'many' is not of type 'integer'",
        ),
        (
            '{"cfg": {"n_layers": 3000, "n_heads": 3000}, "nodes": {}, "edges": {}}',
            "a complete graph of",
        ),
        ('{"cfg": {"n_layers": "2"}, "nodes": {}, "edges": {}}', "cfg: 'n_heads' is a required property"),
        ("[1, 2]", "is not a circuit file"),
        (
            '{"format": "sandbox-lens/circuit", "version": 1, "edges": {"a9.9->logits": {"score": 1, "in_graph": true}}}',
            "does not have, e.g. a9.9->logits",
        ),
        (
            '{"format": "sandbox-lens/circuit", "version": 1, "edges": {"m0->logits": {"score": "big", "in_graph": true}}}',
            "edges/m0->logits/score: 'big' is not of type",
        ),
        (
            '{"cfg": {"n_layers": 1, "n_heads": 5}, "nodes": {}, "edges": {"input->a7.h0<q>": {"score": 1, "in_graph": true}}}',
            "EAP-IG graph of this shape does not have",
        ),
        ('{"edges": {"Resid Start->A3.9.Q": 0.5}}', "does not have, e.g. Resid Start->A3.9.Q"),
    ],
)
def test_bad_circuit_files_are_one_line_and_write_nothing(tmp_path, interp_run, content, message):
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    code, _, err = interp_run("circuit", "score", *BUILD, "--circuit-file", str(bad), "--out", str(tmp_path / "o"))
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert message.replace('\\"', '"') in err, err
    assert not (tmp_path / "o").exists()


def test_oversized_and_missing_files_are_refused(tmp_path, monkeypatch):
    import sandbox_lens.interp.jsonfile as jsonfile

    graph = ground_truth(NEGATIVE_FAMILIES["ffl+negatives"]()).graph
    big = tmp_path / "big.json"
    big.write_text('{"edges": {}}' + " " * 100)
    monkeypatch.setattr(jsonfile, "MAX_BYTES", 64)  # the one bound on every file read back
    with pytest.raises(CircuitFileError, match="too large to be a circuit file"):
        read_circuit(big, graph)
    with pytest.raises(CircuitFileError, match="no circuit file"):
        read_circuit(tmp_path / "none.json", graph)


@pytest.mark.parametrize(
    "argv,message",
    [
        (["circuit", "score", *BUILD, "--out", "X"], "needs --circuit-file"),
        (["circuit", *BUILD, "--circuit-file", "f.json", "--out", "X"], "goes with interp circuit score"),
        (
            ["circuit", *BUILD, "--method", "acdc", "--acdc-mode", "reference", "--metric", "logit_diff", "--out", "X"],
            "reference mode measures the KL",
        ),
        (["circuit", *BUILD, "--method", "random", "--metric", "kl", "--out", "X"], "measures no metric"),
        (["circuit", *BUILD, "--level", "everything", "--out", "X"], "invalid choice"),
        (["circuit", *BUILD, "--method", "eap-ig", "--steps", "0", "--out", "X"], "1 to 1024 steps"),
        (
            ["circuit", *BUILD, "--method", "auto-circuit:acdc", "--ablation", "zero", "--out", "X"],
            "resample ablation here",
        ),
        (["circuit", *BUILD, "--method", "auto-circuit:eap", "--metric", "kl", "--out", "X"], "leave out --metric"),
        (["circuit", *BUILD, "--method", "auto-circuit:magic", "--out", "X"], "invalid choice"),
    ],
)
def test_bad_settings_are_one_line(tmp_path, interp_run, monkeypatch, argv, message):
    monkeypatch.chdir(tmp_path)
    code, _, err = interp_run(*argv)
    assert code == 2 and len(err.strip().splitlines()) == 1 and message in err, err
    assert not (tmp_path / "X").exists()
