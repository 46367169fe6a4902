"""Fault injection (`make test-slow`): processes SIGKILLed at random points resume to the same results as an
uninterrupted run; a second process on the same --out is refused while the first finishes untouched; a
damaged checkpoint or run file is refused on resume, not trained over; a full disk while a checkpoint or
a report is written is one line and loses nothing. Each case names what must not be lost."""

import errno
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
TRAIN = [
    "train",
    "automaton",
    "--automaton",
    "parity",
    "--length",
    "8",
    "--steps",
    "300",
    "--eval-every",
    "50",
    "--layers",
    "1",
    "--d-model",
    "16",
]


def interp(args, **kw) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-m", "sandbox_lens.interp", "--threads", "1", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        **kw,
    )


def finish(args, timeout=600) -> subprocess.CompletedProcess:
    p = interp(args)
    out, err = p.communicate(timeout=timeout)
    return subprocess.CompletedProcess(args, p.returncode, out.decode(), err.decode())


def kill_at_random(args, out: Path, rng: random.Random, low: float, high: float) -> bool:
    """Start ``args``, wait until it has written a checkpoint under ``out`` (training has begun), then SIGKILL it
    after a further random delay; True if it was still running when killed."""
    p = interp(args)
    deadline = time.time() + 300
    while not list(out.rglob("checkpoint.safetensors")) and p.poll() is None:
        assert time.time() < deadline
        time.sleep(0.05)
    try:
        p.wait(timeout=rng.uniform(low, high))
        return False
    except subprocess.TimeoutExpired:
        p.send_signal(signal.SIGKILL)
        p.wait()
        return True


def _runs(summary: dict) -> list:
    keep = ("seed", "final_accuracy", "best_accuracy", "steps", "stopped_by")
    return [{k: r[k] for k in keep} for r in summary["runs"]]


def _history(run: Path) -> list:
    """Every held-out evaluation of a run (losses to the last bit), without its wall-clock times."""
    return [
        {k: v for k, v in h.items() if k != "wall_seconds"}
        for h in json.loads((run / "metrics.json").read_text())["history"]
    ]


def killed_and_resumed(args, tmp_path: Path, longest: float) -> tuple[Path, Path, int, int]:
    """Run ``args`` once uninterrupted into ``reference``, and into ``killed`` three times SIGKILLed at random
    (at most ``longest`` s after training began) and once to the end: (reference, killed, schedule seed, kills).
    The kill schedule is new every run; its seed goes into every failure."""
    reference = finish([*args, "--out", str(tmp_path / "reference")])
    assert reference.returncode == 0, reference.stderr
    seed = random.Random(int(time.time())).randrange(10**6)
    rng = random.Random(seed)
    out = tmp_path / "killed"
    kills = sum(kill_at_random([*args, "--out", str(out)], out, rng, 0.0, longest) for _ in range(3))
    assert kills, f"no kill landed (schedule seed {seed})"
    done = finish([*args, "--out", str(out)])
    assert done.returncode == 0, (seed, done.stderr)
    return tmp_path / "reference", out, seed, kills


def test_a_sweep_killed_at_random_points_resumes_to_the_uninterrupted_result(tmp_path):
    args = [*TRAIN, "--steps", "1500", "--target", "none", "--seeds", "0-2", "--workers", "1"]
    _, out, seed, kills = killed_and_resumed(args, tmp_path, 4.0)
    want = json.loads((tmp_path / "reference" / "summary.json").read_text())
    got = json.loads((out / "summary.json").read_text())
    assert _runs(got) == _runs(want), f"kill schedule seed {seed} ({kills} kills)"
    for s in range(3):
        assert _history(out / f"seed_{s}") == _history(tmp_path / "reference" / f"seed_{s}"), (seed, s)
    assert not list(out.rglob("*.tmp")), "a torn temporary file was left behind"


def test_an_experiment_killed_at_random_points_resumes_to_the_uninterrupted_result(tmp_path):
    args = ["experiment", "parity-ood", "--quick", "--workers", "1"]
    _, out, seed, _ = killed_and_resumed(args, tmp_path, 6.0)
    want = json.loads((tmp_path / "reference" / "results.json").read_text())
    got = json.loads((out / "results.json").read_text())
    for key in ("claims", "tables", "data", "settings", "seeds"):
        assert got[key] == want[key], f"{key} differs after kills (schedule seed {seed})"


def test_a_second_process_on_the_same_out_is_refused_and_the_first_finishes(tmp_path):
    out = tmp_path / "run"
    long = [*TRAIN, "--steps", "1000000", "--eval-every", "200", "--target", "none", "--out", str(out)]
    first = interp(long)
    deadline = time.time() + 120
    while not (out / ".lock").exists() or not (out / ".lock").read_text().strip():
        assert time.time() < deadline and first.poll() is None
        time.sleep(0.2)
    second = finish([*long, "--resume"])
    assert first.poll() is None  # the first was still writing when the second asked
    assert second.returncode == 2
    assert second.stderr.count("\n") == 1 and "being written by another interp process" in second.stderr
    assert "Traceback" not in second.stderr
    first.send_signal(signal.SIGINT)  # the first stops at its own pace and keeps a checkpoint the second can resume
    first.wait(timeout=120)
    from sandbox_lens.interp.train.checkpoint import read_checkpoint

    assert read_checkpoint(out)[0]["step"] > 0
    experiment = tmp_path / "experiment"
    holder = interp(["experiment", "parity-ood", "--quick", "--workers", "1", "--out", str(experiment)])
    while not (experiment / ".lock").exists() or not (experiment / ".lock").read_text().strip():
        assert time.time() < deadline + 120 and holder.poll() is None
        time.sleep(0.2)
    again = finish(["experiment", "parity-ood", "--quick", "--out", str(experiment)])
    assert again.returncode == 2 and "being written by another interp process" in again.stderr
    assert holder.wait(timeout=600) == 0 and json.loads((experiment / "results.json").read_text())["claims"]


def test_a_damaged_checkpoint_or_run_file_is_refused_not_trained_over(tmp_path):
    out = tmp_path / "run"
    long = [*TRAIN, "--steps", "100000", "--target", "none", "--out", str(out)]
    running = interp(long)
    weights = out / "checkpoint.safetensors"
    deadline = time.time() + 120
    while not weights.exists():
        assert time.time() < deadline and running.poll() is None
        time.sleep(0.2)
    running.send_signal(signal.SIGKILL)
    running.wait()
    damaged = weights.read_bytes()[:-100]
    weights.write_bytes(damaged)
    r = finish([*long, "--resume"])
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert weights.read_bytes() == damaged  # refused, not overwritten by a fresh run
    sweep = tmp_path / "sweep"
    assert finish([*TRAIN, "--seeds", "0-1", "--workers", "1", "--out", str(sweep)]).returncode == 0
    metrics = sweep / "seed_1" / "metrics.json"
    metrics.write_text(metrics.read_text()[:40])
    before = {p: p.read_bytes() for p in sweep.rglob("*") if p.is_file()}
    r = finish([*TRAIN, "--seeds", "0-1", "--workers", "1", "--out", str(sweep)])
    assert r.returncode == 2 and "malformed JSON" in r.stderr and r.stderr.count("\n") == 1
    assert {p: p.read_bytes() for p in sweep.rglob("*") if p.is_file()} == before


def _full_disk_at(monkeypatch, name: str, nth: int = 1):
    """The disk fills up while the ``nth`` write of a file called ``name`` is flushed (``os.fsync`` of a file
    whose path contains ``name`` fails with ENOSPC from then on): the data is written, not yet on disk — a
    writer that wrote in place would now have torn the file."""
    real = os.fsync
    seen = {"n": 0}

    def fsync(fd):
        if name in os.readlink(f"/proc/self/fd/{fd}"):
            seen["n"] += 1
            if seen["n"] >= nth:
                raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd)

    monkeypatch.setattr(os, "fsync", fsync)


def test_a_full_disk_while_a_checkpoint_or_a_report_is_written_loses_nothing(tmp_path, monkeypatch, capsys):
    from sandbox_lens.interp.cli import main
    from sandbox_lens.interp.train.checkpoint import read_checkpoint

    args = [*TRAIN, "--target", "none"]
    assert main([*args, "--out", str(tmp_path / "reference")]) == 0
    out = tmp_path / "run"
    _full_disk_at(monkeypatch, "checkpoint.safetensors", 2)  # while the second checkpoint (step 100) is written
    assert main([*args, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "No space left" in err
    assert read_checkpoint(out)[0]["step"] == 50 and not list(out.glob("*.tmp"))  # the first checkpoint is whole
    monkeypatch.undo()
    assert main([*args, "--out", str(out), "--resume"]) == 0  # and resumes to the uninterrupted run's result
    keep = ("final_accuracy", "best_accuracy", "steps", "history")
    got, want = (json.loads((d / "metrics.json").read_text()) for d in (out, tmp_path / "reference"))

    def strip(m):
        history = [{k: v for k, v in h.items() if k != "wall_seconds"} for h in m["history"]]
        return {k: m[k] for k in keep if k != "history"} | {"history": history}

    assert strip(got) == strip(want)
    experiment = tmp_path / "experiment"
    assert main(["experiment", "parity-ood", "--quick", "--workers", "1", "--out", str(experiment)]) == 0
    page = (experiment / "report.html").read_bytes()
    _full_disk_at(monkeypatch, "report.html")
    assert main(["experiment", "parity-ood", "--quick", "--workers", "1", "--out", str(experiment)]) == 2
    assert "No space left" in capsys.readouterr().err
    assert (experiment / "report.html").read_bytes() == page  # the old report is whole
    assert not list(experiment.glob(".report.html.*"))


def test_a_rebuild_that_runs_out_of_room_keeps_the_old_model_verifying(tmp_path):
    """A real write failure, not a patched one: the rebuild runs with a 4 KiB file-size limit (RLIMIT_FSIZE, the
    kernel's EFBIG as a full disk's ENOSPC), so the new weights cannot be written. One line, exit 2, and the old
    model is byte for byte what it was and still verifies."""
    import resource

    model = tmp_path / "m"
    built = finish(["build", "modular_counter", "--automaton", "C3", "-T", "8", "--out", str(model)])
    assert built.returncode == 0, built.stderr
    before = {p.name: p.read_bytes() for p in model.iterdir() if p.name != ".lock"}
    assert max(len(b) for b in before.values()) > 4096  # the limit bites on the weights

    def small_files() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit then fails with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = ["build", "modular_counter", "--automaton", "C5", "-T", "8", "--out", str(model)]
    p = subprocess.run(
        [sys.executable, "-m", "sandbox_lens.interp", *argv],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        preexec_fn=small_files,
        timeout=300,
    )
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "File too large" in p.stderr, p.stderr
    assert {q.name: q.read_bytes() for q in model.iterdir() if q.name != ".lock"} == before
    checked = finish(["verify", "--model", str(model)])
    assert checked.returncode == 0 and "C3" in checked.stdout + checked.stderr, checked.stderr


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        text = (task / "children").read_text() if (task / "children").exists() else ""
        found += [int(x) for x in text.split()]
    return found


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
def test_a_sweep_whose_parent_is_killed_alone_leaves_no_orphan_and_the_rerun_starts_at_once(tmp_path):
    """SIGKILL to the sweep's own process only (not its group): the kernel kills its workers too, so nothing holds
    the directory's lock and a rerun starts within seconds, resuming from the checkpoints (it used to be refused for
    minutes, naming the dead parent)."""
    out = tmp_path / "sweep"
    args = [*TRAIN, "--steps", "1000000", "--target", "none", "--seeds", "0-1", "--workers", "2", "--out", str(out)]
    parent = interp(args)
    deadline = time.time() + 300
    while len(list(out.rglob("checkpoint.safetensors"))) < 2:
        assert time.time() < deadline and parent.poll() is None
        time.sleep(0.2)
    workers = _children(parent.pid)
    assert workers
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.time() + 60
    while any(
        Path(f"/proc/{w}").exists() and "Z" not in Path(f"/proc/{w}/stat").read_text().split()[2] for w in workers
    ):
        assert time.time() < deadline, "a worker outlived its sweep by a minute"
        time.sleep(0.2)
    rerun = interp(args, start_new_session=True)
    time.sleep(15)
    assert rerun.poll() is None, rerun.communicate()[1].decode()  # running, not refused
    os.killpg(rerun.pid, signal.SIGINT)  # Ctrl-C as a terminal sends it: to the sweep and its workers
    _, err = rerun.communicate(timeout=120)
    # one line, no traceback: busy workers checkpoint and their Interrupted pickles back to the parent; an idle
    # worker lets the signal pass (both used to print tracebacks, the second a BrokenProcessPool)
    assert rerun.returncode == 130 and "Traceback" not in err.decode(), err.decode()[-2000:]
    assert err.decode().strip().splitlines()[-1].startswith("interp: interrupted")
