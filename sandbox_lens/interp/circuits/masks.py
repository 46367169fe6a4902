"""Learned edge masks (edge pruning, Bhaskar et al. 2024; subnetwork probing with hard-concrete gates):
every edge gets a gate in [0, 1] — how much of its sender's output it delivers, the rest coming from
the ablation — trained to keep the model's output (KL from the clean run over the full output
distribution at the scored positions, on a few pairs drawn afresh each step) under a relaxed L0 penalty
on the number of open gates (Louizos, Welling & Kingma 2018; the gates of :mod:`sandbox_lens.probes.masks`). The
circuit is the edges whose deterministic gate is open (> 1/2); the ranking is the gates' log α.

Unlike one-edge-at-a-time methods, the gates are trained jointly, so two edges that only matter
together (a cancelling pair) can close together. Needs the bare engine (:mod:`sandbox_lens.interp.circuits.bare`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sandbox_lens.interp.errors import ModelKindError
from sandbox_lens.interp.model.device import device_of, on, to_numpy
from sandbox_lens.interp.model.run import exact_precision
from sandbox_lens.interp.streams import Stream, torch_seed
from sandbox_lens.probes.masks import expected_open, gate_values

__all__ = ["learn_edge_masks", "MASK_DEFAULTS"]

#: Steps, Adam's learning rate, the L0 weight (per mean open gate), the gates' starting log α and the pairs each
#: step trains on (MIB's edge-mask runs take 5 a step; every pair every step costs three times as much on the board's
#: largest graphs, the prefix scan's and the gridworld's: deviation 37 in docs/deviations.md).
MASK_DEFAULTS = {"steps": 300, "lr": 0.1, "sparsity": 0.5, "init_log_alpha": 3.0, "batch": 5}


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

    if not hasattr(patcher, "run_gated"):
        raise ModelKindError("learned edge masks need the bare patching engine (--engine bare or auto)")
    E = len(patcher.graph.edges)
    log_alpha = torch.full(
        (E,), float(init_log_alpha), dtype=torch.float32, device=device_of(patcher.model), requires_grad=True
    )
    opt = torch.optim.Adam([log_alpha], lr=lr)
    trace = []
    with torch.random.fork_rng(), exact_precision(grad=True):
        torch.manual_seed(torch_seed(seed, Stream.EDGE_MASKS))
        n = len(pairs.clean)
        full = batch is None
        if not full:
            read = on(log_alpha, np.asarray(pairs.read))
            # the reference is the gated engine's own all-open run, not Pairs.kl_full's clean forward: the two differ
            # by rounding, and against this one a mask of all ones has a minibatch KL of exactly 0
            with torch.no_grad():
                ref = torch.log_softmax(patcher.run_gated(pairs.clean, source, torch.ones_like(log_alpha)).double(), -1)
        for step in range(steps):
            keep = gate_values(log_alpha, training=True)
            if full:
                kl = pairs.kl_full(patcher.run_gated(pairs.clean, source, keep))
            else:
                pick = torch.randperm(n)[: min(batch, n)]
                src = {k: v if len(v) == 1 else v[pick.to(v.device)] for k, v in source.items()}
                logits = patcher.run_gated(pairs.clean[to_numpy(pick)], src, keep)
                mask = read[pick.to(read.device)]
                logp, p_ref = torch.log_softmax(logits[mask].double(), -1), ref[pick.to(ref.device)][mask]
                kl = (p_ref.exp() * (p_ref - logp)).sum(-1).mean()
            open_share = expected_open(log_alpha).mean()
            loss = kl + sparsity * open_share
            opt.zero_grad()
            loss.backward()
            opt.step()
            if step % max(1, steps // 10) == 0 or step == steps - 1:
                trace.append({"step": step, "kl": float(kl.detach()), "expected_open": float(open_share.detach())})
        final = gate_values(log_alpha.detach(), training=False)
    return {"log_alpha": to_numpy(log_alpha.double()), "gates": to_numpy(final.double()), "trace": trace}
