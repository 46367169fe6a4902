"""Docs that scan: paragraphs (and list items) of the README and docs/ are counted in words. A paragraph over
:data:`LIMIT` words is debt: their number may only fall (:data:`OVER_LIMIT`, lowered as they are split), and none
may pass :data:`CEILING`."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 120
#: paragraphs over LIMIT words (issue 45 asks for none, and there are none now): never raise it
OVER_LIMIT = 0
CEILING = 400


def prose() -> list[tuple[str, str]]:
    """(file, text) of every prose paragraph and list item; code, tables, headings and comments are not prose."""
    out = []
    files = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").rglob("*.md"))]
    for path in files:
        if "_build" in path.parts:
            continue
        text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
        for block in re.split(r"\n\s*\n", text):
            lines = block.strip().splitlines()
            if not lines or lines[0].startswith(("|", "#", "<!--", "    ")):
                continue
            for item in re.split(r"\n(?=\s*(?:[-*]|\d+\.) )", block.strip()):
                out.append((str(path.relative_to(ROOT)), re.sub(r"<[^>]+>", "", item)))
    return out


def paragraphs() -> list[tuple[int, str, str]]:
    """(words, file, first words) of every prose paragraph and list item."""
    return [(len(text.split()), path, " ".join(text.split()[:8])) for path, text in prose()]


def test_long_paragraphs_only_become_fewer():
    long = sorted((p for p in paragraphs() if p[0] > LIMIT), reverse=True)
    assert len(long) <= OVER_LIMIT, f"{len(long)} paragraphs over {LIMIT} words (at most {OVER_LIMIT}): {long[:5]}"
    assert not [p for p in long if p[0] > CEILING], [p for p in long if p[0] > CEILING]


#: a test count or a suite's time typed into prose goes stale with the next test (issue 45): generate it or drop it
HAND_TYPED = re.compile(
    r"\b\d[\d,]*\s+(?:passed|failed|skipped)\b"
    r"|\b\d[\d,]*\s+tests\b(?! pass)"
    r"|(?:make test(?![-\w])|test suite|the suite)\b[^.]{0,60}?\b\d+(?:\.\d+)?\s*(?:min|minutes|s|seconds)\b"
)


def test_no_test_counts_or_suite_times_in_prose():
    found = [(path, m.group(0)) for path, text in prose() for m in HAND_TYPED.finditer(" ".join(text.split()))]
    assert not found, found


def test_the_hand_typed_figures_reading_finds_them():
    assert HAND_TYPED.search("the default suite: 1,529 passed, 72 skipped")
    assert HAND_TYPED.search("`make test` takes about 13 minutes on two idle cores")
    assert not HAND_TYPED.search("10 seeds per population, 400 words per shift")
