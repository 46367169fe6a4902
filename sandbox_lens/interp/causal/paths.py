"""The high-level graph tested by intervention, not only through the outputs: an edge by a two-step (path)
interchange, a variable's mechanism by a joint interchange of all its parents (issue 42, part 4).

An algorithm's record (:mod:`sandbox_lens.interp.causal.algorithms`) names, for some edges, the **child** variable
they feed (``window1 → window2 at p + 2``) and, for some variables, that their parents **determine** them (a
scan's window of level l + 1 is the composition of two windows of level l, Lemma 14). With the sites the
identification chose for each variable and position (:mod:`sandbox_lens.interp.causal.identify`):

* **Edge u → v at offset o** (the path interchange): run the base words with u's site at p set to its value on
  the source words; take v's site at q = p + o from *that* run; run the base words again with only v's site at q
  set to it. The high-level model's prediction is the counterfactual of u at p, at the outputs v at q reaches.
  This is exact where the proof's graph has one path from u at p to each of those outputs, and only through v at
  q: the records name a child only where that holds (the scan's binary offsets, a recurrent state's next
  state, a count's state, the Dyck top's depth). An edge passes when the model's outputs follow it: u's change
  travels through v's site as the proof says, and through nothing else the test would need.
* **Joint interchange of a variable's parents**: v at q from the source's value of every parent at its offset
  (all at once, from one source word) — the high-level model says v then *is* the source's v at q (it is a
  function of its parents), so the prediction is v's own counterfactual from the source at q. A model whose v is
  made from other inputs, or from the parents at other offsets, fails it.

Both are scored on the test split (changed outputs only), with the same bar, floor and null comparison as every
variable: the nulls run the same interchanges at their own chosen sites.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sandbox_lens.interp.causal.evidence import Counts
from sandbox_lens.interp.causal.highlevel import HighLevel
from sandbox_lens.interp.causal.interchange import answer, source_activations
from sandbox_lens.interp.causal.sweep import MAX_ROWS, hook_head, start_of
from sandbox_lens.interp.model.bare import bare_rest
from sandbox_lens.interp.model.device import on
from sandbox_lens.interp.model.run import exact_precision, run_with_hooks

__all__ = ["Patch", "patched_answers", "path_counts", "joint_counts", "parents_of"]


@dataclass(frozen=True)
class Patch:
    """One row-wise replacement in a forward pass: at ``hook`` (head ``head``, subspace ``basis`` ``[d, k]`` or all
    of it), rows ``rows`` at token positions ``where`` take ``values`` (``[rows, …]``, the activation there)."""

    hook: str
    head: int | None
    basis: Any
    rows: Any
    where: Any
    values: Any


def _apply(x: Any, patch: Patch) -> Any:
    """``x`` with one patch written in (the component along ``basis`` only, where there is one)."""
    if patch.head is not None:
        x[patch.rows, patch.where, patch.head] = patch.values
        return x
    delta = patch.values - x[patch.rows, patch.where]
    if patch.basis is not None:
        delta = (delta @ patch.basis) @ patch.basis.T
    x[patch.rows, patch.where] = x[patch.rows, patch.where] + delta
    return x


def patched_answers(
    model: Any,
    tokens: Any,
    patches: Sequence[Patch],
    readout: Sequence[int] | None,
    capture: Sequence[str] = (),
    rest: Any = None,
) -> tuple[np.ndarray, dict[str, Any]]:
    """(answers ``[rows, T]``, the activations at the ``capture`` hooks after patching) of one forward over
    ``tokens`` ``[rows, P + T]`` with every patch applied (several patches may share a hook). ``rest``
    (:func:`~sandbox_lens.interp.model.bare.bare_rest` of ``model``): the forward runs bare, the patches as edits,
    where every hook is one the bare forward can edit; otherwise it is a hooked run."""

    by_hook: dict[str, list[Patch]] = {}
    for patch in patches:
        by_hook.setdefault(patch.hook, []).append(patch)
    captured: dict[str, Any] = {}

    def edit_of(name: str) -> Any:
        # one closure per hook: TransformerLens 4's bridge may call a hook under another (canonical) name
        def edit(x: Any, hook: Any = None) -> Any:  # a bare edit, or a hook (``hook`` unused)
            if name in by_hook:
                x = x.clone()
                for patch in by_hook[name]:
                    x = _apply(x, patch)
            if name in capture:
                captured[name] = x.detach().clone()
            return x

        return edit

    names = sorted(set(by_hook) | set(capture))
    P = len(model.card.io.prefix)
    T = tokens.shape[1] - P
    bare = rest is not None and all(start_of(h, model.cfg.n_layers) is not None for h in names)
    with exact_precision():
        if bare:
            logits = rest(rest.embed(tokens), "blocks.0.hook_resid_pre", {h: edit_of(h) for h in names})
        else:
            logits = run_with_hooks(model, tokens, fwd_hooks=[(h, edit_of(h)) for h in names], return_type="logits")
    return answer(logits[:, P : P + T], readout), captured


def _site(label: str, bases: dict[str, tuple[str, Any]]) -> tuple[str, int | None, Any]:
    """(hook, head, basis) of a chosen site's label (a card's named site by its basis)."""
    if label in bases:
        hook, basis = bases[label]
        return hook, None, basis
    hook, head = hook_head(label)
    return hook, head, None


def _patch(model: Any, label: str, bases: dict[str, tuple[str, Any]], j: int, n: int, where: int, acts: Any) -> Patch:
    """The patch that sets the site ``label`` at token ``where`` of rows ``j·n … (j + 1)·n − 1`` to its value in
    ``acts`` (a hook's activation ``[n, tokens, …]`` from another run)."""

    hook, head, basis = _site(label, bases)
    value = acts[hook][:, where]
    B = None if basis is None else on(value, np.asarray(basis), dtype=value.dtype)
    rows = on(model, np.arange(j * n, (j + 1) * n))
    return Patch(hook, head, B, rows, where, value if head is None else value[:, head])


class _Truths:
    """What the high-level model predicts for the base and source words of one test, each counterfactual computed
    once: the base's own answers, a variable's counterfactual from the source at p, and the outputs a variable at q
    reaches."""

    def __init__(self, high: HighLevel, base: np.ndarray, source: np.ndarray) -> None:
        self.high, self.base, self.source = high, base, source
        self.plain, self.answered = high.answers(base)
        self._memo: dict[tuple[str, str, int], tuple[np.ndarray, np.ndarray]] = {}

    def _counterfactual(self, variable: str, p: int, source: np.ndarray, tag: str) -> tuple[np.ndarray, np.ndarray]:
        key = (tag, variable, p)
        if key not in self._memo:
            self._memo[key] = self.high.counterfactual(self.base, source, p, variable)
        return self._memo[key]

    def at(self, variable: str, p: int, reach_of: str, q: int) -> tuple[np.ndarray, np.ndarray]:
        """(labels, changed) ``[n, T]``: ``variable``'s counterfactual from the source at p, scored only at the
        outputs ``reach_of`` at q reaches (the path's end) and where the label changes."""
        labels, scored = self._counterfactual(variable, p, self.source, "source")
        _, reach = self._counterfactual(reach_of, q, self.base, "reach")
        return labels, scored & reach & self.answered & (labels != self.plain)

    def score(self, got: np.ndarray, n: int, ends: Sequence[tuple[str, int, str, int]], counts: Counts) -> None:
        """Add to ``counts`` the per-word hits and changed outputs of ``got`` (``n`` rows per test, in the order of
        ``ends``: (variable, p, reach_of, q) each)."""
        for j, (variable, p, reach_of, q) in enumerate(ends):
            labels, changed = self.at(variable, p, reach_of, q)
            np.add(counts.hits, ((got[j * n : (j + 1) * n] == labels) & changed).sum(-1), out=counts.hits)
            np.add(counts.outputs, changed.sum(-1), out=counts.outputs)


def path_counts(
    model: Any,
    high: HighLevel,
    base: np.ndarray,
    source: np.ndarray,
    parent: str,
    child: str,
    parent_sites: Sequence[str | None],
    child_sites: Sequence[str | None],
    offsets: Sequence[int],
    bases: dict[str, tuple[str, Any]],
) -> Counts:
    """Per-word counts of the edge ``parent`` → ``child`` tested by path interchanges (module docstring) at every
    position p whose parent site and child site at q = p + o (o in ``offsets``) were chosen (None: not chosen)."""

    n, T = base.shape
    P = len(model.card.io.prefix)
    readout = high.readout
    tokens = on(model, model.card.io.encode(base))
    pq = [
        (p, p + o)
        for p in range(T)
        for o in offsets
        if p + o < T and parent_sites[p] is not None and child_sites[p + o] is not None
    ]
    counts = Counts(np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64))
    if not pq:
        return counts
    truths = _Truths(high, base, source)
    rest = bare_rest(model)
    parent_hooks = {_site(parent_sites[p], bases)[0] for p, _ in pq}  # type: ignore[arg-type]
    acts = source_activations(model, source, sorted(parent_hooks))
    child_hooks = sorted({_site(child_sites[q], bases)[0] for _, q in pq})  # type: ignore[arg-type]
    # step 1: the parent set from the source at each p (the words repeated once per p), the child hooks kept
    ps = sorted({p for p, _ in pq})
    chunk = max(1, MAX_ROWS // max(n, 1))
    kept: dict[int, dict[str, Any]] = {}
    for first in range(0, len(ps), chunk):
        group = ps[first : first + chunk]
        patches = [_patch(model, parent_sites[p], bases, j, n, P + p, acts) for j, p in enumerate(group)]  # type: ignore[arg-type]
        _, captured = patched_answers(model, tokens.repeat(len(group), 1), patches, readout, child_hooks, rest)
        for j, p in enumerate(group):
            kept[p] = {h: captured[h][j * n : (j + 1) * n] for h in child_hooks}
    # step 2: the base words with only the child's site at q taken from step 1's run for p
    for first in range(0, len(pq), chunk):
        group = pq[first : first + chunk]
        patches = [_patch(model, child_sites[q], bases, j, n, P + q, kept[p]) for j, (p, q) in enumerate(group)]  # type: ignore[arg-type]
        got, _ = patched_answers(model, tokens.repeat(len(group), 1), patches, readout, rest=rest)
        truths.score(got, n, [(parent, p, child, q) for p, q in group], counts)
    return counts


def parents_of(variables: Sequence[Any], child: str) -> list[tuple[str, int]]:
    """(parent, offset) of every edge of ``variables`` into ``child`` at one exact offset."""
    return [(v.name, e.lo) for v in variables for e in v.edges if e.child == child and e.hi == e.lo]


def joint_counts(
    model: Any,
    high: HighLevel,
    base: np.ndarray,
    source: np.ndarray,
    child: str,
    parents: Sequence[tuple[str, int]],
    sites: dict[str, Sequence[str | None]],
    bases: dict[str, tuple[str, Any]],
) -> Counts:
    """Per-word counts of ``child``'s mechanism tested by a joint interchange of all its ``parents`` (name, offset)
    at q − offset from one source word, at every q where each parent inside the word has a chosen site (a
    parent before the word's start is a constant of the proof, the same in base and source)."""

    n, T = base.shape
    P = len(model.card.io.prefix)
    tokens = on(model, model.card.io.encode(base))
    counts = Counts(np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64))
    qs = []
    for q in range(T):
        inside = [(u, q - o) for u, o in parents if q - o >= 0]
        if inside and all(sites[u][p] is not None for u, p in inside):
            qs.append((q, inside))
    if not qs:
        return counts
    truths = _Truths(high, base, source)
    rest = bare_rest(model)
    hooks = sorted({_site(sites[u][p], bases)[0] for _, inside in qs for u, p in inside})  # type: ignore[arg-type]
    acts = source_activations(model, source, hooks)
    chunk = max(1, MAX_ROWS // max(n, 1))
    for first in range(0, len(qs), chunk):
        group = qs[first : first + chunk]
        patches = [
            _patch(model, sites[u][p], bases, j, n, P + p, acts)  # type: ignore[arg-type]
            for j, (_, inside) in enumerate(group)
            for u, p in inside
        ]
        got, _ = patched_answers(model, tokens.repeat(len(group), 1), patches, high.readout, rest=rest)
        truths.score(got, n, [(child, q, child, q) for q, _ in group], counts)
    return counts
