"""Where each candidate's variables are found and what is read there: per variable and position the site chosen on
the select split (an anchored algorithm: one block for all its variables), the test split's numbers at those
sites (pooled, with a bootstrap interval over base words), the graph tests by intervention at the sites chosen on
all the select words (:mod:`sandbox_lens.interp.causal.paths`), and the cells of each partition. Used by
:mod:`sandbox_lens.interp.causal.identify`, which holds the rules."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from sandbox_lens.interp.causal.algorithms import Algorithm, Variable
from sandbox_lens.interp.causal.evidence import Counts, rate_interval
from sandbox_lens.interp.causal.fitted import admitted, is_fitted
from sandbox_lens.interp.causal.highlevel import HighLevel
from sandbox_lens.interp.causal.paths import joint_counts, parents_of, path_counts
from sandbox_lens.interp.causal.sweep import hook_head

__all__ = [
    "site_place",
    "allowed_sites",
    "choose_sites",
    "pooled_counts",
    "number_of",
    "pick_sites",
    "graph_counts",
    "model_numbers",
    "add_cells",
]


def site_place(label: str) -> tuple[int, str]:
    """(block, "before" / "after") of a site: a block's input is *before* it; its attention's and MLP's outputs,
    its heads and its ``resid_mid``/``resid_post`` are *after* it (a card's named site by its hook)."""
    hook = hook_head(label.rsplit(" @ ", 1)[-1].split(" ")[0])[0]
    block = int(hook.split(".")[1])
    return (block, "before") if hook.endswith("hook_resid_pre") else (block, "after")


def allowed_sites(variable: Variable, anchor: int | None, labels: Sequence[str], hooks: Sequence[str]) -> list[int]:
    """The sites (indices into ``labels``) where ``variable`` may be found, given the anchoring block: before it
    (its input, which is the block before's ``resid_post``, swapped whole or along a DAS subspace) or after it
    (inside the block)."""
    if anchor is None:
        return list(range(len(labels)))
    out = []
    for i, label in enumerate(labels):
        block, place = site_place(label)
        if label.endswith("hook_resid_post") and (i < len(hooks) or is_fitted(label)):
            block, place = (block + 1, "before") if variable.place == "before" else (block, "after")
        if (block, place) == (anchor, variable.place):
            out.append(i)
    return out


def choose_sites(hits: np.ndarray, outputs: np.ndarray, allowed: Sequence[int]) -> tuple[np.ndarray, float]:
    """Per position, the allowed site with the best select IIA (the first in ``allowed`` on a tie; −1 where no
    allowed site has an output), and
    the pooled select IIA of those choices. ``hits``/``outputs`` ``[site, P]`` summed over words."""
    k, n = hits[allowed], outputs[allowed]
    with np.errstate(invalid="ignore", divide="ignore"):
        rates = np.where(n > 0, k / np.maximum(n, 1), -1.0)
    best = rates.argmax(axis=0)
    chosen = np.where(n.max(axis=0) > 0, np.asarray(allowed)[best], -1)
    cols = np.arange(hits.shape[1])
    ok = chosen >= 0
    total = outputs[chosen[ok], cols[ok]].sum()
    return chosen, float(hits[chosen[ok], cols[ok]].sum() / total) if total else -1.0


def pooled_counts(hits: np.ndarray, outputs: np.ndarray, chosen: np.ndarray) -> Counts:
    """Per-word counts ``[n]`` at the chosen site of each position (rows ``[site, P, n]``)."""
    cols = np.flatnonzero(chosen >= 0)
    if not len(cols):
        return Counts(np.zeros(hits.shape[-1], dtype=np.int64), np.zeros(hits.shape[-1], dtype=np.int64))
    return Counts(hits[chosen[cols], cols].sum(axis=0), outputs[chosen[cols], cols].sum(axis=0))


def number_of(counts: Counts, seed: int, inner: int) -> dict[str, Any]:
    return {
        "iia": counts.rate,
        "interval": rate_interval(counts, seed, inner) if inner else None,
        "outputs": int(counts.outputs.sum()),
    }


def _rank(label: str, i: int, hooks: Sequence[str]) -> tuple[int, int]:
    """The order in which a tie on the select split is broken: the sites a card names first (the proof's own), then
    whole sites, then DAS subspaces (the simpler intervention before the learned one)."""
    return (2 if is_fitted(label) else 1 if i < len(hooks) else 0, i)


def pick_sites(
    algorithm: Algorithm,
    entry: dict[str, Any],
    labels_of: dict[Variable, list[str]],
    hooks: Sequence[str],
    take: Any,
) -> tuple[int | None, dict[Variable, np.ndarray]]:
    """(anchoring block, per variable the site index chosen at each position) on the select split: the best select
    IIA per position among the sites the algorithm allows (an anchored algorithm: the block whose worst variable
    is best); never the readout baseline, and a DAS subspace only where it beats the readout
    (:func:`~sandbox_lens.interp.causal.fitted.admitted`)."""
    vs = entry["variables_of"][algorithm.name]
    sel = entry["select"]["counts"]
    anchors = [None] if not algorithm.anchored else list(range(entry["layers"]))
    best: tuple[float, Any] | None = None
    for anchor in anchors:
        picks, worst = {}, 1.0
        for v in vs:
            h, o = take(sel[v][0][0], "select").sum(-1), take(sel[v][1][0], "select").sum(-1)
            allowed = [i for i in allowed_sites(v, anchor, labels_of[v], hooks) if i < h.shape[0]]
            allowed = sorted(admitted(labels_of[v], h, o, allowed), key=lambda i: _rank(labels_of[v][i], i, hooks))
            if not allowed:
                worst = -1.0
                picks[v] = np.full(h.shape[1], -1)
                continue
            picks[v], rate = choose_sites(h, o, allowed)
            worst = min(worst, rate)
        if best is None or worst > best[0]:
            best = (worst, (anchor, picks))
    assert best is not None  # anchors is never empty
    return best[1]


def graph_counts(
    model: Any,
    entry: dict[str, Any],
    algorithms: Sequence[Algorithm],
    hooks: Sequence[str],
    highs: dict[str, HighLevel],
    test: tuple[np.ndarray, np.ndarray],
    memo: dict[Any, Counts] | None = None,
) -> dict[str, dict[str, Any]]:
    """Per algorithm, the test split's per-word counts of each edge that names a child, by path interchange, and
    of each determined variable, by a joint interchange of its parents (:mod:`sandbox_lens.interp.causal.paths`),
    at the sites chosen on all the select words. ``memo``: counts already computed on this model and these test
    words (a null shared by a population's twins), keyed by the test and its sites."""

    out: dict[str, dict[str, Any]] = {}
    memo = {} if memo is None else memo
    for a in algorithms:
        vs = entry["variables_of"][a.name]
        labels_of = {v: entry["labels"][v] for v in vs}
        _, picks = pick_sites(a, entry, labels_of, hooks, lambda x, s: x)
        sites: dict[str, Sequence[str | None]] = {
            v.name: [labels_of[v][c] if c >= 0 else None for c in picks[v]] for v in vs
        }
        edges, joint = {}, {}
        for v in vs:
            for j, e in enumerate(v.edges):
                if e.child is None or e.child not in sites:
                    continue
                last = len(sites[v.name]) - 1 if e.hi is None else e.hi
                offsets = tuple(range(e.lo, last + 1))
                key: tuple[Any, ...] = (
                    "path",
                    v.mode,
                    v.name,
                    e.child,
                    offsets,
                    tuple(sites[v.name]),
                    tuple(sites[e.child]),
                )
                if key not in memo:
                    memo[key] = path_counts(
                        model,
                        highs[v.mode],
                        *test,
                        v.name,
                        e.child,
                        sites[v.name],
                        sites[e.child],
                        offsets,
                        entry["bases"],
                    )
                edges[(v, j)] = memo[key]
            parents = parents_of(vs, v.name)
            if v.determined and parents:
                key = ("joint", v.mode, v.name, tuple(parents), tuple(tuple(sites[u]) for u, _ in parents))
                if key not in memo:
                    memo[key] = joint_counts(model, highs[v.mode], *test, v.name, parents, sites, entry["bases"])
                joint[v] = memo[key]
        out[a.name] = {"edges": edges, "joint": joint}
    return out


def model_numbers(
    algorithm: Algorithm,
    entry: dict[str, Any],
    hooks: Sequence[str],
    index: dict[str, np.ndarray] | None,
    inner: int,
    seed: int,
    is_model: bool,
) -> dict[str, Any]:
    """One model's choices (select split) and test numbers for ``algorithm``'s variables, edges and score; the
    score pools every intervention the algorithm predicts: its variables', its path-tested edges' and its joint
    ones'."""
    vs = entry["variables_of"][algorithm.name]
    test = entry["test"]["counts"]
    take = (lambda a, s: a) if index is None else (lambda a, s: a[..., index[s]])
    labels_of = {v: entry["labels"][v] for v in vs}
    anchor, picks = pick_sites(algorithm, entry, labels_of, hooks, take)
    graph = entry.get("graph", {}).get(algorithm.name, {"edges": {}, "joint": {}})
    out: dict[str, Any] = {"anchor": anchor, "variables": {}}
    pooled: list[Counts] = []
    cells: dict[str, dict[str, list[int]]] = {}

    def taken(c: Counts) -> Counts:
        return Counts(take(c.hits, "test"), take(c.outputs, "test"))

    for v in vs:
        hits, outputs = take(test[v][0], "test"), take(test[v][1], "test")
        counts = pooled_counts(hits[0], outputs[0], picks[v])
        if index is None and is_model:
            add_cells(cells, entry["partitions"], hits[0], outputs[0], picks[v])
        pooled.append(counts)
        sites = {int(p): labels_of[v][c] for p, c in enumerate(picks[v]) if c >= 0}
        edges = [
            number_of(pooled_counts(hits[1 + j], outputs[1 + j], picks[v]), seed, inner) for j in range(len(v.edges))
        ]
        paths = {}
        for j in range(len(v.edges)):
            if (v, j) in graph["edges"]:
                c = taken(graph["edges"][(v, j)])
                paths[j] = number_of(c, seed, inner)
                pooled.append(c)
        joint = None
        if v in graph["joint"]:
            c = taken(graph["joint"][v])
            joint = number_of(c, seed, inner)
            pooled.append(c)
        out["variables"][v] = {
            **number_of(counts, seed, inner),
            "sites": sites,
            "edges": edges,
            "paths": paths,
            "joint": joint,
        }
    out["score"] = number_of(
        Counts(np.sum([c.hits for c in pooled], axis=0), np.sum([c.outputs for c in pooled], axis=0)), seed, inner
    )
    if cells:
        out["partitions"] = {
            name: {cell: {"iia": k / n if n else None, "outputs": n} for cell, (k, n) in c.items()}
            for name, c in cells.items()
        }
    return out


def add_cells(
    cells: dict[str, dict[str, list[int]]],
    partitions: dict[str, tuple[np.ndarray, list[str]]],
    hits: np.ndarray,
    outputs: np.ndarray,
    chosen: np.ndarray,
) -> None:
    """Add one variable's test counts at its chosen sites to each partition's cells (a partition gives every
    (swapped position, base word) a cell)."""
    for p, c in enumerate(chosen):
        if c < 0:
            continue
        for name, (labels, titles) in partitions.items():
            for j, title in enumerate(titles):
                mask = labels[p] == j
                k, n = int(hits[c, p][mask].sum()), int(outputs[c, p][mask].sum())
                cell = cells.setdefault(name, {}).setdefault(title, [0, 0])
                cell[0] += k
                cell[1] += n
