"""Distributed alignment search (DAS; Geiger, Wu, Potts, Icard, Goodman 2023): learn the k-dimensional
subspace of a site whose interchange makes the model follow the high-level model.

The subspace is ``R`` ``[d, k]`` with orthonormal columns (``torch.nn.utils.parametrizations.orthogonal``
on a ``d × k`` map), the model is frozen, and the loss is the cross-entropy of the intervened outputs
against the high-level counterfactual labels on the outputs the variable reaches. The map is linear:
non-linear maps reach perfect IIA even on random models (Sutter et al. 2025), so none is offered. The
score that counts is IIA on *held-out* pairs (:func:`sandbox_lens.interp.causal.interchange.iia`), beside a random
subspace of the same k.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from sandbox_lens.interp.causal.highlevel import HighLevel
from sandbox_lens.interp.causal.interchange import Site, interchange, source_activations
from sandbox_lens.interp.model.bare import bare_tail
from sandbox_lens.interp.model.device import device_of, on, to_numpy
from sandbox_lens.interp.model.run import exact_precision, run_with_hooks
from sandbox_lens.interp.streams import Stream, torch_seed

__all__ = ["das", "boundless_das", "principal_angles", "live_basis", "live_fraction", "DORMANT"]

#: A DAS subspace with less than this share in the live span is flagged as (partly) dormant.
DORMANT = 0.5


def das(
    model: Any,
    high: HighLevel,
    hook: str,
    position: int | None,
    k: int,
    base: np.ndarray,
    source: np.ndarray,
    steps: int = 200,
    lr: float = 0.01,
    batch: int = 64,
    seed: int = 0,
    variable: str | None = None,
    tick: Callable[[int], Any] | None = None,
) -> tuple[np.ndarray, list[dict]]:
    """The learned basis ``[d, k]`` of ``hook`` for ``high``'s ``variable`` (trained on the given pairs) and the
    loss trace. At one ``position``, or — ``position`` None — one subspace shared by every position, trained on
    (pair, position) examples drawn from all positions whose outputs the variable reaches (for a variable
    that changes few outputs at any one position, e.g. the Dyck depth). The loss is taken over the task's
    readout classes only (a Dyck model's closing brackets, a flip-flop model's bits). ``tick(n)`` is called as
    steps are done (a progress bar's ``update``; every step is counted, also when nothing is left to learn)."""
    d = model.cfg.d_model
    if not 1 <= k <= d:
        raise ValueError(f"DAS needs 1 ≤ k ≤ d_model = {d}, got {k}")
    rows, positions, labels, scored = _examples(high, base, source, position, variable)
    frozen = [(p, p.requires_grad) for p in model.parameters()]
    for p, _ in frozen:
        p.requires_grad_(False)
    try:
        return _train(
            model, high, hook, k, (base, source, rows), positions, labels, scored, steps, lr, batch, seed, d, tick
        )
    finally:
        for p, flag in frozen:  # the model is the caller's: leave it as it was
            p.requires_grad_(flag)


def _examples(high: HighLevel, base: np.ndarray, source: np.ndarray, position: int | None, variable: str | None):
    """(rows, positions, labels, scored) of the (pair, position) examples whose outputs the variable reaches;
    labels as indices among the readout classes when the task has a readout."""
    T = base.shape[1]
    answered = high.answers(base)[1]
    rows, positions, labels, scored = [], [], [], []
    for p in range(T) if position is None else [position]:
        lab, sc = high.counterfactual(base, source, p, variable)
        sc = sc & answered
        keep = np.flatnonzero(sc.any(axis=1))
        rows.append(keep)
        positions.append(np.full(len(keep), p))
        labels.append(lab[keep])
        scored.append(sc[keep])
    rows, positions = np.concatenate(rows), np.concatenate(positions)
    labels, scored = np.concatenate(labels), np.concatenate(scored)
    return rows, positions, high.readout_labels(labels), scored


def boundless_das(
    model: Any,
    high: HighLevel,
    hook: str,
    base: np.ndarray,
    source: np.ndarray,
    steps: int = 300,
    lr: float = 0.01,
    batch: int = 64,
    seed: int = 0,
    variable: str | None = None,
    sparsity: float = 0.05,
) -> tuple[np.ndarray, list[dict]]:
    """Boundless DAS (Wu, Geiger, Icard, Potts, Goodman 2023): a full orthogonal rotation of ``hook`` (shared by
    every position) and a learned soft mask over its coordinates, ``sigmoid(a / τ)`` with τ annealed from 1 to
    0.01 and a penalty ``sparsity`` × Σ mask, so k is learned rather than chosen. Returns the basis ``[d, k]``
    of the coordinates whose mask ends above 1/2 (k may be 0) and the trace (loss, mask size). Measured: on the
    rotated counter (16 dimensions) it learns k = 2 with held-out IIA 1.000; on a C3 twin k = 3 (0.988) — at
    0.01 the penalty left k = 5 and 9, at 0.2 both 2."""
    import torch

    d = model.cfg.d_model
    rows, positions, labels, scored = _examples(high, base, source, None, variable)
    frozen = [(p, p.requires_grad) for p in model.parameters()]
    for p, _ in frozen:
        p.requires_grad_(False)
    P, T = len(model.card.io.prefix), base.shape[1]
    trace: list[dict] = []
    try:
        with torch.random.fork_rng():
            torch.manual_seed(torch_seed(seed, Stream.DAS_INIT))
            # initialised on the CPU (the same numbers on any device), then moved to the model's
            rotation = torch.nn.utils.parametrizations.orthogonal(torch.nn.Linear(d, d, bias=False)).to(
                device_of(model)
            )
            logits = torch.nn.Parameter(on(model, torch.zeros(d)))
            opt = torch.optim.Adam([*rotation.parameters(), logits], lr=lr)
            cached = source_activations(model, source[rows], [hook])[hook]
            order = np.random.default_rng(torch_seed(seed, Stream.DAS_INIT)).permutation(len(rows))
            tb = on(model, model.card.io.encode(base[rows]))
            for step in range(steps if len(rows) else 0):
                tau = float(np.exp(np.log(1.0) + (np.log(0.01) - np.log(1.0)) * step / max(1, steps - 1)))
                idx = order[(step * batch) % len(rows) :][:batch]
                mask = torch.sigmoid(logits / tau)
                R = rotation.weight  # [d, d], orthogonal
                at = on(model, P + positions[idx])
                n = on(model, np.arange(len(idx)))
                src = cached[idx][n, at]

                def hook_fn(x, hook):
                    x = x.clone()
                    delta = (src - x[n, at]) @ R
                    x[n, at] = x[n, at] + (delta * mask) @ R.T
                    return x

                out = run_with_hooks(model, tb[idx], fwd_hooks=[(hook, hook_fn)], return_type="logits")[:, P : P + T]
                if high.readout is not None:
                    out = out[..., list(high.readout)]
                m = on(model, scored[idx])
                loss = torch.nn.functional.cross_entropy(out[m].float(), on(model, labels[idx])[m])
                total = loss + sparsity * mask.sum()
                opt.zero_grad()
                total.backward()
                opt.step()
                if step % max(1, steps // 10) == 0 or step == steps - 1:
                    trace.append({"step": step, "loss": float(loss.detach()), "mask": float(mask.detach().sum())})
            keep = to_numpy(torch.sigmoid(logits / 0.01) > 0.5)
            basis = to_numpy(rotation.weight.double())[:, keep]
    finally:
        for p, flag in frozen:
            p.requires_grad_(flag)
    return basis, trace


def _train(model, high, hook, k, pairs, positions, labels, scored, steps, lr, batch, seed, d, tick=None):
    """Adam on the orthogonal map's parameters over the (pair, position) examples (``pairs``: the base and source
    words and each example's pair), in a fixed seeded order."""
    import torch

    base, source, rows = pairs
    P, T = len(model.card.io.prefix), base.shape[1]
    trace: list[dict] = []
    with torch.random.fork_rng():
        torch.manual_seed(torch_seed(seed, Stream.DAS_INIT))
        rotation = torch.nn.utils.parametrizations.orthogonal(torch.nn.Linear(k, d, bias=False)).to(device_of(model))
        if not len(rows):  # the variable reaches no output on these pairs: nothing to learn
            if tick is not None:
                tick(steps)
            return to_numpy(rotation.weight.double()), trace
        opt = torch.optim.Adam(rotation.parameters(), lr=lr)
        order = np.random.default_rng(torch_seed(seed, Stream.DAS_INIT)).permutation(len(rows))
        intervened = _intervention(model, hook, base, source)
        for step in range(steps):
            idx = order[(step * batch) % len(rows) :][:batch]
            if len(idx) < batch:
                idx = np.concatenate([idx, order[: batch - len(idx)]])[:batch]
            out = intervened(rows[idx], positions[idx], rotation.weight)[:, P : P + T]
            if high.readout is not None:
                out = out[..., list(high.readout)]
            m = on(model, scored[idx])
            loss = torch.nn.functional.cross_entropy(out[m].float(), on(model, labels[idx])[m])
            opt.zero_grad()
            loss.backward()
            opt.step()
            if step % max(1, steps // 10) == 0 or step == steps - 1:
                trace.append({"step": step, "loss": float(loss.detach())})
            if tick is not None:
                tick(1)
        basis = to_numpy(rotation.weight.double())
    return basis, trace


def _intervention(
    model: Any, hook: str, base: np.ndarray, source: np.ndarray
) -> Callable[[np.ndarray, np.ndarray, Any], Any]:
    """``(rows, positions, R) → logits`` of the ``base`` words ``rows`` with the span of ``R`` ``[d, k]`` at ``hook`` and
    each row's position set to its source word's, differentiable in ``R``. The sources never change, and neither
    do the bases: both streams at ``hook`` are computed once, and each step runs only the blocks after ``hook``
    on the bare forward (:func:`~sandbox_lens.interp.model.bare.bare_tail`; where it does not cover the model,
    each step is a hooked run, :func:`~sandbox_lens.interp.causal.interchange.interchange`)."""
    tail = bare_tail(model, hook)
    P = len(model.card.io.prefix)
    if tail is None:
        cached = source_activations(model, source, [hook])

        def hooked(rows: np.ndarray, positions: np.ndarray, R: Any) -> Any:
            return interchange(
                model,
                base[rows],
                source[rows],
                Site(hook, 0),
                rotation=R,
                activations={hook: cached[hook][rows]},
                positions=positions,
            )

        return hooked
    streams = source_activations(model, np.concatenate([base, source]), [hook])[hook]
    x_base, x_source = streams[: len(base)], streams[len(base) :]

    def bare(rows: np.ndarray, positions: np.ndarray, R: Any) -> Any:
        n, at = on(model, np.arange(len(rows))), on(model, P + np.asarray(positions, dtype=np.int64))
        r = on(model, rows)
        x, src = x_base[r].clone(), x_source[r, at]
        x[n, at] = x[n, at] + ((src - x[n, at]) @ R) @ R.T
        with exact_precision(grad=True):
            return tail(x)

    return bare


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
    return _span(to_numpy(source_activations(model, words, [hook])[hook][:, P + position].double()), tolerance)


def _span(x: np.ndarray, tolerance: float) -> np.ndarray:
    """An orthonormal basis ``[d, r]`` of the directions centred ``x`` ``[n, d]`` varies in (singular values above
    ``tolerance`` × the largest)."""
    _, s, vt = np.linalg.svd(x - x.mean(axis=0), full_matrices=False)
    return vt[s > tolerance * max(float(s[0]), 1e-300)].T


def live_fraction(model: Any, hook: str, basis: np.ndarray, words: np.ndarray, tolerance: float = 1e-3) -> float:
    """The share of a subspace (``basis`` ``[d, k]``, orthonormal) that lies in the directions ``hook``'s activations
    vary in over ``words`` at every position (centred per position; singular values above ``tolerance`` × the
    largest): 1 when the subspace is all live, near 0 when it is *dormant*. An interchange in a dormant
    subspace can still move the output — by switching on a pathway the model never uses on real inputs
    (Makelov, Lange, Nanda 2023's interpretability illusion) — so a DAS result mostly outside the live span
    is flagged, not believed."""
    P = len(model.card.io.prefix)
    x = to_numpy(source_activations(model, words, [hook])[hook][:, P : P + words.shape[1]].double())
    live = _span((x - x.mean(axis=0, keepdims=True)).reshape(-1, x.shape[-1]), tolerance)
    b = np.asarray(basis, dtype=np.float64)
    return float(np.sum((live.T @ b) ** 2) / b.shape[1])
