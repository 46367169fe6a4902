"""``report.html`` of `interp compare`: one self-contained page (PNG data URIs, inlined circuitsvis).

The page is a pure function of two files the analysis wrote — ``metrics.json`` and
``patterns.npz`` — so ``interp report DIR`` rebuilds it in seconds, with no model run. Every
model's attention is drawn on the same example word in canonical coordinates (the tokens before
the word — BOS and any padding — shown as one token), so constructions and the trained twin share
one circuitsvis view and one token axis.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import numpy as np

from sandbox_lens.interp.compare.figures import ablation_png, learning_curve_png, probe_png, side_by_side_png
from sandbox_lens.interp.compare.names import TWIN
from sandbox_lens.interp.compare.report_causal import causal_section, population_section
from sandbox_lens.interp.errors import CheckpointError
from sandbox_lens.interp.files import atomic_write
from sandbox_lens.interp.html import page, table
from sandbox_lens.interp.jsonfile import beyond_schema, inside, read_json
from sandbox_lens.interp.viz import circuitsvis_heads, heatmap_png, png_data_uri

__all__ = ["write_report", "read_results", "conclusions"]

SIDE_BY_SIDE_HEADS = 6  # up to this many live heads per model, all models go in one figure
FOUND_MARGIN = 0.02  # a pruning "reproduces" a construction within this much accuracy of it


#: JSON Schema of a comparison's ``metrics.json``: what the report reads before it renders anything.
REPORT_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "sandbox-lens comparison metrics",
    "type": "object",
    "required": ["example"],
    "properties": {
        "example": {
            "type": "object",
            "required": ["tokens", "heads", "patterns"],
            "properties": {
                "tokens": {"type": "array", "items": {"type": "string"}},
                "heads": {
                    "type": "object",
                    "additionalProperties": {
                        "type": "array",
                        "items": {"type": "array", "items": {"type": "string"}, "minItems": 2, "maxItems": 2},
                    },
                },
                "patterns": {"type": "string"},
            },
        },
    },
}


def read_results(out: Path) -> tuple[dict, dict[str, dict[tuple[int, int], np.ndarray]]]:
    """``metrics.json`` and the example patterns of a comparison directory, checked."""

    metrics_path = out / "metrics.json"
    if not metrics_path.is_file():
        raise CheckpointError(f"no comparison in {out} (metrics.json missing; run `interp compare` first)")
    metrics = read_json(metrics_path, REPORT_SCHEMA, error=CheckpointError, what="a comparison's metrics")
    example = metrics["example"]
    patterns_path = inside(out, example["patterns"], f"{metrics_path}: example/patterns", CheckpointError)
    try:
        with np.load(patterns_path, allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
        patterns = {model: {_head_key(h): arrays[key] for h, key in heads} for model, heads in example["heads"].items()}
    except FileNotFoundError as e:
        raise CheckpointError(f"{out}: {Path(e.filename).name if e.filename else 'a file'} is missing") from None
    except (ValueError, KeyError, TypeError, OSError) as e:
        raise CheckpointError(f"{out} does not hold a complete comparison ({type(e).__name__}: {e})") from None
    return metrics, patterns


def _head_key(name: str) -> tuple[int, int]:
    layer, head = name[1:].split("H")
    return int(layer), int(head)


def _short_hook(hook: str) -> str:
    return hook.replace("blocks.", "").replace(".hook_resid_", " ")


def _fmt(x: Any) -> str:
    return f"{x:.3f}" if isinstance(x, float) else html.escape(str(x))


def _table(header: list[str], rows: list[list[Any]]) -> str:
    return table(header, rows, _fmt)


def _twin_warning(t: dict[str, Any]) -> str:
    """A visible note when the twin stopped below its target: its circuits are not a learned model's."""
    if not t.get("known") or t.get("reached_target") is not False:
        return ""
    return (
        f"<p class='warn'><b>The twin did not reach its target</b>: held-out accuracy {t['final_accuracy']:.3f} "
        f"of {t['target_accuracy']:g} after {t['steps']} steps ({t['minutes']:.1f} min, stopped by "
        f"{html.escape(t['stopped_by'])}). What follows describes a model that has not learned the task. Give it "
        f"more time (<code>--train-minutes</code> larger than before continues the same run) or another "
        f"<code>--seed</code> with another <code>--out</code>.</p>"
    )


def _theorem3_found(metrics: dict[str, Any]) -> bool | None:
    t3 = metrics["pruning"].get("theorem3")
    return None if not t3 else t3["accuracy"] >= t3["target_accuracy"] - FOUND_MARGIN


def _corollary3_shown(metrics: dict[str, Any]) -> bool | None:
    c3 = (metrics["pruning"].get("theorem3") or {}).get("corollary3")
    if not c3:
        return None
    return c3["shared_identical"] and all(
        t["accuracy"] >= metrics["models"].get(n, {}).get("accuracy", 1.0) - FOUND_MARGIN
        for n, t in c3["targets"].items()
    )


def conclusions(metrics: dict[str, Any]) -> list[str]:
    """What the numbers of ``metrics.json`` support, each sentence computed by a stated rule (no hopes)."""
    models = metrics["models"]
    built = [n for n, i in models.items() if i.get("kind") == "construction"]
    twin = TWIN if TWIN in models else None
    out = []
    below = {n: models[n]["accuracy"] for n in built if models[n]["accuracy"] < 1.0}
    if built:
        out.append(
            f"Every construction is exact on these {metrics['samples']} words (accuracy 1.000)."
            if not below
            else "Constructions below accuracy 1 on these words: "
            + ", ".join(f"{n} {a:.3f}" for n, a in below.items())
            + " — check the length and dtype."
        )
    t = metrics.get("twin_training", {})
    if twin:
        acc = models[twin]["accuracy"]
        if t.get("reached_target") is False:
            out.append(
                f"The twin did NOT reach its target (held-out {t['final_accuracy']:.3f} of {t['target_accuracy']:g} "
                f"after {t['steps']} steps): every statement about it below describes a model that has not "
                "learned the task."
            )
        elif t.get("reached_target"):
            out.append(
                f"The twin reached its target ({t['final_accuracy']:.3f} ≥ {t['target_accuracy']:g} after "
                f"{t['steps']} steps, seed {t['seed']}); on these words it scores {acc:.3f}."
            )
        else:
            out.append(f"The twin scores {acc:.3f} on these words (no training record with a target).")
    for latent in metrics["latents"]:
        probes = {n: metrics["probes"][n][latent] for n in models}
        readable = [n for n in built if probes[n]["first_readable"]]
        text = f"{latent}: linearly readable (probe ≥ 0.99) in {len(readable)} of {len(built)} constructions"
        if twin:
            p = probes[twin]
            chance = p.get("chance")
            text += (
                f"; in the twin from {_short_hook(p['first_readable'])}"
                if p["first_readable"]
                else f"; in the twin nowhere (best {p['best']:.3f} at {_short_hook(p['best_hook'])}"
                + (f", chance {chance:.3f})" if chance is not None else ")")
            )
        out.append(text + ".")
    matching = metrics["attention"].get("matching", {})
    if matching:
        mean_tv = {c: float(np.mean([m["tv_distance"] for m in ms])) for c, ms in matching.items() if ms}
        if mean_tv:
            order = sorted(mean_tv, key=mean_tv.get)
            out.append(
                f"The twin's attention is closest to the {order[0]} construction's (mean TV distance of the head "
                f"matching {mean_tv[order[0]]:.2f}; "
                + ", ".join(f"{c} {mean_tv[c]:.2f}" for c in order[1:])
                + "). TV 0 is the same pattern, 1 disjoint; attention alone does not show the same mechanism."
            )
    necessary = {}
    for n, a in metrics["ablation"].items():
        margin = a["baseline"] - a["chance"]
        necessary[n] = [h for h, acc in a["zero"].items() if margin > 0 and a["baseline"] - acc > margin / 2]
    if necessary:
        out.append(
            "Heads whose zero-ablation costs more than half the margin over chance: "
            + "; ".join(f"{n}: {', '.join(hs) or 'none'}" for n, hs in necessary.items())
            + "."
        )
    lost = [
        f"{n} at λ = {r['sparsity']:g}"
        for n in models
        for r in metrics["pruning"].get(n, {}).get("learned_masks", {}).get("runs", [])
        if not r["kept_accuracy"]
    ]
    if any("learned_masks" in metrics["pruning"].get(n, {}) for n in models):
        out.append(
            "Learned head masks lost accuracy for " + ", ".join(lost) + "."
            if lost
            else "Every learned head mask kept its model's accuracy."
        )
    found, shown = _theorem3_found(metrics), _corollary3_shown(metrics)
    if found is not None:
        t3 = metrics["pruning"]["theorem3"]
        out.append(
            f"Theorem 3 at this scale: the pruned random network {'reproduces' if found else 'does NOT reproduce'} "
            f"the {t3['target']} construction (accuracy {t3['accuracy']:.3f} against {t3['target_accuracy']:.3f}, "
            f"within {FOUND_MARGIN} counts)."
        )
    if shown is not None:
        out.append(
            "Corollary 3 "
            + (
                "shown: two mechanisms pruned from one random network share one identical matrix."
                if shown
                else "not shown at this scale (see its section)."
            )
        )
    c = metrics.get("circuits") or {}
    scored = {n: r for n, r in c.get("models", {}).items() if r.get("relevant_edges") is not None}
    if scored:
        out.append(
            "ACDC against the constructions' proofs: precision "
            + ", ".join(f"{n} {r['precision']:.2f}" for n, r in scored.items())
            + "; recall "
            + ", ".join(f"{n} {r['recall']:.2f}" for n, r in scored.items())
            + "."
        )
    return out


def _circuits_section(c: dict[str, Any] | None) -> str:
    if not c:
        return ""
    if c.get("skipped"):
        return f"<h2>Circuits</h2><p class='note'>Not run: {html.escape(c['skipped'])}.</p>"
    rows = []
    for name, r in c["models"].items():
        if "error" in r:
            rows.append([name, r["error"], "", "", "", "", ""])
            continue
        truth = (
            f"{_fmt(r['precision'])} / {_fmt(r['recall'])} / {_fmt(r['auroc'])} ({r['relevant_edges']} edges)"
            if r.get("relevant_edges") is not None
            else "no ground truth (trained)"
        )
        rows.append(
            [
                name,
                f"{r['edges']} of {r['graph_edges']}",
                ", ".join(r["heads"]) or "none",
                r["faithfulness"],
                r["faithfulness_kl"],
                truth,
                f"{r['seconds']:.1f} s",
            ]
        )
    overlap = [
        [
            c_name,
            ", ".join(o["twin_heads"]) or "none",
            ", ".join(o["mapped"]) or "none",
            ", ".join(o["construction_heads"]) or "none",
            o["jaccard"],
        ]
        for c_name, o in c["overlap"].items()
    ]
    return (
        f"""<h2>Circuits (ACDC, {c["pairs"]} counterfactual pairs)</h2>
<p class="note">Edges kept by ACDC (KL threshold 0.01) on pairs that differ in one controlled way; faithfulness is the
circuit's accuracy on the outputs the corruption changes with every other edge patched (the full model's is 1), and
its normalised KL. Constructions are scored against the task-relevant ground truth their weights imply
(precision / recall / AUROC of the edge ranking); a twin has none. `interp circuit` runs one method on one model.</p>"""
        + _table(
            [
                "model",
                "edges kept",
                "heads in the circuit",
                "faithfulness (accuracy)",
                "faithfulness (KL)",
                "vs ground truth: P / R / AUROC",
                "time",
            ],
            rows,
        )
        + (
            "<h3>The twin's circuit heads, through the head matching</h3>"
            + _table(
                ["construction", "twin's circuit heads", "matched to", "construction's circuit heads", "Jaccard"],
                overlap,
            )
            if overlap
            else ""
        )
    )


def _short(hook: str | None) -> str:
    return "—" if hook is None else hook.replace("blocks.", "").replace(".hook_resid_", " ")


def _summary_html(metrics: dict[str, Any]) -> str:
    """The summary table (with the under-target warning) and what we conclude."""
    summary = []
    for name, info in metrics["models"].items():
        probes = metrics["probes"][name]
        pr = metrics["pruning"][name]
        summary.append(
            [
                name,
                info["accuracy"],
                f"{info['layers']} layers, {len(info['heads'])} live heads",
                *(
                    f"{p['best']:.3f} at {_short_hook(p['best_hook'])}; ≥ 0.99 from "
                    f"{_short_hook(p['first_readable']) if p['first_readable'] else 'nowhere'}"
                    for p in probes.values()
                ),
                ", ".join(pr["greedy"]["surviving"]) or "—",
                "; ".join(
                    f"λ={r['sparsity']:g}: "
                    + (", ".join(r["surviving"]) or "none")
                    + ("" if r.get("kept_accuracy", True) else " ✗")  # as in the pruning table
                    for r in pr.get("learned_masks", {}).get("runs", [])
                )
                or "—",
            ]
        )
    latents = list(metrics["latents"])
    summary_table = _table(
        [
            "model",
            "accuracy",
            "size",
            *(f"probe for {l}" for l in latents),
            "greedy pruning keeps",
            "learned masks keep",
        ],
        summary,
    )
    summary_table = _twin_warning(metrics.get("twin_training", {})) + summary_table
    conclude = (
        "<h2>What we conclude</h2><p class='note'>Computed from the numbers on this page by the rules each "
        "sentence states; nothing here is written in advance.</p><ul>"
        + "".join(f"<li>{html.escape(c)}</li>" for c in conclusions(metrics))
        + "</ul>"
    )
    return summary_table + conclude


def _attention_html(metrics: dict[str, Any], patterns: dict[str, dict], tokens: list[str]) -> str:
    """Every model's attention on the example word, the heads against the references, the head matching."""
    word_text, models = " ".join(tokens[1:]), list(metrics["models"])
    if max(len(p) for p in patterns.values()) <= SIDE_BY_SIDE_HEADS:
        png = side_by_side_png(patterns, tokens)
        heat = [f"<img alt='attention of every model, side by side' src='{png_data_uri(png)}'>"]
    else:  # many heads (e.g. the gridworld construction's 2S + 1): one figure per model
        heat = [
            f"<h3>{html.escape(name)}</h3><img alt='{html.escape(name)} attention' "
            f"src='{png_data_uri(heatmap_png(pats, tokens, name))}'>"
            for name, pats in patterns.items()
        ]
    tiles = [p for pats in patterns.values() for p in pats.values()]
    tile_names = [f"{name} L{l}H{h}" for name, pats in patterns.items() for (l, h) in pats]
    cv = circuitsvis_heads(dict(enumerate(tiles)), tokens, names=tile_names) if tiles else ""

    score_rows = []
    for name in models:
        for head, s in metrics["attention"][name].items():
            best = s["best_reference"]
            r = s["references"][best]
            score_rows.append([name, head, best, r.get("mass", "—"), r["argmax_agreement"], r["tv_distance"]])
    match_html = "".join(
        f"<h3>{html.escape(TWIN)} ↔ {html.escape(c)}</h3>"
        + _table(
            ["trained head", "constructed head", "mean TV distance"],
            [[m["trained"], m["constructed"], m["tv_distance"]] for m in ms],
        )
        for c, ms in metrics["attention"]["matching"].items()
    )

    return f"""<h2>Attention on <code>{html.escape(word_text)}</code></h2>
<p class="note">Canonical coordinates: one row per word position; the first key is everything before the word.
Only heads whose OV circuit writes are shown.</p>
{"".join(heat)}
<h3>Interactive (circuitsvis)</h3><p class="note">Tiles in order: {html.escape(", ".join(tile_names))}.</p>{cv}
<h2>Heads against reference patterns</h2>
<p class="note">Averaged over example words: mass on the reference's target (— for uniform, whose target is every
key, so any pattern puts all its mass there), argmax agreement, mean total-variation distance. Each head's closest reference (by TV distance) is shown; all are in <code>metrics.json</code>.</p>
{_table(["model", "head", "best reference", "mass", "argmax agreement", "TV distance"], score_rows)}
<h2>Matching the twin's heads to each construction's (Hungarian, mean TV)</h2>{match_html}"""


def _pruning_html(metrics: dict[str, Any]) -> str:
    """Greedy pruning and learned head masks, per model."""
    models = list(metrics["models"])
    prune_rows = []
    for name in models:
        pr = metrics["pruning"][name]
        runs = pr.get("learned_masks", {}).get("runs", [{}])
        for i, r in enumerate(runs):
            greedy = (
                [name, pr["greedy"]["threshold"], ", ".join(pr["greedy"]["surviving"]) or "—", pr["greedy"]["accuracy"]]
                if i == 0
                else ["", "", "", ""]
            )
            prune_rows.append(
                greedy
                + (
                    [
                        f"{r['sparsity']:g}",
                        ", ".join(f"{h} {g:.2f}" for h, g in r["gates"].items()),
                        ", ".join(r["surviving"]) or "none",
                        f"{r['accuracy_masked']:.3f}" + ("" if r["kept_accuracy"] else " ✗"),
                        r["accuracy_masked_original_weights"],
                    ]
                    if r
                    else ["—"] * 5
                )
            )
    return f"""<h2>Pruning</h2>
<p class="note">Greedy: remove the cheapest head while accuracy stays ≥ the threshold (others fixed). Learned masks:
hard-concrete gates with an L0 penalty of λ nats per open head, trained with all weights (others adapt); a head survives
when its gate is above 0.5. Accuracy as trained (adapted weights, surviving heads scaled by their gates), and with the closed heads
zeroed in the original weights. Constructions can collapse to a constant output when a gate partly closes, which leaves
no gradient to reopen it: a ✗ marks a run that lost accuracy.</p>
{
        _table(
            [
                "model",
                "greedy threshold",
                "greedy keeps",
                "greedy accuracy",
                "λ",
                "learned gates",
                "learned masks keep",
                "accuracy as trained",
                "accuracy, original weights",
            ],
            prune_rows,
        )
    }"""


def _theorem3_html(metrics: dict[str, Any]) -> str:
    """Theorem 3 and Corollary 3 at toy scale (Dyck), or why they did not run."""
    theorem3 = ""
    if metrics["pruning"].get("theorem3_skipped"):
        theorem3 = (
            f"<h3>Theorem 3</h3><p class='note'>Not run: {html.escape(metrics['pruning']['theorem3_skipped'])}.</p>"
        )
    t3 = metrics["pruning"].get("theorem3")
    if t3:
        rs = t3["random_shape"]
        # the heading states what the numbers show: found only if the pruning matches the construction
        found = _theorem3_found(metrics)
        heading = (
            f"the {html.escape(t3['target'])} construction found inside a random network"
            if found
            else f"the pruned random network did <b>not</b> reproduce the {html.escape(t3['target'])} construction "
            f"(accuracy {t3['accuracy']:.3f} against {t3['target_accuracy']:.3f})"
        )
        theorem3 = f"""<h3>Theorem 3 at toy scale: {heading}</h3>
<p>A random transformer ({rs["n_layers"]} layers, width {rs["d_model"]}, {rs["n_heads"]} heads, MLP {rs["d_mlp"]};
entries U(−1, 1)/√fan-in, never trained) is pruned — every weight kept or zeroed, {t3["kept_fraction"]:.0%} kept
({t3["kept_weights"]:,} of {t3["weights"]:,}) — by a mask learned for {t3["steps"]} steps to reproduce the
construction's next-token distribution.</p>""" + _table(
            [
                "kept fraction",
                "accuracy of the pruned network",
                "construction's accuracy",
                "mean TV",
                "max TV",
                "ε̂ (max relative L2)",
            ],
            [
                [
                    t3["kept_fraction"],
                    t3["accuracy"],
                    t3["target_accuracy"],
                    t3["mean_tv"],
                    t3["max_tv"],
                    t3["epsilon_hat"],
                ]
            ],
        )
        c3 = t3.get("corollary3")
        if c3:
            both = _corollary3_shown(metrics)
            c3_heading = (
                "two mechanisms, one identical pruned matrix"
                if both
                else "not shown at this scale: "
                + ("a pruning missed its target" if c3["shared_identical"] else "the shared matrices differ")
            )
            theorem3 += f"""<h3>Corollary 3: {c3_heading}</h3>
<p>The stack-like and the uniform constructions attend differently, yet both were pruned out of the same random
network ({c3["steps"]} steps) with <b>one</b> mask on <code>{html.escape(", ".join(c3["shared"]))}</code>: the two pruned
matrices are {"identical" if c3["shared_identical"] else "NOT identical"}. Elsewhere the two prunings overlap
with Jaccard index {c3["other_masks_jaccard"]:.2f}. Reading that one matrix cannot tell the two functions apart.</p>""" + _table(
                ["target", "accuracy of its pruning", "mean TV", "max TV"],
                [[n, t["accuracy"], t["mean_tv"], t["max_tv"]] for n, t in c3["targets"].items()],
            )

    return theorem3


def write_report(out: str | Path) -> Path:
    """Render ``out/report.html`` from ``out/metrics.json`` and ``out/patterns.npz``; returns its path."""
    out = Path(out)
    metrics, patterns = read_results(out)
    with beyond_schema(out / "metrics.json", "comparison", CheckpointError):
        page_html = _page(metrics, patterns)
    path = out / "report.html"
    atomic_write(path, page_html.encode())
    return path


def _page(metrics: dict[str, Any], patterns: dict[str, dict[tuple[int, int], np.ndarray]]) -> str:
    curve = learning_curve_png(metrics.get("twin_training", {}))
    curve_html = (
        f"<h2>The twin's training</h2><img alt='learning curve of the trained twin' src='{png_data_uri(curve)}'>"
        if curve
        else ""
    )

    probes = probe_png(metrics["probes"], list(metrics["latents"]))
    ablation = ablation_png(metrics["ablation"])
    body = f"""<h1>Constructed vs trained circuits</h1>
<p><b>Task:</b> {html.escape(metrics["task"])}. Exact constructions and a trained twin
(<code>{html.escape(metrics["twin"])}</code>) on the same {metrics["samples"]} sampled words
({metrics["examples"]} for the attention scores).
Accuracy is the task's ({html.escape(metrics["scored_positions"])}).</p>
{_summary_html(metrics)}
{curve_html}
{_attention_html(metrics, patterns, metrics["example"]["tokens"])}
<h2>Where the latents are linearly readable</h2><img alt="probe accuracy by hook" src="{png_data_uri(probes)}">
<h2>Head ablation (others fixed)</h2><img alt="head ablation" src="{png_data_uri(ablation)}">
{_pruning_html(metrics)}
{_theorem3_html(metrics)}
{_circuits_section(metrics.get("circuits"))}
{causal_section(metrics.get("causal"))}
{population_section(metrics.get("causal_population"))}
<p>Raw numbers: <code>metrics.json</code> (sections probes, attention, ablation, pruning, circuits, causal); {metrics["seconds"]:.0f} s.</p>"""
    return page(f"sandbox-lens: constructed vs trained — {metrics['task']}", body)
