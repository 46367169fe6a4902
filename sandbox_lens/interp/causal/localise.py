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

from typing import Any, Sequence

import numpy as np

from sandbox_lens.interp.causal.highlevel import HighLevel
from sandbox_lens.interp.causal.interchange import Site, changed_hits, own_predictions, source_activations

__all__ = ["residual_hooks", "scan", "scan_counts", "first_sites"]


def residual_hooks(n_layers: int) -> list[str]:
    """Every residual-stream hook in order: ``blocks.0.hook_resid_pre``, ``…_mid``, ``…_post``, block 1, …"""
    return [f"blocks.{l}.hook_resid_{x}" for l in range(n_layers) for x in ("pre", "mid", "post")]


def scan_counts(model: Any, high: HighLevel, base: np.ndarray, source: np.ndarray, hooks: Sequence[str] | None = None,
                positions: Sequence[int] | None = None, progress: bool = False,
                variable: str | None = None) -> dict[str, Any]:
    """A full swap at every (hook, position) as ``variable``, counted per base word: ``{"hooks", "positions",
    "hits" [hook, position, word], "outputs" [hook, position, word], "ceiling"}`` (changed outputs and those that
    follow the high-level model; the ceiling is the model's own accuracy on every output the task scores)."""
    from tqdm import tqdm

    hooks = list(hooks or residual_hooks(model.cfg.n_layers))
    positions = list(range(base.shape[1]) if positions is None else positions)
    activations = source_activations(model, source, hooks)  # shared by every site
    own = own_predictions(model, base, high.readout)
    plain, answered = high.answers(base)
    ceiling = float((own == plain)[answered].mean()) if answered.any() else None
    hits = np.zeros((len(hooks), len(positions), len(base)), dtype=np.int64)
    outputs = np.zeros_like(hits)
    bar = tqdm(total=len(hooks) * len(positions), disable=not progress, desc="interchange scan", unit="site")
    for i, hook in enumerate(hooks):
        for j, p in enumerate(positions):
            hit, _, changed = changed_hits(model, high, Site(hook, p), base, source, activations, variable)
            hits[i, j], outputs[i, j] = (hit & changed).sum(axis=1), changed.sum(axis=1)
            bar.update(1)
    bar.close()
    return {"hooks": hooks, "positions": positions, "hits": hits, "outputs": outputs, "ceiling": ceiling,
            "model": high.mode, "variable": high.variable(variable)}


def scan(model: Any, high: HighLevel, base: np.ndarray, source: np.ndarray, hooks: Sequence[str] | None = None,
         positions: Sequence[int] | None = None, progress: bool = False, variable: str | None = None) -> dict[str, Any]:
    """IIA on changed outputs for a full swap at every (hook, position) as ``variable`` (default: the model's
    first): ``{"hooks", "positions", "iia" [hook, position], "outputs" [hook, position], "ceiling"}`` — the
    ceiling is the model's own accuracy on every output the task scores."""
    r = scan_counts(model, high, base, source, hooks, positions, progress, variable)
    k, n = r["hits"].sum(axis=-1), r["outputs"].sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        grid = np.where(n > 0, k / np.maximum(n, 1), np.nan)
    return {**{key: r[key] for key in ("hooks", "positions", "ceiling", "model", "variable")}, "iia": grid, "outputs": n}


def first_sites(result: dict[str, Any], threshold: float = 0.99) -> dict[int, str | None]:
    """Per position, the first hook (in residual order) whose full swap reaches ``threshold``; None if none does."""
    out: dict[int, str | None] = {}
    for j, p in enumerate(result["positions"]):
        column = result["iia"][:, j]
        hits = [i for i, v in enumerate(column) if not np.isnan(v) and v >= threshold]
        out[int(p)] = result["hooks"][hits[0]] if hits else None
    return out
