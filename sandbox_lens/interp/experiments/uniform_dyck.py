"""``uniform-dyck`` — thesis §3.6.2.1, Corollary 1 and footnote 52: a transformer whose attention is uniform fits
Dyck "almost perfectly (> 99% accuracy)".

Corollary 1 builds a 2-layer transformer with uniform attention in both layers (W_K = W_Q = 0), no position
embedding, a causal mask and a BOS token that generates Dyck at every length; footnote 52 says models trained with
their attention weights fixed at 0 fit the distribution at > 99%. Twins of the thesis's Dyck shape (2 layers, 1
head, width 50, MLP 50; Adam at 3e-3) are trained on Dyck_{k,D} prefixes of up to 28 tokens with no position
embedding and every head's query and key weights and biases set to 0 and kept there (``--attention uniform``),
beside twins of the same shape whose attention is trained. Every step is run (no early stop).

For every uniform twin: its held-out accuracy, and its attention on sampled words, which must be exactly uniform
over BOS and the prefix (1/(i + 1) at query i) — a check that the weights stayed at 0. The claim is ruled on the
uniform twins' mean accuracy against the thesis's 0.99.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from sandbox_lens.interp.experiments.base import Context
from sandbox_lens.interp.experiments.rules import Rule, count, exactness_rule
from sandbox_lens.interp.stats import estimate
from sandbox_lens.interp.streams import ExperimentSeed
from sandbox_lens.interp.tasks.batches import DyckTask
from sandbox_lens.interp.tasks.dyck import Dyck, parse_dyck_spec
from sandbox_lens.interp.train import TrainConfig, default_shape, load_trained
from sandbox_lens.probes.dyck import layer_patterns

SEEDS, QUICK_SEEDS = tuple(range(10)), (0, 1)
THESIS_ACCURACY = 0.99  # footnote 52: "> 99% accuracy"
UNIFORM_TOLERANCE = 1e-6  # float32 softmax of equal scores: 1/(i + 1) to rounding

RULES = {
    "fits": Rule(
        "held-out accuracy of the twins with uniform attention (mean over seeds)",
        "above",
        THESIS_ACCURACY,
        null=0.0,
        min_n=3,
    ),
    "uniform": exactness_rule(
        f"uniform twins whose attention on sampled words departs from 1/(i + 1) by more than {UNIFORM_TOLERANCE:g}"
    ),
}


def _scale(quick: bool) -> dict[str, Any]:
    if quick:
        return {"steps": 60, "length": 28, "words": 8}
    return {"steps": 1500, "length": 28, "words": 100}


def check(options: dict[str, Any]) -> None:
    """Refuse a task option this experiment cannot take, in one line, before ``--out`` is claimed."""

    parse_dyck_spec(options["dyck"])


def departure_from_uniform(model: Any, words: list[list[int]]) -> float:
    """The largest |attention − 1/(i + 1)| over every head, layer, query i and word (BOS at key 0)."""

    worst = 0.0
    for w in words:
        for layer in range(model.cfg.n_layers):
            for pattern in layer_patterns(model, w, layer).values():
                n = pattern.shape[0]
                uniform = np.tril(np.ones((n, n))) / np.arange(1, n + 1)[:, None]
                worst = max(worst, float(np.abs(pattern - uniform).max()))
    return worst


def run(ctx: Context) -> None:
    """Train both populations (or reuse finished runs), check the uniform twins' attention, rule on the claim."""

    sc = _scale(ctx.quick)
    k, D = parse_dyck_spec(ctx.options["dyck"])
    lang = Dyck(k, D)
    task = DyckTask(lang, sc["length"])
    shape = replace(default_shape(task), positional="none")
    words = [list(w) for w in lang.sample(sc["words"], sc["length"] - 1, seed=ExperimentSeed.UNIFORM_DYCK_WORDS)]
    base = TrainConfig(steps=sc["steps"], batch=32, lr=3e-3, eval_every=100, target_accuracy=None)
    per: dict[str, dict[str, Any]] = {}
    for label, attention in (("uniform", "uniform"), ("trained attention", "learned")):
        summary = ctx.sweep(label, task, shape, replace(base, attention=attention))
        acc = {r["seed"]: r["final_accuracy"] for r in summary["runs"]}
        departure = {}
        if attention == "uniform":
            for s, d in ctx.run_dirs(label).items():
                departure[s] = departure_from_uniform(load_trained(d), words)
        per[label] = {"accuracy": acc, "departure": departure}
    ctx.data("populations", per)
    _report(ctx, per, lang)


def _report(ctx: Context, per: dict[str, dict[str, Any]], lang: Any) -> None:
    uniform, trained = per["uniform"], per["trained attention"]
    accs = [uniform["accuracy"][s] for s in ctx.seeds]
    rows = [
        [label, len(p["accuracy"]), estimate(list(p["accuracy"].values())).text("{:.4f}"), min(p["accuracy"].values())]
        for label, p in per.items()
    ]
    ctx.table(
        f"Held-out accuracy on {lang.name}, no position embedding",
        ["attention", "twins", "mean accuracy [95% interval]", "worst twin"],
        rows,
        note="uniform: every head's W_Q, W_K, b_Q, b_K at 0 throughout training",
    )
    ctx.table(
        "Per seed",
        ["seed", "uniform: accuracy", "uniform: largest departure from 1/(i + 1)", "trained attention: accuracy"],
        [
            [s, f"{uniform['accuracy'][s]:.4f}", f"{uniform['departure'][s]:.1e}", f"{trained['accuracy'][s]:.4f}"]
            for s in ctx.seeds
        ],
    )
    e = estimate(accs)
    ctx.rule(
        "Twins with uniform attention fit Dyck almost perfectly",
        "models with attention weights fixed to 0 fit the distribution at > 99% accuracy (footnote 52)",
        RULES["fits"],
        e,
        f"mean {e.text('{:.4f}')}; per seed " + ", ".join(f"{a:.4f}" for a in accs),
    )
    off = sum(d > UNIFORM_TOLERANCE for d in uniform["departure"].values())
    ctx.rule(
        "The uniform twins' attention stayed uniform",
        "W_Q = W_K = 0 gives uniform causal attention (Corollary 1)",
        RULES["uniform"],
        count(off),
        f"{off} of {len(uniform['departure'])} twins; largest departure {max(uniform['departure'].values()):.1e}",
    )
    _figure(ctx, per)
    gap = float(np.mean(list(trained["accuracy"].values())) - np.mean(accs))
    ctx.conclude(
        f"Uniform attention (mean accuracy {np.mean(accs):.4f}) against trained attention of the same shape "
        f"({np.mean(list(trained['accuracy'].values())):.4f}): trained attention is {gap:+.4f} better on average."
    )
    ctx.caveat(
        "Accuracy is the project's Dyck next-token accuracy on held-out prefixes of the training length; footnote "
        "52 does not say which measure or which lengths the thesis used. Longer prefixes are not tested here."
    )


def _figure(ctx: Context, per: dict[str, dict[str, Any]]) -> None:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6, 3.4))
    ax = fig.subplots()
    for i, p in enumerate(per.values()):
        values = list(p["accuracy"].values())
        ax.scatter(np.full(len(values), i) + np.linspace(-0.1, 0.1, len(values)), values, color=f"C{i}")
    ax.axhline(THESIS_ACCURACY, color="grey", lw=0.8, ls=":")
    ax.set_xticks(range(len(per)), list(per))
    ax.set(ylabel="held-out accuracy", title="Dyck twins with uniform and with trained attention (one dot a seed)")
    ctx.figure(
        "uniform-dyck",
        fig,
        "Held-out accuracy of every twin; the dotted line is the thesis's 99% (footnote 52).",
    )
