"""The package installs from a wheel, not only editable: the wheel holds every module of the source
tree, and the installed copy runs from a directory outside the repository."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("sandbox_lens",)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """Built from a copy of what a clone holds: a ``build/`` folder left in the checkout would hand an old
    build's files to the new wheel (and hide a package list that misses some)."""
    out, src = tmp_path_factory.mktemp("wheel"), tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, src / name)
    for pkg in PACKAGES:
        shutil.copytree(ROOT / pkg, src / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    r = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-q", "-w", str(out), str(src)],
        capture_output=True,
        text=True,
        cwd=out,
        check=False,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    (path,) = out.glob("sandbox_lens-*.whl")
    return path


def test_the_wheel_holds_every_module_of_the_source_tree(wheel):
    source = {
        p.relative_to(ROOT).as_posix()
        for pkg in PACKAGES
        for p in (ROOT / pkg).rglob("*")
        if p.suffix == ".py" or p.name == "py.typed"
    }
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        entry_points = next(z.read(n).decode() for n in names if n.endswith(".dist-info/entry_points.txt"))
    packaged = {n for n in names if n.split("/")[0] in PACKAGES}
    assert source - packaged == set(), f"missing from the wheel: {sorted(source - packaged)[:10]}"
    assert packaged - source == set(), f"in the wheel but not in the tree: {sorted(packaged - source)[:10]}"
    assert "interp = sandbox_lens.interp.cli:main" in entry_points
    assert "sandbox_lens/py.typed" in packaged  # typed (PEP 561)
    assert not {n.split("/")[0] for n in names} & {"interp", "constructions", "probes"}  # one import root
    with zipfile.ZipFile(wheel) as z:
        metadata = next(z.read(n).decode() for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        assert any(n.endswith("licenses/LICENSE") for n in z.namelist())
    assert "License-Expression: MIT" in metadata


def test_the_sdist_carries_what_its_tests_and_examples_need(tmp_path):
    """Built from the files a clone holds (git's), the sdist has the tests with their conftest and data,
    the examples, the tutorials, the docs and the LICENSE — and no build or cache debris."""
    import tarfile

    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=False)
    if listed.returncode != 0 or not listed.stdout.strip():
        pytest.skip("not a git checkout: the files a clone holds are unknown")
    tracked = listed.stdout.split()
    src = tmp_path / "clone"
    for name in tracked:
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, src / name)
    r = subprocess.run(
        [sys.executable, "-c", "import setuptools.build_meta as b; print(b.build_sdist('dist'))"],
        cwd=src,
        capture_output=True,
        text=True,
        check=False,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    with tarfile.open(src / "dist" / r.stdout.strip().splitlines()[-1]) as t:
        members = {m.split("/", 1)[1] for m in t.getnames() if "/" in m}
    for needed in (
        "LICENSE",
        "tests/conftest.py",
        "tests/data/construction_weights.json",
        "tests/circuit_families.py",
        "examples/cascades/parity_flipflop_counter.json",
        "tutorials/09_causal_alignment.py",
        "docs/circuits/leaderboard.json",
        "Makefile",
        "sandbox_lens/interp/cli/__init__.py",
    ):
        assert needed in members, needed
    assert not [m for m in members if "__pycache__" in m or m.endswith(".pyc")]


def test_the_installed_wheel_runs_from_another_directory(wheel, tmp_path):
    """Installed apart from the checkout (its dependencies from this environment), imported and run
    from a folder that is not the repository: `interp verify` is exact."""
    target = tmp_path / "site"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-compile",
            "--target",
            str(target),
            str(wheel),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "PYTHONPATH": str(target)}
    # this environment may also hold the checkout as an editable install: its import hook goes, so every
    # project module must come from the wheel
    script = elsewhere / "run.py"
    script.write_text(
        "import sys\n"
        "sys.meta_path[:] = [f for f in sys.meta_path if not type(f).__module__.startswith('__editable__')]\n"
        "import sandbox_lens.constructions, sandbox_lens.probes, sandbox_lens.interp\n"
        "from sandbox_lens.interp.cli import main\n"
        "code = main(sys.argv[1:])\n"
        "mine = [m for name, m in sys.modules.items() if name.split('.')[0] == 'sandbox_lens']\n"
        "print('FROM', sorted({str(getattr(m, '__file__', '') or '').split('/site/')[0] for m in mine}))\n"
        "sys.exit(code)\n"
    )
    r = subprocess.run(
        [
            sys.executable,
            str(script),
            "verify",
            "prefix_scan",
            "--automaton",
            "parity",
            "--length",
            "16",
            "--samples",
            "50",
        ],
        capture_output=True,
        text=True,
        cwd=elsewhere,
        env=env,
        check=False,
    )
    assert r.returncode == 0, r.stdout + r.stderr[-2000:]
    assert r.stdout.startswith("EXACT"), r.stdout
    assert f"FROM ['{tmp_path}']" in r.stdout, r.stdout
