"""The README's and the docs' examples run as printed: the JSON automaton with the commands that name its
file, the JSON cascade; every relative link in the README and the docs points at a file that exists; the
README stays a landing page."""

import re
import shlex
from pathlib import Path

import pytest

from sandbox_lens.interp.cli import main

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
README = "\n".join(p.read_text() for p in PAGES)  # the README and every docs page


def _json_blocks() -> list[str]:
    return re.findall(r"```json\n(.*?)```", README, re.S)


def test_the_json_automaton_runs_with_every_command_that_names_it(tmp_path, monkeypatch, capsys):
    automaton = next(b for b in _json_blocks() if '"delta"' in b)
    (tmp_path / "my_automaton.json").write_text(automaton)
    monkeypatch.chdir(tmp_path)
    commands = sorted({m.strip() for m in re.findall(r"^(interp [^\n`#]*my_automaton\.json[^\n`#]*)", README, re.M)})
    assert commands, "the docs show no command for their JSON automaton"
    for command in commands:
        argv = shlex.split(command)[1:]
        assert main(argv) == 0, (command, capsys.readouterr().err)


@pytest.mark.parametrize("name", ["grid3 as two flip-flops"])
def test_the_json_cascade_verifies(name, tmp_path, capsys):
    cascade = next(b for b in _json_blocks() if name in b)
    (tmp_path / "cascade.json").write_text(cascade)
    assert main(["verify", "krohn_rhodes", "--cascade-file", str(tmp_path / "cascade.json"), "--length", "16"]) == 0
    assert "EXACT" in capsys.readouterr().out


def test_every_relative_link_points_at_a_file():
    for page in PAGES:
        text = re.sub(r"`[^`\n]*`", "", re.sub(r"```.*?```", "", page.read_text(), flags=re.S))
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if target.startswith(("http://", "https://", "#", "mailto:")):
                continue
            path = (page.parent / target.split("#")[0]).resolve()
            assert path.exists(), f"{page.relative_to(ROOT)} links to {target}, which does not exist"


def test_the_readme_is_a_landing_page():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 200
    quick = text.split("## Quick start", 1)[1].split("```", 2)[1]
    assert quick.split() == ["make", "demo", "make", "test"]  # exactly two commands


def test_the_readme_counts_the_registered_experiments():
    from sandbox_lens.interp.experiments import EXPERIMENTS

    found = re.search(r"`interp experiment`: (\d+) reproductions", (ROOT / "README.md").read_text())
    assert found and int(found.group(1)) == len(EXPERIMENTS)
