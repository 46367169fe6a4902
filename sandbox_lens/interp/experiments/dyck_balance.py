"""``dyck-balance`` — thesis §3.6.3, Fig. 3.40 (Theorems 1–2): balance violation and length
generalisation with a minimal first layer.

Every twin starts from the Dyck construction with a minimal first layer (``-O first_layer=minimal``,
uniform variant's shape): its embeddings, positions and first layer — which write each bracket's type
and depth and then erase every positional coordinate, so that layer 2's input depends only on type
and depth (Assumption 10; each twin is checked) — are copied and frozen; the second layer and the
read-out are trained on prefixes of ≤ 28 tokens, with
and without the contrastive balance regulariser (eq. 3.40), at two learning rates (the thesis
varies seeds and learning rates). For every twin: β, the balance violation of its trained second
layer (:func:`sandbox_lens.probes.dyck.balance_violation_of_model`), and its closing-bracket accuracy in
distribution and on prefixes of 400–500 tokens. The models hold 500 + 2D positions.

Theorem 2 and Corollary 2 on the same twins (standard training, lr 3e-3): the second layer trained on prefixes of
N = 9D and N = 18D tokens (both above the theorem's N > 8D), each with AdamW's weight decay λ ∈ {0, 1, 10}, on the
first ten seeds. Theorem 2 bounds β by C/N · P, so β should shrink when N doubles; Corollary 2 keeps the bound under
weight decay as λ → 0. Each is ruled on log β(18D) − log β(9D), paired by seed, over the twins that learned at both
lengths (:func:`length_effect`).
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from sandbox_lens.interp.evaluate import dyck_shifts, evaluate
from sandbox_lens.interp.experiments.base import Context, ExperimentError
from sandbox_lens.interp.experiments.dyck_seeds import (
    variation_estimate,
)
from sandbox_lens.interp.experiments.rules import Rule
from sandbox_lens.interp.init_from import start_from
from sandbox_lens.interp.stats import Estimate, estimate, grouped_bootstrap_interval, paired_test
from sandbox_lens.interp.streams import ExperimentSeed
from sandbox_lens.interp.tasks.batches import DyckTask
from sandbox_lens.interp.tasks.dyck import Dyck, parse_dyck_spec
from sandbox_lens.interp.train import TrainConfig, load_trained
from sandbox_lens.probes.dyck import (
    PROBE_INPUT,
    balance_violation_of_model,
    layer_patterns,
    minimal_first_layer_gap,
    random_attention_baseline,
)

SEEDS, QUICK_SEEDS = tuple(range(25)), (0, 1)  # ≈ 25 seeds per learning rate, as the thesis's figure
LENGTH_FACTORS = (9, 18)  # training lengths N = 9D and 18D: both above Theorem 2's N > 8D, one twice the other
DECAYS = (0.0, 1.0, 10.0)  # AdamW's decoupled weight decay λ on the trained second layer (Corollary 2)
LENGTH_SEEDS = 10  # the first seeds also train the length × weight-decay grid
BAND_START = 400  # the long band's first length, which the longest training length must stay below
CONTRASTIVE = 1.0  # λ of eq. 3.40 (the thesis gives none; fixed before any run, not tuned)
LRS = (1e-3, 3e-3)
THESIS_MINIMAL_VARIATION, THESIS_BASELINE = 0.24, 2.85
LEARNED = 0.97  # in-distribution closing-bracket accuracy a twin needs for its β and OOD accuracy to count
MIN_PER_CELL = 3  # learned twins a cell needs before it is compared

#: Each verdict's rule. ρ and the regulariser's effects are taken within each learning rate (pooling across
#: them mixes a second cause into the comparison); the regulariser's two effects are one claim (Holm).
RULES = {
    "rho": Rule(
        "Spearman ρ(β, long-band accuracy) within each learning rate, averaged over the learning rates",
        "below",
        0.0,
        unit="twins",
    ),
    "beta": Rule(
        "β with − without the contrastive regulariser, paired by seed within each learning rate", "below", 0.0
    ),
    "ood": Rule(
        "long-band accuracy with − without the regulariser, paired by seed within each learning rate", "above", 0.0
    ),
    "length": Rule("log β(18D) − log β(9D), paired by seed, weight decay 0 (Theorem 2: β ≤ C/N · P)", "below", 0.0),
    "decay": Rule(
        "log β(18D) − log β(9D), paired by seed, weight decay λ = 1 (Corollary 2: the bound as λ → 0)", "below", 0.0
    ),
    "variation": Rule(
        "attention variation between seeds ÷ the random baseline, standard training (the thesis: 0.08; random: 1)",
        "below",
        0.3,
        null=1.0,
    ),
}


def check(options: dict[str, Any]) -> None:
    """Refuse a ``--dyck`` this experiment cannot take, in one line, before ``--out`` is claimed: the longest
    training length (18D) must stay below the long band it is tested on."""

    _, D = parse_dyck_spec(options["dyck"])
    if max(LENGTH_FACTORS) * D >= BAND_START:
        raise ExperimentError(
            f"dyck-balance trains on prefixes of up to {max(LENGTH_FACTORS)}D = {max(LENGTH_FACTORS) * D} tokens, "
            f"not below the long band ({BAND_START}–500); take D ≤ {(BAND_START - 1) // max(LENGTH_FACTORS)}"
        )


def _scale(quick: bool) -> dict[str, Any]:
    if quick:
        return {"steps": 60, "band": (60, 80), "samples": 24, "id_samples": 64, "context": 80, "lrs": (3e-3,)}
    return {"steps": 1000, "band": (400, 500), "samples": 200, "id_samples": 400, "context": 500, "lrs": LRS}


def run(ctx: Context) -> None:
    """Train this experiment's populations (or reuse finished runs), evaluate them and rule on every claim into
    ``ctx`` (the module docstring says what and how)."""

    sc = _scale(ctx.quick)
    k, D = parse_dyck_spec(ctx.options["dyck"])
    lang = Dyck(k, D)
    task = DyckTask(lang, 28)
    base = TrainConfig(steps=sc["steps"], batch=32, lr=3e-3, eval_every=100, warmup=min(100, sc["steps"] // 4))
    # one shape for every cell: the construction built for the OOD band plus the contrastive pairs
    shape, base, spec = start_from(
        "dyck:uniform", task, base, extra=2 * D, length=sc["context"], options={"first_layer": "minimal"}
    )
    grid = {"lr": list(sc["lrs"]), "contrastive": [0.0, CONTRASTIVE]}
    summary = ctx.sweep("minimal", task, shape, base, init_spec=spec, grid=grid)
    models = {}
    for cell in summary["cells"]:
        for s, d in ctx.run_dirs("minimal", cell=cell["cell"]).items():
            models[f"{cell['cell']} seed {s}"] = load_trained(d)
    in_band = dyck_shifts(lang, [(2, 28)])
    ood = dyck_shifts(lang, [sc["band"]])
    rows = evaluate(models, in_band, samples=sc["id_samples"], seed=ExperimentSeed.DYCK_BALANCE_IN_BAND)
    rows += evaluate(models, ood, samples=sc["samples"], seed=ExperimentSeed.DYCK_BALANCE_OUT_OF_BAND)
    per_model = []
    for name, model in models.items():
        cell, seed = name.rsplit(" seed ", 1)
        setting = next(c["setting"] for c in summary["cells"] if c["cell"] == cell)
        acc = {r["shift"]: r["accuracy"] for r in rows if r["model"] == name}
        per_model.append(
            {
                "model": name,
                "seed": int(seed),
                "lr": setting["lr"],
                "contrastive": setting["contrastive"],
                "beta": balance_violation_of_model(model, lang),
                "in_distribution": acc[in_band[0].label],
                "ood": acc[ood[0].label],
                "assumption_10_gap": minimal_first_layer_gap(model, lang),
            }
        )
    ctx.data("models", per_model)
    probe_word = (
        lang.encode(PROBE_INPUT) if k == 2 and D >= 4 else lang.sample(1, 16, seed=ExperimentSeed.PROBE_WORD)[0]
    )
    n = len(probe_word) + 1
    variation, patterns = {}, {}
    for lam in grid["contrastive"]:
        for lr in grid["lr"]:
            names = [m["model"] for m in per_model if m["contrastive"] == lam and m["lr"] == lr]
            pats = [layer_patterns(models[x], probe_word, 1)[0] for x in names]
            pairs = [float(((a - b) ** 2).sum()) for a, b in itertools.combinations(pats, 2)]
            variation[f"lr={lr:g}, λ={lam:g}"] = float(np.mean(pairs)) if pairs else float("nan")
            learned = [
                i
                for i, x in enumerate(names)
                if next(m for m in per_model if m["model"] == x)["in_distribution"] >= LEARNED
            ]
            patterns[(lr, lam)] = {names[i]: pats[i] for i in learned}
    baseline = random_attention_baseline(n)
    ctx.data("variation", {"per_cell": variation, "random_baseline": baseline, "positions": n})

    table = []
    for lam in grid["contrastive"]:
        for lr in grid["lr"]:
            sel = [m for m in per_model if m["contrastive"] == lam and m["lr"] == lr]
            table.append(
                [
                    f"{lam:g}",
                    f"{lr:g}",
                    len(sel),
                    float(np.median([m["beta"] for m in sel])),
                    float(np.median([m["in_distribution"] for m in sel])),
                    float(np.median([m["ood"] for m in sel])),
                    variation[f"lr={lr:g}, λ={lam:g}"],
                ]
            )
    lo, hi = sc["band"]
    ctx.table(
        "Minimal-first-layer twins (medians over seeds)",
        ["contrastive λ", "lr", "seeds", "β", "accuracy ≤ 28", f"accuracy {lo}–{hi}", "attention variation"],
        table,
        note=f"Closing-bracket accuracy on {sc['id_samples']} prefixes of 2–28 and {sc['samples']} of {lo}–{hi} tokens. "
        f"Attention variation between seeds of a cell on {PROBE_INPUT if n == 17 else 'a sampled word'} "
        f"({n} positions; random {baseline:.2f}).",
    )
    _figure(ctx, per_model, sc["band"])
    _claims(ctx, per_model, variation, baseline, n, patterns)
    _length_and_decay(ctx, sc, lang, shape, base, spec)


def length_effect(models: list[dict[str, Any]], decay: float, learned: float = LEARNED) -> dict[int, float]:
    """Per seed whose twins learned at both training lengths (``in_distribution`` ≥ ``learned``) at weight decay
    ``decay``: log β(long) − log β(short), the shortest and the longest length among ``models``."""

    sel = [m for m in models if m["weight_decay"] == decay and m["in_distribution"] >= learned]
    lengths = sorted({m["length"] for m in models})
    short, long = lengths[0], lengths[-1]
    by = {(m["seed"], m["length"]): m["beta"] for m in sel}
    seeds = sorted({s for s, _ in by if (s, short) in by and (s, long) in by})
    tiny = np.finfo(np.float64).tiny  # a β of exactly 0 (a perfectly balanced layer) stays finite in the log
    return {s: float(np.log(max(by[s, long], tiny)) - np.log(max(by[s, short], tiny))) for s in seeds}


def _length_and_decay(ctx: Context, sc: dict, lang: Dyck, shape: Any, base: TrainConfig, spec: Any) -> None:
    """Theorem 2 and Corollary 2: twins trained on prefixes of 9D and 18D tokens under weight decay 0, 1, 10."""
    from dataclasses import replace

    seeds = ctx.seeds[:LENGTH_SEEDS]
    config = replace(base, lr=3e-3, contrastive=0.0)
    ood = dyck_shifts(lang, [sc["band"]])
    per_model: list[dict[str, Any]] = []
    for factor in LENGTH_FACTORS:
        N = factor * lang.D
        label = f"length-{N}"
        summary = ctx.sweep(
            label, DyckTask(lang, N), shape, config, seeds, init_spec=spec, grid={"weight_decay": list(DECAYS)}
        )
        models = {}
        for cell in summary["cells"]:
            for s, d in ctx.run_dirs(label, seeds, cell=cell["cell"]).items():
                models[(cell["setting"]["weight_decay"], s)] = load_trained(d)
        named = {f"λ={wd:g} seed {s}": m for (wd, s), m in models.items()}
        in_band = dyck_shifts(lang, [(2, N)])
        rows = evaluate(named, in_band, samples=sc["id_samples"], seed=ExperimentSeed.DYCK_BALANCE_IN_BAND)
        rows += evaluate(named, ood, samples=sc["samples"], seed=ExperimentSeed.DYCK_BALANCE_OUT_OF_BAND)
        for (wd, s), model in models.items():
            acc = {r["shift"]: r["accuracy"] for r in rows if r["model"] == f"λ={wd:g} seed {s}"}
            per_model.append(
                {
                    "length": N,
                    "weight_decay": wd,
                    "seed": s,
                    "beta": balance_violation_of_model(model, lang),
                    "in_distribution": acc[in_band[0].label],
                    "ood": acc[ood[0].label],
                    "weight_norm": float(
                        sum(float((p.detach() ** 2).sum()) for p in model.blocks[-1].parameters()) ** 0.5
                    ),
                }
            )
    ctx.data("length_decay", per_model)
    _length_table(ctx, per_model, sc["band"])
    _length_figure(ctx, per_model)
    for key, decay, theorem in (("length", 0.0, "Theorem 2"), ("decay", 1.0, "Corollary 2")):
        ratios = length_effect(per_model, decay, 0.0 if ctx.quick else LEARNED)
        short, long = (f * lang.D for f in LENGTH_FACTORS)
        ctx.rule(
            f"β shrinks when the training length doubles ({theorem}, weight decay {decay:g})",
            "balance violation at most C/N · P after near-optimal training on length N"
            + ("" if decay == 0 else ", for every λ ≤ λ_N"),
            RULES[key],
            estimate(list(ratios.values()), unit="seed pairs"),
            f"{len(ratios)} seeds learned at N = {short} and {long}: β ratio (long ÷ short) per seed "
            + ", ".join(f"{np.exp(x):.2f}" for x in ratios.values()),
            floor=(
                f"only {len(ratios)} seeds learned at both lengths with weight decay {decay:g}"
                if len(ratios) < MIN_PER_CELL and not ctx.quick
                else None
            ),
        )


def _length_figure(ctx: Context, per_model: list[dict[str, Any]]) -> None:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.5, 4.0))
    ax = fig.subplots()
    lengths = sorted({m["length"] for m in per_model})
    for i, wd in enumerate(DECAYS):
        for s in sorted({m["seed"] for m in per_model}):
            pts = sorted((m["length"], m["beta"]) for m in per_model if m["weight_decay"] == wd and m["seed"] == s)
            learned = all(
                m["in_distribution"] >= LEARNED for m in per_model if m["weight_decay"] == wd and m["seed"] == s
            )
            x = np.array([p[0] for p in pts]) * (1 + 0.03 * (i - 1))
            ax.plot(
                x,
                [p[1] for p in pts],
                marker="o",
                color=f"C{i}",
                alpha=0.8 if learned else 0.25,
                lw=1,
                label=f"λ = {wd:g}" if s == min(m["seed"] for m in per_model) else None,
            )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks(lengths, [str(n) for n in lengths])
    ax.set_xlabel("training length N")
    ax.set_ylabel("balance violation β")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.suptitle("β against the training length, per seed (Theorem 2: β ≤ C/N · P)", fontsize=10)
    ctx.figure(
        "beta_vs_length",
        fig,
        "Each line is one seed at one weight decay (faded: a twin that did not learn at one of the lengths).",
    )


def _length_table(ctx: Context, per_model: list[dict[str, Any]], band: tuple[int, int]) -> None:
    rows = []
    for N in sorted({m["length"] for m in per_model}):
        for wd in DECAYS:
            sel = [m for m in per_model if m["length"] == N and m["weight_decay"] == wd]
            learned = [m for m in sel if m["in_distribution"] >= LEARNED]
            rows.append(
                [
                    N,
                    f"{wd:g}",
                    f"{len(learned)}/{len(sel)}",
                    _fmt(np.median([m["beta"] for m in learned]) if learned else None),
                    float(np.median([m["in_distribution"] for m in sel])),
                    float(np.median([m["ood"] for m in sel])),
                    _fmt(np.median([m["weight_norm"] for m in sel])),
                ]
            )
    ctx.table(
        "Training length N and weight decay λ (standard training, lr 3e-3; medians over seeds)",
        [
            "N",
            "λ",
            f"learned (≥ {LEARNED})",
            "β (learned)",
            "accuracy ≤ N",
            f"accuracy {band[0]}–{band[1]}",
            "‖layer 2‖",
        ],
        rows,
        note="λ is AdamW's decoupled weight decay on the trained parameters; the thesis's λ is a squared-norm penalty "
        "in the loss (Corollary 2). ‖layer 2‖: the Frobenius norm of the trained block's weights and biases.",
    )


def _figure(ctx: Context, per_model: list[dict], band: tuple[int, int]) -> None:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.5, 4.2))
    ax = fig.subplots()
    for lam, marker in ((0.0, "o"), (CONTRASTIVE, "^")):
        for i, lr in enumerate(sorted({m["lr"] for m in per_model})):
            sel = [m for m in per_model if m["contrastive"] == lam and m["lr"] == lr]
            ax.scatter(
                [m["beta"] for m in sel],
                [m["ood"] for m in sel],
                marker=marker,
                color=f"C{i}",
                s=36,
                label=f"{'contrastive' if lam else 'standard'}, lr {lr:g}",
            )
    ax.set_xlabel("balance violation β of the trained second layer")
    ax.set_ylabel(f"closing-bracket accuracy, prefixes of {band[0]}–{band[1]}")
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.suptitle("Balance violation against length generalisation (thesis Fig. 3.40)", fontsize=10)
    ctx.figure("beta_vs_ood", fig, "Each point is one twin: its β and its accuracy far beyond the training length.")


def _claims(ctx: Context, per_model: list[dict], variation: dict, baseline: float, n: int, patterns: dict) -> None:
    from scipy.stats import spearmanr

    beta = [m["beta"] for m in per_model]
    ood = [m["ood"] for m in per_model]
    learned = [m for m in per_model if m["in_distribution"] >= LEARNED or ctx.quick]
    lrs = sorted({m["lr"] for m in per_model})

    def rho_of(ms: list[dict]) -> float | None:
        b, o = [m["beta"] for m in ms], [m["ood"] for m in ms]
        return float(spearmanr(b, o).statistic) if len(set(b)) > 1 and len(set(o)) > 1 else None

    cells = {lr: [m for m in learned if m["lr"] == lr] for lr in lrs}
    rhos = {lr: rho_of(ms) for lr, ms in cells.items()}
    few = [lr for lr, ms in cells.items() if len(ms) < MIN_PER_CELL]
    groups = [ms for ms in cells.values() if ms]

    def mean_rho(drawn: list[list[dict]]) -> float | None:
        parts = [rho_of(ms) for ms in drawn]
        return None if not parts or any(x is None for x in parts) else float(np.mean(parts))

    value = None if any(r is None for r in rhos.values()) or not rhos else float(np.mean(list(rhos.values())))
    rho_e = Estimate(
        value,
        grouped_bootstrap_interval(groups, mean_rho),
        len(learned),
        "twins",
        "mean of the within-learning-rate Spearman ρ, bootstrap over twins within each",
    )
    floor = (
        (
            f"fewer than {MIN_PER_CELL} twins reached {LEARNED} in distribution at lr "
            + ", ".join(f"{lr:g}" for lr in few)
        )
        if few and not ctx.quick
        else None
    )
    ctx.data("spearman_beta_ood", {f"{lr:g}": r for lr, r in rhos.items()})
    ctx.rule(
        "β is negatively correlated with length generalisation",
        "negative correlation (Fig. 3.40; no numbers in the text)",
        RULES["rho"],
        rho_e,
        "Spearman ρ(β, long-band accuracy) "
        + ", ".join(f"{_fmt(r)} at lr {lr:g} ({len(cells[lr])} learned twins)" for lr, r in rhos.items()),
        floor=floor,
    )
    # the regulariser: pairs of twins with the same seed and learning rate, with and without it
    pairs = []
    for lr in lrs:
        std = {m["seed"]: m for m in learned if m["contrastive"] == 0 and m["lr"] == lr}
        reg = {m["seed"]: m for m in learned if m["contrastive"] > 0 and m["lr"] == lr}
        pairs += [(std[s], reg[s]) for s in sorted(set(std) & set(reg))]
    d_beta = [r["beta"] - s["beta"] for s, r in pairs]
    d_ood = [r["ood"] - s["ood"] for s, r in pairs]
    floor = (
        f"only {len(pairs)} seeds learned with and without the regulariser"
        if len(pairs) < MIN_PER_CELL and not ctx.quick
        else None
    )
    for key, d, what in (("beta", d_beta, "lowers β"), ("ood", d_ood, "raises length generalisation")):
        ctx.rule(
            f"The contrastive regulariser {what}",
            "lower β and better length generalisation (Fig. 3.40; λ not given)",
            RULES[key],
            estimate(d, unit="seed pairs"),
            f"{len(pairs)} pairs (same seed and learning rate): median difference {_fmt(np.median(d) if d else None)}",
            floor=floor,
            p_value=paired_test(d, [0.0] * len(d), "less" if key == "beta" else "greater") if d else None,
            family="contrastive",
        )
    std_groups = [g for (lr, lam), g in patterns.items() if lam == 0]
    var_e = variation_estimate(std_groups, baseline)
    ctx.rule(
        "A minimal first layer makes seeds agree (attention variation far below random)",
        f"{THESIS_MINIMAL_VARIATION} vs random {THESIS_BASELINE} (ratio {THESIS_MINIMAL_VARIATION / THESIS_BASELINE:.2f})",
        RULES["variation"],
        var_e,
        "per cell: " + ", ".join(f"{k} {x:.2f}" for k, x in variation.items()) + f" (random {baseline:.2f} at {n} "
        f"positions; learned twins of standard training only)",
    )
    ctx.conclude(
        f"Over {len(per_model)} minimal-first-layer twins, β ranges {min(beta):.3g}–{max(beta):.3g} and the "
        f"long-band accuracy {min(ood):.3f}–{max(ood):.3f}; Spearman ρ within each learning rate: "
        + ", ".join(f"{_fmt(r)} (lr {lr:g})" for lr, r in rhos.items())
        + "."
    )
    if any(not np.isnan(x) for x in variation.values()):
        ctx.conclude("Attention variation per cell: " + ", ".join(f"{k} {x:.2f}" for k, x in variation.items()) + ".")
    ctx.caveat(
        f"λ = {CONTRASTIVE} for the contrastive regulariser was fixed before any run (the thesis does not give "
        f"it) and not changed after; a larger λ may move β more. The thesis's steps and batch size are not "
        f"given either."
    )
    gap = max(m["assumption_10_gap"] for m in per_model)
    ctx.caveat(
        f"Inside Theorem 1's class (Assumption 10): each twin's layer-2 input at a bracket is unchanged when "
        f"matched pairs before it move it (largest relative change over the twins {gap:.1g}). The trained second "
        f"layer is a TransformerLens block without LayerNorm — attention, then an MLP, each with a residual — where "
        f"eq. 3.23 normalises the attention output (LN) and adds the residual before g; Fig. 3.39(a) also drops the "
        f"residual and the FFN. Until the first full rerun (issue 30) the twins kept the full first layer, whose "
        f"positional coordinates reached layer 2 (docs/deviations.md)."
    )
    ctx.caveat(
        "The regulariser's verdicts compare twins of the same seed and learning rate. The first full run pooled "
        "both learning rates, which called a 1% difference in β a reproduction; the rule was corrected, not the "
        "settings (docs/deviations.md)."
    )
    ctx.caveat(
        "The first layer is this project's Dyck construction (type and depth written into named subspaces), "
        "not the thesis's one-hot e(τ_{t,d}) table (eq. 3.37); both give the second layer the bracket's type "
        "and depth."
    )


def _fmt(x) -> str:
    return "—" if x is None else f"{x:.3g}"
