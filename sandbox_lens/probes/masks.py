"""Learned continuous head masks with a sparsity penalty: head importance when the others adapt.

Thesis §3.6.5.2 contrasts two notions of head importance. *Others fixed* (``sandbox_lens.probes.ablation``)
removes one head and measures the drop. *Others adapt* (Voita et al. 2019) gives every head a
gate, trains the gates jointly with the rest of the network under a relaxed L0 penalty on the
number of open gates, and reports the heads that survive. The gates are hard-concrete variables
(Louizos, Welling & Kingma 2018): a stretched, clipped, reparameterised sigmoid whose expected
L0 norm is differentiable. Each gate multiplies its head's output ``hook_z``.

The model passed in is not modified: the masks are learned on a copy.

Measured caveat: exact constructions are gradient deserts off their operating point. A head
scaled down by a partly closed gate can push a construction's one-hot lookups out of range, its
output collapses to a constant, and neither the loss nor the gates get a gradient back (seen on
the 16-block Krohn–Rhodes grid9 cascade: gates closed, accuracy at chance). Gates therefore
start almost surely open (log α = 5), and the result says whether the gated network kept its
accuracy (``kept_accuracy``).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from sandbox_lens.interp.errors import VocabularyError
from sandbox_lens.interp.model.device import on, to_numpy
from sandbox_lens.interp.model.run import hook_name, live_heads, run_with_hooks
from sandbox_lens.probes.ablation import accuracy_with_ablation

__all__ = ["learn_head_masks", "gate_values", "expected_open", "BETA", "GAMMA", "ZETA"]

Head = tuple[int, int]
# Hard-concrete constants of Louizos et al.: temperature and the stretch interval (γ, ζ).
BETA, GAMMA, ZETA = 2.0 / 3.0, -0.1, 1.1


def gate_values(log_alpha, training: bool):
    """Hard-concrete gates in [0, 1]: sampled (``training``) or their deterministic value."""
    import torch

    if training:
        # drawn on the CPU whatever the device: the same gates from the same seed on any machine
        u = torch.rand(log_alpha.shape, dtype=log_alpha.dtype).to(log_alpha.device).clamp(1e-6, 1 - 1e-6)
        s = torch.sigmoid((torch.log(u) - torch.log(1 - u) + log_alpha) / BETA)
    else:
        s = torch.sigmoid(log_alpha)
    return (s * (ZETA - GAMMA) + GAMMA).clamp(0.0, 1.0)


def expected_open(log_alpha):
    """The expected number of open gates, per gate: P(gate > 0), the relaxed L0 penalty."""
    import torch

    return torch.sigmoid(log_alpha - BETA * math.log(-GAMMA / ZETA))


def _gate_hooks(index: dict[Head, int], gates_now: dict[str, Any]) -> list[tuple[str, Callable]]:
    """``hook_z`` hooks that scale each masked head's output by its gate in ``gates_now["values"]``."""
    import torch

    def hook_for(layer: int):
        def hook(z, hook):
            values = gates_now["values"]
            one = torch.ones((), dtype=values.dtype, device=values.device)
            scale = torch.stack([values[index[(layer, h)]] if (layer, h) in index else one for h in range(z.shape[2])])
            return z * scale.to(z.dtype)[None, None, :, None]

        return hook

    return [(hook_name("z", layer), hook_for(layer)) for layer in sorted({layer for layer, _ in index})]


def learn_head_masks(
    model,
    batches: Callable[[int], tuple[np.ndarray, np.ndarray, np.ndarray]],
    eval_data: tuple[np.ndarray, np.ndarray, np.ndarray],
    sparsity: float = 1.0,
    steps: int = 200,
    lr: float = 0.1,
    weight_lr: float = 1e-4,
    adapt: bool = True,
    heads: Sequence[Head] | None = None,
    init_log_alpha: float = 5.0,
    seed: int = 0,
) -> dict:
    """Train hard-concrete head gates (and, with ``adapt``, all weights) under an L0 penalty.

    ``batches(step)`` returns ``(tokens, targets, loss_mask)`` for a training step; the loss is
    cross-entropy on ``loss_mask`` plus ``sparsity`` × (expected number of open gates), so with
    the default 1.0 a head stays open only if removing it would cost more than about one nat of
    cross-entropy per token.
    ``eval_data`` = ``(tokens, targets, score_mask)`` judges the result. Returns the gate
    values (deterministic: clamp(sigmoid(log α)(ζ − γ) + γ, 0, 1)), the surviving heads (gate > 0.5),
    the accuracy of the network as trained (adapted weights, surviving heads scaled by their
    gates, the others zeroed) and of
    the original weights with the closed heads zeroed, next to the intact model's.
    """
    import torch

    if sparsity < 0 or steps < 1:
        raise VocabularyError("learn_head_masks needs sparsity ≥ 0 and steps ≥ 1")
    heads = list(heads if heads is not None else live_heads(model))
    if not heads:
        raise VocabularyError("the model has no live attention heads to mask")
    torch.manual_seed(seed)
    work = copy.deepcopy(model)
    work.train()
    for p in work.parameters():
        p.requires_grad_(adapt)
    log_alpha = torch.nn.Parameter(on(model, torch.full((len(heads),), float(init_log_alpha))))
    opt = torch.optim.Adam([log_alpha], lr=lr)
    # Plain SGD for the weights: a weight moves only as far as the loss asks, so an exact
    # construction (loss ≈ 0) is left alone while a closing gate makes the others compensate.
    weights = [p for p in work.parameters() if p.dtype.is_floating_point] if adapt else []
    weight_opt = torch.optim.SGD(weights, lr=weight_lr) if adapt else None
    index = {hd: i for i, hd in enumerate(heads)}
    gates_now: dict[str, Any] = {"values": None}
    hooks = _gate_hooks(index, gates_now)
    trace = []
    for step in range(steps):
        tokens, targets, mask = batches(step)
        gates_now["values"] = gate_values(log_alpha, training=True)
        logits = run_with_hooks(work, on(model, tokens), return_type="logits", fwd_hooks=hooks)
        m = on(model, np.asarray(mask, dtype=bool))
        ce = torch.nn.functional.cross_entropy(logits[m].float(), on(model, targets)[m])
        open_gates = expected_open(log_alpha).sum()
        loss = ce + sparsity * open_gates
        opt.zero_grad()
        if weight_opt is not None:
            weight_opt.zero_grad()
        loss.backward()
        opt.step()
        if weight_opt is not None:
            torch.nn.utils.clip_grad_norm_(weights, 1.0)  # a half-closed gate on a construction gives huge gradients
            weight_opt.step()
        if step % max(1, steps // 20) == 0 or step == steps - 1:
            trace.append({"step": step, "loss": float(ce.detach()), "expected_open": float(open_gates.detach())})
    work.eval()
    with torch.no_grad():
        final = gate_values(log_alpha, training=False)
    surviving = [hd for hd in heads if final[index[hd]] > 0.5]
    gates_now["values"] = torch.where(final > 0.5, final, torch.zeros_like(final))  # closed heads removed
    closed = [hd for hd in heads if hd not in surviving]
    tokens, targets, score = eval_data
    with torch.inference_mode():
        logits = run_with_hooks(
            work, on(model, np.asarray(tokens, dtype=np.int64)), return_type="logits", fwd_hooks=hooks
        )
    m = np.asarray(score, dtype=bool)
    masked = float((to_numpy(logits.argmax(-1))[m] == np.asarray(targets)[m]).mean())
    accuracy_intact = accuracy_with_ablation(model, tokens, targets, score)
    return {
        "sparsity": sparsity,
        "adapt": adapt,
        "steps": steps,
        "gates": {hd: float(final[index[hd]]) for hd in heads},
        "surviving": surviving,
        "closed": closed,
        "accuracy_intact": accuracy_intact,
        # The network as trained: adapted weights, surviving heads scaled by their deterministic gates.
        "accuracy_masked": masked,
        "kept_accuracy": masked >= accuracy_intact - 0.02,
        # The closed heads removed from the original weights: how much of the result is the adaptation.
        "accuracy_masked_original_weights": accuracy_with_ablation(model, tokens, targets, score, closed),
        "trace": trace,
    }
