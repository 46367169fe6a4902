"""Interchange interventions and interchange intervention accuracy (IIA).

A **site** is a hook of the model, a token position and a subspace of the activation there: the
whole activation (``basis`` None), a construction's named residual subspace, a DAS subspace or a
random one (the control). An interchange runs the *base* words with the site's component replaced by
its value on the *source* words: ``x + (x_source − x)·B·Bᵀ`` for an orthonormal basis B.

**IIA** is the share of scored outputs whose intervened argmax equals the high-level model's
counterfactual label (:mod:`sandbox_lens.interp.causal.highlevel`). It is reported three ways: on every scored
output, on the outputs whose label the interchange *changes* (the informative ones: "no change"
counts as success otherwise), and — beside it — the model's own accuracy on the base words (its
behavioural ceiling); each rate with a Wilson interval.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sandbox_lens.interp.budget import require
from sandbox_lens.interp.causal.highlevel import HighLevel, HighLevelError, high_level_of
from sandbox_lens.interp.errors import SandboxError
from sandbox_lens.interp.model.device import on
from sandbox_lens.interp.model.rotate import subspace_basis as rotated_basis
from sandbox_lens.interp.model.run import exact_precision, readout_answer, run_with_hooks
from sandbox_lens.interp.stats import wilson_interval
from sandbox_lens.interp.streams import Stream, rng

__all__ = [
    "Site",
    "interchange",
    "iia",
    "word_pairs",
    "subspace_basis",
    "random_basis",
    "source_activations",
    "own_predictions",
    "answer",
    "construction_sites",
    "pooled_iia",
    "changed_hits",
    "pair_length",
]


@dataclass(frozen=True)
class Site:
    """A hook, a word position (0 = the first symbol) and an orthonormal basis ``[d, k]`` (None: all of it)."""

    hook: str
    position: int
    basis: Any = None
    name: str = ""

    @property
    def dims(self) -> int | None:
        return None if self.basis is None else int(self.basis.shape[1])


def word_pairs(
    model: Any, n: int, length: int | None = None, seed: int = 0, high: HighLevel | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """``n`` (base, source) word pairs of ``model``'s task, drawn by its high-level model (:meth:`HighLevel.pairs`:
    independent automaton words, legal where the automaton has illegal inputs; Dyck prefixes; flip-flop strings
    with their reads aligned). ``length`` defaults to the task's training length (a twin built with room for
    longer inputs is aligned where it was trained; one symbol less for next-token tasks), else the model's."""

    high = high if high is not None else high_level_of(model)
    T = int(length or pair_length(model))
    cfg = model.cfg
    require(
        f"{n} interchange pairs of {T} tokens",
        lower="--pairs",
        memory=n * T * (16.0 + 8 * cfg.d_model * (2 * cfg.n_layers + 2)),
    )
    return high.pairs(n, T, rng(seed, Stream.CAUSAL_PAIRS))


def pair_length(model: Any) -> int:
    """The length of the words :func:`word_pairs` draws by default: the task's training length (one symbol less
    for next-token tasks), else the model's."""
    card = model.card
    trained = card.task.get("length") if isinstance(card.task, dict) else None
    if trained and card.task_kind.next_token:
        trained = int(trained) - 1
    return int(min(card.max_length, int(trained or card.max_length)))


def subspace_basis(model: Any, name: str | Sequence[str]) -> np.ndarray:
    """The orthonormal basis ``[d, k]`` of a construction's named residual subspace, or of several together (its
    card's labels; for a rotated construction, ``interp build --rotate``, the subspace's rows of the rotation)."""
    if not isinstance(name, str):
        return np.concatenate([subspace_basis(model, n) for n in name], axis=1)
    rotated = model.card.options.get("rotate")
    if rotated:
        try:
            return rotated_basis(model.card.options, rotated["labels"], name).T
        except SandboxError as e:
            raise HighLevelError(str(e)) from None
    labels = [lab.split(":", 1)[0] for lab in model.card.residual_labels]
    dims = [i for i, lab in enumerate(labels) if lab == name]
    if not dims:
        raise HighLevelError(
            f"{model.card.construction} has no residual subspace {name!r} (it has: {', '.join(dict.fromkeys(labels))})"
        )
    basis = np.zeros((len(labels), len(dims)))
    basis[dims, range(len(dims))] = 1.0
    return basis


def pooled_iia(
    model: Any,
    high: HighLevel,
    site: Site,
    base: np.ndarray,
    source: np.ndarray,
    variable: str | None = None,
    activations: dict[str, Any] | None = None,
    own: np.ndarray | None = None,
) -> dict[str, Any]:
    """IIA of one subspace of ``site.hook`` used at *every* position in turn, pooled over the positions: the
    changed outputs' rate with its Wilson interval, and the per-position rates. For a construction's named
    site or a position-shared DAS subspace (:func:`sandbox_lens.interp.causal.das.das` with ``position=None``)."""
    import dataclasses

    activations = activations or source_activations(model, source, [site.hook])
    own = own_predictions(model, base, high.readout) if own is None else own
    k = n = 0
    per_position = {}
    for p in range(base.shape[1]):
        r = iia(model, high, dataclasses.replace(site, position=p), base, source, activations, own, variable)
        c = r["changed"]
        n += c["outputs"]
        k += round((c["iia"] or 0.0) * c["outputs"])
        per_position[p] = c["iia"]
    return {
        "site": site.name or site.hook,
        "hook": site.hook,
        "dims": site.dims,
        "iia": k / n if n else None,
        "interval": wilson_interval(k, n),
        "outputs": n,
        "per_position": per_position,
    }


def construction_sites(model: Any, variable: str | None = None) -> list[tuple[dict[str, Any], Site]]:
    """The sites a construction's proof names for its variables (its card's ``variables``; see
    :func:`sandbox_lens.interp.model.spec.variable_site`) or ``interp train --align`` imposed on a twin, each as (the card's
    entry, a :class:`Site` at position 0 — replace the position to use it elsewhere). Empty for a plain twin."""
    out = []
    for v in getattr(model.card, "variables", None) or []:
        if variable is None or v["variable"] == variable:
            name = f"{v['variable']}: {'+'.join(v['subspace'])} @ {v['hook']}" + (
                " (inert)" if v["role"] == "inert" else ""
            )
            if "dims" in v:  # coordinates imposed on a twin (`interp train --align`)
                basis = np.eye(model.cfg.d_model)[:, v["dims"][0] : v["dims"][1]]
            else:
                basis = subspace_basis(model, v["subspace"])
            out.append((v, Site(v["hook"], 0, basis, name)))
    return out


def random_basis(d: int, k: int, seed: int = 0) -> np.ndarray:
    """A uniformly random k-dimensional subspace of ℝ^d (orthonormal columns): the matched-k control."""

    q, _ = np.linalg.qr(rng(seed, Stream.CAUSAL_CONTROL).standard_normal((d, k)))
    return q


def source_activations(model: Any, source: np.ndarray, hooks: list[str]) -> dict[str, Any]:
    """The activations at ``hooks`` of the ``source`` words (one run; interchanges at many sites share it)."""
    with exact_precision():
        _, cache = model.run_with_cache(on(model, model.card.io.encode(source)), names_filter=hooks)
    return {h: cache[h].detach() for h in hooks}


def own_predictions(model: Any, base: np.ndarray, readout: Sequence[int] | None = None) -> np.ndarray:
    """The model's own answers on the ``base`` words, among the ``readout`` classes (the behavioural ceiling)."""
    P = len(model.card.io.prefix)
    with exact_precision():
        logits = model(on(model, model.card.io.encode(base)))[:, P : P + base.shape[1]]
    return answer(logits, readout)


def answer(logits: Any, readout: Sequence[int] | None) -> np.ndarray:
    """The argmax of ``logits`` ``[..., d_vocab_out]`` among the ``readout`` classes (None: all), as class indices
    (:func:`sandbox_lens.interp.model.run.readout_answer`)."""
    return readout_answer(logits, readout)


def interchange(
    model: Any,
    base: np.ndarray,
    source: np.ndarray,
    site: Site,
    rotation: Any = None,
    activations: dict[str, Any] | None = None,
    positions: np.ndarray | None = None,
) -> Any:
    """Logits of the ``base`` words with ``site`` set to its value on the ``source`` words. ``rotation`` (a
    torch ``[d, k]`` with orthonormal columns, differentiable) overrides the site's basis (DAS trains it);
    ``activations`` are the source words' (:func:`source_activations`) when already computed; ``positions``
    (one per word) override the site's position row by row."""
    hooks = getattr(model, "hook_dict", None)
    if hooks is not None and site.hook not in hooks:
        raise HighLevelError(
            f"the model has no hook {site.hook!r} (residual hooks: blocks.<0..{model.cfg.n_layers - 1}>"
            ".hook_resid_<pre|mid|post>)"
        )
    card = model.card
    rows = on(model, np.arange(len(base)))
    p = on(
        model,
        len(card.io.prefix)
        + (np.full(len(base), site.position) if positions is None else np.asarray(positions, dtype=np.int64)),
    )
    tb = on(model, card.io.encode(base))
    if activations is None or site.hook not in activations:
        activations = source_activations(model, source, [site.hook])
    src = activations[site.hook][rows, p]
    B = rotation if rotation is not None else (None if site.basis is None else on(src, site.basis, dtype=src.dtype))

    def hook(x, hook):
        x = x.clone()
        delta = src - x[rows, p]
        x[rows, p] = x[rows, p] + (delta if B is None else (delta @ B) @ B.T)
        return x

    with exact_precision(grad=rotation is not None):
        return run_with_hooks(model, tb, fwd_hooks=[(site.hook, hook)], return_type="logits")


def changed_hits(
    model: Any,
    high: HighLevel,
    site: Site,
    base: np.ndarray,
    source: np.ndarray,
    activations: dict[str, Any] | None = None,
    variable: str | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per output ``[n, T]`` of an interchange at ``site``: (the intervened answer equals the counterfactual label,
    the output is scored, the interchange changes its label) — what :func:`iia` counts, kept per base word so
    that intervals can resample the words (:mod:`sandbox_lens.interp.causal.evidence`)."""
    variable = high.variable(variable)
    P = len(model.card.io.prefix)
    labels, scored = high.counterfactual(base, source, site.position, variable)  # refuses a position off the words
    logits = interchange(model, base, source, site, activations=activations)
    predicted = answer(logits[:, P : P + base.shape[1]], high.readout)
    plain, answered = high.answers(base)
    scored = scored & answered
    return predicted == labels, scored, scored & (labels != plain)


def iia(
    model: Any,
    high: HighLevel,
    site: Site,
    base: np.ndarray,
    source: np.ndarray,
    activations: dict[str, Any] | None = None,
    own: np.ndarray | None = None,
    variable: str | None = None,
) -> dict[str, Any]:
    """IIA of ``site`` as ``high``'s ``variable`` (default: its first) at the site's position (see the module
    docstring); ``activations`` and ``own`` (:func:`source_activations`, :func:`own_predictions`) when a scan
    shares them."""
    variable = high.variable(variable)
    hit, scored, changed = changed_hits(model, high, site, base, source, activations, variable)
    plain, _ = high.answers(base)
    own = own_predictions(model, base, high.readout) if own is None else own
    out = {
        "site": site.name or f"{site.hook}@{site.position}",
        "hook": site.hook,
        "position": site.position,
        "dims": site.dims,
        "model": high.mode,
        "variable": variable,
    }
    for key, mask in (("all", scored), ("changed", changed)):
        k, n = int(hit[mask].sum()), int(mask.sum())
        out[key] = {"iia": k / n if n else None, "interval": wilson_interval(k, n), "outputs": n}
    out["ceiling"] = float((own == plain)[scored].mean()) if scored.any() else None
    return out
