"""``length-generalisation`` — thesis §3.4.5.2.4, Fig. 3.21: which training length, and which
position code, lets a twin run on inputs longer than it saw — and does the LSTM?

The thesis's two tasks, both semiautomaton simulation (the state at every position is scored):
C_2 (parity, uniform symbols; any catalogue automaton with ``--automaton``) and Dyck_{4,2} — the
stack of Dyck with depth 4 and 2 bracket types, ``dyck2-depth4`` (``--dyck K,D`` in this project's
notation, k types and depth D), whose words read only legal brackets. Twins are trained at
N ∈ {8, 16, 32, 64} with three position codes that can be evaluated past N — none, fixed sinusoids,
and learned positions trained with a random shift of 0..15N per batch (the thesis's fix) — beside the
thesis's LSTM, and tested at 1, 3, 8 and 16 × N; the exact constructions (``modular_counter``,
``prefix_scan``) are tested at every length too. Two views: the average (token) accuracy and the ℓ∞
one (the fraction of inputs with any error). Verdicts are taken at two horizons separately: the
thesis's range (trained at 40, tested to 128: ≤ 3.2 × N) and 16 × N.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from sandbox_lens.interp.evaluate import evaluate, skyline
from sandbox_lens.interp.experiments.base import Context, mean_se
from sandbox_lens.interp.experiments.rules import Rule, count, exactness_rule
from sandbox_lens.interp.stats import difference, estimate, permutation_test
from sandbox_lens.interp.streams import ExperimentSeed
from sandbox_lens.interp.tasks.catalogue import get_automaton
from sandbox_lens.interp.tasks.dyck import parse_dyck_spec
from sandbox_lens.interp.tasks.kinds import AUTOMATON
from sandbox_lens.interp.train import TrainConfig, default_shape, load_trained

SEEDS, QUICK_SEEDS = (0, 1), (0,)
TASKS = ("parity", "dyck")
POSITIONS = ("none", "sinusoidal", "learned+shift")
LSTM = "lstm"  # the recurrent baseline, beside the position codes in every table
LEARNED = 0.95  # in-distribution accuracy a model needs for its long-input behaviour to count
DROP = 0.10
NEAR = 3.2  # the thesis's range: trained at 40, tested to 128
FLOOR = 0.05  # two settings both within this of chance cannot be told apart: "not tested (floor)"

#: Each verdict's rule, taken at two horizons separately: the largest tested multiple ≤ 3.2 × N (the
#: thesis's range) and the largest (16 × N). Units: learned models, over every training length N and seed.
RULES = {
    "drop": Rule(
        "accuracy at 1 × N − at the horizon, per learned twin (sinusoidal positions)", "above", DROP, unit="twins"
    ),
    "helps": Rule(
        "accuracy at the horizon: this position code − sinusoidal (difference of means over learned twins)",
        "above",
        0.0,
        unit="twins",
    ),
    # a size ("perfect performance"), not only a direction: until 2026-11-26 the rule asked only that LSTMs drop less
    # than the sinusoidal twins, which passed with a worst accuracy of 0.71 (docs/deviations.md)
    "lstm": Rule("accuracy at the horizon, per learned LSTM", "above", 0.95, null=0.5, unit="models"),
    "exact": exactness_rule("(task, N, length) tests on which a construction is not exact"),
}


def _scale(quick: bool) -> dict[str, Any]:
    if quick:
        return {
            "lengths": (8,),
            "multiples": (1, 2),
            "steps": 40,
            "lstm_steps": 30,
            "samples": 24,
            "exact_samples": 4,
            "positions": ("none", "learned+shift"),
        }
    return {
        "lengths": (8, 16, 32, 64),
        "multiples": (1, 3, 8, 16),
        "steps": 1000,
        "lstm_steps": 600,
        "samples": 200,
        "exact_samples": 24,
        "positions": POSITIONS,
    }


def dyck_automaton(spec: str) -> str:
    """The catalogue name of ``--dyck K,D``'s stack automaton (k types, depth D): ``dyck<K>-depth<D>``."""

    k, D = parse_dyck_spec(spec)
    return f"dyck{k}-depth{D}"


def check(options: dict[str, Any]) -> None:
    """Refuse a task option this experiment cannot take, in one line, before ``--out`` is claimed."""

    get_automaton(options["automaton"])
    get_automaton(dyck_automaton(options["dyck"]))


@dataclass(frozen=True)
class Arm:
    """One task of the experiment: its kind, the kind's options (from the experiment's), the peak learning rate."""

    kind: Any
    options: Callable[[dict[str, Any]], dict[str, Any]]
    lr: float

    def task(self, N: int, options: dict[str, Any]):
        return self.kind.task_from_options(self.options(options), N)

    def shift(self, task, L: int):
        """The training law's words at length L (Dyck: legal brackets only)."""
        return self.kind.shifts(self.kind.source(task.to_dict()), L, {})[0]


def _arms() -> dict[str, Arm]:

    return {
        "parity": Arm(AUTOMATON, lambda o: {"automaton": o.get("automaton")}, 3e-3),
        "dyck": Arm(AUTOMATON, lambda o: {"automaton": dyck_automaton(o.get("dyck") or "2,4")}, 3e-3),
    }


def _settings(sc: dict) -> tuple[str, ...]:
    return (*sc["positions"], LSTM)


def run(ctx: Context) -> None:
    """Train this experiment's populations (or reuse finished runs), evaluate them and rule on every claim into
    ``ctx`` (the module docstring says what and how)."""
    from dataclasses import replace

    sc = _scale(ctx.quick)
    top = max(sc["multiples"])
    results: list[dict[str, Any]] = []
    exact_rows: list[dict[str, Any]] = []
    arms = _arms()
    for kind in TASKS:
        arm = arms[kind]
        for N in sc["lengths"]:
            task = arm.task(N, ctx.options)
            context = task.n_ctx + (top - 1) * N  # room for the longest test input
            base_shape = default_shape(task)
            models = {}
            for pos in _settings(sc):
                if pos == LSTM:
                    shape = default_shape(task, "lstm")
                    config = TrainConfig(
                        steps=sc["lstm_steps"],
                        batch=64,
                        lr=3e-3,
                        eval_every=50,
                        target_accuracy=0.999,
                        warmup=min(50, sc["lstm_steps"] // 4),
                    )
                else:
                    shift = (top - 1) * N if pos == "learned+shift" else 0
                    shape = replace(base_shape, positional=pos.split("+")[0], n_ctx=context)
                    config = TrainConfig(
                        steps=sc["steps"],
                        batch=32,
                        lr=arm.lr,
                        eval_every=100,
                        pos_shift=shift,
                        target_accuracy=0.999,
                        warmup=min(100, sc["steps"] // 4),
                    )
                name = f"{kind}/N={N}/{pos}"
                summary = ctx.sweep(name, task, shape, config)
                acc = {r["seed"]: r["final_accuracy"] for r in summary["runs"]}
                for s, d in ctx.run_dirs(name).items():
                    models[(pos, s)] = (load_trained(d), acc[s])
            lengths = [m * N for m in sc["multiples"]]
            shifts = [arm.shift(task, L) for L in lengths]
            named = {f"{pos} {s}": m for (pos, s), (m, _) in models.items()}
            rows = evaluate(named, shifts, samples=sc["samples"], seed=ExperimentSeed.LENGTH_GENERALISATION + N)
            for (pos, s), (_, held_out) in models.items():
                for m, sh in zip(sc["multiples"], shifts):
                    r = next(x for x in rows if x["model"] == f"{pos} {s}" and x["shift"] == sh.label)
                    results.append(
                        {
                            "task": kind,
                            "N": N,
                            "positions": pos,
                            "seed": s,
                            "held_out": held_out,
                            "multiple": m,
                            "length": m * N,
                            "accuracy": r["accuracy"],
                            "any_error_rate": r["any_error_rate"],
                        }
                    )
            # the construction on its own (fewer) inputs of the same law: prefix_scan at 1024 tokens is slow on a CPU
            exact = skyline(next(iter(models.values()))[0], top * N)
            exact_rows_here = evaluate(
                {"exact": exact}, shifts, samples=sc["exact_samples"], seed=ExperimentSeed.LENGTH_GENERALISATION + N
            )
            for m, sh in zip(sc["multiples"], shifts):
                r = next(x for x in exact_rows_here if x["shift"] == sh.label)
                exact_rows.append(
                    {
                        "task": kind,
                        "N": N,
                        "multiple": m,
                        "construction": exact.card.construction,
                        "accuracy": r["accuracy"],
                        "any_error_rate": r["any_error_rate"],
                        "inputs": sc["exact_samples"],
                    }
                )
    ctx.data("twins", results)
    ctx.data("constructions", exact_rows)
    _tables(ctx, results, sc)
    _figure(ctx, results, sc)
    _claims(ctx, results, exact_rows, sc)


def _learned(results: list[dict], quick: bool) -> list[dict]:
    return [r for r in results if r["held_out"] >= LEARNED or quick]


def _tables(ctx: Context, results: list[dict], sc: dict) -> None:
    rows = []
    for kind in TASKS:
        for pos in _settings(sc):
            for N in sc["lengths"]:
                sel = [r for r in results if r["task"] == kind and r["positions"] == pos and r["N"] == N]
                learned = sum(r["held_out"] >= LEARNED for r in sel if r["multiple"] == sc["multiples"][0])
                line = [kind, pos, N, f"{learned}/{len(ctx.seeds)}"]
                for m in sc["multiples"]:
                    at = [r for r in sel if r["multiple"] == m]
                    line.append(
                        f"{np.mean([r['accuracy'] for r in at]):.3f} / {np.mean([r['any_error_rate'] for r in at]):.2f}"
                    )
                rows.append(line)
    ctx.table(
        "Accuracy / fraction of inputs with any error, mean over seeds",
        ["task", "positions", "N", f"seeds ≥ {LEARNED}"] + [f"{m} × N" for m in sc["multiples"]],
        rows,
        note=f"{sc['samples']} words of L symbols per length, the state scored at every position (Dyck: the "
        f"stack, legal brackets only). Row lstm: the thesis's LSTM baseline (no positions).",
    )
    minimal = []
    for kind in TASKS:
        for pos in _settings(sc):
            exact_at = [
                N
                for N in sc["lengths"]
                if any(
                    r["task"] == kind
                    and r["positions"] == pos
                    and r["N"] == N
                    and r["multiple"] == sc["multiples"][1]
                    and r["any_error_rate"] == 0
                    for r in results
                )
            ]
            minimal.append([kind, pos, min(exact_at) if exact_at else "none"])
    ctx.table(
        f"Smallest training length N with a seed error-free at {sc['multiples'][1]} × N (the ℓ∞ view)",
        ["task", "positions", "smallest N"],
        minimal,
    )
    ctx.data("smallest_generalising_N", minimal)


def _figure(ctx: Context, results: list[dict], sc: dict) -> None:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 3.8))
    axes = fig.subplots(1, len(TASKS), sharey=True)
    for ax, kind in zip(axes, TASKS):
        for i, pos in enumerate(_settings(sc)):
            for j, N in enumerate(sc["lengths"]):
                sel = [r for r in results if r["task"] == kind and r["positions"] == pos and r["N"] == N]
                xs = sc["multiples"]
                ys = [mean_se([r["accuracy"] for r in sel if r["multiple"] == m])[0] for m in xs]
                ax.plot(
                    xs,
                    ys,
                    color=f"C{i}",
                    alpha=0.35 + 0.65 * (j + 1) / len(sc["lengths"]),
                    marker="o",
                    ms=3,
                    label=f"{pos}" if j == len(sc["lengths"]) - 1 else None,
                )
        ax.axhline(1.0, color="k", ls="--", lw=1)
        ax.set_xscale("log", base=2)
        ax.set_xticks(sc["multiples"], [f"{m}×" for m in sc["multiples"]])
        ax.set_xlabel("test length ÷ training length")
        ax.set_title(kind, fontsize=10)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("accuracy (mean over seeds)")
    axes[0].set_ylim(-0.02, 1.02)
    axes[-1].legend(fontsize=8, title="positions (darker: larger N)", title_fontsize=8)
    fig.suptitle(
        "Length generalisation: every training length N, every position code and the LSTM; dashed: the "
        "constructions (exact)"
    )
    ctx.figure(
        "length_generalisation",
        fig,
        "Accuracy against the test length as a multiple of the training length; one "
        "line per training length N (darker = longer).",
    )


def _claims(ctx: Context, results: list[dict], exact_rows: list[dict], sc: dict) -> None:
    first = sc["multiples"][0]
    near = max((m for m in sc["multiples"] if 1 < m <= NEAR), default=None)
    horizons = [
        (m, f"{m} × N" + (" (the thesis's range)" if m == near else ""))
        for m in dict.fromkeys((near, sc["multiples"][-1]))
        if m is not None
    ]
    learned = _learned(results, ctx.quick)
    keys = {(r["task"], r["N"], r["positions"], r["seed"]) for r in learned if r["multiple"] == first}
    keep = [r for r in results if (r["task"], r["N"], r["positions"], r["seed"]) in keys]
    arms = _arms()

    def accs(kind: str, pos: str, m: int) -> dict[tuple[int, int], float]:
        return {
            (r["N"], r["seed"]): r["accuracy"]
            for r in keep
            if r["task"] == kind and r["positions"] == pos and r["multiple"] == m
        }

    def drops(kind: str, pos: str, m: int) -> list[float]:
        a1, aL = accs(kind, pos, first), accs(kind, pos, m)
        return [a1[k] - aL[k] for k in a1 if k in aL]

    base = "sinusoidal" if "sinusoidal" in sc["positions"] else sc["positions"][0]
    for kind in TASKS:
        task = arms[kind].task(sc["lengths"][0], ctx.options)
        chance = arms[kind].kind.chance(task.to_dict())
        for m, where in horizons:
            a1, aL = accs(kind, base, first), accs(kind, base, m)
            ctx.rule(
                f"{kind}: accuracy drops at {where} ({base} positions)",
                "accuracy drops sharply beyond the training length (Fig. 3.21; C_2 and Dyck_{4,2}, trained at 40, "
                "tested to 128; no numbers in the text)",
                RULES["drop"],
                estimate(drops(kind, base, m), unit="twins"),
                f"mean {_mean(a1.values()):.3f} at 1 × N, {_mean(aL.values()):.3f} at {m} × N over learned twins of "
                f"every N (chance {chance:.2f})",
                floor=None if a1 else f"no {kind} twin with {base} positions learned",
            )
            for pos, thesis in (
                ("learned+shift", "random position shifts in [0, 400] give a significant boost but are not perfect"),
                ("none", "removing the position encoding helps too"),
            ):
                if pos not in sc["positions"] or base == pos:
                    continue
                a, b = list(accs(kind, pos, m).values()), list(aL.values())
                perfect = bool(a) and all(
                    r["any_error_rate"] == 0
                    for r in keep
                    if r["task"] == kind and r["positions"] == pos and r["multiple"] == m
                )
                floor = None
                if not a or not b:
                    floor = "a setting had no learned twin"
                elif max(_mean(a), _mean(b)) <= chance + FLOOR:
                    floor = f"both settings are at chance ({chance:.2f}) at {m} × N: the test cannot tell them apart"
                diff = difference(a, b, labels=(pos, base), unit="twins")
                ctx.rule(
                    f"{kind}: {pos} positions help at {where}",
                    thesis + " (Fig. 3.21)",
                    RULES["helps"],
                    diff,
                    f"mean accuracy at {m} × N: {_mean(a):.3f} ({pos}, {len(a)} twins) vs {_mean(b):.3f} ({base}, "
                    f"{len(b)}); per twin {', '.join(f'{x:.3f}' for x in a)} vs {', '.join(f'{x:.3f}' for x in b)}"
                    + ("; every learned twin exact there" if perfect else ""),
                    floor=floor,
                    p_value=permutation_test(a, b, alternative="greater") if len(a) + len(b) >= 3 else None,
                    family=f"{kind}: position codes",
                )
            lstm, twin = drops(kind, LSTM, m), drops(kind, base, m)
            worst = min(
                (r["accuracy"] for r in keep if r["task"] == kind and r["positions"] == LSTM and r["multiple"] == m),
                default=None,
            )
            ctx.rule(
                f"{kind}: the LSTM keeps its accuracy at {where}",
                "LSTM's perfect performance on all scenarios (Fig. 3.21)",
                RULES["lstm"],
                estimate(list(accs(kind, LSTM, m).values()), unit="models"),
                f"mean drop {_mean(lstm):.3f} ({len(lstm)} learned LSTMs; worst accuracy at {m} × N "
                f"{'—' if worst is None else f'{worst:.4f}'}) vs {_mean(twin):.3f} ({len(twin)} {base} twins)",
                floor=None if lstm and twin else "an LSTM or a twin setting had no learned model",
            )
    wrong = sum(r["accuracy"] < 1.0 for r in exact_rows)
    ctx.rule(
        "The constructions are exact at every length",
        "exact for every input length (the theorems)",
        RULES["exact"],
        count(wrong),
        f"worst accuracy {min(r['accuracy'] for r in exact_rows):.4f} over {len(exact_rows)} (task, N, length) tests "
        f"up to {max(sc['lengths']) * sc['multiples'][-1]} tokens ({sc['exact_samples']} words each: "
        + ", ".join(sorted({r["construction"] for r in exact_rows}))
        + ")",
    )
    long_m = sc["multiples"][-1]
    for kind in TASKS:
        best = max(
            (r for r in keep if r["task"] == kind and r["multiple"] == long_m and r["positions"] != LSTM),
            key=lambda r: r["accuracy"],
            default=None,
        )
        if best:
            ctx.conclude(
                f"{kind}: best twin at {long_m} × N — {best['positions']} positions, N = {best['N']}, seed "
                f"{best['seed']}: accuracy {best['accuracy']:.3f}, inputs with any error {best['any_error_rate']:.2f}."
            )
    if not ctx.quick:
        ctx.caveat(
            "Scale: our twins are 2 layers wide 64, 1000 steps at most; the thesis's models are 512 wide with 8 "
            "heads, trained at N = 40 only, 25 replicates. Parity twins at N ≥ 32 often fail to learn at this "
            "size; only models with held-out accuracy ≥ 0.95 enter the verdicts. Two horizons are ruled on "
            "separately: the thesis's range (≤ 3.2 × N) and 16 × N; a comparison of two settings both at "
            "chance there is not tested (floor)."
        )
        ctx.caveat(
            "Dyck here is the thesis's simulation task (the stack of Dyck with depth 4 and 2 types, legal brackets "
            "sampled uniformly, the stack scored at every position). Until the rerun of issue 30 it was "
            "next-token prediction of the closing bracket on 4 types of depth 2, and FFL(0.8) was a third task "
            "(docs/deviations.md). The construction of the Dyck task is the log-depth prefix scan, evaluated on "
            f"{sc['exact_samples']} words per length (it is slow on a CPU at 1024 tokens)."
        )


def _mean(values) -> float:
    v = list(values)
    return float(np.mean(v)) if v else float("nan")
