"""The committed results of the full runs: ``docs/results/<experiment>.json`` (each full run's
``results.json`` without its per-model data and figures) and the table of verdicts the docs quote,
rendered from those files alone — so that no number in the prose lacks a file behind it.

``interp experiment publish --out reports/reproduce --to docs/results`` writes the files and
rewrites the table between the markers in ``docs/experiments.md``; a test checks that the table
there is exactly :func:`verdict_table` of the files.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from sandbox_lens.interp.errors import CheckpointError, SandboxError
from sandbox_lens.interp.experiments.report import RESULTS_SCHEMA, read_results
from sandbox_lens.interp.experiments.rules import effect_text, stability_text
from sandbox_lens.interp.files import atomic_write
from sandbox_lens.interp.jsonfile import read_json

__all__ = [
    "slim",
    "publish",
    "load_published",
    "verdict_table",
    "replace_table",
    "START",
    "END",
    "markdown_table",
    "render_tables",
    "TABLE_BLOCK",
]

#: A block of a docs page that holds one table of a committed result, rendered by :func:`render_tables`:
#: ``<!-- table: EXPERIMENT INDEX -->`` … ``<!-- end of table -->``.
TABLE_BLOCK = re.compile(r"(<!-- table: ([a-z0-9-]+) (\d+) -->\n)(.*?)(\n<!-- end of table -->)", re.S)

#: what a committed file keeps of ``results.json`` (its per-model ``data`` and figures stay in the run directory)
KEEP = (
    "experiment",
    "title",
    "section",
    "thesis_claim",
    "quick",
    "seeds",
    "options",
    "scale",
    "minutes",
    "runs",
    "training_cpu_minutes",
    "provenance",
    "settings",
    "claims",
    "tables",
    "conclusions",
    "caveats",
    "environment",
)
START = "<!-- verdict table: rendered from docs/results/*.json by `interp experiment publish`; do not edit by hand -->"
END = "<!-- end of the verdict table -->"


def slim(results: dict[str, Any]) -> dict[str, Any]:
    """The part of an experiment's ``results.json`` that is committed (every verdict, its estimate and
    interval, the tables, the provenance); a quick run is refused — it does not test a claim."""
    if results.get("quick"):
        raise SandboxError(
            f"{results.get('experiment')}: a quick run tests the pipeline, not the claim; publish full runs"
        )
    missing = [k for k in ("experiment", "claims", "provenance") if k not in results]
    if missing:
        raise CheckpointError(f"results without {', '.join(missing)}: not an experiment's results.json")
    return {k: results[k] for k in KEEP if k in results}


def publish(
    out: str | Path,
    to: str | Path,
    names: Iterable[str],
    docs: str | Path | None = None,
    table: Iterable[str] | None = None,
) -> list[Path]:
    """Write ``to/<name>.json`` for every experiment directory ``out/<name>`` (all must exist) and, with
    ``docs``, rewrite the verdict table between :data:`START` and :data:`END` in that file: every experiment of
    ``table`` (default ``names``), in that order, that has results — those published now, else the ones already in
    ``to`` — so that publishing one rerun keeps the other experiments' rows."""

    names = list(names)
    slims = [slim(read_results(Path(out) / name)) for name in names]  # read all before writing any
    to = Path(to)
    fresh = dict(zip(names, slims))
    order = names if table is None else list(table)
    rows = [
        fresh[n] if n in fresh else load_published(to, [n])[0]
        for n in order
        if n in fresh or (to / f"{n}.json").is_file()
    ]
    # everything is rendered before anything is written: a refusal leaves every file as it was
    docs_text = None if docs is None else replace_table(Path(docs).read_text(), verdict_table(rows)).encode()
    texts = [(json.dumps(r, indent=1, ensure_ascii=False, allow_nan=False) + "\n").encode() for r in slims]
    to.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in zip(names, texts):
        path = to / f"{name}.json"
        atomic_write(path, text)
        written.append(path)
    if docs is not None and docs_text is not None:
        atomic_write(Path(docs), docs_text)
        written.append(Path(docs))
    return written


def load_published(folder: str | Path, names: Iterable[str]) -> list[dict[str, Any]]:
    """The committed results of ``names``, in that order (a missing file is an error)."""
    out = []
    for name in names:
        path = Path(folder) / f"{name}.json"
        if not path.is_file():
            raise CheckpointError(f"no committed results for {name} ({path} missing)")
        out.append(read_json(path, RESULTS_SCHEMA, error=CheckpointError, what="an experiment's results"))
    return out


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _run_line(r: dict[str, Any]) -> str:
    p = r.get("provenance", {})
    commit = (p.get("commit") or "no commit")[:7] + (" (dirty)" if p.get("dirty") else "")
    seeds = r.get("seeds", [])
    span = (
        f"{seeds[0]}–{seeds[-1]}"
        if len(seeds) > 1 and seeds == list(range(seeds[0], seeds[-1] + 1))
        else ", ".join(map(str, seeds))
    )
    return (
        f"`{r['experiment']}` ({r['section']}; seeds {span}, {r['runs']} runs, "
        f"{r.get('training_cpu_minutes', 0):.1f} training CPU-min, commit {commit})"
    )


def verdict_table(slims: Iterable[dict[str, Any]]) -> str:
    """The markdown table of every verdict: experiment, claim, the thesis, what was measured with its
    effect, interval and threshold, and the verdict (with why, when it is not "reproduced")."""
    lines = [
        "| experiment | claim | thesis | measured here (effect, 95% interval, threshold) | verdict |",
        "|---|---|---|---|---|",
    ]
    for r in slims:
        for i, c in enumerate(r["claims"]):
            verdict = f"**{c['verdict']}**" + (f" — {c['why']}" if c.get("why") else "")
            if stability_text(c):
                verdict += f" ({stability_text(c)})"
            measured = c["measured"] + (f"<br>{effect_text(c)}" if effect_text(c) else "")
            lines.append(
                "| "
                + " | ".join(
                    _cell(x) for x in (_run_line(r) if i == 0 else "", c["claim"], c["thesis"], measured, verdict)
                )
                + " |"
            )
    return "\n".join(lines)


def replace_table(text: str, table: str) -> str:
    """``text`` with the block between :data:`START` and :data:`END` replaced by ``table``."""
    pattern = re.compile(re.escape(START) + r".*?" + re.escape(END), re.S)
    if not pattern.search(text):
        raise SandboxError("the docs page has no verdict-table markers (add the START and END comment lines)")
    return pattern.sub(lambda _: f"{START}\n{table}\n{END}", text, count=1)


def markdown_table(table: dict[str, Any]) -> str:
    """One table of a result (``{"title", "columns", "rows", "note"}``) as Markdown: its title in bold, the rows,
    its note below."""

    def cell(x: Any) -> str:
        return "—" if x is None else f"{x:.3f}" if isinstance(x, float) else str(x).replace("|", "\\|")

    lines = [
        f"**{table['title']}**",
        "",
        "| " + " | ".join(map(cell, table["columns"])) + " |",
        "|" + "---|" * len(table["columns"]),
    ]
    lines += ["| " + " | ".join(map(cell, row)) + " |" for row in table["rows"]]
    if table.get("note"):
        lines += ["", table["note"]]
    return "\n".join(lines)


def render_tables(text: str, results: str | Path) -> str:
    """``text`` with every :data:`TABLE_BLOCK` rendered from ``results/<experiment>.json`` (its table INDEX); a
    block naming a missing file or table is refused."""

    def fill(m: re.Match) -> str:
        path = Path(results) / f"{m.group(2)}.json"
        if not path.is_file():
            raise CheckpointError(f"{path} missing: the docs quote a table of a result that is not committed")
        tables = read_json(path, RESULTS_SCHEMA, error=CheckpointError).get("tables") or []
        i = int(m.group(3))
        if i >= len(tables):
            raise CheckpointError(f"{path} has {len(tables)} tables; the docs quote table {i}")
        return m.group(1) + markdown_table(tables[i]) + m.group(5)

    return TABLE_BLOCK.sub(fill, text)
