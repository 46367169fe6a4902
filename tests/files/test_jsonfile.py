"""Hostile files, per format: every file the project reads back goes through one bounded, schema-checked loader
(sandbox_lens.interp.jsonfile); whatever the file holds, the answer is one line naming the file, exit 2, and
nothing written."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sandbox_lens.interp.errors import CheckpointError, FileFormatError
from sandbox_lens.interp.jsonfile import MAX_DEPTH, MAX_NUMBER_CHARS, inside, parse_json

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**15), 10**15) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
    max_leaves=20,
)

#: a hostile body per class of defect (the format's own required fields come from each case below)
HOSTILE = {
    "oversized number": '{"a": ' + "9" * 5000 + "}",
    "oversized float": '{"a": 1.' + "5" * 500 + "}",
    "deep nesting": "[" * 50_000 + "]" * 50_000,
    "wrong top-level type": "[1, 2, 3]",
    "not JSON": '{"a": ',
    "not UTF-8": b"\xff\xfe{\x00",
}


@given(JSON_VALUES)
def test_every_json_value_within_the_bounds_reads_back_as_itself(value):
    assert parse_json(json.dumps(value), "x.json") == value


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=200) | st.binary(max_size=200))
def test_any_text_is_read_or_refused_in_one_line(text):
    try:
        parse_json(text, "x.json")
    except FileFormatError as e:
        assert "\n" not in str(e) and str(e).startswith("x.json: ")


@pytest.mark.parametrize("depth", [MAX_DEPTH, MAX_DEPTH + 1])
def test_the_depth_bound_counts_brackets_but_not_brackets_in_strings(depth):
    text = "[" * depth + '"]]]][[[["' + "]" * depth
    if depth <= MAX_DEPTH:
        assert parse_json(text, "d.json") is not None
    else:
        with pytest.raises(FileFormatError, match="nested more than"):
            parse_json(text, "d.json")


def test_numbers_up_to_the_bound_are_read_and_longer_ones_refused():
    assert parse_json("1" * MAX_NUMBER_CHARS, "n.json") == int("1" * MAX_NUMBER_CHARS)
    with pytest.raises(FileFormatError, match=f"a number of {MAX_NUMBER_CHARS + 1} characters"):
        parse_json("1" * (MAX_NUMBER_CHARS + 1), "n.json")


def test_a_schema_error_names_the_field(tmp_path):
    schema = {"type": "object", "properties": {"runs": {"type": "array", "items": {"type": "integer"}}}}
    with pytest.raises(FileFormatError, match=re.escape("r.json: runs/2: 'x' is not of type 'integer'")):
        parse_json('{"runs": [1, 2, "x"]}', "r.json", schema)
    long = "y" * 10_000
    with pytest.raises(FileFormatError) as e:
        parse_json(json.dumps({"runs": [long]}), "r.json", schema)
    assert len(str(e.value)) < 200  # the value is quoted, not copied


@pytest.mark.parametrize("name", ["../x.npz", "/etc/passwd", "a/../../x", "", 5, None, "link/x.npz"])
def test_a_path_inside_a_file_cannot_lead_out_of_its_directory(tmp_path, name):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "link").symlink_to(tmp_path)
    with pytest.raises(FileFormatError):
        inside(tmp_path / "d", name, "metrics.json")
    assert inside(tmp_path / "d", "sub/p.npz", "metrics.json") == (tmp_path / "d" / "sub" / "p.npz").resolve()


# -- every format through the command that reads it -------------------------------------------------------------


def _model(tmp_path, interp_run):
    d = tmp_path / "model"
    code, _, err = interp_run("build", "prefix_scan", "--automaton", "parity", "--length", "4", "--out", d)
    assert code == 0, err
    return d


def _write(path, body):
    path.write_bytes(body if isinstance(body, bytes) else body.encode())


CASES = {
    # format: (where the hostile body goes, the command that reads it)
    "automaton": lambda t, run: (t / "a.json", ["verify", "prefix_scan", "--automaton-file", t / "a.json", "-T", "4"]),
    "cascade": lambda t, run: (t / "c.json", ["verify", "krohn_rhodes", "--cascade-file", t / "c.json", "-T", "4"]),
    "saved model": lambda t, run: (_model(t, run) / "model.json", ["verify", "--model", t / "model"]),
    "comparison metrics": lambda t, run: (t / "cmp" / "metrics.json", ["report", t / "cmp"]),
    "adopted config": lambda t, run: (
        t / "cfg.json",
        [
            "adopt",
            "automaton",
            "--automaton",
            "parity",
            "--state-dict",
            t / "w.pt",
            "--config",
            t / "cfg.json",
            "--out",
            t / "out",
        ],
    ),
}


@pytest.mark.parametrize("defect", sorted(HOSTILE))
@pytest.mark.parametrize("fmt", sorted(CASES))
def test_a_hostile_file_is_one_line_exit_2_and_nothing_written(tmp_path, interp_run, fmt, defect):
    target, argv = CASES[fmt](tmp_path, interp_run)
    target.parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / "w.pt").write_bytes(b"")
    _write(target, HOSTILE[defect])
    before = _files(tmp_path)
    code, _, err = interp_run(*argv)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert target.name in err, err
    assert _files(tmp_path) == before


def _files(root):
    """Every file under ``root`` and its bytes, but the empty-of-meaning lock a writer leaves (``.lock``: its pid)."""
    return {p.relative_to(root): p.read_bytes() for p in root.rglob("*") if p.is_file() and p.name != ".lock"}


def test_a_report_refuses_a_patterns_file_outside_its_directory(tmp_path, interp_run):
    import numpy as np

    np.savez(tmp_path / "secret.npz", a=np.zeros(2))
    (tmp_path / "cmp").mkdir()
    metrics = {"example": {"tokens": ["a"], "heads": {}, "patterns": "../secret.npz"}}
    (tmp_path / "cmp" / "metrics.json").write_text(json.dumps(metrics))
    code, _, err = interp_run("report", tmp_path / "cmp")
    assert code == 2 and "leads out of" in err and not (tmp_path / "cmp" / "report.html").exists(), err


def test_a_checkpoint_header_without_its_fields_is_one_line(tmp_path):
    import torch
    from safetensors.torch import save

    from sandbox_lens.interp.train.checkpoint import CKPT_WEIGHTS, FORMAT, HEADER_KEY, read_checkpoint

    for header, message in (
        ({"format": FORMAT, "task": {"kind": "automaton"}}, "'shape' is a required property"),
        (
            {"format": FORMAT, "task": {"kind": "automaton"}, "shape": {"d_model": 10**9}, "config": {"seed": 0}},
            "shape/d_model",
        ),
    ):
        header = dict({"step": 1, "history": [], "wall_seconds": 1.0}, **header)
        blob = save({"model.x": torch.zeros(1)}, metadata={HEADER_KEY: json.dumps(header)})
        (tmp_path / CKPT_WEIGHTS).write_bytes(blob)
        with pytest.raises(CheckpointError, match=message):
            read_checkpoint(tmp_path)


def test_publishing_a_result_without_a_verdict_writes_nothing(tmp_path):
    from sandbox_lens.interp.experiments.results import publish

    good = {"experiment": "a", "claims": [{"claim": "c", "thesis": "t", "verdict": "reproduced"}], "provenance": {}}
    bad = dict(good, experiment="b", claims=[{"claim": "c", "thesis": "t"}])
    for name, r in (("a", good), ("b", bad)):
        (tmp_path / "out" / name).mkdir(parents=True)
        (tmp_path / "out" / name / "results.json").write_text(json.dumps(r))
    docs = tmp_path / "page.md"
    docs.write_text("text\n")
    with pytest.raises(CheckpointError, match="claims/0: 'verdict' is a required property"):
        publish(tmp_path / "out", tmp_path / "to", ["a", "b"], docs)
    assert not (tmp_path / "to").exists() and docs.read_text() == "text\n"
    bad["claims"] = 5
    (tmp_path / "out" / "b" / "results.json").write_text(json.dumps(bad))
    with pytest.raises(CheckpointError, match="claims: 5 is not of type 'array'"):
        publish(tmp_path / "out", tmp_path / "to", ["a", "b"])
