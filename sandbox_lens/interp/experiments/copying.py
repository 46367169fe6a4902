"""``copying`` — thesis §3.6.5 (Figs. 3.41–3.43, Proposition 6): on a Dyck copying task, attention patterns that look
interpretable are uninformative, and removing their heads costs little.

The twins copy Dyck_{k,D} prefixes: at every bracket the output is that bracket (the ``dyck-copy`` task kind). The
thesis trains 1- and 4-layer transformers to > 90% and > 96% validation accuracy and finds heads that attend to
closing brackets or to one bracket token, patterns that look interpretable and say nothing about copying, beside
heads that attend to the current position (which does copy); the model "can solve copying through the residual
stream, the MLPs or the value matrices". §3.6.5.2 contrasts two notions of a head's importance: with the others
fixed (ablate one head, measure the drop) and with the others adapting (learned L0 head masks, Voita et al. 2019,
whose surviving heads "tend to be interpretable").

Here twins of the thesis's Dyck shape (1 head per layer, width 50) are trained at 1 and 4 layers. On held-out
words each head's pattern is labelled by the token class it puts ≥ 0.8 of its mass on (the most specific such
class: the current position, one bracket token, one bracket type, the closing or the opening brackets, BOS), or
"diffuse". A head *looks interpretable* when its class is a bracket class: readable, and not the current position.
Each head is mean-ablated alone (others fixed); learned hard-concrete head masks (others adapt) decide which heads a
copying twin keeps. The rules: the accuracy bars, how common the interpretable-looking heads are, the largest
accuracy drop when one of them is ablated (below 0.02: "barely changes"), and whether the masks keep them more often
than heads overall.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from sandbox_lens.interp.experiments.base import Context
from sandbox_lens.interp.experiments.rules import Rule
from sandbox_lens.interp.model.run import attention_patterns, live_heads
from sandbox_lens.interp.stats import Estimate, estimate, share
from sandbox_lens.interp.streams import ExperimentSeed, Stream
from sandbox_lens.interp.tasks.batches import step_rng
from sandbox_lens.interp.tasks.dyck import Dyck, parse_dyck_spec
from sandbox_lens.interp.tasks.variants import DyckCopyTask
from sandbox_lens.interp.train import TrainConfig, default_shape, load_trained
from sandbox_lens.probes.ablation import accuracy_with_ablation, head_ablation
from sandbox_lens.probes.masks import learn_head_masks

SEEDS, QUICK_SEEDS = tuple(range(10)), (0, 1)
DEPTHS = (1, 4)
THESIS_ACCURACY = {1: 0.90, 4: 0.96}  # Figs. 3.42 and 3.41/3.43: "> 90%", "> 96%" validation accuracy
SHARP = 0.8  # a pattern "attends to" a class when it puts at least this much of its mass there
BARELY = 0.02  # "barely changes": an accuracy drop below two points
COMMON = 0.5  # "common": in more than half the twins
CURRENT, DIFFUSE, BOS = "current position", "diffuse", "BOS"
NOT_LOOKING = (CURRENT, DIFFUSE, BOS)
MASK_SPARSITY = 0.1  # nats of cross-entropy per open head (the middle of `interp compare`'s defaults)

RULES = {
    **{
        f"accuracy-{n}": Rule(
            f"held-out copying accuracy of the {n}-layer twins (mean over seeds)", "above", THESIS_ACCURACY[n], null=0.0
        )
        for n in DEPTHS
    },
    "common": Rule(
        "share of 4-layer twins with a head that looks interpretable (attends to a bracket class)", "above", COMMON
    ),
    **{
        f"ablation-{n}": Rule(
            f"largest copying-accuracy drop when one interpretable-looking head of a {n}-layer twin is mean-ablated",
            "below",
            BARELY,
            null=BARELY,
            unit="twins",
        )
        for n in DEPTHS
    },
    "masks": Rule(
        "share of the heads learned masks keep that look interpretable, minus the share among all heads (4 layers)",
        "above",
        0.0,
        unit="twins",
    ),
}


def _scale(quick: bool) -> dict[str, Any]:
    if quick:
        return {"steps": 60, "length": 28, "words": 32, "mask_steps": 10}
    return {"steps": 1000, "length": 28, "words": 400, "mask_steps": 200}


def check(options: dict[str, Any]) -> None:
    """Refuse a language this experiment cannot take, in one line, before ``--out`` is claimed."""

    Dyck(*parse_dyck_spec(options["dyck"]))


def token_classes(lang: Dyck) -> dict[str, np.ndarray]:
    """The key classes a pattern is read against, as the input tokens each holds (BOS is token 0, bracket b is
    token 1 + b), from the narrowest: one bracket token, one bracket type, the closing and the opening brackets."""
    names, b = lang.bracket_names, np.arange(lang.n_brackets)
    out = {BOS: np.array([0])}
    out.update({f"bracket {names[i]}": np.array([1 + i]) for i in b})
    out.update({f"type {names[2 * i]}{names[2 * i + 1]}": np.array([1 + 2 * i, 2 + 2 * i]) for i in range(lang.k)})
    out["closing brackets"], out["opening brackets"] = 1 + b[1::2], 1 + b[0::2]
    return out


def pattern_label(pattern: np.ndarray, tokens: np.ndarray, classes: dict[str, np.ndarray]) -> tuple[str, float]:
    """(label, mass) of one head's patterns ``[batch, query, key]`` on ``tokens`` ``[batch, n]``: among the classes
    it puts ≥ :data:`SHARP` of its mass on (averaged over the queries, after BOS, that see a key of the class), the
    one a uniform pattern would give the least mass; ``"diffuse"`` when there is none."""
    n = tokens.shape[1]
    causal = np.tril(np.ones((n, n), dtype=bool))
    found: list[tuple[float, str, float]] = [(0.0, DIFFUSE, 0.0)]
    diag = np.einsum("bqq->bq", pattern)[:, 1:]
    found.append((float((1.0 / np.arange(2, n + 1)).mean()), CURRENT, float(diag.mean())))
    for name, members in classes.items():
        member = np.isin(tokens, members)  # [b, k]
        seen = (member[:, None, :] & causal[None]).sum(-1)[:, 1:]  # keys of the class each query sees
        valid = seen > 0
        if not valid.any():
            continue
        mass = (pattern * member[:, None, :]).sum(-1)[:, 1:]
        base = seen / np.arange(2, n + 1)[None, :]
        found.append((float(base[valid].mean()), name, float(mass[valid].mean())))
    sharp = [f for f in found[1:] if f[2] >= SHARP]
    if not sharp:  # diffuse: the largest mass it puts on any one class
        return DIFFUSE, max(f[2] for f in found)
    base_rate, label, mass = min(sharp)
    return label, mass


def looks_interpretable(label: str) -> bool:
    """A bracket class: a pattern one can read, which says nothing about the bracket to copy."""
    return label not in NOT_LOOKING


def analyse_twin(model: Any, lang: Dyck, data: Any, sc: dict[str, Any], seed: int) -> dict[str, Any]:
    """One twin: accuracy, every head's label and mean-ablation drop, all heads and the interpretable-looking ones
    ablated together, and the heads learned masks keep."""

    heads = live_heads(model)
    patterns = attention_patterns(model, data.tokens, heads)
    classes = token_classes(lang)
    ablated = head_ablation(model, data.tokens, data.targets, data.score_mask, "mean", heads)  # others fixed
    names = {hd: f"L{hd[0]}H{hd[1]}" for hd in heads}
    per_head: dict[str, dict[str, Any]] = {}
    for hd in heads:
        label, mass = pattern_label(patterns[hd], data.tokens, classes)
        per_head[names[hd]] = {"label": label, "mass": mass, "drop": ablated["drop"][hd]}
    looking = [hd for hd in heads if looks_interpretable(per_head[names[hd]]["label"])]
    task = DyckCopyTask(lang, sc["length"])

    def batches(step: int):
        b = task.batch(step_rng(seed, step, Stream.MASK_BATCHES), 32)
        return b.tokens, b.targets, b.loss_mask

    masks = learn_head_masks(
        model,
        batches,
        (data.tokens, data.targets, data.score_mask),
        sparsity=MASK_SPARSITY,
        steps=sc["mask_steps"],
        heads=heads,
        seed=seed,
    )
    return {
        "accuracy": ablated["baseline"],
        "heads": per_head,
        "all_heads_ablated": accuracy_with_ablation(model, data.tokens, data.targets, data.score_mask, heads, "mean"),
        "looking_ablated": (  # None without an interpretable-looking head: nothing to ablate
            accuracy_with_ablation(model, data.tokens, data.targets, data.score_mask, looking, "mean")
            if looking
            else None
        ),
        "kept": [names[hd] for hd in masks["surviving"]],
        "masked_accuracy": masks["accuracy_masked"],
    }


def run(ctx: Context) -> None:
    """Train both depths (or reuse finished runs), read and ablate every head, learn the masks, rule."""

    sc = _scale(ctx.quick)
    lang = Dyck(*parse_dyck_spec(ctx.options["dyck"]))
    task = DyckCopyTask(lang, sc["length"])
    data = task.batch(np.random.default_rng(ExperimentSeed.COPYING_WORDS), sc["words"])
    config = TrainConfig(steps=sc["steps"], batch=32, lr=3e-3, eval_every=100, target_accuracy=None)
    per: dict[int, dict[int, Any]] = {}
    for n in DEPTHS:
        label = f"{n} layer" + ("s" if n > 1 else "")
        ctx.sweep(label, task, replace(default_shape(task), n_layers=n), config)
        per[n] = {s: analyse_twin(load_trained(d), lang, data, sc, s) for s, d in ctx.run_dirs(label).items()}
    ctx.data("twins", {str(n): {str(s): v for s, v in p.items()} for n, p in per.items()})
    ctx.data("analysis", {"words": sc["words"], "mask_steps": sc["mask_steps"], "mask_sparsity": MASK_SPARSITY})
    _report(ctx, per, lang)
    example(ctx, per, lang, data.tokens[0])


def accuracy_effect(twins: dict[int, Any]) -> Estimate:
    """The mean held-out accuracy over the twins, with its interval."""
    return estimate([t["accuracy"] for t in twins.values()])


def common_effect(twins: dict[int, Any]) -> Estimate:
    """The share of twins with at least one interpretable-looking head (Wilson interval)."""
    return share([any(looks_interpretable(h["label"]) for h in t["heads"].values()) for t in twins.values()])


def ablation_effect(twins: dict[int, Any]) -> Estimate:
    """Over the twins with an interpretable-looking head: the largest drop when one of them is ablated."""
    worst = [
        max(h["drop"] for h in t["heads"].values() if looks_interpretable(h["label"]))
        for t in twins.values()
        if any(looks_interpretable(h["label"]) for h in t["heads"].values())
    ]
    return estimate(worst, unit="twins")


def mask_effect(twins: dict[int, Any]) -> Estimate:
    """Over the twins whose masks keep a head and that have an interpretable-looking head (elsewhere the difference
    is 0 by construction): the share of kept heads that look interpretable minus the share among all the twin's
    heads (positive: the masks keep the interpretable-looking heads more often)."""
    diffs = []
    for t in twins.values():
        if t["kept"] and any(looks_interpretable(h["label"]) for h in t["heads"].values()):
            overall = np.mean([looks_interpretable(h["label"]) for h in t["heads"].values()])
            kept = np.mean([looks_interpretable(t["heads"][name]["label"]) for name in t["kept"]])
            diffs.append(float(kept - overall))
    return estimate(diffs, unit="twins")


def _report(ctx: Context, per: dict[int, dict[int, Any]], lang: Dyck) -> None:
    tables(ctx, per, lang)
    for n in DEPTHS:
        e = accuracy_effect(per[n])
        ctx.rule(
            f"{n}-layer twins learn to copy",
            f"a {n}-layer transformer reaches > {THESIS_ACCURACY[n]:.0%} validation accuracy on copying",
            RULES[f"accuracy-{n}"],
            e,
            f"mean {e.text('{:.4f}')}; worst twin {min(t['accuracy'] for t in per[n].values()):.4f}",
        )
    e = common_effect(per[4])
    ctx.rule(
        "Interpretable-looking patterns are common",
        "attending to closing brackets (uninformative) is common in 4-layer copying models (Fig. 3.43)",
        RULES["common"],
        e,
        f"{e.text('{:.2f}')} of {e.n} twins",
    )
    for n in DEPTHS:
        e = ablation_effect(per[n])
        learned = accuracy_effect(per[n])
        ctx.rule(
            f"Ablating an interpretable-looking head barely changes copying ({n} layer{'s' if n > 1 else ''})",
            "the interpretable-looking patterns are uninformative for copying (§3.6.5.1; the ablation is our test)",
            RULES[f"ablation-{n}"],
            e,
            f"largest drop {e.text('{:.4f}')} over {e.n} twins with such a head",
            floor=None
            if learned.value is not None and learned.value > THESIS_ACCURACY[n]
            else "the twins did not learn",
        )
    e = mask_effect(per[4])
    ctx.rule(
        "Learned masks keep the interpretable-looking heads",
        "with the other heads adapting, the heads that survive tend to be interpretable (§3.6.5.2, Voita et al.)",
        RULES["masks"],
        e,
        f"{e.text('{:+.2f}')} over {e.n} twins with an interpretable-looking head whose masks keep a head "
        f"(masks close every head in {sum(not t['kept'] for t in per[4].values())} of {len(per[4])})",
    )
    figures(ctx, per, lang)
    _conclude(ctx, per)


def _worst_layer(twins: list[dict[str, Any]]) -> int:
    name = max(((h["drop"], k) for x in twins for k, h in x["heads"].items()))[1]
    return int(name[1 : name.index("H")])


def _conclude(ctx: Context, per: dict[int, dict[int, Any]]) -> None:
    for n in DEPTHS:
        t = list(per[n].values())
        ctx.conclude(
            f"{n} layer{'s' if n > 1 else ''}: mean accuracy {np.mean([x['accuracy'] for x in t]):.4f}; with every "
            f"head mean-ablated at once {np.mean([x['all_heads_ablated'] for x in t]):.4f}, so "
            + (
                "copying does not run through attention here (the residual stream and the MLPs carry it)."
                if min(x["all_heads_ablated"] for x in t) > THESIS_ACCURACY[n]
                else "some twins need their heads to copy."
            )
            + f" Heads labelled by a bracket class: {sum(looks_interpretable(h['label']) for x in t for h in x['heads'].values())}"
            f" of {sum(len(x['heads']) for x in t)}; the largest single-head drop {max(h['drop'] for x in t for h in x['heads'].values()):.3f}"
            f" ({'first layer' if _worst_layer(t) == 0 else f'layer {_worst_layer(t)}'})."
        )
    ctx.caveat(
        "A head's label is ours: the most specific token class holding ≥ 0.8 of its attention, averaged over the "
        "queries that see such a key; the thesis reads its figures by eye. Ablation is the mean over the held-out "
        "words at every position; the learned masks adapt the weights (plain SGD at 1e-4) under an L0 penalty of "
        f"{MASK_SPARSITY} nats per open head, one setting among many."
    )
    ctx.caveat(
        "Our twins copy perfectly after 1000 steps, and copying gives attention little to learn: their patterns stay "
        "close to uniform, so the sharp patterns of Figs. 3.41–3.43 (whose training the thesis does not give) may "
        "need other settings (longer training, other widths, a model first trained on next-token prediction)."
    )


GROUPS = ("current position", "bracket class", "BOS", "diffuse")


def group_of(label: str) -> str:
    """A head's label folded into the four groups the figure shows."""
    return "bracket class" if looks_interpretable(label) else label


def _mean(values: list[float]) -> str:
    return estimate(values).text("{:.4f}") if values else "—"


def tables(ctx: Context, per: dict[int, dict[int, Any]], lang: Dyck) -> None:
    """The twins' accuracies and ablations by depth, the heads by pattern, and every 4-layer twin's heads."""
    rows = []
    for n in DEPTHS:
        t = list(per[n].values())
        rows.append(
            [
                n,
                len(t),
                _mean([x["accuracy"] for x in t]),
                _mean([x["all_heads_ablated"] for x in t]),
                _mean([x["looking_ablated"] for x in t if x["looking_ablated"] is not None]),
                f"{np.mean([len(x['kept']) for x in t]):.1f} of {n}",
                _mean([x["masked_accuracy"] for x in t]),
            ]
        )
    ctx.table(
        f"Copying {lang.name}: accuracy, ablation (others fixed) and learned masks (others adapt)",
        [
            "layers",
            "twins",
            "accuracy [95% interval]",
            "every head mean-ablated",
            "interpretable-looking heads mean-ablated",
            "heads the masks keep (mean)",
            "accuracy with the masks",
        ],
        rows,
        note="accuracies on the same held-out words; one head per layer",
    )
    rows = []
    for n in DEPTHS:
        heads = [h for t in per[n].values() for h in t["heads"].values()]
        for label in sorted({h["label"] for h in heads}):
            drops = [h["drop"] for h in heads if h["label"] == label]
            kept = sum(
                name in t["kept"] for t in per[n].values() for name, h in t["heads"].items() if h["label"] == label
            )
            rows.append([n, label, len(drops), f"{np.mean(drops):+.4f}", f"{max(drops):+.4f}", kept])
    ctx.table(
        "Heads by the class their pattern attends to",
        ["layers", "pattern", "heads", "mean accuracy drop when ablated", "largest drop", "kept by the masks"],
        rows,
        note="a pattern attends to a class when ≥ 0.8 of its mass lies there (the most specific such class)",
    )
    ctx.table(
        "Every 4-layer twin's heads: pattern (mass) and accuracy drop when mean-ablated",
        ["seed", "accuracy", *[f"L{layer}H0" for layer in range(4)], "kept by the masks"],
        [
            [s, f"{t['accuracy']:.4f}"]
            + [f"{h['label']} ({h['mass']:.2f}) {h['drop']:+.3f}" for h in t["heads"].values()]
            + [" ".join(t["kept"]) or "none"]
            for s, t in per[4].items()
        ],
    )


def figures(ctx: Context, per: dict[int, dict[int, Any]], lang: Dyck) -> None:
    """Every head's accuracy drop by pattern group, a panel per depth."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 3.4))
    axes = fig.subplots(1, len(DEPTHS), sharey=True)
    for ax, n in zip(axes, DEPTHS):
        heads = [h for t in per[n].values() for h in t["heads"].values()]
        for i, g in enumerate(GROUPS):
            drops = [h["drop"] for h in heads if group_of(h["label"]) == g]
            jitter = np.linspace(-0.15, 0.15, len(drops)) if len(drops) > 1 else np.zeros(len(drops))
            ax.scatter(i + jitter, drops, s=14, color="C1" if g == "bracket class" else "C0")
        ax.axhline(BARELY, color="grey", lw=0.8, ls=":")
        ax.set_xticks(range(len(GROUPS)), GROUPS, rotation=20, ha="right")
        ax.set_title(f"{n} layer{'s' if n > 1 else ''}")
    axes[0].set_ylabel("copying-accuracy drop (head mean-ablated)")
    fig.tight_layout()
    ctx.figure(
        "copying-ablation",
        fig,
        f"Every head of every twin copying {lang.name}: the accuracy lost when it is mean-ablated alone, by what its "
        f"pattern attends to (orange: a bracket class, the interpretable-looking heads). Dotted: {BARELY}.",
    )


def example(ctx: Context, per: dict[int, dict[int, Any]], lang: Dyck, word: np.ndarray) -> None:
    """The attention pattern of the sharpest interpretable-looking head of a 4-layer twin on one held-out word."""
    from matplotlib.figure import Figure

    found = [(h["mass"], s, name) for s, t in per[4].items() for name, h in t["heads"].items()]
    if not found:
        return
    _, seed, name = max(found)  # the sharpest head, whatever its class
    layer = int(name[1 : name.index("H")])
    model = load_trained(ctx.run_dirs("4 layers")[seed])
    pattern = attention_patterns(model, word[None], [(layer, 0)])[(layer, 0)][0]
    names = ["BOS", *(lang.bracket_names[int(x) - 1] for x in word[1:])]
    fig = Figure(figsize=(5.4, 4.8))
    ax = fig.subplots()
    ax.imshow(pattern, cmap="Blues", vmin=0, vmax=1)
    ax.set_xticks(range(len(names)), names, fontsize=7)
    ax.set_yticks(range(len(names)), names, fontsize=7)
    ax.set(xlabel="key", ylabel="query", title=f"seed {seed}, {name}: {per[4][seed]['heads'][name]['label']}")
    fig.tight_layout()
    ctx.figure(
        "copying-pattern",
        fig,
        f"The sharpest head of the 4-layer twins (seed {seed}, {name}) on one held-out word; ablating it "
        f"alone changes the copying accuracy by {-per[4][seed]['heads'][name]['drop']:+.4f}.",
    )
