"""Learned edge masks (edge pruning, Bhaskar et al. 2024; subnetwork probing with hard-concrete gates):
every edge gets a gate in [0, 1] — how much of its sender's output it delivers, the rest coming from
the ablation — trained to keep the model's output (KL from the clean run over the full output
distribution at the scored positions, on a few pairs drawn afresh each step) under a relaxed L0 penalty
on the number of open gates (Louizos, Welling & Kingma 2018; the gates of :mod:`sandbox_lens.probes.masks`). The
circuit is the edges whose deterministic gate is open (> 1/2); the ranking is the gates' log α.

Unlike one-edge-at-a-time methods, the gates are trained jointly, so two edges that only matter
together (a cancelling pair) can close together. Needs the bare engine (:mod:`sandbox_lens.interp.circuits.bare`).

Uniform gradient sampling (UGS, Li & Janson 2024, with optimal ablation) is the same training with another sampler
and another ablation: with p = σ(θ) and w = p(1 − p), each edge's mask is 1 with probability p − w/2, 0 with
1 − p − w/2 and uniform in between, one draw per word (w held fixed in the backward pass, which is rescaled so that
∂mask/∂p is 1 in the window); the penalty is the mean p; and what an ablated edge delivers is not the setting's
ablation but a learned constant per sender and position (optimal ablation: the constant that best keeps the output,
started at the sender's mean over the words), trained with the masks. The circuit is the edges with p > 1/2; the ranking is θ.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sandbox_lens.interp.errors import ModelKindError
from sandbox_lens.interp.model.device import device_of, on, to_numpy
from sandbox_lens.interp.model.run import exact_precision
from sandbox_lens.interp.streams import Stream, torch_seed
from sandbox_lens.probes.masks import expected_open, gate_values

__all__ = ["learn_edge_masks", "learn_ugs_masks", "ugs_sample", "MASK_DEFAULTS", "UGS_DEFAULTS"]

#: Steps, Adam's learning rate, the L0 weight (per mean open gate), the gates' starting log α and the pairs each
#: step trains on (MIB's edge-mask runs take 5 a step; every pair every step costs three times as much on the board's
#: largest graphs, the prefix scan's and the gridworld's: deviation 37 in docs/deviations.md).
MASK_DEFAULTS = {"steps": 300, "lr": 0.1, "sparsity": 0.5, "init_log_alpha": 3.0, "batch": 5}

#: UGS's steps, the masks' learning rate (MIB's 5e-2 for λ = 0.001), the penalty per mean p (the masks' own, so the
#: two differ in the sampler and the ablation only), θ's start (p ≈ 0.95), the pairs a step (MIB's 5) and the learning
#: rate of the optimal-ablation constants, relative to each sender's root-mean-square output (Adam moves a constant
#: by about that share of its size a step, whatever the construction's scale; MIB's oa.py takes 1e-3). Ten times that
#: rate lets the constants chase the sampled masks' noise: they leave the values that make an edge free to cut, and
#: UGS keeps 29 of the counter-with-negatives' 45 edges instead of 12 (benchmarks/ugs_budget.py at 21b1ad4).
UGS_DEFAULTS = {"steps": 300, "lr": 0.05, "sparsity": 0.5, "init_logit": 3.0, "batch": 5, "value_lr": 0.001}


def learn_edge_masks(
    patcher: Any,
    pairs: Any,
    source: dict[str, Any],
    *,
    steps: int = 300,
    lr: float = 0.1,
    sparsity: float = 0.5,
    init_log_alpha: float = 3.0,
    seed: int = 0,
    batch: int | None = 5,
) -> dict[str, Any]:
    """Train one hard-concrete gate per graph edge (see the module docstring); returns ``log_alpha`` (numpy,
    graph order), the open ``gates``, and a short ``trace`` of the KL and the expected open fraction. ``batch``: each
    step trains on that many pairs drawn afresh (None: every pair, every step); the trace's KL is the step's."""
    import torch

    log_alpha = _parameter(patcher, init_log_alpha)
    r = _train(
        patcher,
        pairs,
        source,
        log_alpha,
        lambda rows: gate_values(log_alpha, training=True),  # one draw for every word of the step
        lambda: expected_open(log_alpha).mean(),
        torch.optim.Adam([log_alpha], lr=lr),
        steps=steps,
        sparsity=sparsity,
        seed=torch_seed(seed, Stream.EDGE_MASKS),
        batch=batch,
    )
    final = gate_values(log_alpha.detach(), training=False)
    return {"log_alpha": to_numpy(log_alpha.detach().double()), "gates": to_numpy(final.double()), "trace": r}


def ugs_sample(theta: Any, draws: int = 1) -> Any:
    """UGS's edge masks ``[edges, draws]`` for logits ``theta`` (a uniform draw per edge and draw; see the module
    docstring): 1 where u < p − w/2, 0 where u > p + w/2, linear between, with p = σ(θ), w = p(1 − p); the backward
    pass sees ∂mask/∂p = 1 inside the window (0 outside), so ∂mask/∂θ = w there."""
    import torch

    p = torch.sigmoid(theta)[:, None]
    w = (p * (1 - p)).detach().clamp_min(1e-12)
    scaled = p.detach() + (p - p.detach()) * w  # the value of p, the gradient of p·w
    # drawn on the CPU whatever the device: the same masks from the same seed on any machine
    u = torch.rand(len(theta), draws, dtype=theta.dtype).to(theta.device)
    return 1 - ((u - scaled) / w + 0.5).clamp(0.0, 1.0)


def learn_ugs_masks(
    patcher: Any,
    pairs: Any,
    *,
    steps: int = 300,
    lr: float = 0.05,
    sparsity: float = 0.5,
    init_logit: float = 3.0,
    seed: int = 0,
    batch: int | None = 5,
    value_lr: float = 0.001,
) -> dict[str, Any]:
    """UGS with optimal ablation (see the module docstring): returns ``theta`` (numpy, graph order), ``p`` = σ(θ),
    ``values_moved`` (per sender, how far its constant moved from the mean it started at, relative to that mean's
    size) and the ``trace``."""
    import torch

    theta = _parameter(patcher, init_logit)  # refuses an engine that cannot gate edges
    with torch.no_grad(), exact_precision():
        means = {k: v.mean(0, keepdim=True).detach() for k, v in patcher.outputs(pairs.clean).items()}
    values = {k: v.clone().requires_grad_(True) for k, v in means.items()}
    groups = [{"params": [theta], "lr": lr}] + [
        {"params": [v], "lr": value_lr * max(float(m.pow(2).mean().sqrt()), 1e-6)}
        for v, m in zip(values.values(), means.values())
    ]
    trace = _train(
        patcher,
        pairs,
        values,
        theta,
        lambda rows: ugs_sample(theta, rows)[:, :, None].expand(-1, -1, pairs.clean.shape[1]),  # a draw per word
        lambda: torch.sigmoid(theta).mean(),
        torch.optim.Adam(groups),
        steps=steps,
        sparsity=sparsity,
        seed=torch_seed(seed, Stream.UGS_MASKS),
        batch=batch,
    )
    moved = {k: float((values[k].detach() - m).norm() / max(float(m.norm()), 1e-12)) for k, m in means.items()}
    p = torch.sigmoid(theta.detach())
    return {
        "theta": to_numpy(theta.detach().double()),
        "p": to_numpy(p.double()),
        "values_moved": moved,
        "trace": trace,
    }


def _parameter(patcher: Any, start: float) -> Any:
    """One trainable float32 logit per graph edge, all at ``start`` (refused where the engine cannot gate edges)."""
    import torch

    if not hasattr(patcher, "run_gated"):
        raise ModelKindError("learned edge masks need the bare patching engine (--engine bare or auto)")
    E = len(patcher.graph.edges)
    return torch.full((E,), float(start), dtype=torch.float32, device=device_of(patcher.model), requires_grad=True)


def _train(
    patcher: Any,
    pairs: Any,
    source: dict[str, Any],
    logits: Any,
    sample: Any,
    open_share: Any,
    opt: Any,
    *,
    steps: int,
    sparsity: float,
    seed: int,
    batch: int | None,
) -> list[dict[str, float]]:
    """The masks' loop: each step ``sample(words)``s the masks, runs the gated model (KL from the clean run on ``batch``
    pairs drawn afresh, or on every pair) plus ``sparsity`` × ``open_share()``, and steps ``opt``; returns the trace."""
    import torch

    trace = []
    with torch.random.fork_rng(), exact_precision(grad=True):
        torch.manual_seed(seed)
        n = len(pairs.clean)
        full = batch is None
        if not full:
            read = on(logits, np.asarray(pairs.read))
            # the reference is the gated engine's own all-open run, not Pairs.kl_full's clean forward: the two differ
            # by rounding, and against this one a mask of all ones has a minibatch KL of exactly 0
            with torch.no_grad():
                ref = torch.log_softmax(patcher.run_gated(pairs.clean, source, torch.ones_like(logits)).double(), -1)
        for step in range(steps):
            keep = sample(n if full else min(batch, n))  # drawn before the words (the masks' seeded order)
            if full:
                kl = pairs.kl_full(patcher.run_gated(pairs.clean, source, keep))
            else:
                pick = torch.randperm(n)[: min(batch, n)]
                src = {k: v if len(v) == 1 else v[pick.to(v.device)] for k, v in source.items()}
                out = patcher.run_gated(pairs.clean[to_numpy(pick)], src, keep)
                mask = read[pick.to(read.device)]
                logp, p_ref = torch.log_softmax(out[mask].double(), -1), ref[pick.to(ref.device)][mask]
                kl = (p_ref.exp() * (p_ref - logp)).sum(-1).mean()
            share = open_share()
            loss = kl + sparsity * share
            opt.zero_grad()
            loss.backward()
            opt.step()
            if step % max(1, steps // 10) == 0 or step == steps - 1:
                trace.append({"step": step, "kl": float(kl.detach()), "expected_open": float(share.detach())})
    return trace
