"""`interp evaluate`: models under distribution and length shifts, beside the exact construction."""

import json

import numpy as np
import pytest

from sandbox_lens.interp.cli import main
from sandbox_lens.interp.evaluate import ShiftError, automaton_shifts, evaluate, ffl_shifts, skyline
from sandbox_lens.interp.model.saved import load_model
from sandbox_lens.interp.tasks.batches import AutomatonTask
from sandbox_lens.interp.tasks.catalogue import get_automaton
from sandbox_lens.interp.train import ModelShape, TrainConfig, load_trained, train

TINY = dict(n_layers=1, d_model=16, n_heads=1)
FEW = TrainConfig(steps=20, batch=16, eval_every=20, eval_size=64, warmup=5)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A parity twin with fixed (sinusoidal) positions and context 65, one with learned positions
    and the same context, and a saved modular_counter."""
    d = tmp_path_factory.mktemp("evaluate")
    task = AutomatonTask(get_automaton("parity"), 16)
    train(task, ModelShape(**TINY, positional="sinusoidal", n_ctx=65), FEW, d / "fixed", progress=False)
    train(task, ModelShape(**TINY, positional="learned", n_ctx=65), FEW, d / "learned", progress=False)
    assert main(["build", "modular_counter", "--automaton", "parity", "-T", "32", "--out", str(d / "counter")]) == 0
    return d


def run_json(capsys, *argv):
    code = main(["evaluate", *argv, "--json", "--samples", "40"])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if code == 0 else None), err


def test_a_saved_construction_is_exact_under_every_shift(runs, capsys):
    code, data, _ = run_json(
        capsys,
        "--model",
        str(runs / "counter"),
        "--probs",
        "0.95,0.05",
        "0.5,0.5",
        "0.05,0.95",
        "--counts",
        "0",
        "2",
        "30",
    )
    assert code == 0
    rows = data["rows"]
    assert len(rows) == 1 + 3 + 3 and {r["model"] for r in rows} == {"modular_counter"}  # no second skyline
    assert all(r["accuracy"] == 1.0 and r["final_accuracy"] == 1.0 for r in rows)
    assert [r.get("probs") for r in rows[1:4]] == [[0.95, 0.05], [0.5, 0.5], [0.05, 0.95]]
    assert [r.get("count") for r in rows[4:]] == [0, 2, 30]


def test_a_twin_is_evaluated_beside_its_exact_skyline_on_the_same_words(runs, capsys, tmp_path):
    out = tmp_path / "rows.json"
    code, data, _ = run_json(capsys, str(runs / "fixed"), "--probs", "0.95,0.05", "0.05,0.95", "--out", str(out))
    assert code == 0 and json.loads(out.read_text()) == data
    twin = [r for r in data["rows"] if r["model"] == "twin"]
    exact = [r for r in data["rows"] if r["model"] == "modular_counter (exact)"]
    assert len(twin) == len(exact) == 3
    assert all(r["accuracy"] == 1.0 for r in exact)
    assert all(0.0 <= r["accuracy"] <= 1.0 and len(r["per_position"]) == 16 for r in twin)


def test_fixed_positions_reach_past_the_training_length_and_learned_ones_are_refused(runs, capsys):
    code, data, _ = run_json(capsys, str(runs / "fixed"), "--length", "64")
    assert code == 0 and all(len(r["per_position"]) == 64 for r in data["rows"])
    code, _, err = run_json(capsys, str(runs / "learned"), "--length", "64")
    assert code == 2 and err.count("\n") == 1 and "learned positions trained up to length 16" in err


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--probs", "0.5,0.3"], "sum to 1"),
        (["--probs", "0.2,0.3,0.5"], "has 3 entries"),
        (["--probs=-0.5,1.5"], "non-negative"),
        (["--counts", "17"], "0..16"),
        (["--count-symbol", "7", "--counts", "1"], "not a symbol"),
        (["--ffl", "0.1"], "applies to ffl models"),
        (["--bands", "2-28"], "applies to dyck models"),
        (["--length", "0"], "argument --length/-T: must lie in 1.."),
    ],
)
def test_shifts_that_make_no_sense_are_refused_in_one_line(runs, capsys, argv, message):
    code = main(["evaluate", str(runs / "fixed"), *argv])
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("\n") == 1 and "Traceback" not in err


def test_neither_or_both_sources_are_refused(runs, capsys):
    assert main(["evaluate"]) == 2
    assert main(["evaluate", str(runs / "fixed"), "--model", str(runs / "counter")]) == 2
    assert "one of them" in capsys.readouterr().err


def test_ffl_errors_are_counted_per_read_and_per_string():
    """The exact construction makes no error on sparse or dense strings; the counts add up."""
    from sandbox_lens.constructions import build_model

    model = build_model("ffl", None, 64)
    rows = evaluate({"ffl": model}, ffl_shifts(64, [0.8, 0.98, 0.1]), samples=50)
    assert [r["p"] for r in rows] == [0.8, 0.98, 0.1]
    assert all(r["accuracy"] == 1.0 and r["read_errors"] == 0 and r["strings_with_error"] == 0 for r in rows)
    assert rows[2]["scored"] > rows[0]["scored"] > rows[1]["scored"]  # dense strings read more often


def test_every_ffl_strings_final_read_is_scored():
    """Evaluation strings are whole FFL(T, p) strings: reads counted = the r's of the instruction stream,
    the forced final read included (sparse strings at T = 64 have ≈ 1.3 reads each, not ≈ 0.3)."""
    from sandbox_lens.constructions import build_model
    from sandbox_lens.interp.tasks.ffl import R
    from sandbox_lens.interp.tasks.kinds.base import task_kind

    model = build_model("ffl", None, 64)
    shifts = ffl_shifts(64, [0.8, 0.98, 0.1])
    rows = evaluate({"ffl": model}, shifts, samples=300, seed=5)
    kind = task_kind(model.card.task)
    for i, (shift, row) in enumerate(zip(shifts, rows)):
        strings = kind.draw(model.card.task, shift, 300, 5 + i)
        assert strings.shape == (300, 64) and np.all(strings[:, -2] == R)  # the final read and its answer
        assert row["scored"] == int((strings[:, 0::2] == R).sum())
        assert row["final_accuracy"] == 1.0 and row["read_errors"] == 0
    sparse = rows[1]["scored"] / 300
    assert 1.0 < sparse < 1.6, sparse  # every string's final read, plus the few others FFL(0.98) has


def test_ffl_shifts_take_whole_strings_only():
    with pytest.raises(ShiftError, match="even length"):
        ffl_shifts(15)


def test_the_skyline_of_an_automaton_twin_is_its_exact_construction(runs):
    twin = load_trained(runs / "fixed")
    exact = skyline(twin, 40)
    assert exact.card.construction == "modular_counter" and exact.card.max_length == 40
    assert skyline(load_model(runs / "counter"), 40) is None  # a construction is its own skyline
    rows = evaluate({"exact": exact}, automaton_shifts(get_automaton("parity"), 40, [[0.9, 0.1]], [0, 40]), samples=20)
    assert all(r["accuracy"] == 1.0 for r in rows) and len(rows) == 4
    assert np.all(np.asarray(rows[0]["per_position"]) == 1.0)


def test_the_lstm_baseline_learns_parity_and_refuses_attention_analyses(tmp_path, capsys):
    """`--arch lstm`: the thesis's recurrent baseline, trained, checkpointed and evaluated like a twin."""
    from sandbox_lens.interp.errors import ModelKindError
    from sandbox_lens.interp.model.run import attention_patterns
    from sandbox_lens.probes.linear import probe_accuracy

    out = tmp_path / "lstm"
    assert (
        main(
            [
                "--threads",
                "1",
                "train",
                "automaton",
                "--automaton",
                "parity",
                "-T",
                "12",
                "--arch",
                "lstm",
                "--steps",
                "150",
                "--lr",
                "3e-3",
                "--batch",
                "64",
                "--eval-every",
                "50",
                "--target",
                "0.99",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    capsys.readouterr()
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["best_accuracy"] >= 0.99 and metrics["shape"]["arch"] == "lstm"
    model = load_trained(out)
    assert model.card.options["arch"] == "lstm" and model.card.attention_blocks == []
    code, data, _ = run_json(capsys, str(out), "--length", "48", "--probs", "0.9,0.1")  # recurrent: any length
    assert code == 0 and all(r["accuracy"] >= 0.9 for r in data["rows"])
    with pytest.raises(ModelKindError, match="lstm"):
        attention_patterns(model, [[0, 1, 2]])
    with pytest.raises(ModelKindError, match="no attention"):
        probe_accuracy(
            model, np.zeros((4, 3), dtype=np.int64), np.zeros((4, 3), dtype=np.int64), np.ones((4, 3), dtype=bool)
        )
    code = main(
        ["train", "automaton", "--automaton", "parity", "--arch", "lstm", "--heads", "2", "--out", str(tmp_path / "x")]
    )
    assert code == 2 and "an LSTM takes" in capsys.readouterr().err


def test_dyck_shifts_of_band_q_and_depth_are_exact_for_the_construction():
    from sandbox_lens.constructions import build_model
    from sandbox_lens.interp.evaluate import dyck_shifts
    from sandbox_lens.interp.tasks.dyck import Dyck

    lang = Dyck(2, 4)
    shifts = dyck_shifts(lang, [(2, 28), (90, 100)], qs=[0.3], depths=[2])
    assert [s.label for s in shifts] == [
        "2-28, q=0.5",
        "90-100, q=0.5",
        "2-28, q=0.3",
        "90-100, q=0.3",
        "2-28, q=0.5, D=2",
        "90-100, q=0.5, D=2",
    ]
    rows = evaluate({"stack": build_model("dyck", lang, 100)}, shifts, samples=40)
    assert all(r["accuracy"] == 1.0 and r["inputs"] == 40 for r in rows)
    with pytest.raises(Exception, match="depth shift"):
        dyck_shifts(lang, [(2, 28)], depths=[5])


def test_twins_are_evaluated_at_their_own_training_length(tmp_path):
    """An FFL twin reads T − 1 tokens and a Dyck twin BOS + N − 1 brackets: the last token is only a target."""
    from sandbox_lens.interp.evaluate import dyck_shifts
    from sandbox_lens.interp.tasks.batches import DyckTask, FFLTask
    from sandbox_lens.interp.tasks.dyck import Dyck

    train(FFLTask(0.8, 16), ModelShape(**TINY), FEW, tmp_path / "ffl", progress=False)
    ffl_twin = load_trained(tmp_path / "ffl")
    assert ffl_twin.cfg.n_ctx == 15 and ffl_twin.card.max_length == 16
    rows = evaluate({"twin": ffl_twin}, ffl_shifts(16, [0.8]), samples=20)
    assert rows[0]["scored"] > 0 and 0 <= rows[0]["any_error_rate"] <= 1
    lang = Dyck(2, 4)
    train(DyckTask(lang, 12), ModelShape(**TINY), FEW, tmp_path / "dyck", progress=False)
    dyck_twin = load_trained(tmp_path / "dyck")
    assert dyck_twin.cfg.n_ctx == 12 and dyck_twin.card.max_length == 12
    rows = evaluate({"twin": dyck_twin}, dyck_shifts(lang, [(10, 12)]), samples=20)
    assert rows[0]["inputs"] == 20


def test_position_shifts_and_frozen_construction_positions_reach_further(tmp_path):
    from dataclasses import replace

    from sandbox_lens.interp.init_from import start_from
    from sandbox_lens.interp.tasks.batches import DyckTask
    from sandbox_lens.interp.tasks.dyck import Dyck

    task = AutomatonTask(get_automaton("parity"), 8)
    train(task, ModelShape(**TINY, n_ctx=33), replace(FEW, pos_shift=24), tmp_path / "shift", progress=False)
    assert load_trained(tmp_path / "shift").card.max_length == 32  # trained positions: 8 + the shifts
    dyck = DyckTask(Dyck(2, 4), 12)
    shape, config, spec = start_from("dyck", dyck, FEW, length=40)
    train(dyck, shape, config, tmp_path / "minimal", progress=False, init_spec=spec)
    twin = load_trained(tmp_path / "minimal")
    assert twin.card.options["positional"] == "construction (frozen)" and twin.card.max_length == twin.cfg.n_ctx
