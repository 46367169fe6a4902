"""One causal alignment of a model to its task's high-level model, variable by variable:

* **where** — a scan of full interchanges over every (residual hook, position), with the first site per
  position that reaches :data:`~sandbox_lens.interp.causal.verdict.IMPLEMENTS` × the model's own accuracy;
* **how many dimensions** — DAS (linear, orthogonal) with one subspace shared by every position, at every
  residual hook with the largest k, then over k at the best hook and boundless DAS there (k learned), each beside a random subspace of the
  same k and the random-init null's DAS at the same hook and k; held-out IIA pooled over positions, with
  Wilson intervals;
* **probes against interventions** — at every residual hook, a linear probe's held-out accuracy (is the
  variable *readable* there?) beside the IIA of swapping the probe's own directions (is it *used* there?);
* **the proof's own sites** — for a construction (the model, or one compared with it): the IIA at the
  sites its card names (``carries``: should reach 1; ``inert``: a readable copy nothing reads, should
  change nothing);
* **verdicts** by stated rules (:mod:`sandbox_lens.interp.causal.verdict`), including the case DAS cannot settle: a
  construction whose named site carries a variable that DAS does not find at the same hook (a staircase
  MLP after a one-dimensional count defeats gradient search) — then a twin's negative DAS result is
  reported as no evidence of absence.

Every task kind with a ``high_level`` in its registry entry is aligned (automata: the state, read in
``parallel`` or ``recurrent``; Dyck: ``top`` and ``depth``; the flip-flop language: ``bit``); other kinds
and the LSTM are refused in one line. :func:`align` returns what ``align.json`` holds.
"""

from __future__ import annotations

import hashlib
import time
import warnings
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from sandbox_lens.interp.budget import require
from sandbox_lens.interp.causal.das import boundless_das, principal_angles
from sandbox_lens.interp.causal.defaults import DAS_STEPS
from sandbox_lens.interp.causal.evidence import (
    PairSplits,
    readout_basis,
    site_counts,
    split_pairs,
    stability,
    summaries,
    summarised,
    summary,
)
from sandbox_lens.interp.causal.highlevel import HighLevel, high_level_of
from sandbox_lens.interp.causal.interchange import (
    Site,
    answer,
    construction_sites,
    own_predictions,
    pooled_iia,
    source_activations,
    word_pairs,
)
from sandbox_lens.interp.causal.localise import (
    null_best,
    residual_hooks,
    scan_splits,
    site_bar,
    swap_numbers,
    swap_verdict,
)
from sandbox_lens.interp.causal.search import Fit, chosen, das_search, fit_json
from sandbox_lens.interp.causal.sweep import residual_sites
from sandbox_lens.interp.causal.verdict import block_order, das_verdict, outcome, with_stability
from sandbox_lens.interp.errors import SandboxError
from sandbox_lens.interp.model.device import on, to_numpy
from sandbox_lens.interp.model.run import exact_precision, forward_seconds, run_with_hooks
from sandbox_lens.interp.stats import wilson_interval
from sandbox_lens.interp.tasks.kinds import task_from_dict
from sandbox_lens.interp.train import ModelShape, random_init
from sandbox_lens.interp.train.align import off_circuit_hooks, resample_hooks
from sandbox_lens.probes.linear import probe_directions_cv

__all__ = [
    "align",
    "align_seconds",
    "high_level_of",
    "null_of",
    "nulls_of",
    "named_sites",
    "off_circuit_ablation",
    "probe_sites",
    "NULLS",
]

#: Random-init models of the twin's shape searched exactly like it (the null).
NULLS = 5


def null_of(model: Any, seed: int = 0) -> Any:
    """A random-init twin of ``model``'s task and shape (layers, width, heads, MLP width, norm): the null."""

    cfg = model.cfg
    shape = ModelShape(
        n_layers=cfg.n_layers,
        d_model=cfg.d_model,
        n_heads=cfg.n_heads,
        d_head=cfg.d_head,
        d_mlp=cfg.d_mlp,
        normalization="LN" if cfg.normalization_type else "none",
    )
    task = dict(model.card.task)
    # a construction's card names no length: its words are as long as the model's (a next-token task's length
    # counts one symbol more than its words)
    task.setdefault("length", int(model.card.max_length) + (1 if model.card.task_kind.next_token else 0))
    return random_init(task_from_dict(task), shape, seed)


def nulls_of(model: Any, seed: int = 0, n: int = NULLS) -> list[Any]:
    """``n`` random-init twins of ``model``: the nulls a causal verdict is held against.

    Args:
        model: a model with a ``card`` (its shape and task are copied).
        seed: the nulls' initialisation seeds are ``seed·n … seed·n + n − 1`` (the first is :func:`null_of`'s
            for seed 0).
        n: how many."""
    return [null_of(model, seed * n + i) for i in range(n)]


def align(
    model: Any,
    *,
    constructions: dict[str, Any] | None = None,
    null: Any = None,
    mode: str = "parallel",
    pairs: int = 128,
    ks: Sequence[int] = (1, 2, 4, 8),
    das_steps: int = DAS_STEPS,
    seed: int = 0,
    variables: Sequence[str] | None = None,
    progress: bool = False,
) -> dict[str, Any]:
    """The causal section for ``model`` (see the module docstring): per variable of its task's high-level model,
    full swaps and DAS on three disjoint pair splits, with verdicts beside the nulls and the readout baseline.

    Args:
        model: a model built, trained or adopted by sandbox-lens (it carries a ``card``).
        constructions: name → construction model of the same task, aligned the same way for comparison.
        null: a random-init model of ``model``'s shape or a list of them (``nulls_of``), each searched exactly
            like ``model``; None aligns none.
        mode: the high-level model's reading (``"parallel"`` or ``"recurrent"`` for automata).
        pairs: base/source pairs per split (fit, select, test); at least 16.
        ks: the DAS subspace dimensions tried (chosen on the select split).
        das_steps: optimiser steps of each DAS fit.
        seed: seed of the pairs and fits.
        variables: the variables to align (default: all of the task's).
        progress: show progress bars.

    Returns:
        ``align.json``'s content: per variable the sites, DAS by k, the nulls' numbers and the verdicts."""
    t0 = time.perf_counter()
    high = high_level_of(model, mode)
    names = [high.variable(v) for v in (variables or high.variables)]  # an unknown variable fails here
    splits = split_pairs(*word_pairs(model, 3 * pairs, seed=seed, high=high))
    nulls = [] if null is None else list(null) if isinstance(null, (list, tuple)) else [null]
    wide = sorted(k for k in set(ks) if k > model.cfg.d_model)
    ks = sorted(k for k in set(ks) if 1 <= k <= model.cfg.d_model)
    if not ks:
        raise SandboxError(f"DAS dimensions {list(wide)} all exceed the residual width {model.cfg.d_model}")
    if wide:
        warnings.warn(
            f"DAS dimensions {wide} exceed the residual width {model.cfg.d_model}; searched {ks} only", stacklevel=2
        )
    _require_time(model, splits, len(names), 1 + len(nulls) + len(constructions or {}), len(ks), das_steps)
    out: dict[str, Any] = {
        "task_kind": model.card.task_kind.name,
        "high_level_model": mode,
        "pairs": {**splits.sizes(), "length": int(splits.test[0].shape[1])},
        "seed": seed,
        "das_steps": das_steps,
        "nulls": len(nulls),
        "chance": _chance(model, high),
        "variables": {},
    }
    for variable in names:
        out["variables"][variable] = _variable(
            model, high, splits, nulls, constructions or {}, ks, das_steps, seed, variable, progress
        )
    imposed = model.card.options.get("alignment")
    if imposed:
        out["imposed"] = {
            "construction": imposed["construction"],
            "circuit": imposed["circuit"],
            **off_circuit_ablation(model, high, *splits.test),
        }
    out["seconds"] = time.perf_counter() - t0
    return out


def align_seconds(model: Any, pairs: int, length: int, variables: int, models: int, ks: int, das_steps: int) -> float:
    """Estimated seconds of :func:`align` on ``model``: per variable and per model searched (the twin, each null,
    each construction), full swaps at every residual hook and position on two splits of ``pairs``, and DAS's
    fits (every hook at the widest k, then each other of the ``ks`` dimensions) of ``das_steps`` steps of 64
    pairs, a step costing about three forward passes. The forward pass is timed on this machine
    (:func:`~sandbox_lens.interp.model.run.forward_seconds`); measured on a C3 twin, 96 s estimated for 101 s."""

    hooks = len(residual_sites(model.cfg.n_layers))  # each residual hook once, as the swaps and DAS search them
    per_batch = forward_seconds(model, 64, length + len(model.card.io.prefix))
    swaps = hooks * length * 2 * -(-pairs // 64) * 2 * per_batch
    das = (hooks + ks - 1) * das_steps * 3 * per_batch
    return variables * models * (swaps + das)


def _require_time(model: Any, splits: PairSplits, variables: int, models: int, ks: int, das_steps: int) -> None:
    """Refuse, before any work, an alignment whose :func:`align_seconds` passes the budget (one line naming the
    options that lower it)."""

    pairs = max(len(splits.select[0]), len(splits.test[0]))
    require(
        f"aligning {variables} variable(s) on {models} model(s) ({das_steps} DAS steps, {pairs} pairs per split)",
        seconds=align_seconds(model, pairs, int(splits.test[0].shape[1]), variables, models, ks, das_steps),
        lower="--das-steps, --pairs, --k or --variable",
    )


def _variable(
    model: Any,
    high: HighLevel,
    splits: PairSplits,
    nulls: Sequence[Any],
    constructions: dict[str, Any],
    ks: Sequence[int],
    steps: int,
    seed: int,
    variable: str,
    progress: bool,
) -> dict[str, Any]:
    """Everything :func:`align` reports on one variable (the model, its nulls, each construction, the verdicts)."""
    read_out = variable in high.read_out
    trivial = _trivial_from(model) if read_out else None
    # blocks.<l>.hook_resid_pre is blocks.<l-1>.hook_resid_post: searched once
    hooks = [
        h
        for h in residual_hooks(model.cfg.n_layers)
        if (trivial is None or block_order(h) < trivial)
        and not (h.endswith("resid_pre") and h != "blocks.0.hook_resid_pre")
    ]
    chance = _chance(model, high)
    v: dict[str, Any] = {"read_out": read_out, "das_hooks": hooks}
    m = _analysed(model, high, splits, progress, _title(model), variable)
    fits = das_search(model, high, splits, hooks, ks, steps, seed, variable, progress) if hooks else []
    unembedding = readout_basis(model, high)  # the same basis at every hook: computed once
    readout = {h: site_counts(model, high, Site(h, 0, unembedding), *splits.test, variable) for h in hooks}
    m["das"] = _das_json(model, high, splits, fits, readout, int(unembedding.shape[1]), steps, seed, variable)
    v["model"] = m
    null_scans, null_fits = [], []
    for i, other in enumerate(nulls):
        scanned, searched = _null_searched(
            other, high, splits, hooks, ks, steps, seed, variable, progress, f"DAS, null {i + 1}/{len(nulls)}"
        )
        null_scans.append(dict(scanned))
        null_fits.append(searched)
    if nulls:
        v["null"] = {
            **{k: x for k, x in null_scans[0].items() if k != "_raw"},
            "best": null_best(null_scans),
            "das": _null_das(null_fits, seed),
        }
    v["constructions"] = {}
    for name, other in constructions.items():
        c = _analysed(other, high, splits, progress, name, variable)
        # the construction's own sites where the model's DAS searched: there DAS must find what they carry
        carries = sorted({s["hook"] for s in c["named_sites"] if s["role"] == "carries" and s["hook"] in hooks})
        c_fits = (
            das_search(other, high, splits, carries, ks, steps, seed, variable, progress, f"DAS, {name}")
            if carries
            else []
        )
        c["das"] = {"hooks": carries, "chosen": fit_json(chosen(c_fits), seed) if c_fits else None}
        c["verdict"] = swap_verdict(m["_raw"], [n["_raw"] for n in null_scans], c, chance, variable, trivial, seed)
        c["das_verdict"] = _das_decision(
            fits,
            null_fits,
            readout,
            chance,
            m["ceiling"],
            variable,
            seed,
            named=[x for x in c["named_sites"] if x["hook"] in hooks],
            construction=c["das"]["chosen"]["test"] if c_fits else {"iia": None},
        )
        c.pop("_raw")
        v["constructions"][name] = c
    if not constructions:
        v["das_verdict"] = _das_decision(
            fits,
            null_fits,
            readout,
            chance,
            m["ceiling"],
            variable,
            seed,
            named=[x for x in m["named_sites"] if x["hook"] in hooks],
        )
    for r in [m, *null_scans]:
        r.pop("_raw", None)
    return v


#: Each null's scan and DAS search, per (variable, splits, hooks, ks, steps, seed): a population's twins share
#: their nulls (one shape, one task, the same pairs), which are then searched once.
_NULL_SEARCHES: weakref.WeakKeyDictionary[Any, dict] = weakref.WeakKeyDictionary()


def _null_searched(
    null: Any,
    high: HighLevel,
    splits: PairSplits,
    hooks: Sequence[str],
    ks: Sequence[int],
    steps: int,
    seed: int,
    variable: str,
    progress: bool,
    desc: str,
) -> tuple[dict, list[Fit]]:
    """A null's full-swap scan and DAS search, exactly as the model's (remembered for the same null and pairs)."""
    words = hashlib.sha256(b"".join(a.tobytes() for part in (splits.fit, splits.select, splits.test) for a in part))
    key = (high.mode, variable, tuple(hooks), tuple(ks), steps, seed, words.hexdigest())
    memo = _NULL_SEARCHES.setdefault(null, {})
    if key not in memo:
        scanned = _analysed(null, high, splits, progress, "random init (null)", variable, probes=False, named=False)
        memo[key] = (
            scanned,
            das_search(null, high, splits, hooks, ks, steps, seed, variable, progress, desc) if hooks else [],
        )
    return memo[key]


def _das_decision(
    fits: Sequence[Fit],
    null_fits: Sequence[Sequence[Fit]],
    readout: dict[str, Any],
    chance: float,
    ceiling: float | None,
    variable: str,
    seed: int,
    named: Sequence[dict] = (),
    construction: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The DAS verdict (:func:`~sandbox_lens.interp.causal.verdict.das_verdict`) on the test split, with its
    stability: the share of resamples of the select and test pairs (the choice redone on each) that give it."""
    if not fits:
        return das_verdict({}, [], None, chance=chance, ceiling=ceiling, variable=variable, readout_only=True)
    groups = {
        "select": {"model": [f.select for f in fits], "nulls": [[f.select for f in n] for n in null_fits]},
        "test": {
            "model": [f.test for f in fits],
            "nulls": [[f.test for f in n] for n in null_fits],
            "readout": readout,
        },
    }
    own = {f"{f.hook}/{f.k}": f for f in fits}

    def rule(s: Mapping[str, Any]) -> dict[str, Any]:
        pick = chosen(fits, [r["iia"] for r in s["select"]["model"]])
        i = list(own).index(f"{pick.hook}/{pick.k}")
        model = {**s["test"]["model"][i], "hook": pick.hook, "k": pick.k, "live_fraction": pick.live_fraction}
        null_tests = []
        for n, (sel, test) in enumerate(zip(s["select"]["nulls"], s["test"]["nulls"])):
            if null_fits[n]:
                j = null_fits[n].index(chosen(null_fits[n], [r["iia"] for r in sel]))
                null_tests.append(test[j])
        return das_verdict(
            model,
            null_tests,
            s["test"]["readout"][pick.hook],
            chance=chance,
            ceiling=ceiling,
            variable=variable,
            construction=construction,
            named=named,
        )

    full = rule({name: summaries(g, seed, name == "test") for name, g in groups.items()})
    return with_stability(full, stability(groups, lambda s: outcome(rule(s)), seed))


def _das_json(
    model: Any,
    high: HighLevel,
    splits: PairSplits,
    fits: Sequence[Fit],
    readout: dict[str, Any],
    readout_k: int,
    steps: int,
    seed: int,
    variable: str,
) -> dict[str, Any]:
    """The model's DAS search as align.json holds it: by hook at the largest k, by k at the chosen hook (select
    IIA), the chosen subspace's test numbers, the readout baseline per hook and boundless DAS there."""
    if not fits:
        return {
            "shared_over_positions": True,
            "k_max": None,
            "hook": None,
            "by_hook": [],
            "k": [],
            "chosen": None,
            "readout": [],
            "boundless": None,
        }
    k_max = max(f.k for f in fits)
    pick = chosen(fits)
    angles = _angles_to_named(model, pick, variable)
    return {
        "shared_over_positions": True,
        "k_max": k_max,
        "hook": pick.hook,
        "by_hook": [fit_json(f, seed) for f in fits if f.k == k_max],
        "k": sorted((fit_json(f, seed) for f in fits if f.hook == pick.hook), key=lambda r: r["k"]),
        "chosen": {**fit_json(pick, seed), "angles_to_named": angles},
        "readout": [{"hook": h, "k": readout_k, **summary(c, seed)} for h, c in readout.items()],
        "boundless": _boundless_at(model, high, pick.hook, splits, steps, seed, variable),
    }


def _angles_to_named(model: Any, fit: Fit, variable: str) -> dict[str, list[float]]:
    """Principal angles (degrees) between the chosen DAS subspace and each named subspace the model's card puts
    ``variable`` in at that hook (a construction, rotated or not; an imposed twin): min(k, k_named) angles, all
    ~0 where the DAS subspace contains the proof's. Empty for a plain twin."""

    out = {}
    for entry, site in construction_sites(model, variable):
        if entry["role"] == "carries" and site.hook == fit.hook:
            out[site.name] = [round(float(a), 2) for a in principal_angles(fit.basis, site.basis)]
    return out


def _null_das(null_fits: Sequence[Sequence[Fit]], seed: int) -> dict[str, Any]:
    """The nulls' DAS, each chosen on the select split: every null's test numbers, the largest IIA and upper bound."""
    models = [fit_json(chosen(f), seed) for f in null_fits if f]
    if not models:
        return {"iia": None, "upper": None, "k": None, "hook": None, "models": []}
    worst = max(models, key=lambda r: -1.0 if r["test"]["iia"] is None else r["test"]["iia"])
    uppers = [r["test"]["interval"][1] for r in models if r["test"]["interval"]]
    return {
        "iia": worst["test"]["iia"],
        "upper": max(uppers) if uppers else None,
        "k": worst["k"],
        "hook": worst["hook"],
        "models": models,
    }


def off_circuit_ablation(model: Any, high: HighLevel, base: np.ndarray, source: np.ndarray) -> dict[str, Any]:
    """A twin trained with ``--align``: its accuracy on the ``base`` words, and with every head and MLP off the
    imposed circuit resampled from the ``source`` words (strict IIT asks that this changes nothing), each
    with a Wilson interval, and the difference."""

    circuit = model.card.options["alignment"]["circuit"]
    io, P, T = model.card.io, len(model.card.io.prefix), base.shape[1]
    labels, scored = high.answers(base)
    with exact_precision():
        _, cache = model.run_with_cache(on(model, io.encode(source)), names_filter=off_circuit_hooks(circuit))
        logits = run_with_hooks(
            model, on(model, io.encode(base)), fwd_hooks=resample_hooks(circuit, cache), return_type="logits"
        )
    ablated = answer(logits[:, P : P + T], high.readout)
    plain = own_predictions(model, base, high.readout)
    n = int(scored.sum())
    k_plain, k_ablated = int((plain == labels)[scored].sum()), int((ablated == labels)[scored].sum())
    return {
        "accuracy": k_plain / n,
        "accuracy_interval": wilson_interval(k_plain, n),
        "ablated_accuracy": k_ablated / n,
        "ablated_interval": wilson_interval(k_ablated, n),
        "drop": (k_plain - k_ablated) / n,
        "outputs": n,
    }


def probe_sites(model: Any, high: HighLevel, train: tuple, held: tuple, variable: str) -> list[dict[str, Any]]:
    """At every residual hook: a linear probe for ``variable`` (trained on the ``train`` pairs' base words at every
    position, its L2 strength chosen by cross-validation there: :func:`~sandbox_lens.probes.linear.probe_directions_cv`),
    its accuracy on the ``held`` words — *readable* — and the IIA of swapping its directions there — *used*."""

    hooks = residual_hooks(model.cfg.n_layers)
    P, T = len(model.card.io.prefix), train[0].shape[1]
    acts = {name: source_activations(model, words, hooks) for name, words in (("train", train[0]), ("held", held[0]))}
    values = {name: high.values(words, variable) for name, words in (("train", train[0]), ("held", held[0]))}
    rows = []
    for hook in hooks:
        x = {n: to_numpy(a[hook][:, P : P + T].double()) for n, a in acts.items()}
        (y_tr, m_tr, classes), (y_te, m_te, _) = values["train"], values["held"]
        if len(np.unique(y_tr[m_tr])) < 2:
            continue
        basis, w, b, cv = probe_directions_cv(x["train"][m_tr], y_tr[m_tr], classes)
        accuracy = float(((x["held"][m_te] @ w + b).argmax(-1) == y_te[m_te]).mean())
        base, source = held[0], held[1]
        used = (
            summary(site_counts(model, high, Site(hook, 0, basis), base, source, variable)) if basis.shape[1] else None
        )
        rows.append(
            {
                "hook": hook,
                "probe_accuracy": accuracy,
                "dims": int(basis.shape[1]),
                "l2": cv["l2"],
                "cv_accuracy": cv["cv_accuracy"],
                "iia": None if used is None else used["iia"],
                "interval": None if used is None else used["interval"],
            }
        )
    return rows


def _analysed(
    model: Any,
    high: HighLevel,
    splits: PairSplits,
    progress: bool,
    title: str,
    variable: str,
    probes: bool = True,
    named: bool = True,
    raw: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One model's full-swap scan (sites chosen on the select split, IIA reported on the test split), its named
    sites and probes; ``raw`` the scans' counts (``_raw`` in the result, dropped before it is written)."""
    raw = raw or scan_splits(model, high, splits, progress, variable)
    ceiling = raw["ceiling_test"]
    select = summarised(raw["select"], None, 0, 0)
    test = summarised(raw["test"], None, 0, 0)
    best, first = swap_numbers(select, test, raw["hooks"], raw["positions"], site_bar(ceiling, _chance(model, high)))
    r = {
        "title": title,
        "ceiling": ceiling,
        "best": best,
        "first_sites": first,
        "_raw": raw,
        "scan": {
            "hooks": raw["hooks"],
            "positions": [int(p) for p in raw["positions"]],
            "split": "test",
            "iia": [[c["iia"] for c in row] for row in test],
            "outputs": [[c["outputs"] for c in row] for row in test],
        },
    }
    if named:
        r["named_sites"] = named_sites(model, high, *splits.test, variable)
    if probes:
        r["probes"] = probe_sites(model, high, splits.fit, splits.test, variable)
    return r


def _boundless_at(
    model: Any, high: HighLevel, hook: str, splits: PairSplits, steps: int, seed: int, variable: str
) -> dict[str, Any]:
    """Boundless DAS at ``hook`` (fitted on the fit split): the learned k and its test IIA
    (:func:`sandbox_lens.interp.causal.das.boundless_das`)."""

    basis, trace = boundless_das(model, high, hook, *splits.fit, steps=max(steps, 100), seed=seed, variable=variable)
    if not basis.shape[1]:
        return {"hook": hook, "k": 0, "iia": None, "interval": None}
    r = summary(site_counts(model, high, Site(hook, 0, basis), *splits.test, variable), seed)
    return {
        "hook": hook,
        "k": int(basis.shape[1]),
        "iia": r["iia"],
        "interval": r["interval"],
        "final_loss": trace[-1]["loss"] if trace else None,
    }


def named_sites(
    model: Any, high: HighLevel, base: np.ndarray, source: np.ndarray, variable: str
) -> list[dict[str, Any]]:
    """IIA (changed outputs, pooled over every position) at each site ``model``'s card names for ``variable``
    (:func:`sandbox_lens.interp.causal.interchange.construction_sites`), with its role: ``carries`` should reach 1, ``inert``
    should change nothing. Empty for a trained model."""

    sites = construction_sites(model, variable)
    if not sites:
        return []
    activations = source_activations(model, source, sorted({s.hook for _, s in sites}))
    own = own_predictions(model, base, high.readout)
    return [
        {
            **pooled_iia(model, high, site, base, source, variable, activations, own),
            "subspace": entry["subspace"],
            "role": entry["role"],
            "note": entry.get("note", ""),
        }
        for entry, site in sites
    ]


def _chance(model: Any, high: HighLevel) -> float:
    """IIA of a uniform guess among the task's readout classes (all output classes without a readout)."""
    return 1.0 / (len(high.readout) if high.readout is not None else int(model.cfg.d_vocab_out))


def _trivial_from(model: Any) -> float:
    """The residual order of the last attention layer's output (see :mod:`sandbox_lens.interp.causal.verdict`)."""
    blocks = model.card.attention_blocks or list(range(model.cfg.n_layers))
    return max(blocks) + 1 / 3


def _title(model: Any) -> str:
    name = model.card.construction
    return "twin" if name == "trained" else name
