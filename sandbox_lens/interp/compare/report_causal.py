"""The causal sections of `interp compare`'s report: where the twin computes each variable (interchange
interventions, DAS, probes against interventions, the constructions' named sites), and a population's summary
(``--population``). Pure functions of ``metrics.json``'s ``causal`` and ``causal_population``."""

from __future__ import annotations

import html
from typing import Any

from sandbox_lens.interp.html import table
from sandbox_lens.interp.viz import png_data_uri

__all__ = ["causal_section", "population_section"]


def _fmt(x: Any) -> str:
    return f"{x:.3f}" if isinstance(x, float) else html.escape(str(x))


def _table(header: list[str], rows: list[list[Any]]) -> str:
    return table(header, rows, _fmt)


def _short(hook: str | None) -> str:
    return "—" if hook is None else hook.replace("blocks.", "").replace(".hook_resid_", " ")


def causal_section(c: dict[str, Any] | None) -> str:
    """Where the twin computes each variable (interchange interventions, DAS), beside the constructions and the
    null, with the verdicts."""
    if not c:
        return ""
    from sandbox_lens.interp.viz import interchange_scans_png  # the same picture `interp align` draws

    pairs = c["pairs"]
    parts = [
        f"""<h2>Causal alignment: where each variable is computed</h2>
<p class="note">Interchange interventions on three disjoint splits of {pairs.get("fit", "?")} / {pairs.get("select", "?")} /
{pairs.get("test", pairs.get("held_out", "?"))} pairs of {pairs["length"]} symbols: DAS is fitted on the first, sites, hooks
and k are chosen on the second, and only the third is reported. A site (the whole residual at a hook and position p, or a
subspace of it) is set to its value on another word and the outputs are scored against the high-level model
({c["high_level_model"]}) with the variable at p swapped, on the outputs the swap changes; intervals are 95 % bootstraps
over the base words. A probe shows a latent is readable; this shows where it is used. DAS learns one k-dimensional
subspace shared by every position ({c.get("das_steps", "?")} steps per fit), beside a random subspace of the same k, the
untrained readout basis and {c.get("nulls", 1)} random-init models searched the same way; a verdict's stability is the
share of resamples of the pairs that give it.</p>"""
    ]
    for name, v in c["variables"].items():
        m = v["model"]
        parts.append(f"<h3>{html.escape(name)}</h3>")
        verdicts = [
            [cname, r["verdict"]["verdict"], r["das_verdict"]["verdict"]] for cname, r in v["constructions"].items()
        ]
        if "das_verdict" in v:
            verdicts.append(["—", "", v["das_verdict"]["verdict"]])
        if verdicts:
            rule = next(iter(v["constructions"].values()))["verdict"]["rule"] if v["constructions"] else ""
            parts.append(
                _table(["against", "full swaps", "DAS"], verdicts)
                + (f"<p class='note'>Full-swap rule: {html.escape(rule)}.</p>" if rule else "")
            )
        positions = list(m["first_sites"])
        rows = [["twin", *(_short(m["first_sites"][p]) for p in positions)]]
        rows += [[cn, *(_short(r["first_sites"][p]) for p in positions)] for cn, r in v["constructions"].items()]
        if "null" in v:
            rows.append(["random init (null)", *(_short(v["null"]["first_sites"][p]) for p in positions)])
        parts.append(
            "<h4>First full-swap site reaching IIA 0.95, per position</h4>"
            + _table(["model", *[f"p = {p}" for p in positions]], rows)
        )
        if m["das"].get("chosen"):
            das = [
                [
                    d["k"],
                    _fmt(d["iia"]),
                    _fmt(d["test"]["iia"]),
                    _interval(d["test"]["interval"]),
                    _fmt(d["random_subspace"]["iia"]),
                ]
                for d in m["das"]["k"]
            ]
            readout = {r["hook"]: r for r in m["das"]["readout"]}
            null_das = v.get("null", {}).get("das")
            parts.append(
                f"<h4>DAS at {html.escape(m['das']['hook'])} (chosen on the select pairs; by hook, k = "
                f"{m['das']['k_max']}: "
                + html.escape(", ".join(f"{_short(r['hook'])} {_fmt(r['iia'])}" for r in m["das"]["by_hook"]))
                + ")</h4>"
                + _table(["k", "IIA (select)", "IIA (test)", "95 % interval", "random k-dim subspace"], das)
                + f"<p class='note'>The untrained readout basis there: "
                f"{_fmt(readout[m['das']['hook']]['iia'])} {_interval(readout[m['das']['hook']]['interval'])}."
                + (
                    f" The random-init nulls, searched the same way: up to {_fmt(null_das['iia'])} "
                    f"(upper bound {_fmt(null_das.get('upper'))})."
                    if null_das
                    else ""
                )
                + "</p>"
            )
        else:
            parts.append("<p class='note'>DAS: no hook before the last attention layer to search.</p>")
        if m.get("probes"):
            parts.append(
                "<h4>Readable is not used: a linear probe per hook, and swapping its directions</h4>"
                + _table(
                    ["hook", "probe accuracy (held out)", "directions", "IIA of swapping them"],
                    [[r["hook"], _fmt(r["probe_accuracy"]), r["dims"], _fmt(r["iia"])] for r in m["probes"]],
                )
            )
        named = [
            [cn, s["site"], s["role"], _fmt(s["iia"]), _interval(s["interval"]), s["outputs"]]
            for cn, r in v["constructions"].items()
            for s in r["named_sites"]
        ]
        if named:
            parts.append(
                "<h4>The constructions' own sites (named subspaces, every position)</h4>"
                + _table(["construction", "site", "role", "IIA", "95 % interval", "changed outputs"], named)
            )
    parts.append(f"<img alt='interchange scans' src='{png_data_uri(interchange_scans_png(c))}'>")
    return "".join(parts)


def population_section(p: dict[str, Any] | None) -> str:
    """The causal alignment of every twin of a sweep (``--population``), summarised per variable over seeds."""
    if not p:
        return ""
    rows = []
    for cell, c in p["cells"].items():
        for variable, v in c["variables"].items():
            s = v["summary"]
            imp = s["implements"]
            rows.append(
                [
                    cell,
                    variable,
                    s["verdict"]["verdict"],
                    f"{imp['seeds']} of {imp['of']} {_interval(imp['interval'])}",
                    _estimate(s["das_iia"]),
                    _estimate(s["null_das_iia"]),
                    _estimate(s["median_first_block"]),
                    _fmt(s["construction_median_first_block"]),
                    ", ".join(f"{_short(h)} ×{n}" for h, n in s["das_hooks"].items()),
                    ", ".join(str(k) for k in s["das_k"] if k is not None) or "—",
                ]
            )
    rule = (
        next(iter(next(iter(p["cells"].values()))["variables"].values()))["summary"]["verdict"]["rule"] if rows else ""
    )
    return f"""<h2>Causal alignment of a population: {html.escape(p["directory"])}</h2>
<p class="note">Every twin of the sweep aligned as above, beside its own random-init null and the exact construction;
means and medians with 95 % percentile-bootstrap intervals over seeds, the share of seeds whose DAS verdict is
"implements" with a Wilson interval. Population rule: {html.escape(rule)}.</p>""" + _table(
        [
            "cell",
            "variable",
            "verdict",
            "seeds implementing",
            "best DAS IIA",
            "nulls' DAS IIA",
            "first full-swap block (median)",
            "construction's",
            "DAS hooks",
            "k",
        ],
        rows,
    )


def _estimate(e: dict[str, Any]) -> str:
    if e.get("value") is None:
        return "—"
    return f"{e['value']:.3f}" + (f" {_interval(e['interval'])}" if e.get("interval") else "")


def _interval(interval) -> str:
    return "—" if not interval or interval[0] is None else f"[{interval[0]:.3f}, {interval[1]:.3f}]"
