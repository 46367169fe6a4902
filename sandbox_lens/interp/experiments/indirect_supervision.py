"""``indirect-supervision`` — thesis §3.4.5.2.1, Fig. 3.18 (Fig. 3.7a): twins trained on an observation of the state,
not the state.

"The model is able to achieve near-perfect in-distribution accuracies for all tasks" (best of 25 runs, length 40):
C₄ observed as "the count is 0 mod 4" 99.9, Grid₉ as "at a wall" 100.0, D₈ as the location of a vertex 100.0,
(abab)* as "accepting" 100.0 under both its word laws; "as a reference, LSTM gets 100% on all tasks".

Each task is a catalogue automaton with an observation map (``--observe``): C4 with ``1,0,0,0``, grid9 with
``1,0,0,0,0,0,0,0,1``. D₈'s location needs no map: the catalogue's D8 *is* the group acting on the square's
vertices, whose state is where vertex 0 has gone — the location observation of D₈ acting on itself, as a function
of the input the same task. (abab)* is the catalogue's ``abab`` recogniser observed as ``0,0,0,1,0`` (accepting),
trained on the thesis's two laws (``--periodic``): (1) always *abab…*, (2) *abab…* with probability 0.5, otherwise a
uniform a/b word. Twins (:data:`LAYERS` blocks of the default width) and the thesis's LSTM are trained on
each; a task is learned from its observation when some seed's held-out accuracy reaches :data:`REACH` (the thesis
reports the best of 25), ruled on the share of seeds that do, with its Wilson interval. Dyck₄,₈'s stack top (87 381
stacks, beyond the catalogue's automata) is a task of its own (:class:`~sandbox_lens.interp.tasks.batches.StackTopTask`).
S₅ is the thesis's (``S5-thesis``: the group acting on itself, 8 generators) observed as π_{1:t}(1), where the
first point goes (:func:`thesis_s5_observation`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from sandbox_lens.interp.experiments.base import Context
from sandbox_lens.interp.experiments.rules import Rule
from sandbox_lens.interp.stats import Estimate, estimate, share
from sandbox_lens.interp.tasks.batches import AutomatonTask
from sandbox_lens.interp.tasks.catalogue import get_automaton
from sandbox_lens.interp.tasks.variants import StackTopTask
from sandbox_lens.interp.train import TrainConfig, default_shape

SEEDS, QUICK_SEEDS = tuple(range(6)), (0,)
LAYERS = 3
REACH = 0.99  # "near-perfect": the thesis's best runs are at 99.9–100
ACCEPT = (0, 0, 0, 1, 0)  # the abab recogniser's state 3 accepts


def image_of(permutation: str, point: int) -> int:
    """Where ``point`` goes under a permutation named in cycle notation (``"e"``, ``"(0 1 2)(3 4)"``)."""
    for cycle in permutation.replace(")", "").split("(")[1:]:
        items = [int(x) for x in cycle.split()]
        if point in items:
            return items[(items.index(point) + 1) % len(items)]
    return point


def thesis_s5_observation() -> tuple[int, ...]:
    """The thesis's S₅ observation π_{1:t}(1) (its points are 1-based): for every state of ``S5-thesis`` (the group
    acting on itself with the thesis's 8 generators), where point 0 goes — five labels."""
    return tuple(image_of(name, 0) for name in get_automaton("S5-thesis").states)


#: Fig. 3.18's Dyck_{4,8} column is this task, not a catalogue automaton (see :func:`observed_task`)
STACK_TOP = "dyck4-depth8-top"
#: (label, catalogue automaton, observation map or None, what it observes, the thesis's best of 25, word law: None
#: for the uniform one, else (periodic word, its share) — ``AutomatonTask(periodic=)``)
TASKS = (
    ("C4 0 mod 4", "C4", (1, 0, 0, 0), "whether the count is 0 mod 4", 99.9, None),
    ("grid9 wall", "grid9", (1, 0, 0, 0, 0, 0, 0, 0, 1), "whether the agent is at a wall", 100.0, None),
    ("D8 location", "D8", None, "where vertex 0 of the square has gone", 100.0, None),
    ("(abab)* (1)", "abab", ACCEPT, "acceptance, on abab… only", 100.0, ((0, 1), 1.0)),
    ("(abab)* (2)", "abab", ACCEPT, "acceptance, on abab… half the time", 100.0, ((0, 1), 0.5)),
    # the thesis's S₅ (8 generators) observed as where the first point goes; trained there with 16 layers (8 others)
    ("S5 where 1 goes", "S5-thesis", thesis_s5_observation(), "π_{1:t}(1), where point 1 goes", 99.6, None),
    # Dyck_{4,8}'s stack top: a task of its own (87,381 stacks: no catalogue automaton)
    ("Dyck4,8 stack top", STACK_TOP, None, "the type on top of the stack", 100.0, None),
)


def observed_task(name: str, length: int, observe: Any, periodic: Any) -> Any:
    """The training task of one row: the catalogue automaton with its observation and word law, or the stack top."""
    if name == STACK_TOP:
        return StackTopTask(4, 8, length)
    return AutomatonTask(get_automaton(name), length, observe=observe, periodic=periodic)


RULES = {
    "learned": Rule(
        f"share of twins whose held-out accuracy on the observation reaches {REACH} (the thesis: the best of 25)",
        "above",
        0.0,
        null=0.0,
        min_n=5,
        unit="seeds",
    ),
    "lstm": Rule("held-out accuracy of every LSTM, over every task", "above", REACH, null=0.5, min_n=5, unit="runs"),
}


def _scale(quick: bool) -> dict[str, Any]:
    if quick:
        return {"length": 6, "steps": 40, "lstm_steps": 30}
    return {"length": 16, "steps": 2000, "lstm_steps": 1500}  # 300 until deviation 29: S5 needs more


def reach_share(held_out: list[float], reach: float = REACH) -> Estimate:
    """The share of runs whose held-out accuracy reaches ``reach``, with its Wilson interval."""
    return share([a >= reach for a in held_out])


def run(ctx: Context) -> None:
    """Train twins and LSTMs on every observed task (or reuse finished runs), rule on each task and the LSTM."""
    sc = _scale(ctx.quick)
    rows = []
    for label, name, observe, _, _, periodic in TASKS:
        task = observed_task(name, sc["length"], observe, periodic)
        twin_cfg = TrainConfig(steps=sc["steps"], batch=32, lr=1e-3, eval_every=100, target_accuracy=0.999)
        lstm_cfg = TrainConfig(
            steps=sc["lstm_steps"], batch=64, lr=3e-3, weight_decay=1e-9, eval_every=50, target_accuracy=0.999
        )
        for arch, config in (("transformer", twin_cfg), ("lstm", lstm_cfg)):
            shape = default_shape(task, arch)
            if arch == "transformer":
                shape = replace(shape, n_layers=LAYERS)
            summary = ctx.sweep(f"{_directory(label, name)}/{arch}", task, shape, config)
            for r in summary["runs"]:
                rows.append({"task": label, "arch": arch, "seed": r["seed"], "held_out": r["final_accuracy"]})
    ctx.data("runs", rows)
    _report(ctx, rows, sc)
    _figure(ctx, rows)


def _directory(label: str, name: str) -> str:
    """A population's directory: the automaton's name, and the law's number where one automaton has two laws."""
    return name if "(" not in label else f"{name}-{label.rpartition('(')[2].rstrip(')')}"


def _report(ctx: Context, rows: list[dict[str, Any]], sc: dict[str, Any]) -> None:
    def held(label: str, arch: str) -> list[float]:
        return [r["held_out"] for r in rows if r["task"] == label and r["arch"] == arch]

    ctx.table(
        f"Held-out accuracy on the observation (T = {sc['length']})",
        ["task", "observes", "thesis (best of 25)", "twins: best", "median", f"≥ {REACH}", "LSTMs: worst"],
        [
            [
                label,
                what,
                f"{thesis:g}",
                f"{max(held(label, 'transformer')):.4f}",
                f"{np.median(held(label, 'transformer')):.4f}",
                f"{sum(a >= REACH for a in held(label, 'transformer'))}/{len(held(label, 'transformer'))}",
                f"{min(held(label, 'lstm')):.4f}",
            ]
            for label, _, _, what, thesis, _ in TASKS
        ],
        note=f"Twins: {LAYERS} blocks, the default width, up to {sc['steps']} steps; LSTMs: the thesis's baseline, "
        f"up to {sc['lstm_steps']} steps.",
    )
    for label, _, _, what, thesis, _ in TASKS:
        ctx.rule(
            f"Twins learn {label} from the observation alone",
            f"near-perfect in-distribution accuracy from {what} (Fig. 3.18: {thesis:g}, best of 25, T = 40)",
            RULES["learned"],
            reach_share(held(label, "transformer")),
            f"best {max(held(label, 'transformer')):.4f} over {len(held(label, 'transformer'))} seeds",
        )
    lstm = [r["held_out"] for r in rows if r["arch"] == "lstm"]
    ctx.rule(
        "The LSTM learns every observed task",
        "as a reference, LSTM gets 100% on all tasks",
        RULES["lstm"],
        estimate(lstm, unit="runs"),
        f"{len(lstm)} LSTM runs over {len(TASKS)} tasks; worst {min(lstm):.4f}",
    )
    ctx.conclude(
        "Best / median twin accuracy on the observation: "
        + "; ".join(
            f"{label} {max(held(label, 'transformer')):.3f} / {np.median(held(label, 'transformer')):.3f}"
            for label, *_ in TASKS
        )
        + "."
    )
    ctx.caveat(
        f"T = {sc['length']} (the thesis: 40), {LAYERS} blocks of width 64 (the thesis: 8 of width 512), "
        f"{len(ctx.seeds)} seeds per task (the thesis: the best of 25); S₅ with {LAYERS} blocks where the thesis "
        "used 16. Dyck₄,₈'s stack top is read off legal bracket walks drawn uniformly (as the catalogue's Dyck stacks "
        "are); at T = 16 its depth 8 is rarely reached. The (abab)* twins use learned positions (the thesis finds "
        "linear encodings struggle and sinusoidal ones easy)."
    )


def _figure(ctx: Context, rows: list[dict[str, Any]]) -> None:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9, 3.6), layout="constrained")
    ax = fig.subplots()
    for i, (label, *_, thesis, _) in enumerate(TASKS):
        for j, arch in enumerate(("transformer", "lstm")):
            ys = [r["held_out"] for r in rows if r["task"] == label and r["arch"] == arch]
            xs = i + (j - 0.5) * 0.3 + np.linspace(-0.05, 0.05, len(ys))
            ax.scatter(xs, ys, color=f"C{j}", s=14, label=("twins" if j == 0 else "LSTMs") if i == 0 else None)
        ax.plot(
            [i - 0.35, i + 0.35], [thesis / 100] * 2, color="k", lw=1, label="thesis (best of 25)" if i == 0 else None
        )
    ax.set_xticks(range(len(TASKS)), [t[0] for t in TASKS])
    ax.set(ylabel="held-out accuracy on the observation", title="Trained on an observation of the state")
    ax.legend(fontsize=8, loc="lower left")
    ctx.figure("indirect-supervision", fig, "One point a run: twins and LSTMs per observed task; line: the thesis.")
