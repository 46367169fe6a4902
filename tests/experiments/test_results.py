"""The committed results: every verdict the docs quote is rendered from a file under docs/results/,
and `interp experiment publish` writes those files and that table (quick runs refused)."""

import json
from pathlib import Path

import pytest

from sandbox_lens.interp.cli import main
from sandbox_lens.interp.errors import SandboxError
from sandbox_lens.interp.experiments import EXPERIMENTS
from sandbox_lens.interp.experiments.results import (
    END,
    START,
    load_published,
    publish,
    replace_table,
    slim,
    verdict_table,
)
from sandbox_lens.interp.experiments.rules import VERDICTS, Rule, rule_on
from sandbox_lens.interp.stats import Estimate

ROOT = Path(__file__).resolve().parents[2]


def _results(name: str, quick: bool = False) -> dict:
    rule = Rule("a drop", "above", 0.1)
    row = {
        "claim": f"{name} drops",
        "thesis": "drops sharply",
        "measured": "0.9 → 0.5",
        "family": None,
        "null": None,
        **rule_on(rule, Estimate(0.4, (0.3, 0.5), 6, "twins", "mean")),
    }
    return {
        "experiment": name,
        "title": name,
        "section": "§1",
        "thesis_claim": "x",
        "quick": quick,
        "seeds": [0, 1, 2],
        "options": {},
        "scale": "s",
        "minutes": 1.0,
        "runs": 6,
        "training_cpu_minutes": 2.5,
        "provenance": {"commit": "abc1234def", "dirty": False, "command": "interp experiment all"},
        "settings": {},
        "claims": [row],
        "tables": [],
        "conclusions": [],
        "caveats": [],
        "data": {"big": [1] * 100},
        "figures": [{"file": "f.png"}],
    }


def _write(tmp_path: Path, names, quick=False) -> Path:
    out = tmp_path / "runs"
    for n in names:
        (out / n).mkdir(parents=True)
        (out / n / "results.json").write_text(json.dumps(_results(n, quick)))
    return out


def test_publish_writes_slim_files_and_the_docs_table(tmp_path):
    out = _write(tmp_path, ["a", "b"])
    page = tmp_path / "page.md"
    page.write_text(f"# Results\n\nbefore\n\n{START}\nold table\n{END}\n\nafter\n")
    written = publish(out, tmp_path / "results", ["a", "b"], page)
    assert [p.name for p in written] == ["a.json", "b.json", "page.md"]
    kept = json.loads((tmp_path / "results" / "a.json").read_text())
    assert "data" not in kept and "figures" not in kept and kept["claims"][0]["estimate"]["interval"] == [0.3, 0.5]
    text = page.read_text()
    assert "old table" not in text and text.startswith("# Results") and text.rstrip().endswith("after")
    table = verdict_table(load_published(tmp_path / "results", ["a", "b"]))
    assert table in text
    assert "`a` (§1; seeds 0–2, 6 runs, 2.5 training CPU-min, commit abc1234)" in table
    assert "a drop = 0.4 [0.3, 0.5], 6 twins; threshold 0.1 (above)" in table and "**reproduced**" in table


def test_publishing_one_rerun_keeps_the_other_experiments_rows(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(f"{START}\nold\n{END}\n")
    publish(_write(tmp_path, ["a", "b"]), tmp_path / "results", ["a", "b"], page)
    rerun = tmp_path / "rerun"
    (rerun / "b").mkdir(parents=True)
    (rerun / "b" / "results.json").write_text(json.dumps({**_results("b"), "runs": 9}))
    written = publish(rerun, tmp_path / "results", ["b"], page, table=["a", "b", "c"])  # c: never published
    assert [p.name for p in written] == ["b.json", "page.md"]
    rows = load_published(tmp_path / "results", ["a", "b"])
    assert rows[1]["runs"] == 9 and f"{START}\n{verdict_table(rows)}\n{END}" in page.read_text()


def test_quick_runs_missing_runs_and_pages_without_markers_are_refused(tmp_path):
    with pytest.raises(SandboxError, match="quick run"):
        slim(_results("a", quick=True))
    out = _write(tmp_path, ["a"])
    with pytest.raises(Exception, match="results.json missing"):
        publish(out, tmp_path / "results", ["a", "b"])
    assert not (tmp_path / "results").exists()  # nothing written before everything was read
    with pytest.raises(SandboxError, match="markers"):
        replace_table("no markers here", "| x |")


def test_cli_publish(tmp_path, capsys):
    out = _write(tmp_path, list(EXPERIMENTS))
    assert main(["experiment", "publish", "--out", str(out)]) == 2
    assert "needs --to" in capsys.readouterr().err
    assert main(["experiment", "publish", "--out", str(out), "--to", str(tmp_path / "r")]) == 0
    assert sorted(p.name for p in (tmp_path / "r").iterdir()) == sorted(f"{n}.json" for n in EXPERIMENTS)
    one = _write(tmp_path / "one", ["parity-ood"])  # publishes what --out holds; the table keeps the rest
    assert main(["experiment", "publish", "--out", str(one), "--to", str(tmp_path / "r")]) == 0
    assert main(["experiment", "publish", "--out", str(tmp_path / "empty"), "--to", str(tmp_path / "r")]) == 2
    assert "holds no experiment's directory" in capsys.readouterr().err
    assert main(["experiment", "parity-ood", "--out", str(tmp_path / "x"), "--to", "y"]) == 2
    assert "go with `interp experiment publish`" in capsys.readouterr().err


def test_the_docs_verdict_table_is_rendered_from_the_committed_results():
    """No verdict in docs/experiments.md without a file behind it: the table between the markers is exactly
    the one rendered from docs/results/<experiment>.json, and every committed run is a full run with a commit."""
    published = load_published(ROOT / "docs" / "results", EXPERIMENTS)
    page = (ROOT / "docs" / "experiments.md").read_text()
    assert f"{START}\n{verdict_table(published)}\n{END}" in page
    for r in published:
        assert r["quick"] is False and r["provenance"]["commit"] and r["claims"]
        for c in r["claims"]:
            assert c["verdict"] in VERDICTS and "interval" in c["estimate"]


def test_every_quoted_table_is_rendered_from_the_committed_results(tmp_path):
    """A docs page may quote a result's table between `<!-- table: EXPERIMENT I -->` and `<!-- end of table -->`:
    the block holds exactly that table of docs/results/EXPERIMENT.json; a block naming no committed file is refused."""
    from sandbox_lens.interp.experiments.results import TABLE_BLOCK, render_tables

    for page in sorted((ROOT / "docs").rglob("*.md")):
        text = page.read_text()
        assert render_tables(text, ROOT / "docs" / "results") == text, f"{page}: a quoted table differs from its result"
    assert TABLE_BLOCK.search("<!-- table: x-y 0 -->\nold\n<!-- end of table -->")
    with pytest.raises(Exception, match="missing"):
        render_tables("<!-- table: no-such 0 -->\nold\n<!-- end of table -->", tmp_path)
