"""Distributed alignment search (DAS; Geiger, Wu, Potts, Icard, Goodman 2023): learn the k-dimensional
subspace of a site whose interchange makes the model follow the high-level model.

The subspace is ``R`` ``[d, k]`` with orthonormal columns (``torch.nn.utils.parametrizations.orthogonal``
on a ``d × k`` map), the model is frozen, and the loss is the cross-entropy of the intervened outputs
against the high-level counterfactual labels on the outputs the variable reaches. The map is linear:
non-linear maps reach perfect IIA even on random models (Sutter et al. 2025), so none is offered. The
score that counts is IIA on *held-out* pairs (:func:`interp.causal.interchange.iia`), beside a random
subspace of the same k.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from interp.causal.highlevel import StateModel
from interp.causal.interchange import Site, interchange, source_activations

__all__ = ["das", "principal_angles", "live_basis"]


def das(model: Any, high: StateModel, hook: str, position: int, k: int, base: np.ndarray, source: np.ndarray,
        steps: int = 200, lr: float = 0.01, batch: int = 64, seed: int = 0) -> tuple[np.ndarray, list[dict]]:
    """The learned basis ``[d, k]`` of ``hook`` at ``position`` (trained on the given pairs) and the loss trace."""
    d = model.cfg.d_model
    if not 1 <= k <= d:
        raise ValueError(f"DAS needs 1 ≤ k ≤ d_model = {d}, got {k}")
    labels, scored = high.counterfactual(base, source, position)
    P = len(model.card.io.prefix)
    T = base.shape[1]
    frozen = [(p, p.requires_grad) for p in model.parameters()]
    for p, _ in frozen:
        p.requires_grad_(False)
    try:
        return _train(model, high, hook, position, k, base, source, labels, scored, steps, lr, batch, seed, P, T, d)
    finally:
        for p, flag in frozen:  # the model is the caller's: leave it as it was
            p.requires_grad_(flag)


def _train(model, high, hook, position, k, base, source, labels, scored, steps, lr, batch, seed, P, T, d):
    import torch

    from interp.streams import Stream, torch_seed

    with torch.random.fork_rng():
        torch.manual_seed(torch_seed(seed, Stream.DAS_INIT))
        rotation = torch.nn.utils.parametrizations.orthogonal(torch.nn.Linear(k, d, bias=False))
        opt = torch.optim.Adam(rotation.parameters(), lr=lr)
        order = np.random.default_rng(torch_seed(seed, Stream.DAS_INIT)).permutation(len(base))
        trace = []
        site = Site(hook, position)
        for step in range(steps):
            idx = order[(step * batch) % len(base):][:batch]
            if len(idx) < batch:
                idx = np.concatenate([idx, order[: batch - len(idx)]])
            logits = interchange(model, base[idx], source[idx], site, rotation=rotation.weight)
            out = logits[:, P: P + T]
            m = torch.from_numpy(scored[idx])
            loss = torch.nn.functional.cross_entropy(out[m].float(), torch.from_numpy(labels[idx])[m])
            opt.zero_grad()
            loss.backward()
            opt.step()
            if step % max(1, steps // 10) == 0 or step == steps - 1:
                trace.append({"step": step, "loss": float(loss.detach())})
        basis = rotation.weight.detach().double().numpy()
    return basis, trace


def principal_angles(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The principal angles, in degrees and ascending, between the column spans of ``a`` and ``b`` (``[d, k]``)."""
    qa, _ = np.linalg.qr(np.asarray(a, dtype=np.float64))
    qb, _ = np.linalg.qr(np.asarray(b, dtype=np.float64))
    s = np.linalg.svd(qa.T @ qb, compute_uv=False)
    return np.degrees(np.arccos(np.clip(s, -1.0, 1.0)))


def live_basis(model: Any, hook: str, position: int, words: np.ndarray, tolerance: float = 1e-6) -> np.ndarray:
    """An orthonormal basis ``[d, r]`` of the directions ``hook`` actually varies in at ``position`` over ``words``
    (centred activations, singular values above ``tolerance`` × the largest). A DAS basis is only determined
    inside it — a direction the activations never move along changes nothing when swapped — so compare
    subspaces after projecting onto it (:func:`principal_angles`)."""
    P = len(model.card.io.prefix)
    x = source_activations(model, words, [hook])[hook][:, P + position].double().numpy()
    x = x - x.mean(axis=0)
    _, s, vt = np.linalg.svd(x, full_matrices=False)
    return vt[s > tolerance * max(float(s[0]), 1e-300)].T
