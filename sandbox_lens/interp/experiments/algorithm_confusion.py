"""``algorithm-confusion`` — does the identification find the algorithm a twin was made to run? (issue 42's
positive controls: twins that provably carry a known algorithm, and random-init twins that carry none.)

Twins are trained with ``--align CONSTRUCTION`` (interchange intervention training with the strictness term,
:mod:`sandbox_lens.interp.train.align`) so that they carry each proven algorithm's variables at the sites its
construction names: the prefix scan's windows and state (``prefix_scan``, 6 blocks at T = 8) on S3, the counter
(``modular_counter``) on C4, the Krohn–Rhodes cascade's levels (``krohn_rhodes``, 4 blocks) on S3, the Dyck stack
(``dyck``) on Dyck_{2,4}; three seeds each, trained until 99% accuracy *and* every imposed site's held-out IIA reaches
0.99, or the step budget (6000 steps; the cascade, twice as wide as the others, 12000), and a twin counts as carrying
its algorithm at 0.95. Where the algorithm's graph has edges
between imposed variables at exact offsets (the scan's windows), those edges are imposed too, by path interchanges
(``--iit-variables graph``), and their held-out IIA counts toward the target; elsewhere every variable is swapped at
every step (``all``). The scan is not imposed on C4: imposed with its whole graph for 6000 steps (56 CPU-minutes a
twin) its windows stay at held-out IIA 0.68 / 0.75 and the identification names the twin a counter (docs/causal.md),
so no such twin would reach its targets and count. Random-init twins of the same shapes (three per task) are the
negatives. Each twin is put to every algorithm its task can have (:func:`sandbox_lens.interp.causal.identify.identify`
at its defaults: 128 pairs per split, five random-init nulls), and the confusion matrix counts imposed against
identified, with the identification's accuracy and its Wilson interval over the twins that reached their targets.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sandbox_lens.interp.causal.align import nulls_of
from sandbox_lens.interp.causal.impose import correspondence
from sandbox_lens.interp.errors import OptionError
from sandbox_lens.interp.experiments.algorithm_census import automaton_task, dyck_task, identified_row
from sandbox_lens.interp.experiments.base import Context
from sandbox_lens.interp.experiments.rules import Rule
from sandbox_lens.interp.jsonfile import read_json
from sandbox_lens.interp.stats import Estimate, wilson_interval
from sandbox_lens.interp.streams import ExperimentSeed
from sandbox_lens.interp.train import ModelShape, TrainConfig, load_trained, random_init
from sandbox_lens.interp.train.checkpoint import METRICS_SCHEMA
from sandbox_lens.interp.train.sweep import run_pool

SEEDS, QUICK_SEEDS = (0, 1, 2), (0,)
#: Random-init twins per task (initialisation seeds from NULL_SEED): the negatives.
NEGATIVES, NULL_SEED = 3, 20_000
REACHED = 0.95  # accuracy and imposed IIA a twin needs to count as carrying its algorithm
#: training goes on until every imposed term reaches this (or the step budget ends): a twin stopped the moment its
#: terms reach 0.95 sits on the identification's own bar (docs/causal.md: the S3 scan's seed 1, two edges at 0.94–0.95)
ALIGN_TARGET = 0.99

RULES = {
    "accuracy": Rule(
        "share of the twins that carry an imposed algorithm (or none) identified as it (Wilson interval)",
        "above",
        0.5,
        null=0.5,
        min_n=3,
        unit="twins",
    ),
}


def _scale(quick: bool) -> dict[str, Any]:
    """(label, imposed algorithm, construction, task, layers, shape) per population, and the budget."""
    if quick:
        return {
            "populations": [
                (
                    "C3-counter",
                    "counter",
                    "modular_counter",
                    lambda: automaton_task("C3", 6),
                    2,
                    {"d_model": 32, "n_heads": 2},
                )
            ],
            "negatives": [("C3-random", lambda: automaton_task("C3", 6), 2, {"d_model": 32, "n_heads": 2})],
            "steps": 100,
            "pairs": 16,
            "nulls": 1,
            "negatives_per_task": 1,
        }
    wide = {"d_model": 64, "n_heads": 2}
    # the cascade at width 64 left its sign level at 0.77 / 0.87 after 6000 steps (two of three seeds) and at 0.92
    # after 12000; at width 128 seed 0 reached 0.94 in 6000, still rising as the learning rate ran out (deviation 40)
    cascade = {"d_model": 128, "n_heads": 2}
    dyck = {"d_model": 50, "n_heads": 2, "d_mlp": 50}
    return {
        "populations": [
            ("C4-counter", "counter", "modular_counter", lambda: automaton_task("C4", 8), 2, wide),
            ("S3-scan", "scan", "prefix_scan", lambda: automaton_task("S3", 8), 6, wide),
            ("S3-cascade", "cascade", "krohn_rhodes", lambda: automaton_task("S3", 8), 4, cascade),
            ("Dyck-stack", "stack", "dyck", lambda: dyck_task(2, 4, 16), 2, dyck),
        ],
        "negatives": [
            ("C4-random", lambda: automaton_task("C4", 8), 2, wide),
            ("S3-random", lambda: automaton_task("S3", 8), 4, wide),
            ("Dyck-random", lambda: dyck_task(2, 4, 16), 2, dyck),
        ],
        "steps": 6000,
        "steps_for": {"S3-cascade": 12000},
        "pairs": 128,
        "nulls": 5,
        "negatives_per_task": NEGATIVES,
    }


def run(ctx: Context) -> None:
    """Train the imposed twins (or reuse finished runs), identify them and the random-init negatives (the populations
    in a pool of ``--workers`` processes), count."""

    sc = _scale(ctx.quick)
    jobs: list[tuple] = []
    for label, _, construction, make, layers, shape_args in sc["populations"]:
        task, shape = make(), ModelShape(n_layers=layers, **shape_args)
        config = control_config(construction, task, shape, sc.get("steps_for", {}).get(label, sc["steps"]))
        summary = ctx.sweep(label, task, shape, config)
        runs = {r["seed"]: {k: r[k] for k in ("final_accuracy", "steps")} for r in summary["runs"]}
        jobs.append((ctx.quick, label, ctx.run_dirs(label), runs))
    jobs += [(ctx.quick, label, None, None) for label, *_ in sc["negatives"]]
    found = run_pool(_identified, jobs, ctx.workers, ctx.progress, "identifying populations", unit="population")
    twins = [t for rows in found for t in rows]
    ctx.data("twins", twins)
    ctx.data("reached_threshold", REACHED)
    _tables(ctx, twins)
    _claims(ctx, twins)


def _identified(job: tuple) -> list[dict[str, Any]]:
    """One population identified (in a pool worker: one thread) beside nulls shared by its twins: a trained one's
    twins from their run directories (``runs``: each seed's final accuracy and steps), or the task's random-init
    negatives where ``dirs`` is None. Picklable: the population is found again by its label in :func:`_scale`."""
    import torch

    quick, label, dirs, runs = job
    torch.set_num_threads(1)
    sc = _scale(quick)
    twins: list[dict[str, Any]] = []
    nulls = None
    if dirs is None:
        make, layers, shape_args = next(n[1:] for n in sc["negatives"] if n[0] == label)
        task, shape = make(), ModelShape(n_layers=layers, **shape_args)
        for i in range(sc["negatives_per_task"]):
            model = random_init(task, shape, NULL_SEED + i)
            nulls = nulls or nulls_of(model, ExperimentSeed.ALGORITHM_PAIRS, n=sc["nulls"])
            twins.append(
                {
                    "population": label,
                    "imposed": "none",
                    "construction": None,
                    "seed": NULL_SEED + i,
                    "accuracy": None,
                    "steps": 0,
                    "imposed_iia": {},
                    "reached": True,
                    **identified_row(model, nulls, sc["pairs"]),
                }
            )
        return twins
    algorithm, construction = next(p[1:3] for p in sc["populations"] if p[0] == label)
    for seed, directory in dirs.items():
        twin = load_trained(directory)
        nulls = nulls or nulls_of(twin, ExperimentSeed.ALGORITHM_PAIRS, n=sc["nulls"])
        imposed = last_evaluation(directory).get("imposed_iia") or {}
        reached = (
            runs[seed]["final_accuracy"] >= REACHED
            and bool(imposed)
            and all(v is not None and v >= REACHED for v in imposed.values())
        )
        twins.append(
            {
                "population": label,
                "imposed": algorithm,
                "construction": construction,
                "seed": seed,
                "accuracy": runs[seed]["final_accuracy"],
                "steps": runs[seed]["steps"],
                "imposed_iia": imposed,
                "reached": reached or quick,
                **identified_row(twin, nulls, sc["pairs"]),
            }
        )
    return twins


def imposition(construction: str, task: Any, shape: Any) -> tuple[dict[str, Any], str]:
    """(correspondence, ``iit_variables``) of a positive control: every variable and every edge of the algorithm's
    graph between them (``graph``) where the algorithm has such edges — imposing the variables alone leaves the
    twin free to compute them another way (docs/causal.md: the S3 scan's windows at 0.98–1.00 whose edges fail) —
    and every variable (``all``) where it has none."""
    try:
        return correspondence(construction, task, shape, edges=True), "graph"
    except OptionError:
        return correspondence(construction, task, shape), "all"


def control_config(construction: str, task: Any, shape: Any, steps: int, **more: Any) -> TrainConfig:
    """How a positive control is trained: ``construction``'s algorithm imposed (:func:`imposition`) until 99% accuracy
    and every imposed term at :data:`ALIGN_TARGET`, or ``steps``; ``more`` sets other fields (``strict_on``)."""
    alignment, mode = imposition(construction, task, shape)
    return TrainConfig(
        steps=steps,
        batch=32,
        lr=1e-3,
        eval_every=100,
        target_accuracy=0.99,
        alignment=alignment,
        iit_variables=mode,
        align_target=ALIGN_TARGET,
        **more,
    )


def last_evaluation(directory: Any) -> dict[str, Any]:
    """The last held-out evaluation of a run (its ``metrics.json`` history's last entry, schema-checked)."""
    history = read_json(Path(directory) / "metrics.json", METRICS_SCHEMA)["history"]
    return history[-1] if history else {}


def _tables(ctx: Context, twins: list[dict[str, Any]]) -> None:
    counted = [t for t in twins if t["reached"]]
    rows_labels = list(dict.fromkeys(t["imposed"] for t in twins))
    cols = sorted({t["identified"] for t in counted} - {"none", "inconclusive"}) + [
        x for x in ("none", "inconclusive") if any(t["identified"] == x for t in counted)
    ]
    rows = []
    for imposed in rows_labels:
        mine = [t for t in counted if t["imposed"] == imposed]
        rows.append([imposed, len(mine), *[sum(t["identified"] == c for t in mine) for c in cols]])
    ctx.table(
        "Confusion matrix: imposed (rows) against identified (columns), twins that reached their targets",
        ["imposed", "twins", *cols],
        rows,
        note=f"reached: accuracy ≥ {REACHED} and every imposed site's held-out IIA ≥ {REACHED}; 'none' rows are "
        "random-init twins",
    )
    detail = [
        [
            t["population"],
            t["seed"],
            "—" if t["accuracy"] is None else f"{t['accuracy']:.3f}",
            t["steps"],
            ", ".join(f"{k} {v:.2f}" for k, v in t["imposed_iia"].items() if v is not None) or "—",
            "yes" if t["reached"] else "no",
            t["identified"],
            f"{t['stability']:.2f}",
        ]
        for t in twins
    ]
    ctx.table(
        "Every twin",
        ["population", "seed", "accuracy", "steps", "imposed IIA", "reached", "identified", "stability"],
        detail,
    )


def _claims(ctx: Context, twins: list[dict[str, Any]]) -> None:
    counted = [t for t in twins if t["reached"]]
    right = sum(t["identified"] == t["imposed"] for t in counted)
    ci = wilson_interval(right, len(counted))
    estimate = Estimate(
        right / len(counted) if counted else None, ci, len(counted), "twins", "share with a 95% Wilson interval"
    )
    ctx.rule(
        "The identification names the algorithm a twin was made to carry, and none for random-init twins",
        "the constructions prove these algorithms; IIT imposes them (positive controls)",
        RULES["accuracy"],
        estimate,
        f"{right} of {len(counted)} twins identified as imposed",
        floor=None if counted else "no imposed twin reached its targets",
    )
    missed = [t for t in counted if t["identified"] != t["imposed"]]
    for t in missed:
        best = max(t["candidates"].items(), key=lambda kv: kv[1]["score"] or 0.0)
        failing = [
            v
            for v, (status, _) in t["candidates"].get(t["imposed"], {}).get("variables", {}).items()
            if status != "passes"
        ]
        ctx.conclude(
            f"{t['population']} seed {t['seed']}: identified {t['identified']} (best score {best[0]} "
            f"{best[1]['score']:.3f}); the imposed algorithm's failing variables: {', '.join(failing) or '—'}"
        )
    ctx.caveat(
        "Imposing an algorithm fixes where its variables live; it does not stop the twin computing them another "
        "way as well, so an identification other than the imposed one can be right about the twin."
    )
