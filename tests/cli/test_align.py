"""`interp align` from the shell: a saved construction and a twin (with the construction and the null
beside it), and bad input in one line with nothing written."""

from __future__ import annotations

import json

import pytest


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    from sandbox_lens.interp.cli import main

    root = tmp_path_factory.mktemp("align")
    main(["build", "modular_counter", "--automaton", "C3", "-T", "8", "--out", str(root / "counter")])
    main(["build", "ffl", "-T", "8", "--out", str(root / "ffl")])
    main(["build", "dyck", "--dyck", "2,4", "-T", "12", "--out", str(root / "dyck")])
    main(["train", "automaton", "--automaton", "C3", "--length", "6", "--steps", "30", "--out", str(root / "twin")])
    main(
        [
            "train",
            "automaton",
            "--automaton",
            "C3",
            "--length",
            "6",
            "--steps",
            "5",
            "--arch",
            "lstm",
            "--out",
            str(root / "lstm"),
        ]
    )
    return root


def test_align_a_saved_construction(saved, tmp_path, interp_run):
    code, out, err = interp_run(
        "align", "--model", str(saved / "counter"), "--pairs", "64", "--k", "2", "--json", "--out", str(tmp_path / "a")
    )
    assert code == 0, err
    state = json.loads(out)["variables"]["state"]
    assert state["first_sites"]["4"] == "blocks.0.hook_resid_mid" and state["ceiling"] == 1.0
    assert state["named_sites"] == {
        "state: s @ blocks.0.hook_resid_mid": 1.0,
        "state: state @ blocks.0.hook_resid_post": 1.0,
        "state: s @ blocks.0.hook_resid_post (inert)": 0.0,
    }
    data = json.loads((tmp_path / "a" / "align.json").read_text())["variables"]["state"]
    assert data["model"]["das"]["k"][0]["k"] == 2 and "null" not in data and data["constructions"] == {}
    assert (tmp_path / "a" / "align.png").stat().st_size > 10_000


def test_align_the_dyck_construction_variable_by_variable(saved, tmp_path, interp_run):
    """Theorem 1's two variables at the sites its proof names; DAS does not find the depth the named
    subspace carries (a one-dimensional count before MLP 1's trapezoids), and says so."""
    code, out, err = interp_run(
        "align",
        "--model",
        str(saved / "dyck"),
        "--pairs",
        "96",
        "--k",
        "1,2",
        "--das-steps",
        "60",
        "--json",
        "--out",
        str(tmp_path / "d"),
    )
    assert code == 0, err
    v = json.loads(out)["variables"]
    assert set(v) == {"top", "depth"}
    assert v["top"]["named_sites"]["top: top @ blocks.1.hook_resid_post"] == 1.0
    assert v["depth"]["named_sites"]["depth: depth @ blocks.0.hook_resid_mid"] == 1.0
    assert v["depth"]["named_sites"]["depth: depth @ blocks.0.hook_resid_post (inert)"] == 0.0
    assert "no evidence of absence" in v["depth"]["das_verdict"]


# slow: a twin, DAS at every hook and five nulls (~1 min on 2 cores); the faster align tests stay
@pytest.mark.slow
def test_align_a_twin_beside_its_construction_and_the_null(saved, tmp_path, interp_run):
    code, _, err = interp_run(
        "align",
        "--run",
        str(saved / "twin"),
        "--construction",
        "modular_counter",
        "--pairs",
        "64",
        "--k",
        "1",
        "--out",
        str(tmp_path / "t"),
    )
    assert code == 0, err
    data = json.loads((tmp_path / "t" / "align.json").read_text())["variables"]["state"]
    assert data["null"]["title"] == "random init (null)" and data["null"]["das"]["k"] == 1
    counter = data["constructions"]["modular_counter"]
    assert counter["first_sites"]["3"] == "blocks.0.hook_resid_mid" and counter["verdict"]["verdict"]
    assert counter["das_verdict"]["verdict"] and [s["iia"] for s in counter["named_sites"]] == [1.0, 1.0, 0.0]


@pytest.mark.parametrize(
    "argv,message",
    [
        (["align", "--out", "X"], "give one of --run DIR"),
        (["align", "--model", "{ffl}", "--variable", "seen", "--out", "X"], "has no variable 'seen'"),
        (
            ["align", "--model", "{counter}", "--high-level", "recurrent", "--variable", "depth", "--out", "X"],
            "has no variable 'depth'",
        ),
        (["align", "--model", "{dyck}", "--high-level", "recurrent", "--out", "X"], "unknown high-level model"),
        (["align", "--model", "{dyck}", "--construction", "ffl", "--out", "X"], "models the ffl task"),
        (["align", "--run", "{lstm}", "--out", "X"], "has none"),
        (["align", "--model", "{counter}", "--construction", "magic", "--out", "X"], "unknown construction"),
        (["align", "--run", "{twin}", "--construction", "dyck", "--out", "X"], "models the dyck task"),
        (["align", "--model", "{counter}", "--k", "two", "--out", "X"], "comma-separated integers"),
        (["align", "--model", "{counter}", "--pairs", "2", "--out", "X"], "too few for three disjoint splits"),
        (
            ["align", "--model", "{counter}", "--das-steps", "0", "--out", "X"],
            "argument --das-steps: must lie in 1..100,000",
        ),
    ],
)
def test_bad_input_is_one_line(saved, tmp_path, interp_run, monkeypatch, argv, message):
    monkeypatch.chdir(tmp_path)
    argv = [
        a.format(
            ffl=saved / "ffl", counter=saved / "counter", twin=saved / "twin", lstm=saved / "lstm", dyck=saved / "dyck"
        )
        for a in argv
    ]
    code, _, err = interp_run(*argv)
    assert code == 2 and len(err.strip().splitlines()) == 1 and message in err and "Traceback" not in err, err
    assert not (tmp_path / "X").exists()


def test_the_help_states_the_das_steps_the_analyses_take(capsys):
    """`--das-steps`'s help quotes the defaults the code uses, not numbers typed beside it."""
    import inspect

    from sandbox_lens.interp.causal.align import align
    from sandbox_lens.interp.causal.fitted import STEPS
    from sandbox_lens.interp.causal.identify import identify
    from sandbox_lens.interp.cli import main

    assert main(["align", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    plain, per_site = (inspect.signature(f).parameters["das_steps"].default for f in (align, identify))
    assert per_site == STEPS
    assert f"(default {plain}; with --candidates --das, {per_site} per site)" in text
