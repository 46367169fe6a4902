"""Progress that stays: off a terminal, bars print whole lines at most every INTERVAL seconds and a heartbeat
fills the silences; --quiet prints nothing; on a terminal, bars stay when done."""

import io
import time

import pytest

from sandbox_lens.interp import progress


class _Err(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


@pytest.fixture
def log(monkeypatch):
    """pytest's own capture of stderr (not a terminal) with a short interval; read it with ``log()``."""
    monkeypatch.setattr(progress, "INTERVAL", 0.2)
    monkeypatch.delenv(progress.QUIET_ENV, raising=False)
    return None


def test_off_a_terminal_a_bar_writes_whole_lines_and_a_heartbeat_fills_silences(log, capsys):
    with progress.heartbeat("interp test"):
        b = progress.bar(total=4, desc="work", unit="step")
        for _ in range(4):
            time.sleep(0.25)
            b.update(1)
        b.close()
        time.sleep(0.6)  # a phase without a bar
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert "\r" not in err and "" not in lines
    assert any(line.startswith("work:") and "4/4" in line for line in lines)
    assert any(line.startswith("interp test: still working") for line in lines)


def test_short_work_off_a_terminal_prints_nothing(log, monkeypatch, capsys):
    monkeypatch.setattr(progress, "INTERVAL", 30.0)
    with progress.heartbeat("interp test"):
        for _ in progress.bar(range(3), desc="quick"):
            pass
    assert capsys.readouterr().err == ""


def test_quiet_prints_nothing(log, monkeypatch, capsys):
    monkeypatch.setenv(progress.QUIET_ENV, "1")
    with progress.heartbeat("interp test"):
        for _ in progress.bar(range(3), desc="work"):
            time.sleep(0.15)
        time.sleep(0.5)
    assert capsys.readouterr().err == "" and not progress.wanted()


def test_on_a_terminal_the_bar_stays(monkeypatch):
    monkeypatch.setattr("sys.stderr", _Err(True))
    monkeypatch.delenv(progress.QUIET_ENV, raising=False)
    b = progress.bar(range(2), desc="tty", leave=False, dynamic_ncols=True)  # leave=False is overridden: bars stay
    assert b.leave is True
    list(b)


def test_interp_quiet_is_a_global_option(tmp_path, capsys):
    from sandbox_lens.interp.cli import main

    assert main(["--quiet", "verify", "modular_counter", "--automaton", "C3", "--length", "8", "--samples", "5"]) == 0
    assert capsys.readouterr().err == ""
