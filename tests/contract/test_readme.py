"""The README's examples run as printed: the JSON automaton with the commands that name its file."""

import re
import shlex
from pathlib import Path

import pytest

from interp.cli import main

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


def _json_blocks() -> list[str]:
    return re.findall(r"```json\n(.*?)```", README, re.S)


def test_the_json_automaton_runs_with_every_command_that_names_it(tmp_path, monkeypatch, capsys):
    automaton = next(b for b in _json_blocks() if '"delta"' in b)
    (tmp_path / "my_automaton.json").write_text(automaton)
    monkeypatch.chdir(tmp_path)
    commands = sorted({m.strip() for m in re.findall(r"^(interp [^\n`#]*my_automaton\.json[^\n`#]*)", README, re.M)})
    assert commands, "the README shows no command for its JSON automaton"
    for command in commands:
        argv = shlex.split(command)[1:]
        assert main(argv) == 0, (command, capsys.readouterr().err)


@pytest.mark.parametrize("name", ["grid3 as two flip-flops"])
def test_the_json_cascade_verifies(name, tmp_path, capsys):
    cascade = next(b for b in _json_blocks() if name in b)
    (tmp_path / "cascade.json").write_text(cascade)
    assert main(["verify", "krohn_rhodes", "--cascade-file", str(tmp_path / "cascade.json"), "--length", "16"]) == 0
    assert "EXACT" in capsys.readouterr().out
