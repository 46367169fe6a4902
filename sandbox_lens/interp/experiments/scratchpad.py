"""``scratchpad`` — thesis §3.4.5.2.3–4 (Figs. 3.20, 3.21; D10): a scratchpad with an explicit recency bias
generalises to longer inputs; a scratchpad alone does not.

The thesis trains transformers on C_2 and on Dyck_{4,2}'s stack (here ``dyck2-depth4``: depth 4, two bracket
types) with the states written between the symbols, BOS σ_1 q_1 σ_2 q_2 … σ_T, the loss on q_t at σ_t (the
``scratchpad`` task kind), and fills the states in one at a time at inference. With "explicit recency bias in the
attention mechanism [Press et al., 2022]" the scratchpad twins generalise in length; "without [recency bias],
scratchpad training shows no improvement on length generalization". The slopes are not given: ALiBi's own are used
(head h of H gets −2^(−8h/H)·(query − key) added to its scores; 8 heads per layer, so the steepest is 1/2).

Four populations per task, every twin the same shape (2 layers, 8 heads, width 64, a context of 2 × 4N tokens):
plain (the state at every symbol, learned positions), plain with ALiBi (the recency bias alone, a control),
scratchpad with learned positions, scratchpad with ALiBi. Trained at N, tested at 1, 2 and 4 × N on the same
words; a scratchpad twin is tested autoregressively (its own states fed back), as the thesis does. A twin counts
once it reaches 0.95 at N.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from sandbox_lens.interp.experiments.base import Context, ExperimentError, mean_se
from sandbox_lens.interp.experiments.length_generalisation import dyck_automaton
from sandbox_lens.interp.experiments.rules import Rule
from sandbox_lens.interp.model import hooked
from sandbox_lens.interp.model.device import on, to_numpy
from sandbox_lens.interp.model.run import predict
from sandbox_lens.interp.stats import Estimate, difference, estimate
from sandbox_lens.interp.streams import ExperimentSeed
from sandbox_lens.interp.tasks.batches import AutomatonTask
from sandbox_lens.interp.tasks.catalogue import get_automaton
from sandbox_lens.interp.tasks.variants import ScratchpadTask
from sandbox_lens.interp.train import TrainConfig, default_shape, load_trained

SEEDS, QUICK_SEEDS = tuple(range(5)), (0,)
#: (label, scratchpad, positions)
ARMS = (
    ("plain", False, "learned"),
    ("plain + ALiBi", False, "alibi"),
    ("scratchpad", True, "learned"),
    ("scratchpad + ALiBi", True, "alibi"),
)
LEARNED = 0.95  # in-distribution accuracy a twin needs for its longer-input accuracy to count
KEEPS = 0.95  # "generalises": the accuracy at 4 × N a twin keeps
NO_GAIN = 0.05  # "no improvement": a gain below five points

RULES = {
    "recency": Rule(
        "accuracy at the longest test length (4 × N) of learned scratchpad + ALiBi twins (autoregressive; mean)",
        "above",
        KEEPS,
        unit="twins",
    ),
    "alone": Rule(
        "accuracy at the longest test length (4 × N): scratchpad − plain, both with learned positions (difference of "
        "means over learned twins)",
        "below",
        NO_GAIN,
        null=NO_GAIN,
        unit="twins",
    ),
}


def _scale(quick: bool) -> dict[str, Any]:
    if quick:
        return {"length": 4, "multiples": (1, 2), "steps": 40, "words": 16}
    return {"length": 16, "multiples": (1, 2, 4), "steps": 1500, "words": 200}


def check(options: dict[str, Any]) -> None:
    """Refuse an automaton or a Dyck language the catalogue does not have, or a TransformerLens without ALiBi, in one
    line, before ``--out`` is claimed."""
    get_automaton(options["automaton"])
    get_automaton(dyck_automaton(options["dyck"]))
    if hooked.backend() == "TransformerBridge":  # read at call time: the installed TransformerLens
        raise ExperimentError("scratchpad trains twins with " + hooked.BRIDGE_LACKS["alibi"])


def fill_scratchpad(model: Any, task: ScratchpadTask, words: np.ndarray, cached: bool | None = None) -> np.ndarray:
    """The states ``model`` writes into its own scratchpad on ``words`` [n, T]: q_t predicted at σ_t from the
    symbols and the states it predicted before (greedy decoding), [n, T]. A TransformerLens 3.9 model decodes with
    its key-value cache (two new tokens a step; ``cached=False``, or any other model: the whole prefix again each
    step, the same argmax up to float rounding)."""
    import torch

    tokens = task.layout(words, None)
    predicted = np.zeros(words.shape, dtype=np.int64)
    cache = _kv_cache(model, len(words)) if cached is not False else None
    with torch.inference_mode():
        for t in range(words.shape[1]):
            if cache is not None:  # BOS σ_1 at the first step, then q_{t−1} σ_t
                logits = model(on(model, tokens[:, max(0, 2 * t) : 2 * t + 2]), past_kv_cache=cache)[:, -1]
            else:
                logits = model(on(model, tokens[:, : 2 * t + 2]))[:, 2 * t + 1]
            predicted[:, t] = to_numpy(logits.argmax(-1))
            if 2 * t + 2 < tokens.shape[1]:
                tokens[:, 2 * t + 2] = task.state_token(predicted[:, t])
    return predicted


def _kv_cache(model: Any, batch: int) -> Any:
    """A fresh key-value cache for ``model`` (TransformerLens 3.9's ``HookedTransformer``), or None."""
    try:
        from transformer_lens import HookedTransformer, TransformerLensKeyValueCache
    except ImportError:  # TransformerLens 4.x
        return None
    if not isinstance(model, HookedTransformer):
        return None
    return TransformerLensKeyValueCache.init_cache(model.cfg, model.cfg.device, batch)


def _states(model: Any, task: Any, words: np.ndarray) -> np.ndarray:
    return fill_scratchpad(model, task, words) if isinstance(task, ScratchpadTask) else predict(model, words)


def _tasks(ctx: Context) -> dict[str, Any]:
    return {
        "parity": get_automaton(ctx.options["automaton"]),
        "dyck": get_automaton(dyck_automaton(ctx.options["dyck"])),
    }


def run(ctx: Context) -> None:
    """Train the four populations per task (or reuse finished runs), test each twin at every multiple of N, rule."""

    sc = _scale(ctx.quick)
    N, longest = sc["length"], sc["length"] * max(sc["multiples"])
    config = TrainConfig(steps=sc["steps"], batch=32, lr=1e-3, eval_every=100, target_accuracy=None)
    per: dict[str, dict[str, dict[int, dict[str, float]]]] = {}
    for name, automaton in _tasks(ctx).items():
        words = {
            m: automaton.sample(sc["words"], N * m, np.random.default_rng(ExperimentSeed.SCRATCHPAD_WORDS + N * m))
            for m in sc["multiples"]
        }
        truth = {m: automaton.run(w) for m, w in words.items()}
        for label, scratch, positions in ARMS:
            task = ScratchpadTask(automaton, N) if scratch else AutomatonTask(automaton, N)
            shape = replace(default_shape(task), n_heads=8, positional=positions, n_ctx=2 * longest)
            cell = f"{name}/{label}"
            ctx.sweep(cell, task, shape, config)
            per.setdefault(name, {})[label] = {}
            for s, d in ctx.run_dirs(cell).items():
                model = load_trained(d)
                per[name][label][s] = {
                    str(m): float((_states(model, task, words[m]) == truth[m]).mean()) for m in sc["multiples"]
                }
    ctx.data("accuracy", per)
    _report(ctx, per, sc)


def learned(twins: dict[int, dict[str, float]]) -> list[dict[str, float]]:
    """The twins that reach :data:`LEARNED` at N."""
    return [t for t in twins.values() if t["1"] >= LEARNED]


def recency_effect(twins: dict[int, dict[str, float]], horizon: str) -> Estimate:
    """Mean accuracy at ``horizon`` (a multiple of N) over the learned twins."""
    return estimate([t[horizon] for t in learned(twins)], unit="twins")


def alone_effect(scratch: dict[int, dict[str, float]], plain: dict[int, dict[str, float]], horizon: str) -> Estimate:
    """Scratchpad − plain (both with learned positions): the difference of mean accuracies at ``horizon`` over the
    learned twins of each."""
    return difference(
        [t[horizon] for t in learned(scratch)],
        [t[horizon] for t in learned(plain)],
        labels=("scratchpad", "plain"),
        unit="twins",
    )


def _floor(*populations: dict[int, dict[str, float]]) -> str | None:
    short = [len(learned(p)) for p in populations]
    return None if min(short) >= 3 else f"fewer than 3 twins reached {LEARNED} at N ({', '.join(map(str, short))})"


def _report(ctx: Context, per: dict[str, Any], sc: dict[str, Any]) -> None:
    horizon = str(max(sc["multiples"]))
    table(ctx, per, sc)
    for name, arms in per.items():
        e = recency_effect(arms["scratchpad + ALiBi"], horizon)
        ctx.rule(
            f"A scratchpad with a recency bias generalises in length ({name})",
            "scratchpad + recency bias generalises to longer inputs (Fig. 3.21, yellow curves)",
            RULES["recency"],
            e,
            f"{e.text('{:.3f}')} at {horizon} × N over {e.n} learned twins",
            floor=_floor(arms["scratchpad + ALiBi"]),
        )
        e = alone_effect(arms["scratchpad"], arms["plain"], horizon)
        ctx.rule(
            f"A scratchpad alone does not help length generalisation ({name})",
            "without recency bias, scratchpad training shows no improvement on length generalization",
            RULES["alone"],
            e,
            f"{e.text('{:+.3f}')} at {horizon} × N",
            floor=_floor(arms["scratchpad"], arms["plain"]),
        )
    figure(ctx, per, sc)
    conclude(ctx, per, horizon)


def table(ctx: Context, per: dict[str, Any], sc: dict[str, Any]) -> None:
    """Mean ± s.e. accuracy of every population at every multiple of N, over its learned twins."""
    rows = []
    for name, arms in per.items():
        for label, twins in arms.items():
            ok = learned(twins)
            cells = ["—"] * len(sc["multiples"])
            if ok:
                cells = ["{:.3f} ± {:.3f}".format(*mean_se([t[str(m)] for t in ok])) for m in sc["multiples"]]
            rows.append([name, label, f"{len(ok)} of {len(twins)}", *cells])
    ctx.table(
        f"Accuracy at 1 … {max(sc['multiples'])} × N (N = {sc['length']}), learned twins",
        ["task", "population", f"learned (≥ {LEARNED} at N)", *[f"{m} × N" for m in sc["multiples"]]],
        rows,
        note="scratchpad twins decode their own states one at a time; mean ± standard error over the learned twins",
    )


def figure(ctx: Context, per: dict[str, Any], sc: dict[str, Any]) -> None:
    """Accuracy against the test length, a line per population (a dot per learned twin), a panel per task."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 3.4))
    axes = fig.subplots(1, len(per), sharey=True, squeeze=False)[0]
    xs = [m * sc["length"] for m in sc["multiples"]]
    for ax, (name, arms) in zip(axes, per.items()):
        for i, (label, _, _) in enumerate(ARMS):
            ok = learned(arms[label])
            if not ok:
                continue
            values = np.array([[t[str(m)] for m in sc["multiples"]] for t in ok])
            ax.plot(xs, values.mean(0), marker="o", color=f"C{i}", label=label)
            for row in values:
                ax.scatter(xs, row, s=6, color=f"C{i}", alpha=0.4)
        ax.axhline(KEEPS, color="grey", lw=0.8, ls=":")
        ax.set_xscale("log", base=2)
        ax.set_xticks(xs, [str(x) for x in xs])
        ax.set(title=name, xlabel="test length")
    axes[0].set_ylabel("state accuracy")
    if axes[-1].get_legend_handles_labels()[0]:
        axes[-1].legend(fontsize=7)
    fig.tight_layout()
    ctx.figure(
        "scratchpad",
        fig,
        f"State accuracy of the learned twins trained at N = {sc['length']} against the test length (line: mean; "
        f"dots: twins). Dotted: {KEEPS}.",
    )


def conclude(ctx: Context, per: dict[str, Any], horizon: str) -> None:
    """What the four populations say at the longest length, and the caveats."""
    for name, arms in per.items():
        means = {
            label: (np.mean([t[horizon] for t in learned(arms[label])]) if learned(arms[label]) else float("nan"))
            for label, _, _ in ARMS
        }
        ctx.conclude(
            f"{name} at {horizon} × N: "
            + "; ".join(f"{label} {v:.3f}" for label, v in means.items())
            + " (mean over learned twins)."
        )
    ctx.caveat(
        "The recency bias is ALiBi's, with its own slopes (2^(−8h/8), steepest 1/2) and no position embedding; the "
        "thesis gives no slopes and may have kept its positions. Twins are trained at N = 16 (the thesis: 40) and "
        "tested to 4 × N; the plain twins' positions past N are untrained, as in the thesis."
    )
