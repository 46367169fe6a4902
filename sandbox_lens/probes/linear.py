"""Linear probes on cached residual activations (every layer: resid_pre, resid_mid, resid_post).

For a model, a batch of token sequences and a task latent per position (automaton state, count
mod n, Dyck depth, ...), fit a linear classifier from the residual stream at each hook to the
latent on a training split and report its held-out accuracy. Only the probed hooks are cached
(``names_filter``), so memory stays small. The same inputs and labels can be used for a
constructed model and a trained one.

The default probe is multinomial logistic regression (softmax, a small L2 penalty, L-BFGS), which
finds any linear readout: the prefix scan, for instance, stores the state as one scalar
coordinate x = q + 1 and reads it with logits linear in x, which least squares on one-hot targets
cannot separate ("masking"; it got 0.37 where logistic regression gets 1.0 on grid9).
``method="ridge"`` is the closed-form least-squares probe, kept for speed and comparison.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from sandbox_lens.interp.errors import VocabularyError
from sandbox_lens.interp.model.checked import residual_stream
from sandbox_lens.interp.model.device import to_numpy
from sandbox_lens.interp.model.run import hook_name, require_hooked

__all__ = ["residual_hooks", "probe_accuracy", "automaton_probe_data", "probe_directions", "probe_directions_cv"]

DEFAULT_L2 = {"logistic": 1e-5, "ridge": 1e-3}
#: The L2 strengths :func:`probe_directions_cv` chooses among (by held-out accuracy within the training words).
L2_GRID = (1e-4, 1e-2, 1.0)
#: Among the strengths whose cross-validated accuracy is within this of the best, the strongest is chosen.
L2_TOLERANCE = 0.01


def residual_hooks(n_layers: int) -> list[str]:
    """hook_resid_pre, hook_resid_mid and hook_resid_post of every block, in order."""
    return [hook_name(f"resid_{kind}", l) for l in range(n_layers) for kind in ("pre", "mid", "post")]


def automaton_probe_data(model, automaton, words: np.ndarray, latent=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(tokens, labels, mask) for a sandbox-lens model's token layout on automaton ``words``.

    ``latent`` maps the state sequence (words × T) to the probed labels; default: the state.
    """
    io = model.card.io
    words = np.atleast_2d(np.asarray(words, dtype=np.int64))
    P = len(io.prefix)
    tokens = io.encode(words)
    states = automaton.run(words)
    values = states if latent is None else np.asarray(latent(states))
    labels = np.zeros_like(tokens)
    labels[:, P:] = values
    mask = np.zeros(tokens.shape, dtype=bool)
    mask[:, P:] = True
    return tokens, labels, mask


def probe_accuracy(
    model,
    tokens: np.ndarray,
    labels: np.ndarray,
    mask: np.ndarray,
    hooks: Sequence[str] | None = None,
    train_fraction: float = 0.7,
    l2: float | None = None,
    seed: int = 0,
    method: str = "logistic",
) -> dict[str, float]:
    """Held-out accuracy of a linear probe for ``labels`` at every hook (sequences split train/test).

    ``method``: ``"logistic"`` (softmax regression, L2 weight ``l2``, default 1e-5: weak, because a
    latent stored along one direction needs large weights to separate many classes; where the
    least-squares probe already classifies the whole training split correctly, that one is used)
    or ``"ridge"`` (least squares on one-hot targets, ridge ``l2`` × rows, default 1e-3).
    """
    require_hooked(model, "linear probes on residual hooks")
    if method not in ("logistic", "ridge"):
        raise VocabularyError(f"probe method must be logistic or ridge, got {method!r}")
    tokens, labels, mask = (np.asarray(x) for x in (tokens, labels, mask))
    if tokens.shape != labels.shape or tokens.shape != mask.shape:
        raise VocabularyError("tokens, labels and mask must have the same shape")
    if len(tokens) < 4:
        raise VocabularyError("linear probes need at least 4 sequences (train and test splits)")
    hooks = list(hooks or residual_hooks(model.cfg.n_layers))
    order = np.random.default_rng(seed).permutation(len(tokens))
    cut = max(1, min(len(tokens) - 1, int(round(train_fraction * len(tokens)))))
    train_rows, test_rows = order[:cut], order[cut:]
    classes = np.unique(labels[mask])
    if tokens.shape[1] > model.cfg.n_ctx:
        raise VocabularyError(f"inputs of {tokens.shape[1]} tokens do not fit the model's context ({model.cfg.n_ctx})")
    cache, _ = residual_stream(model, tokens, hooks)  # the bare forward where it agrees with the model
    out = {}
    for hook in hooks:
        acts = to_numpy(cache[hook].double())
        x_tr, y_tr = acts[train_rows][mask[train_rows]], labels[train_rows][mask[train_rows]]
        x_te, y_te = acts[test_rows][mask[test_rows]], labels[test_rows][mask[test_rows]]
        mu, sd = x_tr.mean(0), x_tr.std(0) + 1e-8
        x_tr, x_te = (x_tr - mu) / sd, (x_te - mu) / sd
        y_index = np.searchsorted(classes, y_tr)
        w, b = _fit_ridge(
            x_tr, y_index, len(classes), l2 if l2 is not None and method == "ridge" else DEFAULT_L2["ridge"]
        )
        # Softmax regression only where least squares does not already separate the training set
        # (it is ~100x slower, and cannot beat a perfect training fit by more than luck).
        if method == "logistic" and ((x_tr @ w + b).argmax(1) != y_index).any():
            w, b = _fit_logistic(x_tr, y_index, len(classes), l2 if l2 is not None else DEFAULT_L2["logistic"])
        pred = classes[(x_te @ w + b).argmax(1)]
        out[hook] = float((pred == y_te).mean())
    return out


def _fit_ridge(x: np.ndarray, y: np.ndarray, n_classes: int, ridge: float) -> tuple[np.ndarray, np.ndarray]:
    xb = np.hstack([x, np.ones((len(x), 1))])
    target = np.zeros((len(y), n_classes))
    target[np.arange(len(y)), y] = 1.0
    w = np.linalg.solve(xb.T @ xb + ridge * len(xb) * np.eye(xb.shape[1]), xb.T @ target)
    return w[:-1], w[-1]


def _fit_logistic(x: np.ndarray, y: np.ndarray, n_classes: int, l2: float) -> tuple[np.ndarray, np.ndarray]:
    """Softmax regression by full-batch L-BFGS in float64 (deterministic; 100 iterations ≈ 0.5 s)."""
    import torch

    if n_classes == 1:
        return np.zeros((x.shape[1], 1)), np.zeros(1)
    with torch.enable_grad():
        xt, yt = torch.from_numpy(x), torch.from_numpy(y.astype(np.int64))
        w = torch.zeros(x.shape[1], n_classes, dtype=torch.float64, requires_grad=True)
        b = torch.zeros(n_classes, dtype=torch.float64, requires_grad=True)
        opt = torch.optim.LBFGS(
            [w, b], lr=1.0, max_iter=100, tolerance_grad=1e-9, tolerance_change=1e-12, line_search_fn="strong_wolfe"
        )

        def closure():
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(xt @ w + b, yt) + l2 * (w * w).sum()
            loss.backward()
            return loss

        opt.step(closure)
    return w.detach().numpy(), b.detach().numpy()


def _fit_logistic_quick(x: np.ndarray, y: np.ndarray, n_classes: int, l2: float) -> tuple[np.ndarray, np.ndarray]:
    """The same objective as :func:`_fit_logistic` by SciPy's L-BFGS-B on an analytic gradient (no autograd per
    step: ~50x faster on small probes); used where only held-out accuracy is read (choosing the L2 strength)."""
    from scipy.optimize import minimize
    from scipy.special import log_softmax, softmax

    n, d = x.shape
    onehot = np.eye(n_classes)[y]

    def loss(theta: np.ndarray) -> tuple[float, np.ndarray]:
        w, b = theta[: d * n_classes].reshape(d, n_classes), theta[d * n_classes :]
        z = x @ w + b
        value = -(onehot * log_softmax(z, axis=1)).sum() / n + l2 * (w * w).sum()
        g = (softmax(z, axis=1) - onehot) / n
        return value, np.concatenate([(x.T @ g + 2 * l2 * w).ravel(), g.sum(axis=0)])

    theta = minimize(loss, np.zeros(d * n_classes + n_classes), jac=True, method="L-BFGS-B", options={"maxiter": 200}).x
    return theta[: d * n_classes].reshape(d, n_classes), theta[d * n_classes :]


def probe_directions(
    x: np.ndarray, y: np.ndarray, n_classes: int, l2: float = DEFAULT_L2["logistic"]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A multinomial logistic probe of ``y`` (``[n]`` class indices) on ``x`` (``[n, d]``): (an orthonormal basis
    ``[d, r]`` of its class weights' span after removing their mean, r ≤ n_classes − 1 — the subspace an
    interchange on "the probe's directions" swaps —, its weights ``[d, C]``, its biases ``[C]``)."""
    w, b = _fit_logistic(np.asarray(x, dtype=np.float64), np.asarray(y), n_classes, l2)
    centred = w - w.mean(axis=1, keepdims=True)
    u, s, _ = np.linalg.svd(centred, full_matrices=False)
    return (u[:, s > 1e-9 * max(float(s[0]), 1e-300)] if len(s) and s[0] > 0 else u[:, :0]), w, b


def probe_directions_cv(
    x: np.ndarray, y: np.ndarray, n_classes: int, grid: Sequence[float] = L2_GRID, folds: int = 2
) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
    """:func:`probe_directions` with its L2 strength chosen by ``folds``-fold cross-validation on ``x`` alone: the
    strongest of ``grid`` within :data:`L2_TOLERANCE` of the best held-out accuracy (a weak penalty lets a probe
    that reads perfectly rest on directions the model never uses, so "readable but not used" is only said of
    a probe regularised as far as its accuracy allows). Returns the basis, weights, biases and the choice
    (``{"l2", "cv_accuracy": {l2: accuracy}}``)."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y)
    fold = np.arange(len(y)) % folds
    accuracy = {}
    for l2 in grid:
        right = 0
        for f in range(folds):
            tr, te = fold != f, fold == f
            w, b = _fit_logistic_quick(x[tr], y[tr], n_classes, l2)
            right += int(((x[te] @ w + b).argmax(1) == y[te]).sum())
        accuracy[l2] = right / len(y)
    best = max(accuracy.values())
    l2 = max(v for v, a in accuracy.items() if a >= best - L2_TOLERANCE)
    basis, w, b = probe_directions(x, y, n_classes, l2)
    return basis, w, b, {"l2": l2, "cv_accuracy": {str(k): v for k, v in accuracy.items()}}
