"""What every reproduction shares: its declaration, the directory it owns, and the results file.

An experiment is a function ``run(ctx) -> None`` that trains populations through
:meth:`Context.sweep` (resumable; local pool or Ray), measures, and records everything the
report shows on the context: :meth:`Context.rule` (one row of "thesis vs measured": an effect with
its interval, ruled on by a :class:`~sandbox_lens.interp.experiments.rules.Rule` that states its threshold and
can fail), :meth:`Context.table`,
:meth:`Context.figure`, :meth:`Context.conclude`, :meth:`Context.caveat` and
:meth:`Context.data`. :func:`run_experiment` then writes ``OUT/results.json`` (atomically) and the
report is rendered from that file alone (:mod:`sandbox_lens.interp.experiments.report`).

``OUT/experiment.json`` names the experiment, the scale (full or quick) and the task options the
runs below it were trained with; another experiment, scale or task in the same directory is
refused before anything is touched, so a rerun reuses finished runs and never mixes two
populations.
"""

from __future__ import annotations

import json
import platform
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sandbox_lens.interp.errors import SandboxError
from sandbox_lens.interp.experiments.rules import VERDICTS, Rule, holm_family, rule_on
from sandbox_lens.interp.files import atomic_write, exclusive, write_json
from sandbox_lens.interp.jsonfile import read_json
from sandbox_lens.interp.stats import Estimate

__all__ = [
    "Experiment",
    "Context",
    "ExperimentError",
    "VERDICTS",
    "RESULTS",
    "MARKER",
    "prepare_directory",
    "run_experiment",
    "check_seeds",
    "MIN_SEEDS",
    "mean_se",
]

RESULTS, MARKER, FIGURES, RUNS = "results.json", "experiment.json", "figures", "runs"


class ExperimentError(SandboxError, ValueError):
    """An experiment request that cannot be honoured (unknown name, option, or directory)."""


@dataclass(frozen=True)
class Experiment:
    """A reproduction's declaration: what it shows, where in the thesis, what it takes, how long."""

    name: str
    title: str
    section: str  # the thesis's section / figure / result labels
    claim: str  # the thesis's claim in one sentence
    scale: str  # the default (full) scale in words
    minutes: float  # measured minutes of the full scale on 2 cores
    takes: tuple[str, ...] = ()  # task options: "automaton", "dyck"
    module: str = ""  # where run(ctx) lives (imported only when the experiment runs)
    defaults: dict[str, Any] = field(default_factory=dict)  # default task options
    # the module-like object itself (run, SEEDS, QUICK_SEEDS), for an experiment registered from outside the
    # package (docs/recipes.md); the package's own name their module, imported only when they run
    code: Any = None

    def load(self):
        """The module that runs it: ``run(ctx)``, ``SEEDS`` and ``QUICK_SEEDS``."""
        import importlib

        return self.code if self.code is not None else importlib.import_module(self.module)


@dataclass
class Context:
    """One invocation: where it writes, at what scale, with which seeds, and what it has recorded."""

    experiment: Experiment
    out: Path
    quick: bool
    seeds: list[int]
    backend: str = "local"
    workers: int | None = None
    progress: bool = False
    options: dict[str, Any] = field(default_factory=dict)
    claims: list[dict[str, Any]] = field(default_factory=list)
    tables: list[dict[str, Any]] = field(default_factory=list)
    figures: list[dict[str, str]] = field(default_factory=list)
    conclusions: list[str] = field(default_factory=list)
    caveats: list[str] = field(default_factory=list)
    numbers: dict[str, Any] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    trained_now: int = 0
    runs_total: int = 0
    training_minutes: float = 0.0  # summed over every run, reused or not (one CPU each)

    # -- training -------------------------------------------------------------------------------
    def sweep(
        self,
        name: str,
        task,
        shape,
        config,
        seeds: Sequence[int] | None = None,
        init_spec: Any = None,
        grid: dict[str, list[Any]] | None = None,
    ) -> dict[str, Any]:
        """Train (or reuse) one population under ``OUT/runs/<name>``; returns the sweep summary."""
        from sandbox_lens.interp.train.sweep import run_sweep

        seeds = list(self.seeds if seeds is None else seeds)
        summary = run_sweep(
            task,
            shape,
            config,
            self.out / RUNS / name,
            seeds,
            grid=grid,
            backend=self.backend,
            workers=self.workers,
            progress=self.progress,
            init_spec=init_spec,
            stack="off",  # the published records were trained as separate runs; stacking would change their rounding
        )
        self.trained_now += summary["trained_now"]
        self.runs_total += len(summary["runs"])
        self.training_minutes += sum(r["wall_seconds"] for r in summary["runs"]) / 60
        self.settings[name] = {
            "task": summary["task"],
            "task_name": summary["task_name"],
            "shape": summary["shape"],
            "config": summary["config"],
            "seeds": summary["seeds"],
            "grid": summary["grid"],
        }
        return summary

    def run_dirs(self, name: str, seeds: Sequence[int] | None = None, cell: str = "") -> dict[int, Path]:
        base = self.out / RUNS / name / cell if cell else self.out / RUNS / name
        return {s: base / f"seed_{s}" for s in (self.seeds if seeds is None else seeds)}

    # -- what the report shows ------------------------------------------------------------------
    def rule(
        self,
        claim: str,
        thesis: str,
        rule: Rule,
        estimate: Estimate,
        measured: str,
        *,
        floor: str | None = None,
        p_value: float | None = None,
        family: str | None = None,
        null: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """One row of "thesis vs measured": ``rule`` on ``estimate`` (:func:`~sandbox_lens.interp.experiments.rules.rule_on`).
        ``floor``: why this setting cannot test the claim; ``family``: rows sharing it test one claim and get
        Holm-adjusted p-values; ``null``: the null a maximum was compared with
        (:func:`~sandbox_lens.interp.stats.null_exceedance`)."""
        row = {
            "claim": claim,
            "thesis": thesis,
            "measured": measured,
            "family": family,
            "null": null,
            **rule_on(rule, estimate, floor, p_value),
        }
        self.claims.append(row)
        return row

    def table(self, title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]], note: str = "") -> None:
        self.tables.append({"title": title, "columns": list(columns), "rows": [list(r) for r in rows], "note": note})

    def figure(self, name: str, fig, caption: str) -> None:
        """Save a matplotlib ``Figure`` as ``OUT/figures/<name>.png`` (atomically) and list it."""
        from sandbox_lens.interp.viz import figure_png

        (self.out / FIGURES).mkdir(parents=True, exist_ok=True)
        path = self.out / FIGURES / f"{name}.png"
        atomic_write(path, figure_png(fig))
        self.figures.append({"file": f"{FIGURES}/{name}.png", "caption": caption})

    def conclude(self, text: str) -> None:
        self.conclusions.append(text)

    def caveat(self, text: str) -> None:
        self.caveats.append(text)

    def data(self, key: str, value: Any) -> None:
        self.numbers[key] = value


#: JSON Schema of an experiment directory's marker (which experiment, scale and options it holds).
MARKER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["format", "experiment", "quick", "options"],
    "properties": {
        "format": {"const": "sandbox-lens-experiment"},
        "experiment": {"type": "string"},
        "quick": {"type": "boolean"},
        "options": {"type": "object"},
    },
}


def _marker(experiment: Experiment, quick: bool, options: dict[str, Any]) -> dict[str, Any]:
    return {"format": "sandbox-lens-experiment", "experiment": experiment.name, "quick": quick, "options": options}


def prepare_directory(out: Path, experiment: Experiment, quick: bool, options: dict[str, Any]) -> None:
    """Claim ``out`` for this experiment, or refuse (nothing is written or removed on refusal)."""
    if out.exists() and not out.is_dir():
        raise ExperimentError(f"--out {out} is a file, not a directory")
    mine = _marker(experiment, quick, options)
    marker = out / MARKER
    if marker.is_file():
        try:
            theirs = read_json(marker, MARKER_SCHEMA, error=ExperimentError, what="an experiment's marker")
        except ExperimentError as e:
            raise ExperimentError(f"{e}; use another --out") from None
        if theirs.get("experiment") != experiment.name:
            raise ExperimentError(
                f"{out} holds the runs of experiment {theirs.get('experiment')!r}; "
                f"use another --out for {experiment.name}"
            )
        if theirs.get("quick") != quick:
            held = "a --quick run" if theirs.get("quick") else "a full-scale run"
            raise ExperimentError(f"{out} holds {held} of {experiment.name}; use another --out")
        if theirs.get("options") != options:
            raise ExperimentError(
                f"{out} holds {experiment.name} with task options {theirs.get('options')}, "
                f"not {options}; use another --out"
            )
        return
    if out.is_dir() and any(out.iterdir()):
        raise ExperimentError(f"{out} is not empty and holds no experiment; use another --out")
    out.mkdir(parents=True, exist_ok=True)
    atomic_write(marker, (json.dumps(mine, indent=1) + "\n").encode())


def _families(claims: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Holm over each family of claims (rows with the same ``family``)."""
    out = list(claims)
    for name in {c["family"] for c in claims if c.get("family")}:
        idx = [i for i, c in enumerate(claims) if c.get("family") == name]
        for i, c in zip(idx, holm_family([claims[i] for i in idx])):
            out[i] = c
    for c in out:
        if c["verdict"] not in VERDICTS:
            raise ValueError(f"verdict must be one of {VERDICTS}, got {c['verdict']!r}")
    return out


#: The fewest seeds a full-scale run may take: below it no interval over seeds exists (Student's t needs 2 values,
#: and a verdict's rule 3), so every ruling would be "not tested". An experiment whose default is fewer (its units
#: are automata or lengths, not seeds) may take as few as its default.
MIN_SEEDS = 3


def check_seeds(name: str, seeds: list[int], default: int) -> None:
    """Refuse, before anything is written, a full-scale ``--seeds`` too few for an interval over seeds."""
    fewest = min(MIN_SEEDS, default)
    if len(seeds) < fewest:
        raise ExperimentError(
            f"{name} rules on intervals over seeds: a full-scale run needs at least {fewest} seeds, got "
            f"{len(seeds)} ({', '.join(map(str, seeds))}); --quick runs any"
        )


def run_experiment(
    experiment: Experiment,
    out: str | Path,
    quick: bool = False,
    seeds: Sequence[int] | None = None,
    backend: str = "local",
    workers: int | None = None,
    progress: bool = False,
    options: dict[str, Any] | None = None,
    command: str | None = None,
) -> dict[str, Any]:
    """Run (or finish) one experiment in ``out``; write ``results.json`` and ``report.html``. ``command``: the
    command line recorded in the provenance (default: this process's)."""
    import resource

    import torch

    from sandbox_lens.interp import __version__
    from sandbox_lens.interp.experiments.report import write_report
    from sandbox_lens.interp.provenance import provenance

    out = Path(out)
    options = {**experiment.defaults, **(options or {})}
    unknown = [k for k in options if k not in experiment.takes]
    if unknown:
        raise ExperimentError(
            f"{experiment.name} takes no --{unknown[0]}"
            + (f" (it takes --{', --'.join(experiment.takes)})" if experiment.takes else "")
        )
    module = experiment.load()
    if hasattr(module, "check"):
        module.check(options)  # a bad task option is refused before the directory is touched
    if seeds and not quick:
        check_seeds(experiment.name, list(seeds), len(module.SEEDS))
    prepare_directory(out, experiment, quick, options)
    with exclusive(out):  # a second process on the same --out is refused before it writes anything
        seeds = list(seeds) if seeds else list(module.QUICK_SEEDS if quick else module.SEEDS)
        ctx = Context(experiment, out, quick, seeds, backend, workers, progress, options)

        def cpu() -> float:  # this process and its finished workers
            c = resource.getrusage(resource.RUSAGE_CHILDREN)
            return time.process_time() + c.ru_utime + c.ru_stime

        started, cpu0 = time.time(), cpu()
        module.run(ctx)
        results = {
            "experiment": experiment.name,
            "title": experiment.title,
            "section": experiment.section,
            "thesis_claim": experiment.claim,
            "quick": quick,
            "seeds": seeds,
            "backend": backend,
            "options": options,
            "scale": experiment.scale if not quick else "quick (a test of the pipeline, not of the claim)",
            "minutes": round((time.time() - started) / 60, 2),
            "trained_now": ctx.trained_now,
            "runs": ctx.runs_total,
            "training_cpu_minutes": round(ctx.training_minutes, 2),
            "provenance": {
                **provenance(command),
                "seeds": seeds,
                "cpu_minutes_this_invocation": round((cpu() - cpu0) / 60, 2),
                "training_cpu_minutes_all_runs": round(ctx.training_minutes, 2),
            },
            "settings": ctx.settings,
            "claims": _families(ctx.claims),
            "tables": ctx.tables,
            "figures": ctx.figures,
            "conclusions": ctx.conclusions,
            "caveats": ctx.caveats,
            "data": ctx.numbers,
            "environment": {
                "sandbox_lens": __version__,
                "torch": torch.__version__,
                "python": platform.python_version(),
                "torch_threads_per_run": 1,
            },
        }
        # strict JSON: a number that could not be measured (no learned seed, no pair) is null, not NaN
        results = write_json(out / RESULTS, results)
        write_report(out)
        return results


def mean_se(values: Sequence[float]) -> tuple[float, float]:
    """Mean and standard error (0 for a single value)."""
    import numpy as np

    v = np.asarray(values, dtype=float)
    return float(v.mean()), float(v.std(ddof=1) / np.sqrt(len(v))) if len(v) > 1 else 0.0
