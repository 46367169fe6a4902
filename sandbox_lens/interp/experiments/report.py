"""An experiment's report: ``OUT/report.html`` rendered from ``OUT/results.json`` and its PNG figures
alone (no model is run, nothing outside floor 0 is imported), self-contained (figures inlined), and
the index page of several experiments."""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sandbox_lens.interp.errors import CheckpointError, FileFormatError
from sandbox_lens.interp.experiments.rules import VERDICTS, effect_text, stability_text
from sandbox_lens.interp.files import atomic_write
from sandbox_lens.interp.html import page, table
from sandbox_lens.interp.jsonfile import beyond_schema, read_json
from sandbox_lens.interp.viz import png_data_uri

__all__ = ["write_report", "write_index", "read_results", "RESULTS_SCHEMA"]


_CLAIM = {
    "type": "object",
    "required": ["claim", "thesis", "verdict"],
    "properties": {
        "claim": {"type": "string"},
        "thesis": {"type": "string"},
        "measured": {"type": ["string", "null"]},
        "verdict": {"enum": list(VERDICTS)},
        "why": {"type": ["string", "null"]},
        "estimate": {"type": ["object", "null"]},
        "stability": {
            "type": ["object", "null"],
            "required": ["leave_one_out", "verdicts", "fragile"],
            "properties": {
                "leave_one_out": {"type": "integer", "minimum": 1},
                "verdicts": {"type": "object", "additionalProperties": {"type": "integer", "minimum": 0}},
                "fragile": {"type": "boolean"},
            },
        },
    },
}
#: JSON Schema of an experiment's ``results.json`` (and of its committed copy under docs/results).
RESULTS_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "sandbox-lens experiment results",
    "type": "object",
    "required": ["experiment", "claims"],
    "properties": {
        "experiment": {"type": "string", "maxLength": 100},
        "title": {"type": "string"},
        "quick": {"type": "boolean"},
        "seeds": {"type": "array", "items": {"type": "integer"}},
        "options": {"type": "object"},
        "claims": {"type": "array", "items": _CLAIM},
        "tables": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["columns", "rows"],
                "properties": {
                    "title": {"type": "string"},
                    "columns": {"type": "array"},
                    "rows": {"type": "array", "items": {"type": "array"}},
                },
            },
        },
        "provenance": {"type": "object"},
        "conclusions": {"type": "array", "items": {"type": "string"}},
        "caveats": {"type": "array", "items": {"type": "string"}},
    },
}


def read_results(out: str | Path) -> dict[str, Any]:
    """An experiment directory's ``results.json`` (a one-line error when it is missing or not JSON)."""
    path = Path(out) / "results.json"
    if not path.is_file():
        raise CheckpointError(f"no experiment results in {out} (results.json missing; run `interp experiment` first)")
    return read_json(path, RESULTS_SCHEMA, error=CheckpointError, what="an experiment's results")


def _table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    return table(columns, rows)  # None: not measured (see the table's note)


def _effect(c: dict[str, Any]) -> str:
    """The effect a verdict rests on (:func:`~sandbox_lens.interp.experiments.rules.effect_text`), under the measured text."""
    text = effect_text(c)
    return f"<br><span class='note'>{html.escape(text)}</span>" if text else ""


def _claims(claims: list[dict[str, Any]]) -> str:
    rows = []
    for c in claims:
        cls = "v-" + (c["verdict"] if c["verdict"] in VERDICTS else "unknown").replace(" ", "-")  # into an attribute
        why = f"<br><span class='note'>{html.escape(c['why'])}</span>" if c.get("why") else ""
        if stability_text(c):
            why += f"<br><span class='note'>{html.escape(stability_text(c))}</span>"
        rows.append(
            f"<tr><td class='text'>{html.escape(c['claim'])}</td><td class='text'>{html.escape(c['thesis'])}</td>"
            f"<td class='text'>{html.escape(c['measured'])}{_effect(c)}</td><td class='text {cls}'><b>"
            f"{html.escape(c['verdict'])}</b>{why}<br><span class='note'>rule: {html.escape(c['rule'])}</span></td></tr>"
        )
    head = "<tr><th>claim</th><th class='text'>thesis</th><th class='text'>measured here</th><th class='text'>verdict</th></tr>"
    return f"<table>{head}{''.join(rows)}</table>"


def _provenance(p: dict[str, Any] | None) -> str:
    if not p:
        return ""
    commit = (
        "not a git checkout"
        if p.get("commit") is None
        else (p["commit"][:12] + (" with uncommitted changes" if p.get("dirty") else ""))
    )
    versions = ", ".join(f"{k} {v}" for k, v in p.get("versions", {}).items() if v)
    return (
        f"<p class='note'>Provenance: commit {html.escape(commit)} · <code>{html.escape(str(p.get('command')))}</code> · "
        f"seeds {html.escape(', '.join(map(str, p.get('seeds', []))))} · {p.get('cpu_minutes_this_invocation', 0):.1f} "
        f"CPU-minutes this invocation, {p.get('training_cpu_minutes_all_runs', 0):.1f} of training in all · "
        f"{html.escape(versions)} · Python {html.escape(str(p.get('python')))}</p>"
    )


def _settings(settings: dict[str, Any]) -> str:
    rows = []
    for name, s in settings.items():
        shape = ", ".join(f"{k}={v}" for k, v in s["shape"].items() if v is not None)
        config = ", ".join(f"{k}={v}" for k, v in s["config"].items() if v not in (None, 0, 0.0, "", [], ()))
        rows.append([name, s["task_name"], shape, config, ", ".join(map(str, s["seeds"]))])
    return _table(["population", "task", "shape", "training", "seeds"], rows)


def write_report(out: str | Path) -> Path:
    """Render ``out/report.html`` from ``out/results.json`` and the figures it lists; returns its path. A file edited
    deeper than its schema checks (a field of the wrong shape) is one line, not a traceback."""
    out = Path(out)
    r = read_results(out)
    with beyond_schema(out / "results.json", "experiment", CheckpointError):
        return _write_report(out, r)


def _write_report(out: Path, r: dict[str, Any]) -> Path:
    parts = [
        f"<h1>{html.escape(r['title'])}</h1>",
        f"<p><b>Thesis</b> {html.escape(r['section'])}: {html.escape(r['thesis_claim'])}</p>",
        f"<p class='note'>Experiment <code>{html.escape(r['experiment'])}</code> · scale: {html.escape(r['scale'])} · "
        f"seeds {html.escape(', '.join(map(str, r['seeds'])))} · {r['runs']} training runs ({r['trained_now']} trained "
        f"by this invocation, the rest reused; {r.get('training_cpu_minutes', 0):.1f} CPU-minutes of training in all) · "
        f"{r['minutes']:.1f} minutes for this invocation · backend {html.escape(r['backend'])}"
        + (f" · task options {html.escape(json.dumps(r['options']))}" if r["options"] else "")
        + "</p>",
    ]
    if r["quick"]:
        parts.append(
            "<p><b>Quick run</b>: a seconds-scale version that exercises the pipeline. Its verdicts are "
            "computed by the same rules but at this scale they do not test the thesis's claims.</p>"
        )
    parts += ["<h2>Thesis vs measured</h2>", _claims(r["claims"])]
    parts += [
        "<h2>What we conclude</h2>",
        "<ul>" + "".join(f"<li>{html.escape(c)}</li>" for c in r["conclusions"]) + "</ul>",
    ]
    for f in r["figures"]:
        path = out / f["file"]
        if not path.is_file():
            raise CheckpointError(f"{out}: figure {f['file']} is missing (rerun the experiment)")
        parts.append(
            f"<figure><img src='{png_data_uri(path.read_bytes())}' alt='{html.escape(f['caption'])}'>"
            f"<figcaption>{html.escape(f['caption'])}</figcaption></figure>"
        )
    for t in r["tables"]:
        parts += [f"<h3>{html.escape(t['title'])}</h3>", _table(t["columns"], t["rows"])]
        if t.get("note"):
            parts.append(f"<p class='note'>{html.escape(t['note'])}</p>")
    if r["caveats"]:
        parts += ["<h2>Caveats</h2>", "<ul>" + "".join(f"<li>{html.escape(c)}</li>" for c in r["caveats"]) + "</ul>"]
    if r["settings"]:
        parts += ["<h2>Settings</h2>", _settings(r["settings"])]
    env = r.get("environment", {})
    parts.append(
        f"<p class='note'>Every number on this page is in <code>results.json</code>; the runs are under "
        f"<code>runs/</code>. sandbox-lens {html.escape(str(env.get('sandbox_lens', '?')))}, torch "
        f"{html.escape(str(env.get('torch', '?')))}, Python {html.escape(str(env.get('python', '?')))}, one torch "
        f"thread per run.</p>"
    )
    parts.append(_provenance(r.get("provenance")))
    path = out / "report.html"
    atomic_write(path, page(r["title"], "".join(parts)).encode())
    return path


def _index_row(name: str, r: dict[str, Any]) -> str:
    counts = {v: sum(c["verdict"] == v for c in r["claims"]) for v in VERDICTS}
    summary = ", ".join(f"{n} {v}" for v, n in counts.items() if n)
    return (
        f"<tr><td><a href='{html.escape(name)}/report.html'>{html.escape(name)}</a></td>"
        f"<td class='text'>{html.escape(r['section'])}</td><td class='text'>{html.escape(summary)}</td>"
        f"<td>{float(r.get('training_cpu_minutes', 0)):.1f}</td><td>{float(r['minutes']):.1f}</td>"
        f"<td class='text'>{'quick' if r['quick'] else html.escape(str(r['scale']))}</td></tr>"
    )


def write_index(out: str | Path, names: Sequence[str]) -> Path:
    """``out/index.html``: one row per experiment directory ``out/<name>`` with its verdicts and a link."""
    out = Path(out)
    rows = []
    for name in names:
        try:
            r = read_results(out / name)
        except CheckpointError as e:
            why = "not run" if not (out / name / "results.json").exists() else f"unreadable: {e}"
            rows.append(f"<tr><td>{html.escape(name)}</td><td colspan='5' class='text'>{html.escape(why)}</td></tr>")
            continue
        try:  # a file edited past its schema is said on its row (the same wrap as every report's)
            with beyond_schema(out / name / "results.json", "results file"):
                rows.append(_index_row(name, r))
        except FileFormatError as e:
            rows.append(f"<tr><td>{html.escape(name)}</td><td colspan='5' class='text'>{html.escape(str(e))}</td></tr>")
    index = (
        "<table><tr><th>experiment</th><th>thesis</th><th>claims</th><th>training CPU-minutes (all runs)</th>"
        "<th>minutes of the last invocation</th><th>scale</th></tr>" + "".join(rows) + "</table>"
    )
    out.mkdir(parents=True, exist_ok=True)
    path = out / "index.html"
    atomic_write(
        path,
        page(
            "sandbox-lens: reproducing the thesis", f"<h1>Reproducing the thesis's learning claims</h1>{index}"
        ).encode(),
    )
    return path
