"""The task-kind registry: one object per kind, and no dispatch on a kind anywhere else.

* every dispatch on a task kind outside ``sandbox_lens.interp.tasks`` is a registry lookup: the count of
  comparisons with a kind's name (and of ``isinstance`` checks on a kind's task class) in floors 2–4
  is zero;
* a toy fourth kind, registered here and nowhere else, is trained by `interp train`, evaluated by
  `interp evaluate` and verified by `verify` without a change to any other file.
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sandbox_lens.interp.errors import SandboxError
from sandbox_lens.interp.tasks import kinds
from sandbox_lens.interp.tasks.batches import Batch, TokenLayout
from sandbox_lens.interp.tasks.kinds import AUTOMATON, DYCK, FFL, TaskKind, TaskKindError, task_from_dict, task_kind

ROOT = Path(__file__).resolve().parents[2]
KIND_NAMES = {"automaton", "dyck", "ffl", "flipflop"}
TASK_CLASSES = {"AutomatonTask", "DyckTask", "FFLTask"}


def _is_kind_literal(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return node.value in KIND_NAMES
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_is_kind_literal(e) for e in node.elts)
    return False


def _names_a_kind(node: ast.AST) -> bool:
    """An expression that holds a task kind: its text mentions kind, task or takes (``card.kind``,
    ``args.task``, ``entry.takes``; not a construction's ``name``, which may also be "dyck")."""
    text = ast.unparse(node).lower()
    return any(word in text for word in ("kind", "task", "takes"))


def kind_branches(source: str) -> list[int]:
    """Lines that compare a kind-holding expression with a kind's name, or test ``isinstance`` against a
    kind's task class."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            sides = (node.left, *node.comparators)
            if any(_is_kind_literal(x) for x in sides) and any(
                _names_a_kind(x) for x in sides if not _is_kind_literal(x)
            ):
                lines.append(node.lineno)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "isinstance"
            and len(node.args) == 2
        ):
            names = {n.id for n in ast.walk(node.args[1]) if isinstance(n, ast.Name)}
            if names & TASK_CLASSES:
                lines.append(node.lineno)
    return lines


def test_the_counter_sees_what_it_counts():
    src = (
        'if task.kind == "dyck": pass\nif kind in ("ffl", "x"): pass\nif isinstance(t, (DyckTask, int)): pass\n'
        'if name == "dyck": pass\nif kind is DYCK: pass\nif "automaton" in accepts: pass\nif args.task != "ffl": pass\n'
    )
    assert kind_branches(src) == [1, 2, 3, 7]


def test_no_kind_branches_outside_the_registry():
    found = {}
    for pkg in ("sandbox_lens/interp", "sandbox_lens/constructions", "sandbox_lens/probes"):
        for path in sorted((ROOT / pkg).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel.startswith("sandbox_lens/interp/tasks/"):
                continue
            lines = kind_branches(path.read_text())
            if lines:
                found[rel] = lines
    assert found == {}, (
        f"dispatch on a task kind outside sandbox_lens.interp.tasks (use sandbox_lens.interp.tasks.kinds): {found}"
    )


def test_names_aliases_and_refusals():
    assert task_kind("ffl") is FFL and task_kind("flipflop") is FFL and task_kind({"kind": "dyck"}) is DYCK
    assert task_kind(AUTOMATON) is AUTOMATON
    with pytest.raises(TaskKindError, match="unknown task kind 'nope'"):
        task_kind("nope")
    with pytest.raises(TaskKindError):
        task_kind({"automaton": {}})  # no kind at all
    with pytest.raises(ValueError, match="taken"):
        kinds.register(type("Clash", (TaskKind,), {"name": "other", "aliases": ("dyck",), "default_length": 2})())


@pytest.mark.parametrize("kind", [AUTOMATON, DYCK, FFL], ids=lambda k: k.name)
def test_every_kind_states_its_facts(kind):
    assert set(kind.train_defaults) == {"steps", "lr", "target_accuracy"}
    assert kind.default_length >= kind.min_length and kind.corruptions and kind.constructions
    for attr in ("verifier", "evaluator", "comparison"):  # each names something that exists
        assert callable(kinds.resolve(getattr(kind, attr))), attr
    task = kind.task_from_options({"automaton": "parity", "dyck": "2,4", "ffl": "0.8"}, None)
    assert task.length == kind.default_length and task_kind(task) is kind
    again = task_from_dict(json.loads(json.dumps(task.to_dict())))
    assert again.to_dict() == task.to_dict()
    layout = task.token_layout()
    assert len(layout.input_names) == task.d_vocab and len(layout.output_names) == task.d_vocab_out
    with pytest.raises(SandboxError, match="incomplete"):
        kind.task_from_dict({"kind": kind.name})


def test_the_thesis_kinds_keep_their_defaults():
    """The numbers the registry took over from the per-kind tables (behaviour unchanged)."""
    assert (AUTOMATON.default_length, AUTOMATON.compare_length, DYCK.default_length, FFL.default_length) == (
        32,
        16,
        28,
        64,
    )
    assert AUTOMATON.train_defaults == {"steps": 3000, "lr": 1e-3, "target_accuracy": 0.99}
    assert DYCK.train_defaults == {"steps": 1500, "lr": 3e-3, "target_accuracy": 0.97}
    assert FFL.train_defaults == {"steps": 3000, "lr": 1e-3, "target_accuracy": 0.999}
    assert (AUTOMATON.verify_samples, DYCK.verify_samples, FFL.verify_samples) == (1000, 200, 200)


def test_chance_is_a_uniform_guess_among_the_scored_outputs():
    from sandbox_lens.interp.tasks.batches import AutomatonTask, DyckTask, FFLTask
    from sandbox_lens.interp.tasks.catalogue import get_automaton
    from sandbox_lens.interp.tasks.dyck import Dyck

    assert AUTOMATON.chance(AutomatonTask(get_automaton("parity"), 8).to_dict()) == 0.5
    assert AUTOMATON.chance(AutomatonTask(get_automaton("grid9"), 8).to_dict()) == pytest.approx(1 / 9)
    assert DYCK.chance(DyckTask(Dyck(4, 2), 12).to_dict()) == 0.25  # one of k closing brackets
    assert FFL.chance(FFLTask(0.8, 16).to_dict()) == 0.5  # one of two bits


# -- a toy fourth kind: a registry entry only ------------------------------------------------------
@dataclass
class CopyTask:
    """Repeat the symbol just read: BOS, then symbols 1..m; the target at each symbol is that symbol."""

    m: int
    length: int
    kind = "copy"

    @property
    def name(self) -> str:
        return f"copy over {self.m} symbols (T={self.length})"

    d_vocab = property(lambda self: self.m + 1)
    d_vocab_out = property(lambda self: self.m)
    n_ctx = property(lambda self: self.length + 1)

    def batch(self, rng: np.random.Generator, size: int) -> Batch:
        tokens = np.pad(rng.integers(1, self.m + 1, size=(size, self.length)), ((0, 0), (1, 0)))  # BOS = 0
        scored = tokens > 0
        return Batch(tokens, np.maximum(tokens - 1, 0), scored, scored)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "m": self.m, "length": self.length}

    def token_layout(self) -> TokenLayout:
        names = [f"s{i}" for i in range(self.m)]
        return TokenLayout((0,), tuple(range(1, self.m + 1)), ["BOS", *names], names)


class CopyKind(TaskKind):
    name = "copy"
    summary = "repeat the symbol just read (a test's toy kind)"
    default_length = 6
    train_defaults = {"steps": 400, "lr": 1e-2, "target_accuracy": 1.0}
    twin_shape = {"n_layers": 1, "d_model": 16, "n_heads": 1}
    train_options = (
        kinds.CommandLineOption(("--symbols",), "symbols", "copy: alphabet size", "M", type=int, default=3),
    )

    def task_from_dict(self, d):
        return kinds.checked(self, lambda: CopyTask(d["m"], d["length"]))

    def task_from_options(self, values, length):
        return CopyTask(values.get("symbols", 3), length or self.default_length)


@pytest.fixture
def copy_kind():
    kind = kinds.register(CopyKind())
    yield kind
    kinds.unregister("copy")


def test_a_fourth_kind_is_trained_evaluated_and_verified(copy_kind, tmp_path, capsys):
    from sandbox_lens.interp.cli import main
    from sandbox_lens.interp.train import load_trained
    from sandbox_lens.interp.verify import verify

    run = tmp_path / "run"
    assert main(["train", "copy", "--symbols", "3", "--out", str(run)]) == 0
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["task"] == {"kind": "copy", "m": 3, "length": 6} and metrics["final_accuracy"] == 1.0
    capsys.readouterr()
    assert main(["evaluate", str(run), "--samples", "50", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert [r["model"] for r in rows] == ["twin"]  # no construction models a copy task: no skyline
    assert rows[0]["accuracy"] == 1.0 and rows[0]["scored"] == 50 * 6
    result = verify(load_trained(run), samples=64)
    assert result.kind == "copy" and result.exact and result.checked == 64 * 6
    # another kind's options are refused for it, and its own for the others
    assert main(["train", "copy", "--dyck", "2,4", "--out", str(tmp_path / "x")]) == 2
    assert main(["train", "ffl", "--symbols", "4", "--out", str(tmp_path / "y")]) == 2
    assert "--symbols goes with `train copy`" in capsys.readouterr().err
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()
