"""Head ablation and greedy head pruning (thesis §3.6.5.2's "others fixed" notion of importance).

Each head's output ``hook_z`` is replaced by zero or by its mean over the batch and positions;
the accuracy on the scored positions is compared with the intact model's. Greedy pruning removes,
one at a time, the head whose removal costs least, while accuracy stays above a threshold, and
reports the heads that survive.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from sandbox_lens.interp.errors import VocabularyError
from sandbox_lens.interp.model.device import on, to_numpy
from sandbox_lens.interp.model.run import Head, hook_name, live_heads, require_hooked, run_with_hooks

__all__ = ["accuracy_with_ablation", "head_ablation", "greedy_prune"]


def accuracy_with_ablation(
    model, tokens: np.ndarray, targets: np.ndarray, mask: np.ndarray, ablate: Iterable[Head] = (), kind: str = "zero"
) -> float:
    """Argmax accuracy on ``mask`` with the heads in ``ablate`` zeroed or mean-ablated on hook_z."""
    import torch

    require_hooked(model, "head ablation")
    if kind not in ("zero", "mean"):
        raise VocabularyError(f"ablation kind must be zero or mean, got {kind!r}")
    tokens_t = on(model, np.asarray(tokens, dtype=np.int64))
    by_layer: dict[int, list[int]] = {}
    for layer, head in ablate:
        by_layer.setdefault(int(layer), []).append(int(head))

    def hook_for(heads: Sequence[int]):
        def hook(z, hook):  # z: [batch, pos, head, d_head]
            for h in heads:
                z[:, :, h, :] = 0.0 if kind == "zero" else z[:, :, h, :].mean(dim=(0, 1), keepdim=True)
            return z

        return hook

    hooks = [(hook_name("z", l), hook_for(hs)) for l, hs in by_layer.items()]
    with torch.inference_mode():
        logits = run_with_hooks(model, tokens_t, return_type="logits", fwd_hooks=hooks)
    pred = to_numpy(logits.argmax(-1))
    m = np.asarray(mask, dtype=bool)
    return float((pred[m] == np.asarray(targets)[m]).mean())


def head_ablation(model, tokens, targets, mask, kind: str = "zero", heads: Sequence[Head] | None = None) -> dict:
    """Accuracy of the intact model and with each head ablated alone, plus the drop per head."""
    base = accuracy_with_ablation(model, tokens, targets, mask)
    heads = list(heads if heads is not None else live_heads(model))
    per_head = {hd: accuracy_with_ablation(model, tokens, targets, mask, [hd], kind) for hd in heads}
    return {"kind": kind, "baseline": base, "accuracy": per_head, "drop": {hd: base - a for hd, a in per_head.items()}}


def greedy_prune(
    model, tokens, targets, mask, threshold: float, kind: str = "zero", heads: Sequence[Head] | None = None
) -> dict:
    """Remove heads one by one (cheapest first) while accuracy stays ≥ ``threshold``."""
    remaining = list(heads if heads is not None else live_heads(model))
    removed: list[Head] = []
    trace = []
    while remaining:
        scores = {hd: accuracy_with_ablation(model, tokens, targets, mask, removed + [hd], kind) for hd in remaining}
        best = max(scores, key=lambda hd: (scores[hd], -hd[0], -hd[1]))
        if scores[best] < threshold:
            break
        removed.append(best)
        remaining.remove(best)
        trace.append({"removed": best, "accuracy": scores[best]})
    final = accuracy_with_ablation(model, tokens, targets, mask, removed, kind)
    return {
        "kind": kind,
        "threshold": threshold,
        "surviving": remaining,
        "removed": removed,
        "accuracy": final,
        "trace": trace,
    }
