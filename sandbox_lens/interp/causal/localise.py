"""Where does a model hold a high-level variable? A scan of full interchange interventions over the
residual stream: for each residual hook (``resid_pre`` of every block, its ``resid_mid`` and
``resid_post``) and each position p, the IIA (on changed outputs) of swapping the whole residual at
(hook, p) as the state S_p.

A full swap at a site the variable has not reached yet scores low; at the first site where the model
has computed it, high. The scan's answer is that first site per position and whether the order of the
sites follows the residual stream (it always does for a full swap — the order that matters is the
construction's: :func:`first_sites` lets the two be compared). After the last position-mixing block a
full swap is trivially high wherever the model solves the task (the behavioural ceiling): the scan
says which sites are after the last attention that can still move information across positions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from sandbox_lens.interp.causal.evidence import Counts, PairSplits, stability, summaries
from sandbox_lens.interp.causal.highlevel import HighLevel
from sandbox_lens.interp.causal.interchange import Site, changed_hits, own_predictions, source_activations
from sandbox_lens.interp.causal.sweep import changed_counts, is_residual
from sandbox_lens.interp.causal.verdict import FLOOR, IMPLEMENTS, MIN_OUTPUTS, outcome, verdict, with_stability
from sandbox_lens.interp.progress import bar as progress_bar

__all__ = [
    "residual_hooks",
    "scan",
    "scan_counts",
    "first_sites",
    "scan_splits",
    "swap_numbers",
    "null_best",
    "swap_verdict",
    "site_bar",
]


def residual_hooks(n_layers: int) -> list[str]:
    """Every residual-stream hook in order: ``blocks.0.hook_resid_pre``, ``…_mid``, ``…_post``, block 1, …"""
    return [f"blocks.{l}.hook_resid_{x}" for l in range(n_layers) for x in ("pre", "mid", "post")]


def scan_counts(
    model: Any,
    high: HighLevel,
    base: np.ndarray,
    source: np.ndarray,
    hooks: Sequence[str] | None = None,
    positions: Sequence[int] | None = None,
    progress: bool = False,
    variable: str | None = None,
) -> dict[str, Any]:
    """A full swap at every (hook, position) as ``variable``, counted per base word: ``{"hooks", "positions",
    "hits" [hook, position, word], "outputs" [hook, position, word], "ceiling"}`` (changed outputs and those that
    follow the high-level model; the ceiling is the model's own accuracy on every output the task scores)."""

    hooks = list(hooks or residual_hooks(model.cfg.n_layers))
    positions = list(range(base.shape[1]) if positions is None else positions)
    activations = source_activations(model, source, hooks)  # shared by every site
    own = own_predictions(model, base, high.readout)
    plain, answered = high.answers(base)
    ceiling = float((own == plain)[answered].mean()) if answered.any() else None
    hits = np.zeros((len(hooks), len(positions), len(base)), dtype=np.int64)
    outputs = np.zeros_like(hits)
    bar = progress_bar(total=len(hooks) * len(positions), disable=not progress, desc="interchange scan", unit="site")
    every = positions == list(range(base.shape[1]))
    for i, hook in enumerate(hooks):
        if every and is_residual(hook, model.cfg.n_layers):  # every position in one batched sweep
            k, n = changed_counts(model, high, [(hook, None)], base, source, variable, activations)
            hits[i], outputs[i] = k[0], n[0]
            bar.update(len(positions))
            continue
        for j, p in enumerate(positions):
            hit, _, changed = changed_hits(model, high, Site(hook, p), base, source, activations, variable)
            hits[i, j], outputs[i, j] = (hit & changed).sum(axis=1), changed.sum(axis=1)
            bar.update(1)
    bar.close()
    return {
        "hooks": hooks,
        "positions": positions,
        "hits": hits,
        "outputs": outputs,
        "ceiling": ceiling,
        "model": high.mode,
        "variable": high.variable(variable),
    }


def scan(
    model: Any,
    high: HighLevel,
    base: np.ndarray,
    source: np.ndarray,
    hooks: Sequence[str] | None = None,
    positions: Sequence[int] | None = None,
    progress: bool = False,
    variable: str | None = None,
) -> dict[str, Any]:
    """IIA on changed outputs for a full swap at every (hook, position) as ``variable`` (default: the model's
    first): ``{"hooks", "positions", "iia" [hook, position], "outputs" [hook, position], "ceiling"}`` — the
    ceiling is the model's own accuracy on every output the task scores."""
    r = scan_counts(model, high, base, source, hooks, positions, progress, variable)
    k, n = r["hits"].sum(axis=-1), r["outputs"].sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        grid = np.where(n > 0, k / np.maximum(n, 1), np.nan)
    return {
        **{key: r[key] for key in ("hooks", "positions", "ceiling", "model", "variable")},
        "iia": grid,
        "outputs": n,
    }


def first_sites(result: dict[str, Any], threshold: float = 0.99) -> dict[int, str | None]:
    """Per position, the first hook (in residual order) whose full swap reaches ``threshold``; None if none does."""
    out: dict[int, str | None] = {}
    for j, p in enumerate(result["positions"]):
        column = result["iia"][:, j]
        hits = [i for i, v in enumerate(column) if not np.isnan(v) and v >= threshold]
        out[int(p)] = result["hooks"][hits[0]] if hits else None
    return out


def scan_splits(model: Any, high: HighLevel, splits: PairSplits, progress: bool, variable: str) -> dict[str, Any]:
    """Full swaps at every (residual hook, position) on the select and the test split, as grids of
    :class:`~sandbox_lens.interp.causal.evidence.Counts` ``[hook][position]``."""
    out: dict[str, Any] = {}
    for name in ("select", "test"):
        r = scan_counts(model, high, *getattr(splits, name), progress=progress, variable=variable)
        out[name] = [
            [Counts(r["hits"][i, j], r["outputs"][i, j]) for j in range(len(r["positions"]))]
            for i in range(len(r["hooks"]))
        ]
        out.update(hooks=r["hooks"], positions=r["positions"], **{f"ceiling_{name}": r["ceiling"]})
    return out


def swap_numbers(
    select: Sequence[Sequence[dict]],
    test: Sequence[Sequence[dict]],
    hooks: Sequence[str],
    positions: Sequence[int],
    bar: float,
) -> tuple[dict[int, float | None], dict[int, str | None]]:
    """Per position, from grids of summaries: the test IIA at the hook the select split rates best, and the first
    hook whose select IIA reaches ``bar`` (None where the test split has fewer than MIN_OUTPUTS changed outputs)."""
    best: dict[int, float | None] = {}
    first: dict[int, str | None] = {}
    for j, p in enumerate(positions):
        rates = [select[i][j]["iia"] for i in range(len(hooks))]
        if all(r is None for r in rates) or max(test[i][j]["outputs"] for i in range(len(hooks))) < MIN_OUTPUTS:
            best[int(p)], first[int(p)] = None, None
            continue
        top = max(range(len(hooks)), key=lambda i: (-1.0 if rates[i] is None else rates[i], -i))
        best[int(p)] = test[top][j]["iia"]
        first[int(p)] = next((hooks[i] for i, r in enumerate(rates) if r is not None and r >= bar), None)
    return best, first


def null_best(null_scans: Sequence[dict[str, Any]]) -> dict[int, float | None]:
    """Per position, the largest of the nulls' best full-swap IIA (each chosen on its select split)."""
    out: dict[int, float | None] = {}
    for scan in null_scans:
        for p, value in scan["best"].items():
            if value is not None:
                out[p] = max(value, out.get(p) or 0.0)
            else:
                out.setdefault(p, None)
    return out


def swap_verdict(
    raw: dict[str, Any],
    null_raw: Sequence[dict[str, Any]],
    construction: dict[str, Any],
    chance: float,
    variable: str,
    trivial: float | None,
    seed: int,
) -> dict[str, Any]:
    """The full-swap verdict (:func:`~sandbox_lens.interp.causal.verdict.verdict`): sites chosen on the select split,
    IIA read on the test split, the nulls chosen the same way; with its stability under resampling both."""
    ceiling = raw["ceiling_test"]
    bar = site_bar(ceiling, chance)
    groups = {name: {"model": raw[name], "nulls": [r[name] for r in null_raw]} for name in ("select", "test")}

    def rule(s: dict[str, Any]) -> dict[str, Any]:
        best, first = swap_numbers(s["select"]["model"], s["test"]["model"], raw["hooks"], raw["positions"], bar)
        nulls = [
            {"best": swap_numbers(sel, test, r["hooks"], r["positions"], site_bar(1.0, chance))[0]}
            for sel, test, r in zip(s["select"]["nulls"], s["test"]["nulls"], null_raw)
        ]
        return verdict(
            best, first, construction["first_sites"], null_best(nulls), variable, trivial, ceiling, chance=chance
        )

    full = rule({name: summaries(g, seed, False) for name, g in groups.items()})
    return with_stability(full, stability(groups, lambda s: outcome(rule(s)), seed, intervals=()))


def site_bar(ceiling: float | None, chance: float) -> float:
    """The IIA at which a site carries a variable: :data:`IMPLEMENTS` × the model's accuracy, never below chance +
    :data:`~sandbox_lens.interp.causal.verdict.FLOOR`."""
    return max(IMPLEMENTS * min(1.0, ceiling or 1.0), chance + FLOOR)
