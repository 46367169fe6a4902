import json
import subprocess
import sys
from pathlib import Path

import pytest

from sandbox_lens.interp.cli import main
from sandbox_lens.interp.model.saved import load_model

# One --json schema for every task (issue: automata, Dyck and FFL print the same keys).
VERIFY_KEYS = {
    "construction",
    "kind",
    "task",
    "length",
    "dtype",
    "accuracy",
    "exact",
    "checked",
    "checked_unit",
    "sequences",
    "exhaustive_upto",
    "samples",
    "seed",
    "n_layers",
    "attention_layers",
    "d_model",
    "n_heads",
    "d_mlp",
    "mismatches",
    "details",
    "backend",
}


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_list_names_constructions_and_automata(capsys):
    code, out, _ = run(capsys, "list", "--json")
    data = json.loads(out)
    assert code == 0
    assert {"prefix_scan", "modular_counter", "memory"} <= set(data["constructions"])
    assert any("S5" in e["examples"] for e in data["automata"])
    code, out, _ = run(capsys, "list")
    assert code == 0 and "prefix_scan" in out and "grid<n>" in out


def test_info_reports_solvability(capsys):
    code, out, _ = run(capsys, "info", "--automaton", "A5", "--json")
    data = json.loads(out)
    assert code == 0 and data["is_group"] and data["group_order"] == 60 and not data["solvable"]


def test_info_prints_the_holonomy_skeleton(capsys):
    code, out, _ = run(capsys, "info", "--automaton", "A5+resets")
    assert code == 0 and "holonomy group A5 (order 60) (NOT solvable)" in out
    code, out, _ = run(capsys, "info", "--automaton", "grid4", "--json")
    h = json.loads(out)["holonomy"]
    assert h["levels"] == 3 and [c["order"] for c in h["components"]] == [1, 1, 1] and h["solvable"]
    assert [c["name"] for c in h["components"]] == ["trivial"] * 3


def test_info_prints_the_depth_and_size_before_building(capsys):
    """The krohn_rhodes path's depth does not grow with T; the prefix scan's does; both match what is built."""
    from sandbox_lens.constructions.krohn_rhodes import build_krohn_rhodes
    from sandbox_lens.interp.tasks.catalogue import get_automaton

    code, out, _ = run(capsys, "info", "--automaton", "dyck1-depth2", "--json")
    sizes = json.loads(out)["sizes"]
    kr, scan = sizes["krohn_rhodes"], sizes["prefix_scan"]
    assert code == 0 and kr["64"]["blocks"] == kr["1024"]["blocks"] == len(
        build_krohn_rhodes(get_automaton("dyck1-depth2"), 1024).blocks
    )
    assert (scan["64"]["attention"], scan["1024"]["attention"]) == (6, 10)
    assert kr["1024"]["parameters"] > kr["64"]["parameters"]  # the position table grows
    code, out, _ = run(capsys, "info", "--automaton", "A5+resets")
    assert code == 0 and "krohn_rhodes at" not in out and "prefix_scan at T=1024: 20 block(s)" in out


@pytest.mark.parametrize(
    "construction, automaton, length",
    [
        ("prefix_scan", "S5", 16),
        ("modular_counter", "C3", 32),
        ("memory", "flipflop", 32),
    ],
)
def test_verify_json_contract(capsys, construction, automaton, length):
    code, out, _ = run(
        capsys, "verify", construction, "--automaton", automaton, "--length", str(length), "--samples", "50", "--json"
    )
    data = json.loads(out)
    assert code == 0
    assert set(data) == VERIFY_KEYS
    assert data["accuracy"] == 1.0 and data["construction"] == construction and data["length"] == length
    n_symbols = {"S5": 2, "C3": 3, "flipflop": 3}[automaton]
    assert data["sequences"] == 50 + n_symbols ** data["exhaustive_upto"] and data["task"] == automaton
    assert data["checked"] == 50 * length + n_symbols ** data["exhaustive_upto"] * data["exhaustive_upto"]


@pytest.mark.parametrize(
    "argv, kind, unit",
    [
        (["dyck", "--dyck", "2,4", "-T", "40"], "dyck", "closing brackets"),
        (["ffl", "-T", "40"], "ffl", "reads"),
        (["prefix_scan", "--automaton", "parity", "-T", "40"], "automaton", "positions"),
    ],
)
def test_verify_json_is_one_schema_for_every_task(capsys, argv, kind, unit):
    code, out, _ = run(capsys, "verify", *argv, "--samples", "10", "--exhaustive-upto", "4", "--json")
    data = json.loads(out)
    assert code == 0 and set(data) == VERIFY_KEYS and data["kind"] == kind and data["checked_unit"] == unit
    assert data["exact"] and data["checked"] > 0 and data["exhaustive_upto"] == 4 and data["samples"] == 10
    assert ("bands" in data["details"]) == (kind != "automaton")


def test_verify_automaton_file_and_human_output(capsys, tmp_path):
    f = tmp_path / "toy.json"
    f.write_text(
        json.dumps(
            {
                "name": "toy",
                "states": ["a", "b", "c"],
                "alphabet": ["x", "y"],
                "delta": {"x": ["b", "c", "a"], "y": ["a", "a", "c"]},
                "initial": "a",
            }
        )
    )
    code, out, _ = run(
        capsys,
        "verify",
        "prefix_scan",
        "--automaton-file",
        str(f),
        "--length",
        "20",
        "--samples",
        "30",
        "--exhaustive-upto",
        "6",
    )
    assert code == 0 and out.startswith("EXACT") and "exhaustive up to length 6" in out


def test_build_saves_a_loadable_model_that_verify_accepts(capsys, tmp_path):
    code, out, _ = run(
        capsys, "build", "memory", "--automaton", "memory3", "--length", "16", "--out", str(tmp_path / "m")
    )
    assert code == 0 and "built memory" in out
    model = load_model(tmp_path / "m")
    assert model.card.construction == "memory" and model.cfg.n_ctx == 17
    code, out, _ = run(capsys, "verify", "--model", str(tmp_path / "m"), "--samples", "20", "--json")
    data = json.loads(out)
    assert code == 0 and data["accuracy"] == 1.0 and data["length"] == 16 and data["task"] == "memory3"
    code, _, err = run(capsys, "verify", "prefix_scan", "--model", str(tmp_path / "m"))
    assert code == 2 and "not 'prefix_scan'" in err
    code, _, err = run(capsys, "verify", "--model", str(tmp_path / "m"), "--length", "17")
    assert code == 2 and "built for lengths 1..16" in err


@pytest.mark.parametrize(
    "argv, message",
    [
        (["verify", "prefix_scan", "--automaton", "nope", "--length", "8"], "unknown automaton"),
        (["verify", "spiral", "--automaton", "C2", "--length", "8"], "unknown construction"),
        (["verify", "modular_counter", "--automaton", "S3", "--length", "8"], "adds a constant"),
        (["verify", "prefix_scan", "--automaton", "C2", "--length", "100000"], "verified for lengths"),
        (["verify", "prefix_scan", "--automaton", "C2", "--length", "8", "-O", "code"], "KEY=VALUE"),
        (["verify", "prefix_scan", "--automaton", "C2", "--length", "8", "-O", "code=spiral"], "code must be"),
        (
            ["verify", "prefix_scan", "--automaton", "C2", "--length", "4000", "-O", "code=circle"],
            "not exact in float32",
        ),
        (["verify", "prefix_scan", "--automaton", "C2", "--length", "8", "--exhaustive-upto", "9"], "exhaustive_upto"),
        (["verify", "prefix_scan", "--automaton-file", "/no/such.json", "--length", "8"], "not found"),
        (["verify", "prefix_scan", "--length", "8"], "required"),
        (["verify", "--automaton", "C2", "--length", "8"], "needs CONSTRUCTION"),
        (["verify", "prefix_scan", "--automaton", "C2"], "needs CONSTRUCTION and --length"),
        (["verify", "--model", "/no/such/dir"], "no saved model"),
        (["verify", "prefix_scan", "--automaton", "C2", "--length", "eight"], "expected an integer, got 'eight'"),
    ],
)
def test_bad_input_is_one_line_exit_2(capsys, argv, message):
    try:
        code = main(argv)
    except SystemExit as e:  # argparse usage errors
        code = e.code
    err = capsys.readouterr().err
    assert code == 2
    assert message in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_malformed_and_nondeterministic_files(capsys, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{oops")
    code, _, err = run(capsys, "info", "--automaton-file", str(bad))
    assert code == 2 and "malformed JSON" in err
    nd = tmp_path / "nd.json"
    nd.write_text(json.dumps({"states": ["a", "b"], "alphabet": ["x"], "delta": {"x": [["a", "b"], "a"]}}))
    code, _, err = run(capsys, "verify", "prefix_scan", "--automaton-file", str(nd), "--length", "4")
    assert code == 2 and "deterministic" in err


def test_console_script_and_module_entry_points(tmp_path):
    script = Path(sys.executable).parent / "interp"
    ok = subprocess.run(
        [
            str(script),
            "verify",
            "modular_counter",
            "--automaton",
            "parity",
            "--length",
            "16",
            "--samples",
            "20",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert ok.returncode == 0 and json.loads(ok.stdout)["accuracy"] == 1.0
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "sandbox_lens.interp",
            "build",
            "prefix_scan",
            "--automaton",
            "S99",
            "--length",
            "8",
            "--out",
            str(tmp_path / "x"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and bad.stderr.count("\n") == 1
    assert not (tmp_path / "x").exists()  # nothing written on error


def test_version_and_a_bare_interp_print_and_exit_0(capsys):
    import sandbox_lens.interp

    assert main(["--version"]) == 0  # a status, not an exit: main runs in-process too
    assert capsys.readouterr().out.strip() == f"sandbox-lens {sandbox_lens.interp.__version__}"
    assert main([]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: interp") and "experiment" in out


@pytest.fixture
def hostile(tmp_path):
    (tmp_path / "deep.json").write_text("[" * 5000 + "]" * 5000)
    (tmp_path / "afile").write_text("x")
    big = [f"s{i}" for i in range(5000)]
    (tmp_path / "big.json").write_text(
        json.dumps({"name": "big", "states": ["a", "b"], "alphabet": big, "delta": {x: ["b", "a"] for x in big}})
    )
    return tmp_path


@pytest.mark.parametrize(
    "argv, message",
    [
        (["verify", "prefix_scan", "--automaton-file", "{d}/deep.json", "-T", "8"], "nested more than 64 levels deep"),
        (["verify", "prefix_scan", "--automaton-file", "/dev/zero", "-T", "8"], "larger than 64 MiB"),
        (
            ["train", "automaton", "--automaton", "parity", "--batch", "100000000", "--out", "{d}/t"],
            "argument --batch: must lie in 1..100,000",
        ),
        (
            ["train", "automaton", "--automaton", "parity", "--eval-size", "100000000", "--out", "{d}/t"],
            "argument --eval-size: must lie in",
        ),
        (["train", "automaton", "--automaton", "parity", "-T", "1000000", "--out", "{d}/t"], "at most 8192"),
        (
            ["train", "automaton", "--automaton", "parity", "--lr", "nan", "--out", "{d}/t"],
            "argument --lr: must be a finite number",
        ),
        (["train", "automaton", "--automaton", "parity", "--lr", "0", "--out", "{d}/t"], "learning rate"),
        (
            ["train", "automaton", "--automaton", "parity", "--d-mlp", "-4", "--out", "{d}/t"],
            "argument --d-mlp: must lie in 1..",
        ),
        (["train", "automaton", "--automaton", "parity", "--target", "2", "--out", "{d}/t"], "target accuracy"),
        (
            ["train", "automaton", "--automaton", "parity", "--warmup", "-5", "--out", "{d}/t"],
            "argument --warmup: must lie in 0..",
        ),
        (
            ["train", "automaton", "--automaton", "parity", "--clip", "-1", "--out", "{d}/t"],
            "argument --clip: must lie in 0..1,000,000",
        ),
        (
            ["train", "automaton", "--automaton", "parity", "--max-minutes", "-1", "--out", "{d}/t"],
            "argument --max-minutes: must lie in 0..1,000,000",
        ),
        (["train", "automaton", "--automaton", "parity", "--steps", "1", "--out", "{d}/afile"], "is a file"),
        (["train", "automaton", "--automaton", "parity", "--resume", "--out", "{d}/t"], "holds no checkpoint"),
        (["train", "automaton", "--automaton", "parity", "--freeze", "embed", "--out", "{d}/t"], "without --init-from"),
        (["train", "automaton", "--automaton", "parity", "--d-model", "3", "--out", "{d}/t"], "does not split into 2"),
        (["train", "automaton", "--automaton", "parity", "--workers", "2", "--out", "{d}/t"], "one run takes one"),
        (["train", "automaton", "--automaton", "parity", "--seeds", "0-99999999999", "--out", "{d}/t"], "--seeds"),
        (["build", "prefix_scan", "--automaton", "parity", "-T", "8", "--out", "{d}/afile"], "File exists"),
        (["build", "prefix_scan", "--automaton", "parity", "-T", "8", "--out", "{d}/afile/sub"], "Not a directory"),
        (["verify", "dyck", "--dyck", "2,4", "-T", "16", "-O", "q=abc"], "option q"),
        # a size refused from the sparse spec, before any dense weight (this once ran out of memory or minutes); verify
        # never builds the dense model, so Dyck_{64,64} at T = 64 (1.6 G dense parameters) now verifies, in ~80 s
        (["build", "prefix_scan", "--automaton", "C64", "-T", "16", "--out", "{d}/m"], "parameters"),
        (["verify", "prefix_scan", "--automaton-file", "{d}/big.json", "-T", "8"], "at most 4,096 are supported"),
    ],
)
def test_hostile_requests_get_one_line_and_write_nothing(argv, message, hostile, capsys):
    before = sorted(hostile.rglob("*"))
    try:
        code = main([a.replace("{d}", str(hostile)) for a in argv])
    except SystemExit as e:  # the parser's own refusals (a number out of its range) exit 2 in one line
        code = e.code
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert sorted(hostile.rglob("*")) == before


def test_sampled_verification_streams_its_words(monkeypatch):
    """--samples is limited by time, not memory: words are drawn and checked chunk by chunk."""
    import sandbox_lens.interp.verify.automaton as va
    from sandbox_lens.constructions import build_model
    from sandbox_lens.interp.tasks.catalogue import get_automaton
    from sandbox_lens.interp.verify import verify

    monkeypatch.setattr(va, "CHUNK_POSITIONS", 64)  # 8 words of length 8 per chunk
    model = build_model("modular_counter", get_automaton("parity"), 8)
    sizes = []
    real = va.predict
    monkeypatch.setattr(va, "predict", lambda m, w, **kw: sizes.append(len(w)) or real(m, w, **kw))
    r = verify(model, samples=20, exhaustive_upto=0)
    assert r.accuracy == 1.0 and r.sequences == 20 and sizes == [8, 8, 4]


def test_threads_default_to_one_for_small_model_work_and_can_be_set():
    from sandbox_lens.interp.cli import default_threads

    for command in ("train", "compare", "demo", "experiment", "circuit", "population", "evaluate"):
        assert default_threads(command, None) == 1
    assert default_threads("verify", None) is None  # long single forwards: torch's choice
    assert default_threads("train", 2) == 2


def _subparsers():
    import argparse

    from sandbox_lens.interp.cli import _parser

    parser, _ = _parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return [("interp", parser)] + list(sub.choices.items())


def test_every_option_has_help_and_its_default_is_shown():
    import argparse

    missing, no_default = [], []
    for name, p in _subparsers():
        for a in p._actions:
            if isinstance(a, (argparse._HelpAction, argparse._VersionAction, argparse._SubParsersAction)):
                continue
            label = f"{name} {'/'.join(a.option_strings) or a.dest}"
            if not (a.help or "").strip():
                missing.append(label)
            if a.option_strings and a.default not in (None, False, [], argparse.SUPPRESS):
                if "default" not in p.formatter_class(prog="x")._get_help_string(a):
                    no_default.append(label)
    assert missing == [], missing
    assert no_default == [], no_default


def test_an_in_process_command_puts_back_what_it_changed(tmp_path, capsys):
    """`main` run in-process (a notebook, a test) leaves the warning printer and the thread count as it found them."""
    import warnings

    import torch

    from sandbox_lens.interp.cli import main

    before_show, before_threads = warnings.showwarning, torch.get_num_threads()
    torch.set_num_threads(2)
    assert (
        main(
            [
                "--threads",
                "1",
                "train",
                "automaton",
                "--automaton",
                "C2",
                "-T",
                "4",
                "--steps",
                "2",
                "--eval-every",
                "1",
                "--eval-size",
                "8",
                "--batch",
                "4",
                "--out",
                str(tmp_path / "r"),
            ]
        )
        == 0
    )
    assert main(["train", "ffl", "--dyck", "2,4", "--out", str(tmp_path / "x")]) == 2  # a refusal, too
    assert warnings.showwarning is before_show and torch.get_num_threads() == 2
    torch.set_num_threads(before_threads)


def test_decompose_writes_a_cascade_that_verifies_exactly(tmp_path, capsys):
    out = tmp_path / "dyck.json"
    code, text, _ = run(capsys, "decompose", "--automaton", "dyck1-depth2", "--out", str(out))
    assert code == 0 and "3 holonomy level(s)" in text and json.loads(out.read_text())["levels"][0]["name"] == "h3"
    code, text, _ = run(
        capsys, "verify", "krohn_rhodes", "--cascade-file", str(out), "--length", "64", "--samples", "100"
    )
    assert code == 0 and text.startswith("EXACT")


def test_decompose_refuses_a_non_solvable_automaton_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "s5.json"
    code, _, err = run(capsys, "decompose", "--automaton", "S5+resets", "--out", str(out))
    assert code == 2 and "is S5 (order 120), not solvable" in err and err.count("\n") == 1 and not out.exists()


def test_decompose_refuses_past_its_limits_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "g.json"
    code, _, err = run(capsys, "decompose", "--automaton", "grid4x4", "--out", str(out))
    assert code == 2 and "273,780 wirings" in err and "at most 200,000" in err and err.count("\n") == 1
    assert not out.exists()


def test_a_decomposition_edited_into_a_wrong_covering_is_refused_before_anything_is_built(tmp_path, capsys):
    good = tmp_path / "dyck.json"
    assert run(capsys, "decompose", "--automaton", "dyck1-depth2", "--out", str(good))[0] == 0
    data = json.loads(good.read_text())
    key = next(iter(data["output"]))
    data["output"][key] = next(s for s in data["simulates"]["states"] if s != data["output"][key])
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    code, _, err = run(
        capsys, "build", "krohn_rhodes", "--cascade-file", str(bad), "--length", "16", "--out", str(tmp_path / "model")
    )
    assert code == 2 and "not a covering" in err and err.count("\n") == 1 and not (tmp_path / "model").exists()


def test_a_gradient_method_says_where_rounding_decides_its_scores(tmp_path, interp_run):
    """The balanced Dyck stack reads units whose pre-activation is 0 on the clean run: attribution says so (and
    misses edges whose patching moves everything); path patching, which differentiates nothing, does not."""
    base = ["circuit", "dyck", "--dyck", "2,4", "--length", "16", "--variant", "balanced", "--no-curve"]
    code, out, err = interp_run(*base, "--method", "attribution", "--out", tmp_path / "a")
    assert code == 0, err
    kinks = json.loads((tmp_path / "a" / "circuit.json").read_text())["kinks"]
    assert kinks["at_kink"] > 0
    assert f"note: {kinks['at_kink']} of {kinks['units']} ReLU pre-activations sit at the kink" in out
    code, out, err = interp_run(*base, "--method", "path", "--out", tmp_path / "p")
    assert code == 0, err
    assert "at the kink" not in out
