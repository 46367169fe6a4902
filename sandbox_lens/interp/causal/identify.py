"""Which registered algorithm does a model run? Every candidate of :mod:`sandbox_lens.interp.causal.algorithms`
tested by interchange interventions, beside random-init nulls searched exactly the same way.

* **Sites.** Every residual site — ``blocks.0.hook_resid_pre`` and each block's ``resid_mid`` and
  ``resid_post`` — and every component output — each attention layer's, each head's (``attn.hook_z``, one
  head at a time) and each MLP's (:func:`model_sites`) — at every position, swapped whole from the source
  word (one forward per site for all positions at once: :func:`sweep`); on a model whose card names sites for
  a variable (a construction, a twin trained with ``--align`` whose sites reached their target), those named
  subspaces too. One sweep serves every candidate: a full swap does not depend on the variable, only its
  score does. Each null's sweep is remembered for the same pairs, so a population's twins share it.
* **DAS sites** (``das=True``): a variable hidden among others at a site is not moved alone by a whole swap, so
  each variable also gets a DAS subspace at every residual site, fitted in the model and in every null alike,
  and chosen only where it beats the untrained readout (:mod:`sandbox_lens.interp.causal.fitted`).
* **Fit, select, report.** Pairs come in three disjoint splits (:func:`~sandbox_lens.interp.causal.evidence.split_pairs`;
  the first is used only by the DAS sites, so that the splits are those of ``interp align``). Per
  variable and position the site is chosen on the *select* split (the best IIA on changed outputs among
  the sites the algorithm allows; a tie goes to a site the card names), and only the *test* split is reported:
  pooled over positions, with a bootstrap interval over base words. An anchored algorithm (the counter)
  chooses one block for all its variables, also on the select split.
* **A variable passes** when its test IIA reaches :func:`~sandbox_lens.interp.causal.localise.site_bar`
  (0.95 × the model's accuracy, never below chance + :data:`~sandbox_lens.interp.causal.verdict.FLOOR`),
  its lower bound lies :data:`FLOOR` above chance, and above every null's upper bound; with fewer than
  :data:`~sandbox_lens.interp.causal.verdict.MIN_OUTPUTS` changed outputs it is *untestable*. Each **edge**
  (the outputs an intervention reaches through one edge of the algorithm's graph) is held to the same
  rule where it has enough outputs.
* **The graph by intervention** (:mod:`sandbox_lens.interp.causal.paths`): at the sites chosen on all the select
  words, each edge whose record names a child is also tested by a path interchange (the parent set from the source,
  only the child's site carried into the base run), and each variable its parents determine by a joint interchange
  of all of them — on the test split, for the nulls at their own sites too, held to the same rule.
* **An algorithm passes** when all its variables, testable edges and graph tests pass. Its **abstraction score**
  is the IIA of every intervention it predicts — its variables', its path-tested edges' and its joint ones' —
  pooled, with a bootstrap interval over base words, beside the nulls'.
* **Identified**: among the passing algorithms, the one with the most variables (the most specific
  account: every correct model passes a bare state); a tie is "ambiguous", none passing is "none of
  these". The identification's **stability** is the share of resamples of the select and test words that
  give it; below :data:`~sandbox_lens.interp.causal.evidence.STABLE` it is "inconclusive".
* **Partitions**: each candidate's test interventions are also counted by cell — the prefix's length, the
  answer after the swapped position, a group's prefix parity — to show which inputs it explains.

:func:`sandbox_lens.interp.causal.over_training.over_training` repeats it at every model a training run kept.
"""

from __future__ import annotations

import hashlib
import time
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from sandbox_lens.interp.budget import require
from sandbox_lens.interp.causal.algorithms import Algorithm, Variable, resolve
from sandbox_lens.interp.causal.choice import graph_counts, model_numbers
from sandbox_lens.interp.causal.evidence import BOOTSTRAP, INNER, RESAMPLES, STABLE, split_pairs
from sandbox_lens.interp.causal.fitted import STEPS as DAS_STEPS
from sandbox_lens.interp.causal.fitted import das_hooks, das_table, fitted_sites, is_fitted, readout_sites
from sandbox_lens.interp.causal.highlevel import HighLevel, high_level_of
from sandbox_lens.interp.causal.interchange import construction_sites, pair_length, word_pairs
from sandbox_lens.interp.causal.localise import site_bar
from sandbox_lens.interp.causal.sweep import (
    MAX_ROWS,
    component_sites,
    model_sites,
    residual_sites,
    sweep,
    swept,
)
from sandbox_lens.interp.causal.verdict import FLOOR, MIN_OUTPUTS
from sandbox_lens.interp.model.run import forward_seconds
from sandbox_lens.interp.progress import bar as progress_bar
from sandbox_lens.interp.streams import Stream, rng
from sandbox_lens.interp.tasks.kinds import task_kind

__all__ = ["identify", "candidates_of", "sweep", "residual_sites", "component_sites", "model_sites", "MAX_ROWS"]


class _Truth:
    """What the high-level model says for one variable on one split: per position swapped ``[P, n, T]``, the
    counterfactual labels, the outputs scored and those the interchange changes, and each output's offset from
    the swapped position."""

    def __init__(self, high: HighLevel, variable: Variable, base: np.ndarray, source: np.ndarray) -> None:
        n, T = base.shape
        plain, answered = high.answers(base)
        self.labels = np.empty((T, n, T), dtype=np.int64)
        self.changed = np.zeros((T, n, T), dtype=bool)
        for p in range(T):
            labels, scored = high.counterfactual(base, source, p, variable.name)
            self.labels[p] = labels
            self.changed[p] = scored & answered & (labels != plain)
        self.offset = np.arange(T)[None, :] - np.arange(T)[:, None]  # [P, T]: t − p

    def counts(self, predictions: np.ndarray, edges: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
        """(hits, outputs) ``[1 + edges, site, P, n]``: changed outputs that follow the high-level model, over all
        outputs (row 0) and over those reached through each edge."""
        hit = (predictions == self.labels[None]) & self.changed[None]  # [S, P, n, T]
        masks = [np.ones_like(self.offset, dtype=bool)] + [np.vectorize(e.covers)(self.offset) for e in edges]
        hits = np.stack([(hit & m[None, :, None, :]).sum(-1) for m in masks])
        outputs = np.stack([np.broadcast_to((self.changed & m[:, None, :]).sum(-1), hit.shape[:-1]) for m in masks])
        return hits, outputs


#: A null's graph-test counts per test words: a population's twins share their nulls and pairs, so each null's
#: path and joint interchanges at the same sites run once.
_NULL_GRAPHS: weakref.WeakKeyDictionary[Any, dict[Any, dict[Any, Any]]] = weakref.WeakKeyDictionary()


def _null_graph_memo(model: Any, test: tuple[np.ndarray, np.ndarray], das_steps: int) -> dict[Any, Any]:
    """The null's memo for these test words and DAS fits (a DAS site's label does not name its steps)."""
    key = hashlib.sha256(test[0].tobytes() + test[1].tobytes() + str(test[0].shape).encode()).hexdigest()
    return _NULL_GRAPHS.setdefault(model, {}).setdefault((key, das_steps), {})


def _high_levels(model: Any, modes: set[str]) -> dict[str, HighLevel]:
    """The task's high-level model in each reading (with the group coordinates where the task has them)."""
    return {mode: high_level_of(model, mode) for mode in sorted(modes)}


def _named(model: Any, variable: str) -> list[tuple[str, str, Any]]:
    """(label, hook, basis) of each site ``model``'s card names as carrying ``variable``."""
    return [
        (site.name, site.hook, site.basis)
        for entry, site in construction_sites(model, variable)
        if entry["role"] == "carries"
    ]


def candidates_of(model: Any, candidates: str | Sequence[str] = "all") -> tuple[list[Algorithm], dict[str, str]]:
    """The candidate algorithms ``candidates`` names for ``model``'s task at the length it is aligned at, and the
    ones ``"all"`` skips with why (:func:`~sandbox_lens.interp.causal.algorithms.resolve`: one-line refusals)."""

    high_level_of(model)  # refuses a model without a residual stream or a task without a high-level model
    kind = task_kind(model.card.task)
    return resolve(candidates, kind.name, kind.source(model.card.task), pair_length(model))


def _require_sweeps(model: Any, models: int, sites: int, T: int, pairs: int, fits: int = 0, steps: int = 0) -> None:
    """Refuse, before any work, sweeps whose estimated time or memory pass the budget (one line naming the options
    that lower them): per model and split, a full swap at every site and position of every pair (rows of 64
    pairs, each a forward pass timed on this machine), and their answers kept ``[site, position, pair, output]``
    (int64) for every model and split; with DAS, ``fits`` subspaces per model of ``steps`` steps (a forward and a
    backward pass of 64 pairs each, counted as three forwards), each swept as one more site, and the readout
    baseline at each of their hooks."""

    per_batch = forward_seconds(model, 64, T + len(model.card.io.prefix))
    sites += fits + (len(das_hooks(model.cfg.n_layers)) if fits else 0)
    require(
        f"sweeping {sites} sites × {T} positions × {pairs} pairs per split on {models} model(s)"
        + (f" and fitting {fits} DAS subspaces of {steps} steps on each" if fits else ""),
        seconds=models * (2 * sites * T * -(-pairs // 64) + 3 * fits * steps) * per_batch,
        memory=models * 2 * sites * T * pairs * T * 8.0,
        lower="--pairs" + (" or --das-steps" if fits else ""),
    )


def _extra_sites(
    model: Any,
    i: int,
    variables: Sequence[Variable],
    highs: dict[str, HighLevel],
    base_high: HighLevel,
    fit: tuple[np.ndarray, np.ndarray],
    das_steps: int,
    seed: int,
    tick: Any,
) -> dict[Variable, list[tuple[str, str, Any]]]:
    """Per variable, the sites searched beside the whole ones, as (label, hook, basis): those the card of the model
    (``i`` = 0; not a null's) names, then with ``das_steps`` a DAS subspace at every residual site and the readout
    baseline there (:mod:`sandbox_lens.interp.causal.fitted`)."""
    extra = {v: _named(model, v.name) if i == 0 else [] for v in variables}
    if das_steps:
        hooks = das_hooks(model.cfg.n_layers)
        fitted = fitted_sites(model, variables, highs, fit, hooks, das_steps, seed, remember=i > 0, tick=tick)
        readout = readout_sites(model, base_high, hooks)
        extra = {v: extra[v] + fitted[v] + readout for v in variables}
    return extra


def identify(
    model: Any,
    candidates: str | Sequence[str] = "all",
    nulls: Sequence[Any] = (),
    pairs: int = 128,
    seed: int = 0,
    progress: bool = False,
    components: bool = True,
    das: bool = False,
    das_steps: int = DAS_STEPS,
) -> dict[str, Any]:
    """Test each candidate algorithm (``"all"`` the task can have, or names) on ``model`` beside the ``nulls``
    (random-init models of its shape, swept the same way); see the module docstring. ``pairs`` per split;
    ``components``: search the heads' and MLPs' outputs as well as the residual stream; ``das``: also a DAS
    subspace per variable at every residual site, fitted on the fit split in the model and in each null
    (:mod:`sandbox_lens.interp.causal.fitted`), ``das_steps`` optimiser steps each."""

    t0 = time.perf_counter()
    card = model.card
    kind = task_kind(card.task)
    base_high = high_level_of(model)
    splits = split_pairs(*word_pairs(model, 3 * pairs, seed=seed, high=base_high))
    T = int(splits.test[0].shape[1])
    algorithms, not_applicable = candidates_of(model, candidates)
    source_of = kind.source(card.task)
    variables_of = {a.name: a.variables(source_of, T) for a in algorithms}
    variables = list(dict.fromkeys(v for vs in variables_of.values() for v in vs))  # a variable's record is its key
    highs = _high_levels(model, {v.mode for v in variables})
    hooks = model_sites(model, components)
    truths = {
        split: {v: _Truth(highs[v.mode], v, *getattr(splits, split)) for v in variables} for split in ("select", "test")
    }
    models = [model, *nulls]
    fits = len(variables) * len(das_hooks(model.cfg.n_layers)) if das else 0
    _require_sweeps(model, len(models), len(hooks), T, len(splits.test[0]), fits, das_steps)
    answers = {split: base_high.answers(getattr(splits, split)[0]) for split in ("select", "test")}
    partitions = _partitions(base_high, splits.test[0])
    bar = progress_bar(total=len(models) * 2, disable=not progress, desc="algorithm sweep", unit="sweep")
    das_bar = progress_bar(
        total=len(models) * fits * das_steps, disable=not (progress and das), desc="DAS sites", unit="step"
    )
    data = []
    for i, m in enumerate(models):
        extra = _extra_sites(
            m, i, variables, highs, base_high, splits.fit, das_steps if das else 0, seed, das_bar.update
        )
        sites, rows, at = [(h, None) for h in hooks], {}, {}
        for v in variables:
            rows[v] = list(range(len(hooks)))
            for label, h, b in extra[v]:  # a site two variables share (the readout) is swept once
                if label not in at:
                    at[label] = len(sites)
                    sites.append((h, b))
                rows[v].append(at[label])
        per_split = {}
        for split in ("select", "test"):
            base, source = getattr(splits, split)
            predictions, own = swept(m, sites, base, source, base_high.readout, remember=i > 0)
            plain, answered = answers[split]
            per_split[split] = {
                "counts": {v: truths[split][v].counts(predictions[rows[v]], v.edges) for v in variables},
                "ceiling": float((own == plain)[answered].mean()),
            }
            bar.update(1)
        data.append(
            {
                "labels": {v: hooks + [s[0] for s in extra[v]] for v in variables},
                "bases": {label: (hook, basis) for v in extra.values() for label, hook, basis in v},
                "variables_of": variables_of,
                "layers": m.cfg.n_layers,
                "partitions": partitions,
                **per_split,
            }
        )
    bar.close()
    das_bar.close()
    chance = 1.0 / (len(base_high.readout) if base_high.readout is not None else int(model.cfg.d_vocab_out))
    ceiling = data[0]["test"]["ceiling"]
    words = {split: len(getattr(splits, split)[0]) for split in ("select", "test")}
    for i, (m, entry) in enumerate(zip(models, data)):
        memo = None if i == 0 else _null_graph_memo(m, splits.test, das_steps if das else 0)
        entry["graph"] = graph_counts(m, entry, algorithms, hooks, highs, splits.test, memo)

    def judge(index: dict[str, np.ndarray] | None, inner: int) -> dict[str, Any]:
        return _judge(algorithms, data, hooks, chance, ceiling, index, inner, seed)

    full = judge(None, BOOTSTRAP)
    draws = rng(seed, Stream.CAUSAL_BOOTSTRAP, step=2)
    same = 0
    for _ in range(RESAMPLES):
        index = {split: draws.integers(0, n, size=n) for split, n in words.items()}
        same += judge(index, INNER)["identified"] == full["identified"]
    share = same / RESAMPLES
    identified = full["identified"] if share >= STABLE else "inconclusive"
    return {
        "task_kind": kind.name,
        "pairs": {**splits.sizes(), "length": T},
        "seed": seed,
        "nulls": len(nulls),
        "chance": chance,
        "ceiling": ceiling,
        "sites": hooks,
        "identified": identified,
        "identified_on_all_pairs": full["identified"],
        "stability": share,
        "verdict": _sentence(identified, full, share),
        "candidates": full["candidates"],
        "not_applicable": not_applicable,
        **(
            {"das": {"steps": das_steps, "hooks": das_hooks(model.cfg.n_layers), "sites": das_table(data, variables)}}
            if das
            else {}
        ),
        "seconds": time.perf_counter() - t0,
    }


def _partitions(high: HighLevel, base: np.ndarray) -> dict[str, tuple[np.ndarray, list[str]]]:
    """Ways to split the test interventions (swapped position p × base word) to see which inputs a candidate
    explains: by the prefix's length (up to half the word or longer), by the task's answer after p, and for a
    group with a sign by the prefix's parity. Each: (labels ``[P, n]``, cell titles)."""
    n, T = base.shape
    half = (T + 1) // 2
    band = np.broadcast_to((np.arange(T) >= half)[:, None], (T, n)).astype(np.int64)
    out = {"prefix length": (band, [f"≤ {half}", f"> {half}"])}
    answers, _ = high.answers(base)
    classes = sorted({int(x) for x in np.unique(answers)})
    out["answer after p"] = (np.searchsorted(classes, answers.T), [str(c) for c in classes])
    family = next((f for f in getattr(high, "families", []) if "sign" in getattr(f, "names", ())), None)
    if family is not None:
        sign = family.values(base, "sign")[0]
        out["prefix parity"] = (sign.T, ["even", "odd"])
    return out


#: A null's number where it could not run an interchange (no site chosen): nothing to compare with.
_NONE: dict[str, Any] = {"iia": None, "interval": None, "outputs": 0}


def _passes(number: dict[str, Any], bar: float, chance: float, null_upper: float | None) -> str:
    """ "passes", "fails" or "untestable" (fewer than MIN_OUTPUTS changed outputs) for one variable or edge."""
    if number["outputs"] < MIN_OUTPUTS or number["iia"] is None:
        return "untestable"
    lower = number["interval"][0] if number["interval"] else number["iia"]
    ok = number["iia"] >= bar and lower >= chance + FLOOR and (null_upper is None or lower > null_upper)
    return "passes" if ok else "fails"


def _judge(
    algorithms: Sequence[Algorithm],
    data: list[dict[str, Any]],
    hooks: Sequence[str],
    chance: float,
    ceiling: float,
    index: dict[str, np.ndarray] | None,
    inner: int,
    seed: int,
) -> dict[str, Any]:
    """Every candidate's numbers and status on (a resample of) the words, and the identification."""
    bar = site_bar(ceiling, chance)
    rows = []
    for a in algorithms:
        numbers = [model_numbers(a, entry, hooks, index, inner, seed, i == 0) for i, entry in enumerate(data)]
        own, nulls = numbers[0], numbers[1:]

        def upper(get: Any) -> float | None:
            ups = [(get(n)["interval"] or (None, get(n)["iia"]))[1] for n in nulls if get(n)["iia"] is not None]
            return max(ups) if ups else (0.0 if nulls else None)

        variables = []
        for v in data[0]["variables_of"][a.name]:
            r = own["variables"][v]
            null_up = upper(lambda n, k=v: n["variables"][k])
            edges = []
            for j, e in enumerate(v.edges):
                eu = upper(lambda n, k=v, j=j: n["variables"][k]["edges"][j])
                edge = {
                    "edge": e.title,
                    **r["edges"][j],
                    "null_upper": eu,
                    "status": _passes(r["edges"][j], bar, chance, eu),
                }
                if j in r["paths"]:
                    pu = upper(lambda n, k=v, j=j: n["variables"][k]["paths"].get(j) or _NONE)
                    edge["path"] = {
                        **r["paths"][j],
                        "null_upper": pu,
                        "status": _passes(r["paths"][j], bar, chance, pu),
                    }
                edges.append(edge)
            joint = None
            if r["joint"] is not None:
                ju = upper(lambda n, k=v: n["variables"][k]["joint"] or _NONE)
                joint = {**r["joint"], "null_upper": ju, "status": _passes(r["joint"], bar, chance, ju)}
            variables.append(
                {
                    "variable": v.key,
                    "iia": r["iia"],
                    "interval": r["interval"],
                    "outputs": r["outputs"],
                    "null_upper": null_up,
                    "status": _passes(r, bar, chance, null_up),
                    "sites": r["sites"],
                    "das": any(is_fitted(x) for x in r["sites"].values()),
                    "edges": edges,
                    "joint": joint,
                }
            )
        tested = [e for v in variables for e in v["edges"]] + [
            e["path"] for v in variables for e in v["edges"] if "path" in e
        ]
        tested += [v["joint"] for v in variables if v["joint"] is not None]
        statuses = [v["status"] for v in variables] + [e["status"] for e in tested if e["status"] != "untestable"]
        status = "fails" if "fails" in statuses else "untestable" if "untestable" in statuses else "passes"
        null_scores = [n["score"]["iia"] for n in nulls if n["score"]["iia"] is not None]
        rows.append(
            {
                "algorithm": a.name,
                "title": a.title,
                "summary": a.summary,
                "reference": a.reference,
                "construction": a.construction,
                "status": status,
                "anchor_block": own["anchor"],
                "score": own["score"],
                "partitions": own.get("partitions", {}),
                "null_score": max(null_scores) if null_scores else None,
                "variables": variables,
            }
        )
    order = {"passes": 0, "untestable": 1, "fails": 2}
    rows.sort(
        key=lambda r: (
            order[r["status"]],
            -len(r["variables"]) if r["status"] == "passes" else 0,
            -(r["score"]["iia"] or 0.0),
        )
    )
    passing = [r for r in rows if r["status"] == "passes"]
    if not passing:
        identified = "none"
    else:
        most = max(len(r["variables"]) for r in passing)
        top = [r["algorithm"] for r in passing if len(r["variables"]) == most]
        identified = top[0] if len(top) == 1 else "ambiguous: " + ", ".join(top)
    return {"identified": identified, "candidates": rows}


def _failed_graph_tests(row: dict[str, Any]) -> list[str]:
    """The graph tests of a candidate that fail: each edge (through the outputs, or by path interchange) and each
    joint interchange of a variable's parents, named as the report names them."""
    out = []
    for v in row["variables"]:
        for e in v.get("edges", ()):
            if e.get("status") == "fails":
                out.append(str(e.get("edge", "an edge")))
            elif (e.get("path") or {}).get("status") == "fails":
                out.append(f"{e.get('edge', 'an edge')} by path interchange")
        if (v.get("joint") or {}).get("status") == "fails":
            out.append(f"{v['variable']} from all its parents at once")
    return out


def _sentence(identified: str, full: dict[str, Any], share: float) -> str:
    """The verdict in words."""
    if identified == "inconclusive":
        said = "none of these" if full["identified"] == "none" else full["identified"]
        return f"inconclusive: {said} on all the pairs, but only {share:.0%} of resamples agree (needs {STABLE:.0%})"
    if identified == "none":
        nodes_only = [
            r for r in full["candidates"] if r["variables"] and all(v["status"] == "passes" for v in r["variables"])
        ]
        if nodes_only:
            said = "; ".join(
                f"{r['algorithm']} ({', '.join(_failed_graph_tests(r)) or 'no test'} fails)" for r in nodes_only
            )
            return (
                f"none of these: {said} — every variable passes at its sites, but not every test of the graph "
                "between them: the variables are there, the graph the algorithm computes them by is not"
            )
        return "none of these: no candidate's variables all pass at any site"
    if identified.startswith("ambiguous"):
        return f"{identified} pass with as many variables each ({share:.0%} of resamples agree)"
    row = next(r for r in full["candidates"] if r["algorithm"] == identified)
    return (
        f"runs {row['title']}: every variable and testable edge passes, abstraction score "
        f"{row['score']['iia']:.3f} ({share:.0%} of resamples agree)"
    )
