"""One output-path policy: a write never replaces a device, pipe, socket or directory, never goes through or over a
symbolic link, a lock is never taken through a planted link, and a directory has one writer at a time."""

from __future__ import annotations

import os

import pytest

from sandbox_lens.interp.errors import OutputPathError
from sandbox_lens.interp.files import InUseError, atomic_write, check_output_path, claimed, exclusive


@pytest.fixture
def odd(tmp_path):
    """A pipe, a symbolic link to a file outside, a directory, and the file the link points at."""
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "target").write_text("keep")
    (tmp_path / "link").symlink_to(tmp_path / "target")
    (tmp_path / "dir").mkdir()
    return tmp_path


@pytest.mark.parametrize(
    "name, message", [("pipe", "not a regular file"), ("link", "symbolic link"), ("dir", "a directory")]
)
def test_an_atomic_write_replaces_only_regular_files(odd, name, message):
    with pytest.raises(OutputPathError, match=message):
        atomic_write(odd / name, b"x")
    assert (odd / "target").read_text() == "keep" and (odd / "pipe").is_fifo() and (odd / "link").is_symlink()
    atomic_write(odd / "new", b"x")
    atomic_write(odd / "new", b"y")
    assert (odd / "new").read_bytes() == b"y"


def test_an_out_that_is_a_link_or_a_device_is_refused_before_any_work(odd, interp_run):
    for name in ("pipe", "link"):
        code, _, err = interp_run("build", "prefix_scan", "--automaton", "parity", "-T", "4", "--out", odd / name)
        assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert (odd / "target").read_text() == "keep" and (odd / "pipe").is_fifo()
    check_output_path(odd / "dir")  # a directory, or a path not yet there, is fine
    check_output_path(odd / "absent")


@pytest.mark.skipif(not os.path.exists("/dev/null"), reason="needs /dev/null")
def test_an_out_at_a_device_node_is_refused_and_the_device_kept(tmp_path, interp_run):
    """The null device as a directory (build, circuit) or as a file (evaluate, population): one line, and it is
    still a character device afterwards (as root an atomic rename would have replaced it with a file)."""
    import stat

    code, _, err = interp_run("build", "prefix_scan", "--automaton", "parity", "-T", "4", "--out", tmp_path / "m")
    assert code == 0, err
    for argv in (
        ["build", "prefix_scan", "--automaton", "parity", "-T", "4"],
        ["circuit", "prefix_scan", "--automaton", "C3", "-T", "4"],
        ["evaluate", "--model", tmp_path / "m"],
    ):
        code, _, err = interp_run(*argv, "--out", "/dev/null")
        assert code == 2 and len(err.strip().splitlines()) == 1 and "/dev/null" in err, (argv, err)
        assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_a_planted_lock_link_is_refused_not_truncated(odd):
    (odd / "dir" / ".lock").symlink_to(odd / "target")
    with pytest.raises(OutputPathError, match="symbolic link"):
        with exclusive(odd / "dir"):
            pass
    assert (odd / "target").read_text() == "keep"


def test_a_directory_has_one_writer_and_a_failed_claim_leaves_nothing(tmp_path, interp_run):
    busy = tmp_path / "busy"
    busy.mkdir()
    with exclusive(busy):  # a training run, say, writing there
        code, _, err = interp_run("circuit", "prefix_scan", "--automaton", "C3", "-T", "4", "--out", busy)
        assert code == 2 and "being written by another" in err, err
        code, _, err = interp_run("align", "--model", busy, "--out", busy)
        assert code == 2 and "being written by another" in err, err
        code, _, err = interp_run("build", "prefix_scan", "--automaton", "C3", "-T", "4", "--out", busy)
        assert code == 2 and "being written by another" in err, err
        code, _, err = interp_run("report", busy)  # a comparison still writing there
        assert code == 2 and "being written by another" in err, err
        code, _, err = interp_run("demo", "--out", busy)
        assert code == 2 and "being written by another" in err, err
    assert sorted(p.name for p in busy.iterdir()) == [".lock"]
    fresh = tmp_path / "fresh"
    with pytest.raises(RuntimeError):
        with claimed(fresh):
            raise RuntimeError("the work failed")
    assert not fresh.exists()  # created for the claim, removed with it
    with pytest.raises(InUseError):
        with claimed(busy), claimed(busy):
            pass


def test_a_sweep_is_refused_in_a_single_runs_directory(tmp_path, interp_run):
    run = tmp_path / "run"
    base = ["train", "automaton", "--automaton", "parity", "-T", "4", "--steps", "2", "--eval-every", "1"]
    code, _, err = interp_run(*base, "--d-model", "8", "--out", run)
    assert code == 0, err
    before = sorted(p.name for p in run.iterdir())
    code, _, err = interp_run(*base, "--d-model", "8", "--seeds", "0-1", "--workers", "1", "--out", run)
    assert code == 2 and "holds a single training run" in err, err
    assert sorted(p.name for p in run.iterdir()) == before
    code, _, err = interp_run("population", run)  # one run is not a population (was a ValueError on a subpath)
    assert code == 2 and "is one training run" in err and len(err.strip().splitlines()) == 1, err


def test_a_report_cut_short_leaves_no_temporary_after_the_next_run(tmp_path, interp_run):
    """A report killed while it was written leaves `.report.html.*.tmp` (1.5 MB with circuitsvis); the next
    `interp report` holds the directory's lock (a report or comparison in progress there refuses it), so every
    such temporary is torn and removed, old or new."""
    stale, fresh = tmp_path / ".report.html.x1y2.tmp", tmp_path / ".report.html.z3.tmp"
    stale.write_bytes(b"half a page")
    fresh.write_bytes(b"also cut short")
    os.utime(stale, (0, 0))
    (tmp_path / "metrics.json").write_text("{}")
    code, _, err = interp_run("report", tmp_path)
    assert code == 2 and "example" in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == [".lock", "metrics.json"]
