"""The two registry-only kinds: Dyck copying (thesis §3.6.5.1) and an automaton with a scratchpad (§3.4.5.2)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from sandbox_lens.interp.errors import SandboxError
from sandbox_lens.interp.tasks.catalogue import get_automaton
from sandbox_lens.interp.tasks.dyck import Dyck
from sandbox_lens.interp.tasks.kinds import DYCK_COPY, SCRATCHPAD, task_from_dict, task_kind
from sandbox_lens.interp.tasks.variants import DyckCopyTask, ScratchpadTask


def test_a_copying_batch_asks_for_every_bracket_it_reads():
    task = DyckCopyTask(Dyck(2, 4), 12)
    b = task.batch(np.random.default_rng(0), 50)
    assert b.tokens.shape == (50, 12) and (b.tokens[:, 0] == 0).all() and not b.score_mask[:, 0].any()
    assert b.score_mask[:, 1:].all() and (b.loss_mask == b.score_mask).all()
    assert (b.targets[:, 1:] == b.tokens[:, 1:] - 1).all()
    for w in b.targets[:, 1:]:
        Dyck(2, 4).check(w)  # the words are Dyck prefixes
    assert DYCK_COPY.chance(task.to_dict()) == 0.25  # one of the 2k brackets
    assert task_from_dict(json.loads(json.dumps(task.to_dict()))).to_dict() == task.to_dict()
    assert task_kind(task) is DYCK_COPY and task.d_vocab == 5 and task.d_vocab_out == 4


def test_a_scratchpad_batch_interleaves_the_states_and_scores_them_at_the_symbols():
    automaton = get_automaton("C3")
    task = ScratchpadTask(automaton, 7)
    b = task.batch(np.random.default_rng(1), 40)
    words, states = b.tokens[:, 1::2] - 1, b.targets[:, 1::2]
    assert b.tokens.shape == (40, 14) == (40, task.n_ctx) and (b.tokens[:, 0] == 0).all()
    assert (states == automaton.run(words)).all()
    assert (b.tokens[:, 2::2] == 1 + automaton.n_symbols + states[:, :-1]).all()  # q_t written after σ_t
    assert b.score_mask[:, 1::2].all() and not b.score_mask[:, 0::2].any()
    assert (task.layout(words, None)[:, 2::2] == 0).all()  # the slots a decoder fills
    layout = task.token_layout()
    assert len(layout.input_names) == task.d_vocab == 1 + 3 + 3 and len(layout.output_names) == task.d_vocab_out
    assert task_from_dict(json.loads(json.dumps(task.to_dict()))).to_dict() == task.to_dict()
    assert task_kind(task) is SCRATCHPAD and "scratchpad" in task.name


def test_the_kinds_refuse_a_missing_source_in_one_line():
    with pytest.raises(SandboxError, match="needs --dyck"):
        DYCK_COPY.task_from_options({}, None)
    with pytest.raises(SandboxError, match="--automaton"):
        SCRATCHPAD.task_from_options({}, None)
    with pytest.raises(SandboxError, match="incomplete"):
        SCRATCHPAD.task_from_dict({"kind": "scratchpad"})


def test_the_command_line_trains_both_and_refuses_the_other_kinds_options(tmp_path, capsys):
    from sandbox_lens.interp.cli import main

    assert main(["train", "dyck-copy", "--dyck", "2,2", "--steps", "30", "--out", str(tmp_path / "c")]) == 0
    assert (
        main(
            [
                "train",
                "scratchpad",
                "--automaton",
                "parity",
                "--length",
                "4",
                "--steps",
                "30",
                "--pos",
                "alibi",
                "--heads",
                "8",
                "--out",
                str(tmp_path / "s"),
            ]
        )
        == 0
    )
    assert json.loads((tmp_path / "s" / "metrics.json").read_text())["task"]["kind"] == "scratchpad"
    capsys.readouterr()
    assert main(["train", "dyck-copy", "--automaton", "parity", "--out", str(tmp_path / "x")]) == 2
    assert main(["train", "scratchpad", "--dyck", "2,4", "--out", str(tmp_path / "y")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 2 and "Traceback" not in err
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()


def test_the_stack_top_kind_round_trips_and_refuses_a_bad_language(tmp_path, capsys):
    from sandbox_lens.interp.cli import main
    from sandbox_lens.interp.tasks.kinds import STACK_TOP
    from sandbox_lens.interp.tasks.variants import StackTopTask

    task = STACK_TOP.task_from_options({"dyck": "4,8"}, None)
    assert isinstance(task, StackTopTask) and (task.k, task.depth, task.length) == (4, 8, 16)
    assert task_from_dict(json.loads(json.dumps(task.to_dict()))).to_dict() == task.to_dict()
    b = task.batch(np.random.default_rng(0), 30)
    assert b.tokens.shape == (30, 17) and b.targets.max() <= 4 and not b.score_mask[:, 0].any()
    assert len(task.token_layout().input_names) == task.d_vocab and STACK_TOP.chance(task.to_dict()) == 0.2
    capsys.readouterr()
    assert main(["train", "dyck-top", "--dyck", "9,2", "--out", str(tmp_path / "x")]) == 2
    assert "1 ≤ k ≤ 8" in capsys.readouterr().err and not (tmp_path / "x").exists()
