"""``grid-boundary`` — thesis §3.4.4.4 / §3.4.5, Figs. 3.6 and 3.17: trained gridworld models
contain nearest-boundary detectors.

Twins of two shapes (2 layers × 2 heads, and a deeper 4 × 4) are trained on the 1-D gridworld
(``grid9``: 9 states, S = 8, as the thesis's Grid_9). For every head, on the same sampled words:
its *boundary score* — the fraction of queries whose largest attention weight sits on the last
position where the walk was at a wall (state 0 or S; the start counts, at BOS) — and its mean mass
there, beside two baselines a head gets for free: always attending to BOS (right whenever the walk
has not hit a wall since the start) and always attending to itself (right whenever the walk is at
a wall now). Theorem 12's construction (2 attention layers) is scored the same way; per query, its
winning window's endpoint head attends to that position exactly, so its "any head" score is 1.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from interp.experiments.base import Context, ExperimentError

SEEDS, QUICK_SEEDS = tuple(range(3)), (0,)
LEARNED = 0.95


def _scale(quick: bool) -> dict[str, Any]:
    if quick:
        return {"length": 16, "steps": 100, "words": 24, "shapes": {"2x2": (2, 2)}}
    return {"length": 64, "steps": 3000, "words": 200, "shapes": {"2x2": (2, 2), "4x4": (4, 4)}}


def check(options: dict[str, Any]) -> None:
    from interp.tasks.catalogue import get_automaton
    from interp.tasks.gridworld import is_line_grid

    a = get_automaton(options["automaton"])
    if not is_line_grid(a):
        raise ExperimentError(f"grid-boundary needs a 1-D gridworld (e.g. grid9), not {a.name}")


def boundary_scores(model, comparison, words: np.ndarray) -> dict[str, Any]:
    """Per head: argmax agreement and mass on the last wall position (canonical coordinates), and the
    per-query "any head" agreement."""
    from interp.compare.canonical import canonical
    from interp.model.run import attention_patterns, live_heads

    data = comparison.inputs(model, words, with_latents=False)
    heads = live_heads(model)
    raw = attention_patterns(model, data.tokens, heads)
    refs = np.stack([comparison.references(w)["last boundary"] for w in words])  # [B, T, T+1]
    target = refs.argmax(-1)
    hits, mass = {}, {}
    for head, pats in raw.items():
        canon = np.stack([canonical(p, data.prefix) for p in pats])
        hits[head] = canon.argmax(-1) == target
        mass[head] = float(np.take_along_axis(canon, target[..., None], -1).mean())
    any_head = np.any(np.stack(list(hits.values())), axis=0) if hits else np.zeros(target.shape, dtype=bool)
    T = target.shape[1]
    return {"heads": {f"L{l}H{h}": {"score": float(hits[(l, h)].mean()), "mass": mass[(l, h)]} for l, h in heads},
            "any_head": float(any_head.mean()),
            "always_bos": float((target == 0).mean()), "always_self": float((target == np.arange(1, T + 1)).mean())}


def run(ctx: Context) -> None:
    from interp.compare.automaton import AutomatonComparison
    from interp.evaluate import skyline
    from interp.tasks.batches import AutomatonTask
    from interp.tasks.catalogue import get_automaton
    from interp.train import ModelShape, TrainConfig, load_trained

    sc = _scale(ctx.quick)
    a = get_automaton(ctx.options["automaton"])
    T = sc["length"]
    task = AutomatonTask(a, T)
    comparison = AutomatonComparison(a, T)
    words = comparison.words(sc["words"], seed=5000)
    config = TrainConfig(steps=sc["steps"], batch=32, lr=1e-3, eval_every=100, target_accuracy=0.99)
    results: dict[str, Any] = {}
    for label, (layers, heads) in sc["shapes"].items():
        summary = ctx.sweep(label, task, ModelShape(n_layers=layers, n_heads=heads), config)
        acc = {r["seed"]: r["final_accuracy"] for r in summary["runs"]}
        per_seed = {}
        for s, d in ctx.run_dirs(label).items():
            per_seed[s] = {"accuracy": acc[s], **boundary_scores(load_trained(d), comparison, words)}
        results[label] = per_seed
    first_run = next(iter(ctx.run_dirs(next(iter(sc["shapes"]))).values()))
    exact = skyline(load_trained(first_run), T)
    built = boundary_scores(exact, comparison, words)
    ctx.data("twins", {k: {str(s): v for s, v in per.items()} for k, per in results.items()})
    ctx.data("construction", {"name": exact.card.construction, **built})
    any_seed = next(iter(next(iter(results.values())).values()))
    bos, self_ = any_seed["always_bos"], any_seed["always_self"]

    rows = []
    for label, per in results.items():
        for s, r in per.items():
            best = max(r["heads"], key=lambda h: r["heads"][h]["score"])
            layer_of_best = int(best[1:].split("H")[0])
            rows.append([f"{label} seed {s}", r["accuracy"], best, r["heads"][best]["score"], r["heads"][best]["mass"],
                         layer_of_best, r["any_head"]])
    best_c = max(built["heads"], key=lambda h: built["heads"][h]["score"])
    rows.append([f"construction ({exact.card.construction})", 1.0, best_c, built["heads"][best_c]["score"],
                 built["heads"][best_c]["mass"], int(best_c[1:].split("H")[0]), built["any_head"]])
    ctx.table("Boundary-detector scores (fraction of queries whose argmax is the last wall position)",
              ["model", "held-out accuracy", "best head", "its score", "its mass there", "its layer", "any head"], rows,
              note=f"{len(words)} words of length {T}; baselines: always-BOS {bos:.3f}, always-self {self_:.3f}. "
                   f"Layers count TransformerLens blocks from 0.")
    _figure(ctx, results, built, bos, self_, exact.card.construction)
    _claims(ctx, results, built, bos, self_, a.name, T)


def _figure(ctx: Context, results: dict, built: dict, bos: float, self_: float, name: str) -> None:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 3.6))
    ax = fig.subplots()
    x, labels = 0, []
    for i, (label, per) in enumerate(results.items()):
        for s, r in per.items():
            names = list(r["heads"])
            ax.scatter([x + j * 0.8 / max(1, len(names)) for j in range(len(names))], [r["heads"][h]["score"] for h in names],
                       color=f"C{i}", s=14)
            labels.append((x + 0.4, f"{label}\nseed {s}"))
            x += 1
    names = list(built["heads"])
    ax.scatter([x + j * 0.8 / len(names) for j in range(len(names))], [built["heads"][h]["score"] for h in names],
               color="k", s=14)
    labels.append((x + 0.4, "construction"))
    ax.axhline(bos, color="C3", ls="--", lw=1, label=f"always BOS ({bos:.2f})")
    ax.axhline(self_, color="C4", ls=":", lw=1, label=f"always self ({self_:.2f})")
    ax.set_xticks([p for p, _ in labels], [t for _, t in labels], fontsize=7)
    ax.set_ylabel("boundary score of each head")
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=8, loc="upper left")
    fig.suptitle(f"Nearest-boundary detection: every head of every model ({name} beside the twins)", fontsize=10)
    ctx.figure("boundary_scores", fig, "Each dot is one head (left to right: layer by layer); the lines are what a "
               "head scores by always attending to BOS or to itself.")


def _claims(ctx: Context, results: dict, built: dict, bos: float, self_: float, name: str, T: int) -> None:
    floor = max(bos, self_)
    margin = 0.2
    for label, per in results.items():
        learned = {s: r for s, r in per.items() if r["accuracy"] >= LEARNED or ctx.quick}
        best = {s: max(h["score"] for h in r["heads"].values()) for s, r in learned.items()}
        detectors = sum(b >= floor + margin for b in best.values())
        layers = sorted({int(max(r["heads"], key=lambda h: r["heads"][h]["score"])[1:].split("H")[0])
                         for r in learned.values()})
        if not learned:
            v, why = "not tested", f"no {label} twin reached {LEARNED} held-out accuracy"
        else:
            v, why = ("reproduced" if detectors > len(learned) / 2 else "not reproduced" if detectors == 0 else "differs"), ""
        ctx.claim(f"Trained {label} twins contain a nearest-boundary detector head",
                  "last-layer heads act as nearest-boundary detectors (Fig. 3.6, 3.17: 4-layer, 8-head GPT-2 on Grid_9, T = 128)",
                  f"{detectors} of {len(learned)} learned twins ({len(per)} trained) have a head whose boundary score beats "
                  f"the better baseline ({floor:.2f}) by ≥ {margin}; best scores "
                  + ", ".join(f"{b:.2f}" for b in best.values()) + (f"; in layer(s) {layers}" if layers else ""),
                  v, f"reproduced if more than half the learned twins have a head scoring ≥ max(always-BOS, always-self) + {margin}",
                  why)
    ctx.claim("Theorem 12's construction detects the nearest boundary exactly",
              "a 2-layer construction whose layer-2 heads attend to the last boundary (Theorem 12)",
              f"for {built['any_head']:.3f} of queries some head's argmax is the last wall position",
              "reproduced" if built["any_head"] == 1.0 else "not reproduced", "reproduced if the any-head score is 1.0")
    ctx.conclude(f"Baselines on these words: a head always on BOS scores {bos:.3f}, one always on itself {self_:.3f}; a "
                 f"boundary score well above both means the head tracks the walls, not a fixed position.")
    if not ctx.quick:
        ctx.caveat(f"Scale: T = {T} and width 64 (the thesis: T = 100 for training, length-128 probes, width 512, 8 heads); "
                   f"{len(ctx.seeds)} seeds per shape.")
