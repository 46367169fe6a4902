"""Theorem 3 at toy scale: prune a larger *random* transformer until it computes a construction.

Thesis §3.6.4 (Theorem 3): a random transformer with 4L layers and wider matrices, entries
U(−1, 1), contains with high probability a *nonstructural pruning* (every weight kept or zeroed,
Definition 15) that ε-approximates any given L-layer transformer. So a weight pattern that
implements a construction can be found inside noise, and one weight matrix says little about the
function (Corollary 3). The theorem's widths are far beyond a CPU; here the mask is *learned*
(reference note dyck.md §6.3): every weight matrix of the random network gets a score per entry,
the forward pass keeps the top ``keep`` fraction of each matrix by score (edge-popup, Ramanujan
et al. 2020) with a straight-through gradient to the scores, and the objective is the KL
divergence from the construction's next-token distribution. The random weights never change.

Reported: the kept fraction, the task accuracy of the pruned network, the largest total-variation
distance between its next-token distribution and the construction's over all scored positions,
and ε̂ = max over positions of ‖f(x) − g(x)‖₂ / ‖g(x)‖₂ for the probability vectors.

Corollary 3 (:func:`learn_weight_masks` with ``shared``): two constructions — say the stack-like
and the uniform Dyck models, whose attention differs — are both carved out of the same random
network with *one* mask on a chosen matrix, so the two pruned networks contain an identical
matrix while computing with different mechanisms.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from sandbox_lens.interp.errors import ModelKindError, VocabularyError
from sandbox_lens.interp.model.device import current, on, to_numpy
from sandbox_lens.interp.model.hooked import backend
from sandbox_lens.interp.progress import bar as progress_bar

__all__ = ["RandomShape", "random_transformer", "learn_weight_mask", "learn_weight_masks"]


@dataclass(frozen=True)
class RandomShape:
    """The random network (Theorem 3 asks for 4L layers; the default is 2L for a 2-layer target)."""

    n_layers: int = 4
    d_model: int = 64
    n_heads: int = 4
    d_mlp: int = 256


def random_transformer(d_vocab: int, d_vocab_out: int, n_ctx: int, shape: RandomShape = RandomShape(), seed: int = 0):
    """A HookedTransformer whose weight matrices are U(−1, 1) · 1/√fan_in, biases 0, LayerNorms plain.

    The 1/√fan_in factor keeps activations O(1) (the theorem's U(−1, 1) is the same up to a
    per-matrix scale, which a pruning cannot create but LayerNorm largely absorbs).
    """
    import torch

    if backend() != "HookedTransformer":  # the masks are keyed by 3.9's parameter names (W_Q, W_in, ...)
        raise ModelKindError(
            "Theorem 3's weight masks need TransformerLens 3.9's HookedTransformer; this environment "
            f"has the {backend()}"
        )
    from transformer_lens import HookedTransformer, HookedTransformerConfig

    cfg = HookedTransformerConfig(
        n_layers=shape.n_layers,
        d_model=shape.d_model,
        n_heads=shape.n_heads,
        d_head=shape.d_model // shape.n_heads,
        d_mlp=shape.d_mlp,
        n_ctx=n_ctx,
        d_vocab=d_vocab,
        d_vocab_out=d_vocab_out,
        act_fn="relu",
        normalization_type="LN",
        default_prepend_bos=False,
        seed=seed,
        device=current(),
    )
    model = HookedTransformer(cfg)
    gen = torch.Generator().manual_seed(seed)  # a CPU generator: the same weights on any device
    with torch.no_grad():
        for name, p in model.named_parameters():
            if _masked(name):
                fan_in = p.shape[-2] if p.ndim >= 2 else 1
                u = torch.rand(p.shape, generator=gen).to(p.device)
                p.copy_((u * 2 - 1) / max(1.0, fan_in) ** 0.5)
    model.requires_grad_(False)
    return model


def _masked(name: str) -> bool:
    """The pruned matrices: every weight matrix (embeddings, Q/K/V/O, MLP, unembedding), no bias or LN."""
    return name.split(".")[-1].startswith("W_")


def learn_weight_mask(
    target,
    large,
    batches: Callable[[int], np.ndarray],
    eval_data: tuple[np.ndarray, np.ndarray, np.ndarray],
    keep: float = 0.5,
    steps: int = 400,
    lr: float = 0.05,
    seed: int = 0,
    progress: bool = False,
) -> dict:
    """Learn a keep-``keep`` mask of every weight matrix of ``large`` so that it matches ``target``.

    ``batches(step)`` gives the token batch of a step; ``eval_data`` = (tokens, targets, score_mask)
    judges the pruned network (accuracy on ``score_mask``, distances on the same positions).
    """
    result = learn_weight_masks(
        [target], large, batches, eval_data, keep=keep, steps=steps, lr=lr, seed=seed, progress=progress
    )
    return {**result["targets"][0], "trace": result["trace"]}


def _top_k_masks(scores: dict, names: Sequence[str], keep: float, hard_only: bool = False) -> dict:
    """Per matrix, 1 on its ``keep`` fraction of highest scores (straight-through to the scores unless ``hard_only``)."""
    out = {}
    for n in names:
        s = scores[n]
        k = max(1, int(round(keep * s.numel())))
        threshold = s.detach().flatten().kthvalue(s.numel() - k + 1).values
        hard = (s.detach() >= threshold).to(s.dtype)
        out[n] = hard if hard_only else hard + s - s.detach()
    return out


def _agreement(p: np.ndarray, q: np.ndarray, labels: np.ndarray, sel: np.ndarray) -> dict:
    """How the pruned network's next-token distributions ``p`` match the target's ``q`` at the scored positions."""
    tv = 0.5 * np.abs(p - q).sum(-1)[sel]
    rel = (np.linalg.norm(p - q, axis=-1) / np.linalg.norm(q, axis=-1))[sel]
    return {
        "accuracy": float((p.argmax(-1)[sel] == labels[sel]).mean()),
        "target_accuracy": float((q.argmax(-1)[sel] == labels[sel]).mean()),
        "max_tv": float(tv.max()),
        "mean_tv": float(tv.mean()),
        "epsilon_hat": float(rel.max()),
    }


def learn_weight_masks(
    targets: Sequence,
    large,
    batches: Callable[[int], np.ndarray],
    eval_data: tuple[np.ndarray, np.ndarray, np.ndarray],
    keep: float = 0.5,
    steps: int = 400,
    lr: float = 0.05,
    shared: Sequence[str] = (),
    seed: int = 0,
    progress: bool = False,
) -> dict:
    """One pruning of ``large`` per target, trained together; the matrices named in ``shared`` get
    *one* mask for all targets (Corollary 3: the prunings coincide on that matrix).

    The loss is the sum of the targets' KL divergences. Returns, per target, the same numbers as
    :func:`learn_weight_mask`, and for the shared matrices whether the pruned matrices are
    identical across targets (they are by construction; checked on the final masks) next to the
    overlap of the targets' other masks (how different the two prunings are elsewhere).
    """
    import torch
    from torch.func import functional_call

    targets = list(targets)
    if not targets:
        raise VocabularyError("learn_weight_masks needs at least one target")
    if not 0.0 < keep <= 1.0:
        raise VocabularyError(f"keep must be in (0, 1], got {keep}")
    for target in targets:
        if (target.cfg.d_vocab, target.cfg.d_vocab_out) != (large.cfg.d_vocab, large.cfg.d_vocab_out):
            raise VocabularyError("the random network and the targets must share input and output vocabularies")
    torch.manual_seed(seed)
    base = {n: p.detach() for n, p in large.named_parameters()}
    names = [n for n in base if _masked(n)]
    unknown = [n for n in shared if n not in names]
    if unknown:
        raise VocabularyError(f"not a weight matrix of the random network: {', '.join(unknown)}")

    def new_scores(n: str) -> torch.nn.Parameter:
        # |w| (a magnitude-pruning start) plus a little noise to break ties
        noise = torch.rand(base[n].shape, dtype=base[n].dtype).to(base[n].device)  # drawn on the CPU: any device
        return torch.nn.Parameter(base[n].abs() + 1e-3 * noise)

    common = {n: new_scores(n) for n in shared}
    scores = [{n: common[n] if n in common else new_scores(n) for n in names} for _ in targets]
    opt = torch.optim.Adam(
        list(common.values()) + [p for sc in scores for n, p in sc.items() if n not in common], lr=lr
    )

    def forward(sc: dict, tokens: torch.Tensor, hard_only: bool = False) -> torch.Tensor:
        m = _top_k_masks(sc, names, keep, hard_only)
        params = {n: base[n] * m[n] if n in m else base[n] for n in base}
        return functional_call(large, params, (tokens,), {"return_type": "logits"})

    def target_logprobs(target, tokens: torch.Tensor) -> torch.Tensor:
        with torch.inference_mode():
            return torch.log_softmax(target(tokens, return_type="logits").double(), -1).float().clone()

    trace = []
    for step in progress_bar(range(steps), disable=not progress, desc="weight mask", unit="step", leave=False):
        tokens = on(large, np.asarray(batches(step), dtype=np.int64))
        losses = []
        for target, sc in zip(targets, scores):
            got = torch.log_softmax(forward(sc, tokens), -1)
            want = target_logprobs(target, tokens)
            losses.append(
                torch.nn.functional.kl_div(
                    got.flatten(0, 1), want.flatten(0, 1), log_target=True, reduction="batchmean"
                )
            )
        loss = sum(losses)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % max(1, steps // 20) == 0 or step == steps - 1:
            trace.append(
                {"step": step, "kl": [float(x.detach()) for x in losses]}
                if len(targets) > 1
                else {"step": step, "kl": float(losses[0].detach())}
            )

    tokens, labels, score = (np.asarray(x) for x in eval_data)
    tokens_t = on(large, tokens.astype(np.int64))
    sel = score.astype(bool)
    total = sum(base[n].numel() for n in names)
    results, finals = [], []
    for target, sc in zip(targets, scores):
        with torch.inference_mode():
            p = to_numpy(torch.softmax(forward(sc, tokens_t, hard_only=True).double(), -1))
            q = to_numpy(torch.softmax(target(tokens_t, return_type="logits").double(), -1))
            finals.append(_top_k_masks(sc, names, keep, hard_only=True))
        kept = sum(float(m.sum()) for m in finals[-1].values())
        results.append(
            {
                "keep": keep,
                "kept_fraction": kept / total,
                "kept_weights": int(kept),
                "weights": int(total),
                "steps": steps,
                **_agreement(p, q, labels, sel),
            }
        )
    out: dict = {"targets": results, "trace": trace, "shared": list(shared)}
    if len(targets) > 1:
        out["shared_identical"] = all(torch.equal(f[n], finals[0][n]) for f in finals for n in shared)
        others = [n for n in names if n not in shared]
        a = torch.cat([finals[0][n].flatten() for n in others]).bool()
        b = torch.cat([finals[1][n].flatten() for n in others]).bool()
        out["other_masks_jaccard"] = float((a & b).sum() / (a | b).sum())
    return out
