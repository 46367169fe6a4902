"""Linear probes on cached residual activations (every layer: resid_pre, resid_mid, resid_post).

For a model, a batch of token sequences and a task latent per position (automaton state, count
mod n, Dyck depth, ...), fit a ridge-regularised linear map from the residual stream at each hook
to the one-hot latent on a training split and report the held-out argmax accuracy. Only the
probed hooks are cached (``names_filter``), so memory stays small. The same inputs and labels
can be used for a constructed model and a trained one.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from interp.errors import VocabularyError

__all__ = ["residual_hooks", "probe_accuracy", "automaton_probe_data"]


def residual_hooks(n_layers: int) -> list[str]:
    """hook_resid_pre, hook_resid_mid and hook_resid_post of every block, in order."""
    return [f"blocks.{l}.hook_resid_{kind}" for l in range(n_layers) for kind in ("pre", "mid", "post")]


def automaton_probe_data(model, automaton, words: np.ndarray, latent=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(tokens, labels, mask) for a sandbox-lens model's token layout on automaton ``words``.

    ``latent`` maps the state sequence (words × T) to the probed labels; default: the state.
    """
    io = model.card.io
    words = np.atleast_2d(np.asarray(words, dtype=np.int64))
    P = len(io.prefix)
    tokens = np.concatenate([np.broadcast_to(np.asarray(io.prefix, dtype=np.int64), (len(words), P)),
                             np.asarray(io.symbol_tokens)[words]], axis=1)
    states = automaton.run(words)
    values = states if latent is None else np.asarray(latent(states))
    labels = np.zeros_like(tokens)
    labels[:, P:] = values
    mask = np.zeros(tokens.shape, dtype=bool)
    mask[:, P:] = True
    return tokens, labels, mask


def probe_accuracy(model, tokens: np.ndarray, labels: np.ndarray, mask: np.ndarray, hooks: Sequence[str] | None = None,
                   train_fraction: float = 0.7, ridge: float = 1e-3, seed: int = 0) -> dict[str, float]:
    """Held-out accuracy of a linear probe for ``labels`` at every hook (sequences split train/test)."""
    import torch

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
    index = {c: i for i, c in enumerate(classes)}
    with torch.inference_mode():
        _, cache = model.run_with_cache(torch.from_numpy(tokens), names_filter=hooks)
    out = {}
    for hook in hooks:
        acts = cache[hook].double().numpy()

        def rows(sel: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            m = mask[sel]
            return acts[sel][m], labels[sel][m]

        x_tr, y_tr = rows(train_rows)
        x_te, y_te = rows(test_rows)
        mu, sd = x_tr.mean(0), x_tr.std(0) + 1e-8
        x_tr, x_te = (x_tr - mu) / sd, (x_te - mu) / sd
        x_tr = np.hstack([x_tr, np.ones((len(x_tr), 1))])
        x_te = np.hstack([x_te, np.ones((len(x_te), 1))])
        target = np.zeros((len(y_tr), len(classes)))
        target[np.arange(len(y_tr)), [index[c] for c in y_tr]] = 1.0
        w = np.linalg.solve(x_tr.T @ x_tr + ridge * len(x_tr) * np.eye(x_tr.shape[1]), x_tr.T @ target)
        pred = classes[(x_te @ w).argmax(1)]
        out[hook] = float((pred == y_te).mean())
    return out
