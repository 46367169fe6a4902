"""Where a number came from: the commit (and whether the tree had uncommitted changes), the package
versions, the exact command, and the machine's Python — recorded in every ``results.json`` and in
the committed benchmark and leaderboard files."""

from __future__ import annotations

import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

__all__ = ["provenance", "git_state", "PACKAGES"]

#: The packages whose versions a result records (absent ones are recorded as None).
PACKAGES = ("sandbox-lens", "torch", "transformer-lens", "numpy", "scipy")
ROOT = Path(__file__).resolve().parents[2]


def git_state(root: Path = ROOT) -> dict[str, Any]:
    """``{"commit": sha or None, "dirty": bool or None}`` of the checkout ``root`` (None outside git, e.g.
    an installed wheel)."""

    def git(*args: str) -> str | None:
        try:
            r = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=20)
        except (OSError, subprocess.SubprocessError):
            return None
        return r.stdout if r.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if commit is None:
        return {"commit": None, "dirty": None}
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit.strip(), "dirty": None if status is None else bool(status.strip())}


def provenance(command: str | None = None) -> dict[str, Any]:
    """The commit, dirty flag, package versions, command (default: this process's argv) and Python."""
    from importlib.metadata import PackageNotFoundError, version

    versions: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            versions[name] = version(name)
        except PackageNotFoundError:
            versions[name] = None
    if command is None:
        command = " ".join(["interp" if Path(sys.argv[0]).name == "interp" else Path(sys.argv[0]).name, *sys.argv[1:]])
    return {
        **git_state(),
        "command": command,
        "versions": versions,
        "python": platform.python_version(),
        "platform": platform.platform(terse=True),
    }
