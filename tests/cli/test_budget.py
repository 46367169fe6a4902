"""Bad input, round 3: work whose size the input decides is estimated first and refused in one line
(exit 2, within seconds, nothing written); options a mode does not use are refused; a special file
system is one line. Variants differ from the audit's examples on purpose."""

from __future__ import annotations

import json
import time

import pytest

from sandbox_lens.interp.budget import BudgetError, human_bytes, require


def _automaton(path, n, symbols):
    """A cycle, a transposition and a merge generate all n^n maps of n states; more symbols repeat them."""
    maps = [[(i + 1) % n for i in range(n)], [1, 0] + list(range(2, n)), [1] + list(range(1, n))]
    delta = {s: [f"q{j}" for j in maps[k % 3]] for k, s in enumerate(symbols)}
    path.write_text(json.dumps({"states": [f"q{i}" for i in range(n)], "alphabet": symbols, "delta": delta}))
    return path


@pytest.mark.parametrize(
    "argv,message",
    [
        (
            ["circuit", "prefix_scan", "--automaton", "S3", "-T", "16", "--pairs", "20000000000"],
            "argument --pairs: must lie in 1..100,000",
        ),
        (
            ["circuit", "gridworld", "--automaton", "grid4", "-T", "8", "--method", "path", "--per-position"],
            "--per-position goes with --method patching",
        ),
        (
            ["circuit", "modular_counter", "--automaton", "C5", "-T", "8", "--method", "path", "--steps", "8"],
            "--steps goes with --method eap-ig",
        ),
        (
            ["verify", "prefix_scan", "--automaton", "A4", "-T", "128", "--samples", "400000000"],
            "argument --samples: must lie in 0..1,000,000",
        ),
        (["compare", "dyck", "--length", "-3"], "argument --length/-T: must lie in 1.."),
        (["compare", "C3", "--length", "0"], "argument --length/-T: must lie in 1.."),
    ],
)
def test_unbounded_or_ignored_requests_are_one_line(tmp_path, interp_run, argv, message):
    t0 = time.perf_counter()
    out = [] if argv[0] == "verify" else ["--out", tmp_path / "o"]
    code, _, err = interp_run(*argv, *out)
    assert code == 2 and len(err.strip().splitlines()) == 1 and message in err, err
    assert time.perf_counter() - t0 < 30 and not (tmp_path / "o").exists()


def test_evaluating_billions_of_samples_is_refused_before_drawing_them(tmp_path, interp_run):
    """The parser's bound comes first (10^6 words); below it the memory estimate decides (tests/cli budget unit)."""
    code, _, err = interp_run("build", "ffl", "-T", "16", "--out", tmp_path / "m")
    assert code == 0, err
    code, _, err = interp_run(
        "evaluate", "--model", tmp_path / "m", "--samples", "900000000", "--out", tmp_path / "e.json"
    )
    assert code == 2 and "argument --samples: must lie in" in err and not (tmp_path / "e.json").exists()


@pytest.mark.parametrize("n,symbols", [(25000, ["x", "y", "z"]), (60, ["a", "b", "c", "d"])])
def test_a_huge_semigroup_closure_stops_within_seconds(tmp_path, interp_run, n, symbols):
    f = _automaton(tmp_path / "big.json", n, symbols)
    t0 = time.perf_counter()
    code, _, err = interp_run("info", "--automaton-file", f)
    assert code == 2 and "transformation semigroup" in err and "more than" in err, err
    assert time.perf_counter() - t0 < 20


def test_an_output_on_a_special_file_system_is_one_line(tmp_path, interp_run):
    code, _, err = interp_run("build", "memory", "--automaton", "memory3", "-T", "8", "--out", "/proc/self/none/model")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "/proc/self/none" in err, err


def test_the_budget_says_its_estimate_its_limit_and_what_lowers_it(monkeypatch):
    monkeypatch.setenv("SANDBOX_LENS_MEMORY_GB", "1")
    with pytest.raises(
        BudgetError, match=r"about 2.0 GiB of memory, more than the 1.0 GiB allowed .*; --samples lowers it"
    ):
        require("the thing", memory=2 * 2**30, lower="--samples")
    require("the thing", memory=0.5 * 2**30)  # under the limit: nothing happens
    monkeypatch.setenv("SANDBOX_LENS_MAX_OPERATIONS", "1000")
    with pytest.raises(BudgetError, match="operations"):
        require("the loop", operations=1e4)
    monkeypatch.setenv("SANDBOX_LENS_MAX_HOURS", "0.5")
    with pytest.raises(BudgetError, match="about 2.0 h, more than the 30 min allowed"):
        require("the sweep", seconds=7200)
    monkeypatch.setenv("SANDBOX_LENS_MEMORY_GB", "lots")
    with pytest.raises(BudgetError, match="number of GiB"):
        require("x", memory=1.0)
    assert human_bytes(512) == "512 B" and human_bytes(3 * 2**40) == "3.0 TiB"


@pytest.mark.parametrize(
    "where,err,text", [("fsync", 28, "No space left on device"), ("mkstemp", 30, "Read-only file system")]
)
def test_a_write_that_fails_midway_is_one_line_and_leaves_no_partial_file(
    tmp_path, interp_run, monkeypatch, where, err, text
):
    """Disk full while the weights are written, or a read-only file system: one line, exit 2, no temporary
    or half-written file left, and a model already saved there is kept whole."""
    import os
    import tempfile

    code, _, e = interp_run("build", "modular_counter", "--automaton", "C3", "-T", "8", "--out", tmp_path / "m")
    assert code == 0, e
    before = {p.name: p.read_bytes() for p in (tmp_path / "m").iterdir()}

    def fail(*args, **kwargs):
        raise OSError(err, os.strerror(err), str(tmp_path / "m"))

    monkeypatch.setattr(os if where == "fsync" else tempfile, where, fail)
    code, _, e = interp_run("build", "modular_counter", "--automaton", "C5", "-T", "8", "--out", tmp_path / "m")
    monkeypatch.undo()
    assert code == 2 and len(e.strip().splitlines()) == 1 and text in e, e
    after = {p.name: p.read_bytes() for p in (tmp_path / "m").iterdir()}
    assert after == before  # nothing torn, nothing lost: the old model is still there, whole


def test_work_that_passed_the_budget_shows_a_bar_with_an_eta(capsys, monkeypatch):
    """budget.progress: a bar (rate and ETA) on stderr when asked for and the work has several steps; none for
    one step or when not asked; verify draws one over its chunks of sampled words."""
    from sandbox_lens.constructions import build_model
    from sandbox_lens.interp import budget
    from sandbox_lens.interp.tasks.catalogue import get_automaton
    from sandbox_lens.interp.verify import automaton as verify_automaton
    from sandbox_lens.interp.verify import verify

    bars = [budget.progress(range(5), show=False), budget.progress(range(1)), budget.progress(range(5))]
    assert [b.disable for b in bars] == [True, True, False]
    for b in bars:
        b.close()
    capsys.readouterr()
    from sandbox_lens.interp import progress

    monkeypatch.setattr(progress, "INTERVAL", 0.0)  # off a terminal a bar prints a line per INTERVAL: every update
    monkeypatch.setattr(verify_automaton, "CHUNK_POSITIONS", 64)  # 40 words of 16: 10 chunks of 4
    model = build_model("modular_counter", get_automaton("C3"), 16)
    assert verify(model, samples=40, exhaustive_upto=2, progress=True).accuracy == 1.0
    err = capsys.readouterr().err
    assert "verify modular_counter" in err and "/11 [" in err  # 1 exhaustive set + 10 sampled chunks, with an ETA


@pytest.fixture(scope="module")
def small_sweep(tmp_path_factory):
    """Two C3 twins of a few steps, as a sweep directory (and one of them as a single run)."""
    from sandbox_lens.interp.cli import main

    root = tmp_path_factory.mktemp("budget")
    argv = ["train", "automaton", "--automaton", "C3", "--length", "6", "--steps", "20", "--seeds", "0-1"]
    assert main([*argv, "--out", str(root / "sweep")]) == 0
    return root / "sweep"


@pytest.mark.parametrize(
    "argv,message",
    [
        (["align", "--run", "{sweep}/seed_0", "--das-steps", "100000"], "aligning 1 variable(s) on 6 model(s)"),
        (
            ["compare", "C3", "--length", "6", "--trained", "{sweep}/seed_0", "--mask-steps", "100000"],
            "the comparison (100000 head-mask steps × 3 sparsities",
        ),
        (["population", "{sweep}", "--causal-pairs", "16", "--das-steps", "100000"], "aligning the population's"),
    ],
)
def test_long_optimisations_are_estimated_before_they_start(
    small_sweep, tmp_path, interp_run, monkeypatch, argv, message
):
    """Steps × pairs × sites: the forward pass is timed on this machine and the whole estimated before any of
    it runs; past the budget (here 36 s), one line naming the options that lower it, and no result written."""
    monkeypatch.setenv("SANDBOX_LENS_MAX_HOURS", "0.01")
    out = ["--out", str(tmp_path / ("o.json" if argv[0] == "population" else "o"))]
    t0 = time.perf_counter()
    code, _, err = interp_run(*[a.format(sweep=small_sweep) for a in argv], *out)
    assert code == 2 and len(err.strip().splitlines()) == 1 and message in err, err
    assert "more than the 36 s allowed (SANDBOX_LENS_MAX_HOURS)" in err and "lowers it" in err, err
    assert time.perf_counter() - t0 < 30
    written = {p.name for p in tmp_path.rglob("*")} - {"o"}
    assert not written & {"align.json", "metrics.json", "report.html", "o.json"}, written


def test_an_algorithm_sweep_is_estimated_before_it_starts(small_sweep, tmp_path, interp_run, monkeypatch):
    """`align --candidates`: sites × positions × pairs on the twin and its nulls, in time and in memory."""
    monkeypatch.setenv("SANDBOX_LENS_MAX_HOURS", "0.001")
    argv = ["align", "--run", small_sweep / "seed_0", "--candidates", "all", "--pairs", "20000"]
    code, _, err = interp_run(*argv, "--out", tmp_path / "o")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "sweeping" in err and "--pairs lowers it" in err, err
    assert not (tmp_path / "o" / "align.json").exists()
