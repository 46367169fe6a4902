"""``ffl-one-head`` — thesis §3.5.6.5 (R8, Fig. 3.34): one-layer one-head twins of the flip-flop automaton, with and
without attention sharpening, at a dense and a sparse write law.

"While both types of models give correct results, the attention-sharpened model puts all attention weights to the
most recently write position … whereas the attention patterns of the non-regularized model are much less clean";
"an equally valid (dense) solution is for the model to attend to every write token of the correct type. This is
what the non-regularized (dense) models seem to be implementing"; "sparsity regularization can lead to bad local
minima, where the model tends to (incorrectly) rely on earlier positions … much more likely … when p(⊥) = 0.5
(denser sequences) compared to p(⊥) = 0.9".

Twins of one block with one head (width :data:`WIDTH`) are trained on the flip-flop automaton (``flipflop``: write 0,
write 1, ⊥; the state is the last write) with words drawn at p(⊥) ∈ {0.5, 0.9} (``--symbol-probs``), plain and
with the entropy penalty λ = :data:`SHARPEN` (flipflop.md §7.2 item 11), the same seeds (so the same initial
weights and batches) in every population. On fresh words of each twin's training law the head's attention at every
⊥ after the first write is split into the mass on the latest write, on the other writes of the latest's type (the
dense solution's), on writes of the other type, on the first write (the bad minimum's) and on the rest.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from sandbox_lens.interp.experiments.base import Context
from sandbox_lens.interp.experiments.rules import Rule
from sandbox_lens.interp.model.run import attention_patterns
from sandbox_lens.interp.stats import difference, estimate
from sandbox_lens.interp.streams import ExperimentSeed
from sandbox_lens.interp.tasks.batches import AutomatonTask
from sandbox_lens.interp.tasks.catalogue import get_automaton
from sandbox_lens.interp.train import TrainConfig, default_shape, load_trained

SEEDS, QUICK_SEEDS = tuple(range(10)), (0,)
NOOP_PROBS = (0.5, 0.9)  # p(⊥) of the training words: dense and sparse writes
SHARPEN = 0.01  # λ of the entropy penalty (the thesis's 1L1H setting)
WIDTH = 32
LEARNED = 0.99  # held-out accuracy a twin needs for its attention to say how it solves the task
WRITE0, WRITE1, NOOP = 0, 1, 2  # the flip-flop automaton's alphabet (w0, w1, noop)
#: the thresholds of the rules (the thesis gives pictures, not numbers)
LATEST = 0.9  # "puts all attention weights to the most recent write": at least 0.9 of it
CLEANER = 0.2  # "much less clean": the plain twin's latest-write mass at least 0.2 below the sharpened one's
DENSE = 0.2  # "attend to every write token of the correct type": at least 0.2 on the older writes of that type
STUCK = 0.2  # "much more likely": the share of stuck sharpened twins at least 0.2 higher at p(⊥) = 0.5

RULES = {
    "latest": Rule(
        "mean attention mass on the latest write at the ⊥ queries, per learned sharpened twin (both laws)",
        "above",
        LATEST,
        null=0.0,
        min_n=5,
        unit="twins",
    ),
    "cleaner": Rule(
        "latest-write mass, sharpened twin − plain twin of the same seed and law (both learned)",
        "above",
        CLEANER,
        null=0.0,
        min_n=5,
        unit="pairs",
    ),
    "dense": Rule(
        "mean attention mass on the older writes of the latest's type, at ⊥ queries that have some, per learned "
        "plain twin",
        "above",
        DENSE,
        null=0.0,
        min_n=5,
        unit="twins",
    ),
    "stuck": Rule(
        "share of sharpened twins that did not learn the task, p(⊥) = 0.5 − p(⊥) = 0.9",
        "above",
        STUCK,
        null=0.0,
        min_n=5,
        unit="twins",
    ),
}


def _scale(quick: bool) -> dict[str, Any]:
    if quick:
        return {"length": 16, "steps": 40, "words": 16}
    return {"length": 64, "steps": 1500, "words": 200}


def law(p_noop: float) -> tuple[float, float, float]:
    """The training law of the flip-flop automaton's symbols (write 0, write 1, ⊥) at p(⊥) = ``p_noop``."""
    return ((1 - p_noop) / 2, (1 - p_noop) / 2, p_noop)


# -- the effects, as functions of numbers (tested on synthetic ones) ---------------------------------------------
def attention_masses(words: np.ndarray, pattern: np.ndarray, prefix: int = 1) -> dict[str, float]:
    """Mean attention masses at the ⊥ queries that follow a write: ``latest``, ``older_same`` (the older writes of
    the latest's type; over queries with such a write), ``other_type``, ``first`` (the first write, where it is not
    the latest) and ``rest``. ``pattern`` is ``[batch, query, key]`` over tokens, the word at ``prefix`` onward."""
    sums = {"latest": 0.0, "older_same": 0.0, "other_type": 0.0, "first": 0.0, "rest": 0.0}
    n = {"all": 0, "older_same": 0, "first": 0}
    for b, word in enumerate(words):
        writes: list[int] = []
        for t, sym in enumerate(word):
            if sym != NOOP:
                writes.append(t)
                continue
            if not writes:
                continue
            row = pattern[b, prefix + t, prefix : prefix + t + 1]
            latest = writes[-1]
            same = [w for w in writes[:-1] if word[w] == word[latest]]
            other = [w for w in writes if word[w] != word[latest]]
            sums["latest"] += row[latest]
            sums["other_type"] += row[other].sum()
            sums["rest"] += 1 - row[writes].sum()
            n["all"] += 1
            if same:
                sums["older_same"] += row[same].sum()
                n["older_same"] += 1
            if writes[0] != latest:
                sums["first"] += row[writes[0]]
                n["first"] += 1
    per = {"latest": "all", "other_type": "all", "rest": "all", "older_same": "older_same", "first": "first"}
    return {k: (sums[k] / n[per[k]] if n[per[k]] else float("nan")) for k in sums}


def stuck_difference(rows: list[dict[str, Any]]) -> Any:
    """Sharpened twins that did not learn: the share at p(⊥) = 0.5 − at 0.9, with its interval."""
    dense, sparse = (
        [float(r["held_out"] < LEARNED) for r in rows if r["sharpen"] and r["p_noop"] == p] for p in NOOP_PROBS
    )
    return difference(dense, sparse, labels=("p(⊥) = 0.5", "p(⊥) = 0.9"), unit="twins", what="difference of shares")


def cleaner_pairs(rows: list[dict[str, Any]]) -> list[float]:
    """Per (seed, law) where both twins learned: the sharpened twin's latest-write mass − the plain twin's."""
    by = {(r["seed"], r["p_noop"], r["sharpen"]): r for r in rows}
    return [
        by[(s, p, True)]["masses"]["latest"] - by[(s, p, False)]["masses"]["latest"]
        for (s, p, sharp) in sorted(by)
        if sharp and (s, p, False) in by and min(by[(s, p, x)]["held_out"] for x in (True, False)) >= LEARNED
    ]


# -- the run -----------------------------------------------------------------------------------------------------
def run(ctx: Context) -> None:
    """Train the four populations (or reuse finished runs), read every head at the ⊥ queries, rule."""
    sc = _scale(ctx.quick)
    a = get_automaton("flipflop")
    rows: list[dict[str, Any]] = []
    for i, p in enumerate(NOOP_PROBS):
        task = AutomatonTask(a, sc["length"], probs=law(p))
        shape = replace(default_shape(task), n_layers=1, n_heads=1, d_model=WIDTH)
        words = a.sample(sc["words"], sc["length"], ExperimentSeed.FFL_ONE_HEAD_WORDS + i, law(p))
        for sharpen in (False, True):
            name = f"p{p:g}/{'sharpened' if sharpen else 'plain'}"
            config = TrainConfig(
                steps=sc["steps"], batch=32, lr=3e-3, eval_every=100, target_accuracy=None, sharpen=SHARPEN * sharpen
            )
            held_out = {r["seed"]: r["final_accuracy"] for r in ctx.sweep(name, task, shape, config)["runs"]}
            for s, d in ctx.run_dirs(name).items():
                model = load_trained(d)
                tokens = model.card.io.encode(words)
                pattern = attention_patterns(model, tokens, [(0, 0)])[(0, 0)]
                rows.append(
                    {
                        "p_noop": p,
                        "sharpen": sharpen,
                        "seed": s,
                        "held_out": held_out[s],
                        "masses": attention_masses(words, pattern, len(model.card.io.prefix)),
                    }
                )
    ctx.data("twins", rows)
    _report(ctx, rows, sc)
    _figure(ctx, rows)


def _report(ctx: Context, rows: list[dict[str, Any]], sc: dict[str, Any]) -> None:
    keys = ("latest", "older_same", "other_type", "first", "rest")
    table = []
    for p in NOOP_PROBS:
        for sharpen in (False, True):
            mine = [r for r in rows if r["p_noop"] == p and r["sharpen"] == sharpen]
            learned = [r for r in mine if r["held_out"] >= LEARNED]
            table.append(
                [
                    f"{p:g}",
                    f"λ = {SHARPEN:g}" if sharpen else "none",
                    f"{len(learned)}/{len(mine)}",
                    *[_mean([r["masses"][k] for r in learned]) for k in keys],
                    *[_mean([r["masses"][k] for r in mine if r["held_out"] < LEARNED]) for k in ("latest", "first")],
                ]
            )
    ctx.table(
        f"Attention of the one head at the ⊥ queries (T = {sc['length']}; mean over twins)",
        [
            "p(⊥)",
            "sharpening",
            f"learned (≥ {LEARNED:g})",
            "latest write",
            "older writes, same type",
            "writes, other type",
            "first write",
            "rest (⊥, BOS)",
            "not learned: latest",
            "not learned: first",
        ],
        table,
        note=f"{sc['words']} fresh words of each law; every ⊥ after the first write is a query; 'older writes, same "
        "type' over queries that have one, 'first write' over queries where it is not the latest.",
    )
    learned_sharp = [r["masses"]["latest"] for r in rows if r["sharpen"] and r["held_out"] >= LEARNED]
    ctx.rule(
        "A sharpened one-head twin reads the latest write",
        "the attention-sharpened model puts all attention weights to the most recent write position (Fig. 3.34b)",
        RULES["latest"],
        estimate(learned_sharp, unit="twins"),
        f"{len(learned_sharp)} learned sharpened twins (both laws)",
    )
    pairs = cleaner_pairs(rows)
    ctx.rule(
        "Without sharpening the head is much less clean",
        "the attention patterns of the non-regularized model (Fig. 3.34a) are much less clean",
        RULES["cleaner"],
        estimate(pairs, unit="pairs"),
        f"{len(pairs)} (seed, law) pairs where both twins learned",
    )
    dense = [
        r["masses"]["older_same"]
        for r in rows
        if not r["sharpen"] and r["held_out"] >= LEARNED and np.isfinite(r["masses"]["older_same"])
    ]
    ctx.rule(
        "Plain twins attend to every write of the correct type (the dense solution)",
        "an equally valid (dense) solution … attend to every write token of the correct type. This is what the "
        "non-regularized (dense) models seem to be implementing",
        RULES["dense"],
        estimate(dense, unit="twins"),
        f"{len(dense)} learned plain twins",
    )
    stuck = stuck_difference(rows)
    counts = {
        p: (sum(r["held_out"] < LEARNED for r in rows if r["sharpen"] and r["p_noop"] == p), len(ctx.seeds))
        for p in NOOP_PROBS
    }
    ctx.rule(
        "Sharpening's bad minima are likelier with dense writes",
        "the model is much more likely to get stuck at a bad local minima when p(⊥) = 0.5 compared to p(⊥) = 0.9",
        RULES["stuck"],
        stuck,
        "sharpened twins that did not learn: "
        + ", ".join(f"{k} of {n} at p(⊥) = {p:g}" for p, (k, n) in counts.items()),
    )
    ctx.conclude(
        "Held-out accuracy (mean over seeds): "
        + "; ".join(
            f"p(⊥) = {p:g} {'sharpened' if s else 'plain'} "
            f"{np.mean([r['held_out'] for r in rows if r['p_noop'] == p and r['sharpen'] == s]):.3f}"
            for p in NOOP_PROBS
            for s in (False, True)
        )
        + "."
    )
    ctx.caveat(
        f"T = {sc['length']}, width {WIDTH}, learned positions, {len(ctx.seeds)} seeds per population (the thesis "
        "shows single models' patterns); an attention weight shows where a head reads, not that the read is used — "
        "in one head with one layer the value it reads is all the head passes on."
    )


def _mean(values: list[float]) -> str:
    vals = [v for v in values if np.isfinite(v)]
    return f"{np.mean(vals):.3f}" if vals else "—"


def _figure(ctx: Context, rows: list[dict[str, Any]]) -> None:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 3.6), layout="constrained")
    axes = fig.subplots(1, 2, sharey=True)
    for ax, p in zip(axes, NOOP_PROBS):
        for i, sharpen in enumerate((False, True)):
            mine = [r for r in rows if r["p_noop"] == p and r["sharpen"] == sharpen]
            x = [r["masses"]["latest"] for r in mine]
            y = [r["masses"]["first"] if np.isfinite(r["masses"]["first"]) else 0.0 for r in mine]
            learned = [r["held_out"] >= LEARNED for r in mine]
            ax.scatter(
                x,
                y,
                c=[f"C{i}"] * len(mine),
                marker="o",
                label="sharpened" if sharpen else "plain",
                edgecolors=["k" if ok else "none" for ok in learned],
            )
        ax.set(title=f"p(⊥) = {p:g}", xlabel="mass on the latest write", xlim=(-0.02, 1.02), ylim=(-0.02, 1.02))
        ax.legend(fontsize=8)
    axes[0].set_ylabel("mass on the first write")
    ctx.figure(
        "ffl-one-head",
        fig,
        "One point a twin: its head's mean attention at the ⊥ queries on the latest write and on the first write "
        "(outlined: learned).",
    )
