"""A file the docs, the README or a docstring names by its path in the repository exists: a moved test or benchmark
leaves no pointer to nothing (two had, found by hand). Paths that name built output (the docs site, a rendered
tutorial) or a placeholder (``NAME.py``) are not files of the checkout."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NAMED = re.compile(
    r"\b(?:tests|benchmarks|sandbox_lens|docs|examples|tutorials)/[A-Za-z0-9_./-]+\."
    r"(?:py|md|json|ipynb|png|toml|yaml|txt)\b"
)
#: built by ``make docs`` (the site and its pages), or a name a reader fills in
NOT_IN_CHECKOUT = re.compile(r"_build/|/[A-Z]+\.py$")


def named_paths() -> dict[str, set[str]]:
    """Every repository path named in the README, CONTRIBUTING, docs/*.md, the package, benchmarks and the Makefile,
    with the files that name it."""
    files = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "Makefile"]
    files += [p for p in (ROOT / "docs").rglob("*.md") if "_build" not in p.parts]
    files += [*(ROOT / "sandbox_lens").rglob("*.py"), *(ROOT / "benchmarks").rglob("*.py")]
    out: dict[str, set[str]] = {}
    for path in files:
        if not path.exists():
            continue
        for name in NAMED.findall(path.read_text()):
            if not NOT_IN_CHECKOUT.search(name):
                out.setdefault(name, set()).add(str(path.relative_to(ROOT)))
    return out


def test_every_named_path_exists():
    named = named_paths()
    assert len(named) > 20, "the reading finds the paths the docs name"
    missing = {name: sorted(where) for name, where in named.items() if not (ROOT / name).exists()}
    assert not missing, missing


def test_the_reading_finds_a_moved_test():
    assert NAMED.findall("checked by ``tests/circuits/test_truth.py`` on every family") == [
        "tests/circuits/test_truth.py"
    ]
    assert not NOT_IN_CHECKOUT.search("tests/circuits/test_truth.py")
    assert NOT_IN_CHECKOUT.search("docs/_build/html/index.html")
