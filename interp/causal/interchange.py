"""Interchange interventions and interchange intervention accuracy (IIA).

A **site** is a hook of the model, a token position and a subspace of the activation there: the
whole activation (``basis`` None), a construction's named residual subspace, a DAS subspace or a
random one (the control). An interchange runs the *base* words with the site's component replaced by
its value on the *source* words: ``x + (x_source − x)·B·Bᵀ`` for an orthonormal basis B.

**IIA** is the share of scored outputs whose intervened argmax equals the high-level model's
counterfactual label (:mod:`interp.causal.highlevel`). It is reported three ways: on every scored
output, on the outputs whose label the interchange *changes* (the informative ones: "no change"
counts as success otherwise), and — beside it — the model's own accuracy on the base words (its
behavioural ceiling); each rate with a Wilson interval.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from interp.causal.highlevel import HighLevelError, StateModel
from interp.errors import SandboxError
from interp.model.run import exact_precision
from interp.stats import wilson_interval

__all__ = ["Site", "interchange", "iia", "word_pairs", "subspace_basis", "random_basis", "source_activations",
           "own_predictions"]


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


def word_pairs(model: Any, n: int, length: int | None = None, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``n`` (base, source) pairs of independent words of ``model``'s automaton task: uniform symbols, or legal
    ones where the automaton has illegal inputs (the Dyck stack). ``length`` defaults to the task's training
    length (a twin built with room for longer inputs is aligned where it was trained), else the model's."""
    from interp.streams import Stream, rng

    from interp.budget import require

    card = model.card
    trained = card.task.get("length") if isinstance(card.task, dict) else None
    T = int(length or min(card.max_length, int(trained or card.max_length)))
    cfg = model.cfg
    require(f"{n} interchange pairs of {T} tokens", lower="--pairs",
            memory=n * T * (16.0 + 8 * cfg.d_model * (2 * cfg.n_layers + 2)))
    g = rng(seed, Stream.CAUSAL_PAIRS)
    automaton = card.source
    if getattr(automaton, "feasible", None) is not None:
        return automaton.sample(n, T, g), automaton.sample(n, T, g)
    k = card.io.n_symbols
    return g.integers(k, size=(n, T)), g.integers(k, size=(n, T))


def subspace_basis(model: Any, name: str) -> np.ndarray:
    """The orthonormal basis ``[d, k]`` of a construction's named residual subspace (its card's labels; for a
    rotated construction, ``interp build --rotate``, the subspace's rows of the rotation)."""
    rotated = model.card.options.get("rotate")
    if rotated:
        from interp.model.rotate import subspace_basis as rotated_basis

        try:
            return rotated_basis(model.card.options, rotated["labels"], name).T
        except SandboxError as e:
            raise HighLevelError(str(e)) from None
    labels = [lab.split(":", 1)[0] for lab in model.card.residual_labels]
    dims = [i for i, lab in enumerate(labels) if lab == name]
    if not dims:
        raise HighLevelError(f"{model.card.construction} has no residual subspace {name!r} "
                             f"(it has: {', '.join(dict.fromkeys(labels))})")
    basis = np.zeros((len(labels), len(dims)))
    basis[dims, range(len(dims))] = 1.0
    return basis


def random_basis(d: int, k: int, seed: int = 0) -> np.ndarray:
    """A uniformly random k-dimensional subspace of ℝ^d (orthonormal columns): the matched-k control."""
    from interp.streams import Stream, rng

    q, _ = np.linalg.qr(rng(seed, Stream.CAUSAL_CONTROL).standard_normal((d, k)))
    return q


def source_activations(model: Any, source: np.ndarray, hooks: list[str]) -> dict[str, Any]:
    """The activations at ``hooks`` of the ``source`` words (one run; interchanges at many sites share it)."""
    import torch

    with exact_precision():
        _, cache = model.run_with_cache(torch.from_numpy(model.card.io.encode(source)), names_filter=hooks)
    return {h: cache[h].detach() for h in hooks}


def own_predictions(model: Any, base: np.ndarray) -> np.ndarray:
    """The model's own answers on the ``base`` words (the behavioural ceiling's numerator)."""
    import torch

    P = len(model.card.io.prefix)
    with exact_precision():
        return model(torch.from_numpy(model.card.io.encode(base)))[:, P: P + base.shape[1]].argmax(-1).numpy()


def interchange(model: Any, base: np.ndarray, source: np.ndarray, site: Site, rotation: Any = None,
                activations: dict[str, Any] | None = None) -> Any:
    """Logits of the ``base`` words with ``site`` set to its value on the ``source`` words. ``rotation`` (a
    torch ``[d, k]`` with orthonormal columns, differentiable) overrides the site's basis (DAS trains it);
    ``activations`` are the source words' (:func:`source_activations`) when already computed."""
    import torch

    card = model.card
    p = len(card.io.prefix) + site.position
    tb = torch.from_numpy(card.io.encode(base))
    if activations is None or site.hook not in activations:
        activations = source_activations(model, source, [site.hook])
    src = activations[site.hook][:, p]
    B = rotation if rotation is not None else (None if site.basis is None else torch.as_tensor(site.basis, dtype=src.dtype))

    def hook(x, hook):
        x = x.clone()
        delta = src - x[:, p]
        x[:, p] = x[:, p] + (delta if B is None else (delta @ B) @ B.T)
        return x

    with exact_precision(grad=rotation is not None):
        return model.run_with_hooks(tb, fwd_hooks=[(site.hook, hook)], return_type="logits")


def iia(model: Any, high: StateModel, site: Site, base: np.ndarray, source: np.ndarray,
        activations: dict[str, Any] | None = None, own: np.ndarray | None = None) -> dict[str, Any]:
    """IIA of ``site`` as ``high``'s variable at the site's position (see the module docstring);
    ``activations`` and ``own`` (:func:`source_activations`, :func:`own_predictions`) when a scan shares them."""
    P = len(model.card.io.prefix)
    logits = interchange(model, base, source, site, activations=activations)
    predicted = logits[:, P: P + base.shape[1]].argmax(-1).numpy()
    labels, scored = high.counterfactual(base, source, site.position)
    plain = high.automaton.run(base)
    changed = scored & (labels != plain)
    own = own_predictions(model, base) if own is None else own
    hit = predicted == labels
    out = {"site": site.name or f"{site.hook}@{site.position}", "hook": site.hook, "position": site.position,
           "dims": site.dims, "model": high.mode}
    for key, mask in (("all", scored), ("changed", changed)):
        k, n = int(hit[mask].sum()), int(mask.sum())
        out[key] = {"iia": k / n if n else None, "interval": wilson_interval(k, n), "outputs": n}
    out["ceiling"] = float((own == plain)[scored].mean()) if scored.any() else None
    return out
