"""`interp batch FILE`: many commands in one process, every line parsed before any runs, a failing command not
stopping the others (unless --stop), the largest exit status returned; bad files refused in one line."""

from __future__ import annotations

import pytest


def _file(tmp_path, *lines):
    f = tmp_path / "commands.txt"
    f.write_text("\n".join(lines) + "\n")
    return f


def test_a_batch_runs_every_command_in_one_process(tmp_path, interp_run):
    f = _file(
        tmp_path,
        "# two builds and a verification",
        f"build prefix_scan --automaton parity -T 4 --out {tmp_path / 'a'}",
        "",
        f"interp build modular_counter --automaton C3 -T 4 --out '{tmp_path / 'b c'}'  # quoted path",
        f"verify --model {tmp_path / 'a'}",
    )
    code, out, err = interp_run("batch", f)
    assert code == 0, err
    assert (tmp_path / "a" / "model.json").exists() and (tmp_path / "b c" / "model.json").exists()
    assert "EXACT" in out and "interp batch [3/3] line 5: interp verify --model" in err
    assert err.strip().endswith("3 of 3 commands run, 3 exited 0")


def test_a_failing_command_does_not_stop_the_others_unless_asked(tmp_path, interp_run):
    (tmp_path / "file").write_text("x")
    lines = [
        f"build prefix_scan --automaton parity -T 4 --out {tmp_path / 'file'}",  # a file: refused, exit 2
        f"build prefix_scan --automaton parity -T 4 --out {tmp_path / 'a'}",
    ]
    code, _, err = interp_run("batch", _file(tmp_path, *lines))
    assert code == 2 and (tmp_path / "a" / "model.json").exists()
    assert "2 of 2 commands run, 1 exited 0; not: line 1 (exit 2)" in err
    code, _, err = interp_run("batch", "--stop", _file(tmp_path, lines[0], lines[1].replace("'a'", "b")))
    assert code == 2 and "1 of 2 commands run" in err


@pytest.mark.parametrize(
    "lines, message",
    [
        (["list", "verfy prefix_scan"], "line 3: argument command: invalid choice: 'verfy'"),
        (["list", "build prefix_scan --automaton parity -T 4 --out 'unclosed"], "line 3: No closing quotation"),
        (["list", "batch other.txt"], "line 3: a batch cannot run another batch"),
        (["list", "verify --help"], "line 3: --help and --version do not run anything"),
        (["list", "verify prefix_scan --automaton parity --samples -1"], "line 3: argument --samples: must lie in"),
    ],
)
def test_a_bad_line_is_refused_before_anything_runs(tmp_path, interp_run, lines, message):
    first = f"build prefix_scan --automaton parity -T 4 --out {tmp_path / 'a'}"
    code, out, err = interp_run("batch", _file(tmp_path, first, *lines))
    assert code == 2 and len(err.strip().splitlines()) == 1 and message in err, err
    assert not (tmp_path / "a").exists() and out == ""


def test_a_missing_unreadable_or_empty_batch_file_is_one_line(tmp_path, interp_run):
    code, _, err = interp_run("batch", _file(tmp_path, "# nothing but a comment", ""))
    assert code == 2 and "holds no command" in err
    code, _, err = interp_run("batch", tmp_path / "none.txt")
    assert code == 2 and "no batch file at" in err
    code, _, err = interp_run("batch", "/dev/zero")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "larger than" in err, err
