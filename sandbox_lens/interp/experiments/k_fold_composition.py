"""``k-fold-composition`` — composing k permutations with final-only, mixed-hop or every-prefix data (the issue's
reading of arXiv 2505.23683), beside the prefix scan that composes them in log k layers.

A word of k symbols of S5 names k permutations; its final state is their k-fold composition. Twins of the prefix
scan's attention depth, log₂ k layers (default automaton width, 2 heads), are trained at k = 8 and k = 16 with three
supervisions of the same words (``AutomatonTask`` ``supervision``): the final state only (k-fold data), the states
after 1, 2, 4, …, k symbols (a mixture of 1-, 2-, 4-, …, k-fold data), and every prefix. Measured on held-out words:

* the k-fold (final-state) accuracy at the end of training;
* per hop h = 1 … k, the accuracy of the state after h symbols at log-spaced checkpoints: the step at which each
  hop is learned (first checkpoint at :data:`HOP_LEARNED`), and per twin Spearman's ρ between h and that step —
  the order in which hop lengths are learned;
* per attention layer ℓ, the largest mean weight any head puts on the symbol 2^(ℓ−1) back (queries whose
  look-back target is a symbol), the prefix scan's look-back — the construction scores 1 — beside random-init
  twins of the same shape (the null of a maximum over heads);
* which algorithm each learned every-prefix twin at the largest k runs, causally
  (:func:`~sandbox_lens.interp.causal.identify.identify`: every candidate S5 can have — the recurrent update, the
  prefix scan (AA; its windows hold S5's 120 permutations and 5 constant maps) and parity first, then the scan (Li,
  Guo & Andreas's PAA) — by interchange interventions at every residual and component site and at a DAS subspace
  per variable, as ``algorithm-census`` does, beside random-init nulls searched the same way). Attention that does not look
  2^(ℓ−1) back does not rule the scan out: its windows could be built by other heads.

The paper's own numbers are not in this project's references: what is ruled is the direction the issue gives, with
the thresholds in :data:`RULES`, fixed before any run.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from sandbox_lens.constructions.registry import build
from sandbox_lens.interp.causal.align import nulls_of
from sandbox_lens.interp.causal.fitted import STEPS
from sandbox_lens.interp.experiments.algorithm_census import identified_row
from sandbox_lens.interp.experiments.base import Context, ExperimentError
from sandbox_lens.interp.experiments.rules import Rule, count, exactness_rule
from sandbox_lens.interp.model.run import attention_patterns, live_heads, predict
from sandbox_lens.interp.progress import bar as progress_bar
from sandbox_lens.interp.stats import Estimate, difference, estimate, null_exceedance, wilson_interval
from sandbox_lens.interp.streams import ExperimentSeed
from sandbox_lens.interp.tasks.batches import AutomatonTask
from sandbox_lens.interp.tasks.catalogue import get_automaton
from sandbox_lens.interp.tasks.groupvars import is_permutation_automaton
from sandbox_lens.interp.train import TrainConfig, default_shape, kept_models, load_trained, open_model, random_init
from sandbox_lens.interp.verify import verify

SEEDS, QUICK_SEEDS = tuple(range(5)), (0, 1)
SUPERVISIONS = ("final", "powers", "every")
LABELS = {"final": "final state only", "powers": "1, 2, 4, …, k-fold", "every": "every prefix"}
HOP_LEARNED = 0.9  # a hop is learned at the first checkpoint whose accuracy on it reaches this
LEARNED = 0.9  # k-fold accuracy a twin needs for its attention to be read
GAP = 0.1  # the smallest mean k-fold accuracy gap (every prefix − final only) that counts as "harder"
LOOKBACK = 0.5  # a head "looks 2^(ℓ−1) back" when it puts at least this weight there on average
NULL_MODELS = 10  # random-init twins per k: the null of the best head's look-back weight
SCANS = ("scan", "parity_first")  # the identified algorithms that compose windows of 2^l symbols (AA and PAA)

RULES = {
    "harder": Rule(
        "k-fold accuracy at the largest k, every-prefix twins − final-only twins (difference of means)",
        "above",
        GAP,
    ),
    "mixture": Rule("k-fold accuracy at the largest k of the twins trained on 1, 2, 4, …, k-fold data", "above", 0.9),
    "order": Rule(
        "Spearman ρ(hop length h, step at which hop h is learned), mean over every-prefix twins at the largest k",
        "above",
        0.0,
        unit="twins",
    ),
    "lookback": Rule(
        "mean over layers ℓ of the best head's weight on the symbol 2^(ℓ−1) back, per learned every-prefix twin "
        "at the largest k (the prefix scan: 1)",
        "above",
        LOOKBACK,
        unit="twins",
    ),
    "scan exact": exactness_rule("k at which the prefix scan construction is not exact"),
    "runs the scan": Rule(
        "share of the learned every-prefix twins at the largest k identified, by interchange interventions beside "
        "random-init nulls, as the prefix scan or as parity first, then the scan (both compose windows of 2^l "
        "symbols)",
        "above",
        0.5,
        unit="twins",
    ),
}


def _scale(quick: bool) -> dict[str, Any]:
    if quick:
        return {"ks": (4,), "steps": 60, "words": 64, "checkpoints": 4, "pairs": 16, "nulls": 1, "das_steps": 5}
    # the identification's scale (pairs per split, nulls, DAS sites at the command's own steps): algorithm-census's
    return {"ks": (8, 16), "steps": 3000, "words": 500, "checkpoints": 20, "pairs": 128, "nulls": 5, "das_steps": STEPS}


def check(options: dict[str, Any]) -> None:
    """Refuse an automaton this experiment cannot take, in one line, before ``--out`` is claimed."""
    a = get_automaton(options["automaton"])
    if not is_permutation_automaton(a) or a.feasible is not None:
        raise ExperimentError(
            f"k-fold-composition composes permutations: some symbol of {a.name} is not one, or not every word is legal"
        )


def hop_accuracy(model: Any, words: np.ndarray, states: np.ndarray) -> list[float]:
    """Held-out accuracy of the state after h symbols, for h = 1 … k (``states``: the exact states ``[B, k]``)."""
    return [float(x) for x in (predict(model, words) == states).mean(axis=0)]


def learned_steps(timeline: list[tuple[int, list[float]]], bar: float = HOP_LEARNED) -> list[int | None]:
    """Per hop, the first step of ``timeline`` ((step, per-hop accuracies), in step order) at which its accuracy
    reaches ``bar`` (None: never)."""
    hops = len(timeline[0][1]) if timeline else 0
    return [next((s for s, acc in timeline if acc[h] >= bar), None) for h in range(hops)]


def order_rho(steps: list[int | None]) -> float | None:
    """Spearman ρ between the hop length and the step it is learned at, over the hops learned; None with fewer
    than three learned hops or no spread in either."""
    from scipy.stats import spearmanr

    pairs = [(h + 1, s) for h, s in enumerate(steps) if s is not None]
    if len(pairs) < 3 or len({s for _, s in pairs}) < 2:
        return None
    return float(spearmanr([h for h, _ in pairs], [s for _, s in pairs]).statistic)


def lookback_weights(model: Any, words: np.ndarray) -> list[float]:
    """Per attention layer ℓ (in order), the largest mean weight any head puts on the symbol 2^(ℓ−1) positions back,
    over the queries whose target is a symbol."""
    tokens = model.card.io.encode(words)
    P = len(model.card.io.prefix)
    pats = attention_patterns(model, tokens, live_heads(model))
    layers = sorted({layer for layer, _ in pats})
    out = []
    for i, layer in enumerate(layers):
        d = 1 << i
        queries = np.arange(P + d, tokens.shape[1])
        best = 0.0
        for (lay, _), p in pats.items():
            if lay == layer and len(queries):
                best = max(best, float(p[:, queries, queries - d].mean()))
        out.append(best)
    return out


def run(ctx: Context) -> None:
    """Train the three supervisions at each k (or reuse the runs), read hops over training and the look-back heads,
    verify the prefix scan, and rule."""
    sc = _scale(ctx.quick)
    a = get_automaton(ctx.options["automaton"])
    per: dict[str, Any] = {}
    for k in sc["ks"]:
        words = a.sample(sc["words"], k, np.random.default_rng(ExperimentSeed.K_FOLD_WORDS + k))
        states = a.run(words)
        base = AutomatonTask(a, k)
        shape = replace(default_shape(base), n_layers=max(1, k.bit_length() - 1))  # the scan's log₂ k
        config = TrainConfig(steps=sc["steps"], batch=32, lr=1e-3, eval_every=50, keep_checkpoints=sc["checkpoints"])
        for sup in SUPERVISIONS:
            label = f"k{k}-{sup}"
            ctx.sweep(label, AutomatonTask(a, k, sup), shape, config)
            for s, d in ctx.run_dirs(label).items():
                model = load_trained(d)
                timeline = [(step, hop_accuracy(open_model(m), words, states)) for step, m in kept_models(d)]
                hops = hop_accuracy(model, words, states)
                per[f"{label} {s}"] = {
                    "k": k,
                    "supervision": sup,
                    "seed": s,
                    "hops": hops,
                    "timeline": timeline,
                    "learned_steps": learned_steps(timeline),
                    "lookback": lookback_weights(model, words) if hops[-1] >= LEARNED or ctx.quick else None,
                }
        null = [
            float(np.mean(lookback_weights(random_init(base, shape, 10_000 + i), words))) for i in range(NULL_MODELS)
        ]
        scan = verify(build("prefix_scan", a, k), samples=200, exhaustive_upto=min(k, 6))
        per[f"k{k} construction"] = {"k": k, "exact": scan.exact, "layers": scan.n_layers, "null": null}
    _identify(ctx, per, max(sc["ks"]), sc)
    ctx.data("twins", per)
    _report(ctx, per, sc, a)


def _identify(ctx: Context, per: dict[str, Any], k: int, sc: dict[str, Any]) -> None:
    """Which algorithm each every-prefix twin at ``k`` runs (the learned ones; every one in a quick run): the
    algorithm experiments' :func:`~sandbox_lens.interp.experiments.algorithm_census.identified_row`, on the
    twins' own pairs and one set of random-init nulls (their sweeps shared by the twins)."""
    nulls = None
    for s, d in progress_bar(
        ctx.run_dirs(f"k{k}-every").items(), disable=not ctx.progress, desc="identifying twins", unit="twin"
    ):
        twin = per[f"k{k}-every {s}"]
        if twin["hops"][-1] < LEARNED and not ctx.quick:
            continue
        model = load_trained(d)
        nulls = nulls or nulls_of(model, ExperimentSeed.ALGORITHM_PAIRS, n=sc["nulls"])
        twin["identified"] = identified_row(model, nulls, sc["pairs"], sc["das_steps"])


def _twins(per: dict[str, Any], k: int, sup: str) -> list[dict[str, Any]]:
    return [v for v in per.values() if v.get("k") == k and v.get("supervision") == sup]


def _report(ctx: Context, per: dict[str, Any], sc: dict[str, Any], a: Any) -> None:
    rows = []
    for k in sc["ks"]:
        for sup in SUPERVISIONS:
            tw = _twins(per, k, sup)
            final = [t["hops"][-1] for t in tw]
            never = sum(any(s is None for s in t["learned_steps"]) for t in tw)
            rows.append([k, LABELS[sup], len(tw), estimate(final).text("{:.3f}"), f"{min(final):.3f}", never])
    ctx.table(
        f"{a.name}: k-fold accuracy of twins with log₂ k layers (held-out words, {sc['words']} per k)",
        [
            "k",
            "supervision",
            "twins",
            "k-fold accuracy: mean [95% interval]",
            "worst",
            "twins with a hop never learned",
        ],
        rows,
        note=f"A hop is learned at the first kept checkpoint ({sc['checkpoints']}, log-spaced) at {HOP_LEARNED}.",
    )
    _figure(ctx, per, max(sc["ks"]))
    _identified_table(ctx, per, max(sc["ks"]), sc)
    _claims(ctx, per, max(sc["ks"]), sc)
    _causal_claim(ctx, per, max(sc["ks"]), sc)


def _identified_table(ctx: Context, per: dict[str, Any], k: int, sc: dict[str, Any]) -> None:
    rows = []
    for t in _twins(per, k, "every"):
        found = t.get("identified")
        if found is None:
            rows.append([t["seed"], f"{t['hops'][-1]:.3f}", "not identified (did not learn)", "", "", "", "", ""])
            continue
        cells = []
        for name in ("scan", "parity_first", "sequential"):
            c = found["candidates"].get(name)
            cells.append(
                "not applicable"
                if c is None
                else f"{c['status']}: {c['score']:.3f} (nulls ≤ {c['null_score']:.3f})"
                if c["null_score"] is not None
                else f"{c['status']}: {c['score']:.3f}"
            )
        scan = found["candidates"].get("scan", {"variables": {}})
        passing = ", ".join(f"{v} {'✓' if st == 'passes' else '✗'}" for v, (st, _) in scan["variables"].items())
        rows.append(
            [t["seed"], f"{t['hops'][-1]:.3f}", found["identified"], f"{found['stability']:.2f}", *cells, passing]
        )
    ctx.table(
        f"Which algorithm the every-prefix twins run (k = {k}, interchange interventions)",
        [
            "seed",
            "k-fold accuracy",
            "identified",
            "stability",
            "prefix scan: status, abstraction score",
            "parity first, then scan",
            "recurrent update",
            "the scan's variables",
        ],
        rows,
        note=f"{sc['pairs']} pairs per split (fit, select, test), {sc['nulls']} random-init nulls searched the same "
        "way; residual and component sites at every position, and a DAS subspace per variable at every residual site "
        f"({sc['das_steps']} steps; chosen only where it beats the untrained readout). 'inconclusive': fewer than 80% "
        "of resamples of the select and test words agree.",
    )


def _causal_claim(ctx: Context, per: dict[str, Any], k: int, sc: dict[str, Any]) -> None:
    put = [t for t in _twins(per, k, "every") if "identified" in t]
    scan = [t for t in put if t["identified"]["identified"] in SCANS]
    verdicts = ", ".join(f"seed {t['seed']}: {t['identified']['identified']}" for t in put)
    ctx.rule(
        f"Twins that compose k permutations run the prefix scan (every prefix, k = {k})",
        "a log-depth learner composes windows of 1, 2, 4, … symbols (Theorem 10's prefix scan; Li, Guo & Andreas "
        "2025: associative or parity-associative)",
        RULES["runs the scan"],
        Estimate(
            len(scan) / len(put) if put else None,
            wilson_interval(len(scan), len(put)),
            len(put),
            "twins",
            "share with a 95% Wilson interval",
        ),
        f"{len(scan)} of {len(put)} learned every-prefix twins identified as the scan or parity first, then the scan "
        f"({verdicts or 'none learned'})",
        floor=None if put else "no every-prefix twin learned its task",
    )


def _figure(ctx: Context, per: dict[str, Any], k: int) -> None:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 3.6))
    axes = fig.subplots(1, len(SUPERVISIONS), sharey=True)
    for ax, sup in zip(axes, SUPERVISIONS):
        for t in _twins(per, k, sup):
            steps = [np.nan if s is None else s for s in t["learned_steps"]]
            ax.plot(range(1, k + 1), steps, marker="o", lw=1, alpha=0.7)
        ax.set_title(f"{LABELS[sup]} (k = {k})", fontsize=9)
        ax.set_xlabel("hop length h")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel(f"step at which hop h reaches {HOP_LEARNED}")
    fig.suptitle("When each hop length is learned (one line a twin; gaps: never)")
    ctx.figure("hop_order", fig, "Per twin, the first kept checkpoint at which the state after h symbols is learned.")


def _claims(ctx: Context, per: dict[str, Any], k: int, sc: dict[str, Any]) -> None:
    final = {sup: [t["hops"][-1] for t in _twins(per, k, sup)] for sup in SUPERVISIONS}
    ctx.rule(
        f"k-fold composition is harder to learn from final states only (k = {k})",
        "final-only data needs far more samples than data on every prefix",
        RULES["harder"],
        difference(final["every"], final["final"], labels=("every prefix", "final only")),
        f"mean k-fold accuracy {np.mean(final['every']):.3f} (every prefix) vs {np.mean(final['final']):.3f} (final "
        f"only), {sc['steps']} steps each",
    )
    ctx.rule(
        f"A mixture of 1, 2, 4, …, k-fold data suffices (k = {k})",
        "mixed hop lengths make k-fold composition learnable",
        RULES["mixture"],
        estimate(final["powers"]),
        "k-fold accuracy per seed " + ", ".join(f"{x:.3f}" for x in final["powers"]),
    )
    every = _twins(per, k, "every")
    rhos = [order_rho(t["learned_steps"]) for t in every]
    kept = [r for r in rhos if r is not None]
    ctx.rule(
        f"Shorter hops are learned first (every prefix, k = {k})",
        "hop lengths are learned in increasing order",
        RULES["order"],
        estimate(kept, unit="twins"),
        f"ρ per twin {', '.join('—' if r is None else f'{r:.2f}' for r in rhos)} (—: fewer than three hops learned "
        "at distinct checkpoints)",
    )
    learned = [t for t in every if t["lookback"] is not None]
    scores = [float(np.mean(t["lookback"])) for t in learned]
    null = per[f"k{k} construction"]["null"]
    ctx.rule(
        f"Layer ℓ attends 2^(ℓ−1) back, as the prefix scan's heads do (k = {k})",
        "the layers of a log-depth learner look back 1, 2, 4, … positions",
        RULES["lookback"],
        estimate(scores, unit="twins"),
        f"{len(learned)} of {len(every)} every-prefix twins learned (≥ {LEARNED}); per layer, best head, per twin: "
        + "; ".join(", ".join(f"{w:.2f}" for w in t["lookback"]) for t in learned),
        null=null_exceedance(float(np.median(scores)) if scores else float("nan"), null),
    )
    wrong = sum(not v["exact"] for key, v in per.items() if key.endswith("construction"))
    ctx.rule(
        "The prefix scan composes k permutations exactly",
        "Theorem 10: log₂ k attention layers simulate the semiautomaton exactly",
        RULES["scan exact"],
        count(wrong),
        ", ".join(
            f"k = {v['k']}: {'exact' if v['exact'] else 'NOT exact'} ({v['layers']} blocks)"
            for key, v in per.items()
            if key.endswith("construction")
        ),
    )
    ctx.conclude(
        f"At k = {k}, mean k-fold accuracy: "
        + ", ".join(f"{LABELS[sup]} {np.mean(final[sup]):.3f}" for sup in SUPERVISIONS)
        + ". Every-prefix twins' best look-back weight at 2^(ℓ−1), mean over layers: "
        + (", ".join(f"{x:.2f}" for x in scores) or "no twin learned")
        + f" (random-init twins: mean {np.mean(null):.2f}; the prefix scan: 1)."
    )
    ctx.caveat(
        "The paper's sample-complexity claim is asymptotic in k; at k ≤ 16 and one training budget, “harder” is read "
        f"as a gap of at least {GAP} in mean k-fold accuracy, and “suffices” as a mean of at least 0.9, both fixed "
        "before any run. Checkpoints are log-spaced, so the steps at which late hops are learned are coarse."
    )
