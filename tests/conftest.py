import os
import subprocess
import sys
from pathlib import Path

from hypothesis import HealthCheck, settings

# Model builds are slow-ish compared with hypothesis's default deadline.
settings.register_profile("sandbox", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "sandbox"))


import pytest  # noqa: E402


def pytest_collection_modifyitems(config, items):
    """On TransformerLens 4.x, skip the tests that cannot run on its bridge, each with its reason
    (``tests/bridge_exclusions.py``); on 3.9 nothing is skipped."""
    from sandbox_lens.interp.model.hooked import backend

    if backend() != "TransformerBridge":
        return
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bridge_exclusions import NOT_ON_BRIDGE

    for item in items:
        why = NOT_ON_BRIDGE.get(item.nodeid.split("[", 1)[0])
        if why:
            item.add_marker(pytest.mark.skip(reason=f"not on TransformerLens 4.x: {why}"))


@pytest.fixture(autouse=True)
def _keep_torch_threads():
    """Commands run in-process set torch's threads (one, by default, for training and analyses); the
    rest of the suite keeps the process's own setting."""
    import torch

    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def interp_cli():
    """``interp ARGS...`` in a fresh process from the checkout, as a user runs it: the CompletedProcess
    (text output captured; ``timeout`` and other ``subprocess.run`` keywords pass through)."""

    def run(*argv, **kwargs):
        kwargs.setdefault("cwd", ROOT)
        return subprocess.run(
            [sys.executable, "-m", "sandbox_lens.interp", *map(str, argv)],
            capture_output=True,
            text=True,
            check=False,
            **kwargs,
        )

    return run


@pytest.fixture
def interp_run(capsys):
    """``interp ARGS...`` in this process (the imports are paid once): (exit code, stdout, stderr); argparse's
    usage errors exit 2 like the command's own."""
    from sandbox_lens.interp.cli import main

    def run(*argv):
        try:
            code = main([str(a) for a in argv])
        except SystemExit as e:
            code = e.code
        out, err = capsys.readouterr()
        return code, out, err

    return run


def _checkout_status() -> set[str] | None:
    """``git status`` of the checkout (untracked files listed one by one, ignored ones left out); None outside git."""
    try:
        r = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=all"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return set(r.stdout.splitlines()) if r.returncode == 0 else None


def pytest_sessionstart(session):
    session.config.stash[_STATUS] = _checkout_status()


def pytest_sessionfinish(session, exitstatus):
    """A test that writes into the checkout (a relative path, a command run with the checkout as its working
    directory) fails the run: such files end up committed. Ignored paths (reports/, build outputs) are allowed."""
    before = session.config.stash.get(_STATUS, None)
    after = _checkout_status() if before is not None else None
    new = sorted(after - before) if after is not None else []
    if new:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        message = "the tests left files in the checkout: " + ", ".join(line[3:] for line in new[:10])
        if reporter is not None:
            reporter.write_line(message, red=True)
        else:
            print(message, file=sys.stderr)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


_STATUS = pytest.StashKey[object]()
