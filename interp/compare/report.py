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

from interp.compare.names import TWIN
from interp.errors import CheckpointError
from interp.files import atomic_write
from interp.viz import circuitsvis_heads, figure_png, heatmap_png, png_data_uri, token_ticks

__all__ = ["write_report", "read_results", "conclusions"]

SIDE_BY_SIDE_HEADS = 6  # up to this many live heads per model, all models go in one figure
FOUND_MARGIN = 0.02  # a pruning "reproduces" a construction within this much accuracy of it

_CSS = """
body{font-family:system-ui,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}
th{background:#f3f3f3}td:first-child{text-align:left}img{max-width:100%}code{background:#f5f5f5;padding:1px 3px}
.note{color:#555;font-size:0.92em}.warn{background:#fdf3d7;border-left:4px solid #d9a400;padding:6px 10px}
"""


def read_results(out: Path) -> tuple[dict, dict[str, dict[tuple[int, int], np.ndarray]]]:
    """``metrics.json`` and the example patterns of a comparison directory, checked."""
    import json

    metrics_path = out / "metrics.json"
    if not metrics_path.is_file():
        raise CheckpointError(f"no comparison in {out} (metrics.json missing; run `interp compare` first)")
    try:
        metrics = json.loads(metrics_path.read_text())
        example = metrics["example"]
        with np.load(out / example["patterns"]) as npz:
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


def _side_by_side_png(patterns: dict[str, dict], tokens: list[str]) -> bytes:
    """One column per model (its heads down the column), all on the same token axes."""
    from matplotlib.figure import Figure  # no pyplot: a notebook keeps its own backend

    rows, cols = max(len(p) for p in patterns.values()), len(patterns)
    size = 1.6 + 0.09 * len(tokens)
    fig = Figure(figsize=(cols * size + 1.2, rows * size))
    axes = fig.subplots(rows, cols, squeeze=False)
    for ax in axes.flat:
        ax.axis("off")
    image = None
    for c, (name, pats) in enumerate(patterns.items()):
        for r, ((layer, head), p) in enumerate(pats.items()):
            ax = axes[r][c]
            ax.axis("on")
            image = ax.imshow(p, vmin=0, vmax=1, cmap="Blues")
            ax.set_title(f"{name}: L{layer}H{head}", fontsize=8)
            token_ticks(ax, tokens, fontsize=6, most=24)
    if image is not None:
        fig.colorbar(image, ax=axes.ravel().tolist(), shrink=0.5, label="attention weight (query row → key column)")
    return figure_png(fig)


def _probe_png(probes: dict[str, dict[str, dict[str, Any]]], latents: list[str]) -> bytes:
    """One panel per latent, one line per model over its residual hooks on a common x-axis (the fraction of
    the way from the embeddings to the last block's output), and the chance line."""
    from matplotlib.figure import Figure  # no pyplot: a notebook keeps its own backend

    fig = Figure(figsize=(max(4.5, 4.6 * len(latents)), 3.6), layout="constrained")
    axes = fig.subplots(1, len(latents), squeeze=False, sharey=True)[0]
    for ax, latent in zip(axes, latents):
        chance = None
        for i, (model, per) in enumerate(probes.items()):
            acc = per[latent]["accuracy"]
            xs = np.linspace(0, 1, len(acc)) if len(acc) > 1 else np.zeros(1)
            # constructions often read identically: earlier lines wider and hollow, so none hides another
            ax.plot(xs, list(acc.values()), marker="os^Dv"[i % 5], ms=7 - 1.2 * min(i, 4), mfc="none",
                    lw=max(0.8, 3.2 - 0.8 * i), ls=("-", "--", "-.", ":")[i % 4], label=model)
            chance = per[latent].get("chance", chance)
        if chance is not None:
            ax.axhline(chance, ls="--", lw=0.9, color="grey")
            ax.text(1.0, chance, "chance (commonest value)", fontsize=7, color="grey", ha="right", va="bottom")
        ax.set_title(latent, fontsize=9)
        ax.set_xticks([0, 0.5, 1], ["embeddings", "middle", "last block"], fontsize=7)
        ax.set_xlabel("depth through the model (each model's residual hooks, evenly spaced)", fontsize=7)
        ax.set_ylim(-0.02, 1.05)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("held-out probe accuracy")
    axes[-1].legend(fontsize=7, loc="lower right")
    fig.suptitle("where each latent is linearly readable", fontsize=10)
    return figure_png(fig)


def _ablation_png(ablation: dict[str, dict[str, Any]]) -> bytes:
    """One panel per model: a pair of bars per head (zero- and mean-ablated), the intact and chance lines."""
    from matplotlib.figure import Figure  # no pyplot: a notebook keeps its own backend

    models = list(ablation)
    fig = Figure(figsize=(max(4.5, 3.4 * len(models)), 3.4))
    axes = fig.subplots(1, len(models), squeeze=False, sharey=True)[0]
    for ax, model in zip(axes, models):
        a = ablation[model]
        heads = list(a["zero"])
        xs = np.arange(len(heads))
        ax.bar(xs - 0.2, [a["zero"][h] for h in heads], width=0.4, label="zero-ablated", color="#4c72b0")
        ax.bar(xs + 0.2, [a["mean"][h] for h in heads], width=0.4, label="mean-ablated", color="#dd8452")
        ax.axhline(a["baseline"], ls="-", lw=0.9, color="black")
        ax.axhline(a["chance"], ls="--", lw=0.9, color="grey")
        ax.text(len(heads) - 0.5, a["baseline"], "intact", fontsize=7, ha="right", va="bottom")
        ax.text(len(heads) - 0.5, a["chance"], "chance", fontsize=7, ha="right", va="bottom", color="grey")
        ax.set_xticks(xs, heads, rotation=60 if len(heads) > 6 else 0, fontsize=7)
        ax.set_title(model, fontsize=9)
        ax.set_ylim(0, 1.08)
    axes[0].set_ylabel("task accuracy")
    axes[0].legend(fontsize=7, loc="lower left")
    fig.suptitle("accuracy with one head ablated (others fixed)", fontsize=10)
    return figure_png(fig)


def _learning_curve_png(t: dict[str, Any]) -> bytes | None:
    """The twin's held-out accuracy and loss by step, with its target."""
    from matplotlib.figure import Figure  # no pyplot: a notebook keeps its own backend

    history = t.get("history") or []
    if not history:
        return None
    steps = [h["step"] for h in history]
    fig = Figure(figsize=(7.5, 3.0), layout="constrained")
    acc_ax, loss_ax = fig.subplots(1, 2)
    acc_ax.plot(steps, [h["accuracy"] for h in history], marker="o", ms=3)
    if t.get("target_accuracy") is not None:
        acc_ax.axhline(t["target_accuracy"], ls="--", lw=0.9, color="grey")
        acc_ax.text(steps[0], t["target_accuracy"], " target", fontsize=7, color="grey", va="bottom")
    acc_ax.set_ylim(min(0.0, min(h["accuracy"] for h in history)), 1.02)
    acc_ax.set_xlabel("step", fontsize=8)
    acc_ax.set_ylabel("held-out accuracy", fontsize=8)
    loss_ax.plot(steps, [h["loss"] for h in history], marker="o", ms=3, color="#dd8452")
    loss_ax.set_ylim(bottom=0)
    loss_ax.set_xlabel("step", fontsize=8)
    loss_ax.set_ylabel("held-out loss (nats per scored position)", fontsize=8)
    for ax in (acc_ax, loss_ax):
        ax.grid(alpha=0.3)
    fig.suptitle("the trained twin's learning curve", fontsize=10)
    return figure_png(fig)


def _short_hook(hook: str) -> str:
    return hook.replace("blocks.", "").replace(".hook_resid_", " ")


def _fmt(x: Any) -> str:
    return f"{x:.3f}" if isinstance(x, float) else html.escape(str(x))


def _table(header: list[str], rows: list[list[Any]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{_fmt(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _twin_warning(t: dict[str, Any]) -> str:
    """A visible note when the twin stopped below its target: its circuits are not a learned model's."""
    if not t.get("known") or t.get("reached_target") is not False:
        return ""
    return (f"<p class='warn'><b>The twin did not reach its target</b>: held-out accuracy {t['final_accuracy']:.3f} "
            f"of {t['target_accuracy']:g} after {t['steps']} steps ({t['minutes']:.1f} min, stopped by "
            f"{html.escape(t['stopped_by'])}). What follows describes a model that has not learned the task. Give it "
            f"more time (<code>--train-minutes</code> larger than before continues the same run) or another "
            f"<code>--seed</code> with another <code>--out</code>.</p>")


def _theorem3_found(metrics: dict[str, Any]) -> bool | None:
    t3 = metrics["pruning"].get("theorem3")
    return None if not t3 else t3["accuracy"] >= t3["target_accuracy"] - FOUND_MARGIN


def _corollary3_shown(metrics: dict[str, Any]) -> bool | None:
    c3 = (metrics["pruning"].get("theorem3") or {}).get("corollary3")
    if not c3:
        return None
    return c3["shared_identical"] and all(t["accuracy"] >= metrics["models"].get(n, {}).get("accuracy", 1.0) - FOUND_MARGIN
                                          for n, t in c3["targets"].items())


def conclusions(metrics: dict[str, Any]) -> list[str]:
    """What the numbers of ``metrics.json`` support, each sentence computed by a stated rule (no hopes)."""
    models = metrics["models"]
    built = [n for n, i in models.items() if i.get("kind") == "construction"]
    twin = TWIN if TWIN in models else None
    out = []
    below = {n: models[n]["accuracy"] for n in built if models[n]["accuracy"] < 1.0}
    if built:
        out.append(f"Every construction is exact on these {metrics['samples']} words (accuracy 1.000)." if not below else
                   "Constructions below accuracy 1 on these words: "
                   + ", ".join(f"{n} {a:.3f}" for n, a in below.items()) + " — check the length and dtype.")
    t = metrics.get("twin_training", {})
    if twin:
        acc = models[twin]["accuracy"]
        if t.get("reached_target") is False:
            out.append(f"The twin did NOT reach its target (held-out {t['final_accuracy']:.3f} of {t['target_accuracy']:g} "
                       f"after {t['steps']} steps): every statement about it below describes a model that has not "
                       "learned the task.")
        elif t.get("reached_target"):
            out.append(f"The twin reached its target ({t['final_accuracy']:.3f} ≥ {t['target_accuracy']:g} after "
                       f"{t['steps']} steps, seed {t['seed']}); on these words it scores {acc:.3f}.")
        else:
            out.append(f"The twin scores {acc:.3f} on these words (no training record with a target).")
    for latent in metrics["latents"]:
        probes = {n: metrics["probes"][n][latent] for n in models}
        readable = [n for n in built if probes[n]["first_readable"]]
        text = f"{latent}: linearly readable (probe ≥ 0.99) in {len(readable)} of {len(built)} constructions"
        if twin:
            p = probes[twin]
            chance = p.get("chance")
            text += (f"; in the twin from {_short_hook(p['first_readable'])}" if p["first_readable"] else
                     f"; in the twin nowhere (best {p['best']:.3f} at {_short_hook(p['best_hook'])}"
                     + (f", chance {chance:.3f})" if chance is not None else ")"))
        out.append(text + ".")
    matching = metrics["attention"].get("matching", {})
    if matching:
        mean_tv = {c: float(np.mean([m["tv_distance"] for m in ms])) for c, ms in matching.items() if ms}
        if mean_tv:
            order = sorted(mean_tv, key=mean_tv.get)
            out.append(f"The twin's attention is closest to the {order[0]} construction's (mean TV distance of the head "
                       f"matching {mean_tv[order[0]]:.2f}; " + ", ".join(f"{c} {mean_tv[c]:.2f}" for c in order[1:])
                       + "). TV 0 is the same pattern, 1 disjoint; attention alone does not show the same mechanism.")
    necessary = {}
    for n, a in metrics["ablation"].items():
        margin = a["baseline"] - a["chance"]
        necessary[n] = [h for h, acc in a["zero"].items() if margin > 0 and a["baseline"] - acc > margin / 2]
    if necessary:
        out.append("Heads whose zero-ablation costs more than half the margin over chance: "
                   + "; ".join(f"{n}: {', '.join(hs) or 'none'}" for n, hs in necessary.items()) + ".")
    lost = [f"{n} at λ = {r['sparsity']:g}" for n in models
            for r in metrics["pruning"].get(n, {}).get("learned_masks", {}).get("runs", []) if not r["kept_accuracy"]]
    if any("learned_masks" in metrics["pruning"].get(n, {}) for n in models):
        out.append("Learned head masks lost accuracy for " + ", ".join(lost) + "." if lost else
                   "Every learned head mask kept its model's accuracy.")
    found, shown = _theorem3_found(metrics), _corollary3_shown(metrics)
    if found is not None:
        t3 = metrics["pruning"]["theorem3"]
        out.append(f"Theorem 3 at this scale: the pruned random network {'reproduces' if found else 'does NOT reproduce'} "
                   f"the {t3['target']} construction (accuracy {t3['accuracy']:.3f} against {t3['target_accuracy']:.3f}, "
                   f"within {FOUND_MARGIN} counts).")
    if shown is not None:
        out.append("Corollary 3 " + ("shown: two mechanisms pruned from one random network share one identical matrix."
                                     if shown else "not shown at this scale (see its section)."))
    c = metrics.get("circuits") or {}
    scored = {n: r for n, r in c.get("models", {}).items() if r.get("relevant_edges") is not None}
    if scored:
        out.append("ACDC against the constructions' proofs: precision " + ", ".join(
            f"{n} {r['precision']:.2f}" for n, r in scored.items()) + "; recall " + ", ".join(
            f"{n} {r['recall']:.2f}" for n, r in scored.items()) + ".")
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
        truth = (f"{_fmt(r['precision'])} / {_fmt(r['recall'])} / {_fmt(r['auroc'])} ({r['relevant_edges']} edges)"
                 if r.get("relevant_edges") is not None else "no ground truth (trained)")
        rows.append([name, f"{r['edges']} of {r['graph_edges']}", ", ".join(r["heads"]) or "none", r["faithfulness"],
                     r["faithfulness_kl"], truth, f"{r['seconds']:.1f} s"])
    overlap = [[c_name, ", ".join(o["twin_heads"]) or "none", ", ".join(o["mapped"]) or "none",
                ", ".join(o["construction_heads"]) or "none", o["jaccard"]] for c_name, o in c["overlap"].items()]
    return (f"""<h2>Circuits (ACDC, {c['pairs']} counterfactual pairs)</h2>
<p class="note">Edges kept by ACDC (KL threshold 0.01) on pairs that differ in one controlled way; faithfulness is the
circuit's accuracy on the outputs the corruption changes with every other edge patched (the full model's is 1), and
its normalised KL. Constructions are scored against the task-relevant ground truth their weights imply
(precision / recall / AUROC of the edge ranking); a twin has none. `interp circuit` runs one method on one model.</p>"""
            + _table(["model", "edges kept", "heads in the circuit", "faithfulness (accuracy)", "faithfulness (KL)",
                      "vs ground truth: P / R / AUROC", "time"], rows)
            + ("<h3>The twin's circuit heads, through the head matching</h3>"
               + _table(["construction", "twin's circuit heads", "matched to", "construction's circuit heads",
                         "Jaccard"], overlap) if overlap else ""))


def write_report(out: str | Path) -> Path:
    """Render ``out/report.html`` from ``out/metrics.json`` and ``out/patterns.npz``; returns its path."""
    out = Path(out)
    metrics, patterns = read_results(out)
    tokens = metrics["example"]["tokens"]
    word_text = " ".join(tokens[1:])
    models = list(metrics["models"])

    summary = []
    for name, info in metrics["models"].items():
        probes = metrics["probes"][name]
        pr = metrics["pruning"][name]
        summary.append([name, info["accuracy"], f"{info['layers']} layers, {len(info['heads'])} live heads",
                        *(f"{p['best']:.3f} at {_short_hook(p['best_hook'])}; ≥ 0.99 from "
                          f"{_short_hook(p['first_readable']) if p['first_readable'] else 'nowhere'}" for p in probes.values()),
                        ", ".join(pr["greedy"]["surviving"]) or "—",
                        "; ".join(f"λ={r['sparsity']:g}: " + (", ".join(r["surviving"]) or "none")
                                  + ("" if r.get("kept_accuracy", True) else " ✗")  # as in the pruning table
                                  for r in pr.get("learned_masks", {}).get("runs", [])) or "—"])
    latents = list(metrics["latents"])
    summary_table = _table(["model", "accuracy", "size", *(f"probe for {l}" for l in latents),
                            "greedy pruning keeps", "learned masks keep"], summary)
    summary_table = _twin_warning(metrics.get("twin_training", {})) + summary_table
    conclude = ("<h2>What we conclude</h2><p class='note'>Computed from the numbers on this page by the rules each "
                "sentence states; nothing here is written in advance.</p><ul>"
                + "".join(f"<li>{html.escape(c)}</li>" for c in conclusions(metrics)) + "</ul>")
    curve = _learning_curve_png(metrics.get("twin_training", {}))
    curve_html = (f"<h2>The twin's training</h2><img alt='learning curve of the trained twin' src='{png_data_uri(curve)}'>"
                  if curve else "")

    if max(len(p) for p in patterns.values()) <= SIDE_BY_SIDE_HEADS:
        png = _side_by_side_png(patterns, tokens)
        heat = [f"<img alt='attention of every model, side by side' src='{png_data_uri(png)}'>"]
    else:  # many heads (e.g. the gridworld construction's 2S + 1): one figure per model
        heat = [f"<h3>{html.escape(name)}</h3><img alt='{html.escape(name)} attention' "
                f"src='{png_data_uri(heatmap_png(pats, tokens, name))}'>" for name, pats in patterns.items()]
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
        + _table(["trained head", "constructed head", "mean TV distance"],
                 [[m["trained"], m["constructed"], m["tv_distance"]] for m in ms])
        for c, ms in metrics["attention"]["matching"].items())

    probe_png = _probe_png(metrics["probes"], latents)
    ablation_png = _ablation_png(metrics["ablation"])

    prune_rows = []
    for name in models:
        pr = metrics["pruning"][name]
        runs = pr.get("learned_masks", {}).get("runs", [{}])
        for i, r in enumerate(runs):
            greedy = [name, pr["greedy"]["threshold"], ", ".join(pr["greedy"]["surviving"]) or "—",
                      pr["greedy"]["accuracy"]] if i == 0 else ["", "", "", ""]
            prune_rows.append(greedy + ([f"{r['sparsity']:g}", ", ".join(f"{h} {g:.2f}" for h, g in r["gates"].items()),
                                         ", ".join(r["surviving"]) or "none",
                                         f"{r['accuracy_masked']:.3f}" + ("" if r["kept_accuracy"] else " ✗"),
                                         r["accuracy_masked_original_weights"]] if r else ["—"] * 5))
    theorem3 = ""
    if metrics["pruning"].get("theorem3_skipped"):
        theorem3 = f"<h3>Theorem 3</h3><p class='note'>Not run: {html.escape(metrics['pruning']['theorem3_skipped'])}.</p>"
    t3 = metrics["pruning"].get("theorem3")
    if t3:
        rs = t3["random_shape"]
        # the heading states what the numbers show: found only if the pruning matches the construction
        found = _theorem3_found(metrics)
        heading = (f"the {html.escape(t3['target'])} construction found inside a random network" if found else
                   f"the pruned random network did <b>not</b> reproduce the {html.escape(t3['target'])} construction "
                   f"(accuracy {t3['accuracy']:.3f} against {t3['target_accuracy']:.3f})")
        theorem3 = f"""<h3>Theorem 3 at toy scale: {heading}</h3>
<p>A random transformer ({rs['n_layers']} layers, width {rs['d_model']}, {rs['n_heads']} heads, MLP {rs['d_mlp']};
entries U(−1, 1)/√fan-in, never trained) is pruned — every weight kept or zeroed, {t3['kept_fraction']:.0%} kept
({t3['kept_weights']:,} of {t3['weights']:,}) — by a mask learned for {t3['steps']} steps to reproduce the
construction's next-token distribution.</p>""" + _table(
            ["kept fraction", "accuracy of the pruned network", "construction's accuracy", "mean TV", "max TV", "ε̂ (max relative L2)"],
            [[t3["kept_fraction"], t3["accuracy"], t3["target_accuracy"], t3["mean_tv"], t3["max_tv"], t3["epsilon_hat"]]])
        c3 = t3.get("corollary3")
        if c3:
            both = _corollary3_shown(metrics)
            c3_heading = ("two mechanisms, one identical pruned matrix" if both else
                          "not shown at this scale: " + ("a pruning missed its target" if c3["shared_identical"]
                                                         else "the shared matrices differ"))
            theorem3 += f"""<h3>Corollary 3: {c3_heading}</h3>
<p>The stack-like and the uniform constructions attend differently, yet both were pruned out of the same random
network ({c3['steps']} steps) with <b>one</b> mask on <code>{html.escape(', '.join(c3['shared']))}</code>: the two pruned
matrices are {'identical' if c3['shared_identical'] else 'NOT identical'}. Elsewhere the two prunings overlap
with Jaccard index {c3['other_masks_jaccard']:.2f}. Reading that one matrix cannot tell the two functions apart.</p>""" + _table(
                ["target", "accuracy of its pruning", "mean TV", "max TV"],
                [[n, t["accuracy"], t["mean_tv"], t["max_tv"]] for n, t in c3["targets"].items()])

    circuits_html = _circuits_section(metrics.get("circuits"))
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>sandbox-lens: constructed vs trained — {html.escape(metrics['task'])}</title>
<style>{_CSS}</style></head><body>
<h1>Constructed vs trained circuits</h1>
<p><b>Task:</b> {html.escape(metrics['task'])}. Exact constructions and a trained twin
(<code>{html.escape(metrics['twin'])}</code>) on the same {metrics['samples']} sampled words
({metrics['examples']} for the attention scores).
Accuracy is the task's ({html.escape(metrics['scored_positions'])}).</p>
{summary_table}
{conclude}
{curve_html}
<h2>Attention on <code>{html.escape(word_text)}</code></h2>
<p class="note">Canonical coordinates: one row per word position; the first key is everything before the word.
Only heads whose OV circuit writes are shown.</p>
{''.join(heat)}
<h3>Interactive (circuitsvis)</h3><p class="note">Tiles in order: {html.escape(', '.join(tile_names))}.</p>{cv}
<h2>Heads against reference patterns</h2>
<p class="note">Averaged over example words: mass on the reference's target (— for uniform, whose target is every
key, so any pattern puts all its mass there), argmax agreement, mean total-variation distance. Each head's closest reference (by TV distance) is shown; all are in <code>metrics.json</code>.</p>
{_table(["model", "head", "best reference", "mass", "argmax agreement", "TV distance"], score_rows)}
<h2>Matching the twin's heads to each construction's (Hungarian, mean TV)</h2>{match_html}
<h2>Where the latents are linearly readable</h2><img alt="probe accuracy by hook" src="{png_data_uri(probe_png)}">
<h2>Head ablation (others fixed)</h2><img alt="head ablation" src="{png_data_uri(ablation_png)}">
<h2>Pruning</h2>
<p class="note">Greedy: remove the cheapest head while accuracy stays ≥ the threshold (others fixed). Learned masks:
hard-concrete gates with an L0 penalty of λ nats per open head, trained with all weights (others adapt); a head survives
when its gate is above 0.5. Accuracy as trained (adapted weights, surviving heads scaled by their gates), and with the closed heads
zeroed in the original weights. Constructions can collapse to a constant output when a gate partly closes, which leaves
no gradient to reopen it: a ✗ marks a run that lost accuracy.</p>
{_table(["model", "greedy threshold", "greedy keeps", "greedy accuracy", "λ", "learned gates", "learned masks keep",
         "accuracy as trained", "accuracy, original weights"], prune_rows)}
{theorem3}
{circuits_html}
<p>Raw numbers: <code>metrics.json</code> (sections probes, attention, ablation, pruning, circuits); {metrics['seconds']:.0f} s.</p>
</body></html>
"""
    report = out / "report.html"
    atomic_write(report, page.encode())
    return report
