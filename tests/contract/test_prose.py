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


def paragraphs() -> list[tuple[int, str, str]]:
    """(words, file, first words) of every prose paragraph and list item; code, tables, headings and comments
    are not prose."""
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
                words = len(re.sub(r"<[^>]+>", "", item).split())
                out.append((words, str(path.relative_to(ROOT)), " ".join(item.split()[:8])))
    return out


def test_long_paragraphs_only_become_fewer():
    long = sorted((p for p in paragraphs() if p[0] > LIMIT), reverse=True)
    assert len(long) <= OVER_LIMIT, f"{len(long)} paragraphs over {LIMIT} words (at most {OVER_LIMIT}): {long[:5]}"
    assert not [p for p in long if p[0] > CEILING], [p for p in long if p[0] > CEILING]
