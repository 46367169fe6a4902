"""``dyck-seeds`` — thesis §3.6.3.1 and footnote 59: trained Dyck models are accurate, but their
second-layer attention is rarely stack-like and differs from seed to seed.

The thesis's model (2 layers, 1 head, width 50 and MLP 50, Adam, lr 3e-3) is trained on Dyck_{k,D}
prefixes of up to 28 tokens with learned, linear (the thesis's p_i = i / n_ctx) and no position
embeddings, 40 seeds each (the thesis's count). For every seed that reaches the thesis's 97%: the stack-top mass of the
layer-2 head (mean attention on the last unmatched open bracket, BOS when the stack is empty) over
sampled words, and its pattern on the thesis's probe input ``[[[[]]]](((())))`` (with BOS: 17 × 17).
Attention variation is ‖A_s − A_s'‖²_F averaged over every pair of seeds, beside the exact
expectation for random causal patterns with uniform-simplex rows of the same size
(:func:`sandbox_lens.probes.dyck.random_attention_baseline`) and beside the three constructions' layer-2 patterns.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from sandbox_lens.constructions import build_model
from sandbox_lens.constructions.dyck import VARIANTS
from sandbox_lens.interp.experiments.base import Context, ExperimentError
from sandbox_lens.interp.experiments.rules import Rule
from sandbox_lens.interp.stats import Estimate, grouped_bootstrap_interval, wilson_interval
from sandbox_lens.interp.streams import ExperimentSeed
from sandbox_lens.interp.tasks.batches import DyckTask
from sandbox_lens.interp.tasks.dyck import Dyck, parse_dyck_spec
from sandbox_lens.interp.train import TrainConfig, default_shape, load_trained
from sandbox_lens.probes.dyck import PROBE_INPUT, layer_patterns, random_attention_baseline, stack_top_mass

SEEDS, QUICK_SEEDS = tuple(range(40)), (0, 1)  # the thesis's 40 (20 until deviation 29)
POSITIONS = ("linear", "none", "learned")
THESIS_VARIATION = {"linear": 2.20, "none": 2.27}
THESIS_BASELINE = 2.85
LEARNED = 0.97  # the thesis: "all models reach ≥ 97%"
STACK_LIKE = 0.5  # a head is called stack-like when its mean stack-top mass exceeds this


def _scale(quick: bool) -> dict[str, Any]:
    if quick:
        return {"steps": 60, "length": 28, "words": 24}
    return {"steps": 1500, "length": 28, "words": 200}


def check(options: dict[str, Any]) -> None:
    """Refuse a task option this experiment cannot take, in one line, before ``--out`` is claimed."""

    parse_dyck_spec(options["dyck"])


def run(ctx: Context) -> None:
    """Train this experiment's populations (or reuse finished runs), evaluate them and rule on every claim into
    ``ctx`` (the module docstring says what and how)."""
    from dataclasses import replace

    sc = _scale(ctx.quick)
    k, D = parse_dyck_spec(ctx.options["dyck"])
    lang = Dyck(k, D)
    task = DyckTask(lang, sc["length"])
    probe_word = (
        lang.encode(PROBE_INPUT) if k == 2 and D >= 4 else lang.sample(1, 16, seed=ExperimentSeed.PROBE_WORD)[0]
    )
    probe_text = "".join(lang.bracket_names[b] for b in probe_word)
    if len(probe_word) + 1 > task.n_ctx:
        raise ExperimentError(f"the probe input {probe_text} does not fit the training length")
    words = lang.sample(sc["words"], sc["length"] - 1, seed=ExperimentSeed.DYCK_SEEDS_WORDS)
    n = len(probe_word) + 1
    baseline = random_attention_baseline(n)
    config = TrainConfig(steps=sc["steps"], batch=32, lr=3e-3, eval_every=100, target_accuracy=0.99)

    constructions = {v: build_model("dyck", lang, max(sc["length"], n), variant=v) for v in VARIANTS}
    built = {v: layer_patterns(m, probe_word, m.cfg.n_layers - 1)[0] for v, m in constructions.items()}
    built_mass = {v: stack_top_mass(m, lang, words)[0] for v, m in constructions.items()}

    per_pos: dict[str, dict[str, Any]] = {}
    for pos in POSITIONS:
        summary = ctx.sweep(f"pos={pos}", task, replace(default_shape(task), positional=pos), config)
        acc = {r["seed"]: r["final_accuracy"] for r in summary["runs"]}
        # a quick run is too short to learn Dyck: it analyses every seed, to exercise the pipeline
        learned = [s for s in ctx.seeds if acc[s] >= LEARNED or ctx.quick]
        patterns, mass = {}, {}
        for s in learned:
            model = load_trained(ctx.run_dirs(f"pos={pos}")[s])
            patterns[s] = layer_patterns(model, probe_word, model.cfg.n_layers - 1)[0]
            mass[s] = stack_top_mass(model, lang, words)[0]
        pairs = [float(((patterns[a] - patterns[b]) ** 2).sum()) for a, b in itertools.combinations(learned, 2)]
        to_built = {
            v: float(np.mean([((patterns[s] - p) ** 2).sum() for s in learned])) if learned else float("nan")
            for v, p in built.items()
        }
        per_pos[pos] = {
            "accuracy": acc,
            "learned": learned,
            "stack_top_mass": mass,
            "variation": float(np.mean(pairs)) if pairs else float("nan"),
            "pairs": len(pairs),
            "to_constructions": to_built,
            "patterns": {s: p.tolist() for s, p in patterns.items()},
        }
    between_built = {f"{a}–{b}": float(((built[a] - built[b]) ** 2).sum()) for a, b in itertools.combinations(built, 2)}
    ctx.data("per_position", per_pos)
    ctx.data(
        "constructions",
        {
            "patterns": {v: p.tolist() for v, p in built.items()},
            "stack_top_mass": built_mass,
            "variation_between": between_built,
        },
    )
    ctx.data(
        "probe",
        {
            "input": probe_text,
            "positions": n,
            "random_baseline": baseline,
            "random_baseline_without_bos": random_attention_baseline(n - 1),
        },
    )

    rows = []
    for pos, e in per_pos.items():
        masses = list(e["stack_top_mass"].values())
        rows.append(
            [
                pos,
                f"{len(e['learned'])}/{len(ctx.seeds)}",
                float(np.median(list(e["accuracy"].values()))),
                float(np.median(masses)) if masses else float("nan"),
                sum(m > STACK_LIKE for m in masses),
                e["variation"],
                e["variation"] / baseline,
                *(e["to_constructions"][v] for v in built),
            ]
        )
    for v in built:
        rows.append(
            [
                f"construction: {v}",
                "—",
                1.0,
                built_mass[v],
                int(built_mass[v] > STACK_LIKE),
                float("nan"),
                float("nan"),
                *(float(((built[v] - built[w]) ** 2).sum()) for w in built),
            ]
        )
    ctx.table(
        "Seeds, accuracy and layer-2 attention",
        [
            "positions",
            f"seeds ≥ {LEARNED}",
            "median accuracy",
            "median stack-top mass",
            f"stack-like heads (mass > {STACK_LIKE})",
            "variation between seeds",
            "÷ random",
            "variation to stack",
            "to uniform",
            "to balanced",
        ],
        rows,
        note=f"Variation on {probe_text} with BOS ({n} × {n} patterns); the exact random baseline for {n} "
        f"positions is {baseline:.3f} ({random_attention_baseline(n - 1):.3f} for {n - 1}). The stack-top "
        f"mass is averaged over {len(words)} sampled words of {sc['length'] - 1} brackets.",
    )
    _figures(ctx, per_pos, built, built_mass, probe_text, baseline)
    _claims(ctx, per_pos, baseline, n, built_mass, lang)


def _figures(ctx: Context, per_pos: dict, built: dict, built_mass: dict, probe_text: str, baseline: float) -> None:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 3.4))
    ax1, ax2 = fig.subplots(1, 2)
    bins = np.linspace(0, 1, 21)
    for i, (pos, e) in enumerate(per_pos.items()):
        ax1.hist(list(e["stack_top_mass"].values()), bins=bins, alpha=0.55, color=f"C{i}", label=f"{pos} positions")
    for v, m in built_mass.items():
        ax1.axvline(m, color="k", ls="--" if v == "stack" else ":", lw=1)
        ax1.text(m, ax1.get_ylim()[1] * 0.95, v, rotation=90, va="top", ha="right", fontsize=7)
    ax1.set_xlabel("stack-top mass of the layer-2 head")
    ax1.set_ylabel("seeds")
    ax1.legend(fontsize=8)
    labels = list(per_pos)
    values = [per_pos[p]["variation"] for p in labels]
    ax2.bar(range(len(labels)), values, color=[f"C{i}" for i in range(len(labels))])
    ax2.axhline(baseline, color="k", ls="--", lw=1)
    ax2.text(len(labels) - 0.5, baseline, " random", va="bottom", ha="right", fontsize=8)
    for i, p in enumerate(labels):
        if p in THESIS_VARIATION:
            ax2.plot([i - 0.4, i + 0.4], [THESIS_VARIATION[p] * baseline / THESIS_BASELINE] * 2, color="r", lw=2)
    ax2.set_xticks(range(len(labels)), [f"{p} positions" for p in labels])
    ax2.set_ylabel("mean ‖A_s − A_s'‖²_F")
    ax2.set_title(f"variation between seeds on {probe_text}", fontsize=9)
    fig.suptitle("Layer-2 attention of trained Dyck models")
    ctx.figure(
        "stack_top_and_variation",
        fig,
        "Left: how much of the layer-2 head's attention lands on the stack top, "
        "per seed (dashed/dotted: the constructions). Right: attention variation between seeds; dashed: the exact "
        "random baseline; red: the thesis's value rescaled by our baseline over its 2.85.",
    )
    heads = {f"{pos} seed {s}": np.asarray(p) for pos in per_pos for s, p in list(per_pos[pos]["patterns"].items())[:3]}
    heads.update({f"construction: {v}": p for v, p in built.items()})
    cols = 4
    rows_n = -(-len(heads) // cols)
    fig = Figure(figsize=(12, 3 * rows_n))
    axes = fig.subplots(rows_n, cols, squeeze=False)
    for ax in axes.flat:
        ax.axis("off")
    tokens = ["BOS", *probe_text]
    for ax, (name, p) in zip(axes.flat, heads.items()):
        ax.axis("on")
        im = ax.imshow(p, vmin=0, vmax=1, cmap="Blues")
        ax.set_title(name, fontsize=8)
        ax.set_xticks(range(len(tokens)), tokens, fontsize=6)
        ax.set_yticks(range(len(tokens)), tokens, fontsize=6)
    fig.colorbar(im, ax=axes.ravel().tolist(), shrink=0.6, label="attention weight")
    ctx.figure(
        "probe_patterns",
        fig,
        f"Layer-2 patterns on BOS {probe_text}: three seeds per setting and the three "
        "constructions (rows: queries, columns: keys).",
    )


#: Each verdict's rule (changes after a run are in docs/deviations.md, with the way they moved a verdict).
RULES = {
    "learned": Rule(
        f"share of seeds reaching {LEARNED} held-out accuracy, pooled over the position codes",
        "above",
        0.9,
        null=0.9,
        min_n=3,
    ),
    "stack_like": Rule(
        f"share of trained layer-2 heads with stack-top mass > {STACK_LIKE}",
        "below",
        0.5,
        null=0.5,
        min_n=3,
        unit="heads",
    ),
    "variation": Rule(
        "|variation between seeds ÷ the random baseline − 1| (close to random: the thesis's ratios 0.77 and 0.80 are "
        "0.23 and 0.20 from it)",
        "below",
        0.4,
        null=1.0,
        min_n=3,
    ),
}


def variation_estimate(groups: list[dict], baseline: float, seed: int = 0) -> Estimate:
    """Attention variation ÷ ``baseline``: per group (seed → pattern; one population), the mean ‖A_s − A_s'‖²_F
    over pairs of distinct seeds, averaged over the groups; a bootstrap resamples seeds within each group
    (pairs of one original seed drawn twice are left out)."""
    mats = []
    for g in groups:
        P = [np.asarray(p) for p in g.values()]
        if len(P) >= 2:
            mats.append(np.array([[float(((a - b) ** 2).sum()) for b in P] for a in P]) / baseline)
    n = sum(len(g) for g in groups)
    what = "mean over pairs of distinct seeds ÷ the random baseline, bootstrap over seeds"
    if not mats:
        return Estimate(None, None, n, "seeds", what)

    def mean_pairs(D: np.ndarray, idx: np.ndarray) -> float | None:
        i, j = np.triu_indices(len(idx), 1)
        keep = idx[i] != idx[j]
        return float(D[idx[i][keep], idx[j][keep]].mean()) if keep.any() else None

    value = float(np.mean([mean_pairs(D, np.arange(len(D))) for D in mats]))

    def statistic(drawn: list[list[int]]) -> float | None:
        parts = [mean_pairs(D, np.asarray(idx)) for D, idx in zip(mats, drawn)]
        return None if any(x is None for x in parts) else float(np.mean(parts))

    interval = grouped_bootstrap_interval([list(range(len(D))) for D in mats], statistic, seed=seed)
    return Estimate(value, interval, n, "seeds", what)


def distance_from_one(ratio: Estimate) -> Estimate:
    """The distance of ``ratio`` from 1, ``abs(ratio − 1)``, with its interval carried through: "close to random" is two-sided, so a ratio far above 1 (seeds
    that vary more than random patterns) fails it as one far below does. The interval is the image of the
    ratio's: from the distance of its nearer end (0 when it contains 1) to that of its farther end."""
    if ratio.value is None:
        return Estimate(None, None, ratio.n, ratio.unit, "|" + ratio.method + " − 1|")
    interval = None
    if ratio.interval is not None:
        lo, hi = ratio.interval
        near = 0.0 if lo <= 1.0 <= hi else min(abs(lo - 1.0), abs(hi - 1.0))
        interval = (near, max(abs(lo - 1.0), abs(hi - 1.0)))
    return Estimate(
        abs(ratio.value - 1.0), interval, ratio.n, ratio.unit, f"|{ratio.method} − 1|", ratio.values, ratio.groups
    )


def _claims(ctx: Context, per_pos: dict, baseline: float, n: int, built_mass: dict, lang) -> None:
    seeds = len(ctx.seeds)
    learned = {p: len(e["learned"]) for p, e in per_pos.items()}
    total = seeds * len(per_pos)
    got = (
        sum(learned.values())
        if not ctx.quick
        else sum(sum(a >= LEARNED for a in e["accuracy"].values()) for e in per_pos.values())
    )
    ctx.rule(
        f"2-layer, 1-head, width-50 models reach ≥ 97% on Dyck_{{{lang.k},{lang.D}}}, with and without positions",
        "all models reach ≥ 97% (§3.6.3.1; footnote 59 for no positions)",
        RULES["learned"],
        Estimate(
            got / total,
            wilson_interval(got, total),
            total,
            "seeds",
            "a binomial rate, Wilson interval",
            [1.0] * got + [0.0] * (total - got),  # per seed: learned or not
        ),
        "; ".join(f"{p}: {learned[p]}/{seeds} seeds" for p in per_pos),
    )
    masses = [m for e in per_pos.values() for m in e["stack_top_mass"].values()]
    stack_like = sum(m > STACK_LIKE for m in masses)
    ctx.rule(
        "Their second-layer attention is mostly not stack-like",
        "usually not stack-like (Fig. 3.3; qualitative)",
        RULES["stack_like"],
        Estimate(
            stack_like / len(masses) if masses else None,
            wilson_interval(stack_like, len(masses)),
            len(masses),
            "heads",
            "a binomial rate, Wilson interval",
            [float(m > STACK_LIKE) for m in masses],
        ),
        f"{stack_like} of {len(masses)} trained heads put > {STACK_LIKE} of their attention on the stack top "
        f"(median mass {np.median(masses) if masses else float('nan'):.3f}; the stack construction "
        f"{built_mass['stack']:.3f})",
    )
    for pos, thesis in THESIS_VARIATION.items():
        e = per_pos[pos]
        est = distance_from_one(variation_estimate([e["patterns"]], baseline))
        thesis_ratio = thesis / THESIS_BASELINE
        ctx.rule(
            f"Attention varies across seeds nearly as much as random ({pos} positions)",
            f"{thesis} vs random {THESIS_BASELINE} (ratio {thesis_ratio:.2f}; 40 seeds, N ≈ 15–16)",
            RULES["variation"],
            est,
            f"{e['variation']:.2f} vs random {baseline:.2f} at {n} positions ({len(e['learned'])} seeds, "
            f"{e['pairs']} pairs)",
            family="variation",
        )
    closest = {p: min(e["to_constructions"], key=e["to_constructions"].get) for p, e in per_pos.items() if e["learned"]}
    ctx.conclude(
        "The construction closest to the trained heads (mean ‖A − A_construction‖²_F on the probe): "
        + "; ".join(f"{p} positions: {c} ({per_pos[p]['to_constructions'][c]:.2f})" for p, c in closest.items())
        + ". All three constructions are exact, so accuracy alone cannot tell which of them — if any — a "
        "trained model resembles."
    )
    ctx.conclude(
        f"Baseline: {baseline:.3f} is E‖A₁ − A₂‖²_F for independent causal {n}×{n} patterns with Dirichlet(1) "
        f"rows, in closed form; the thesis's 2.85 matches such patterns at about 15 positions, so we compare "
        f"ratios, not raw values."
    )
    if not ctx.quick:
        ctx.caveat(
            "The thesis's training steps, batch size and stopping rule are not given; ours: Adam(W) lr 3e-3, "
            "batch 32, up to 1500 steps, stopping at 0.99 held-out accuracy. Learned positions are our addition; "
            "the thesis reports linear positions (2.20) and none (2.27)."
        )
