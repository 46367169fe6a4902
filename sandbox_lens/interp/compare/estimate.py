"""What a comparison will cost, estimated before its analyses start (:func:`require_time`): the optimised parts
whose length the options set, each step timed on this machine, refused in one line past the time budget."""

from __future__ import annotations

from typing import Any

from sandbox_lens.interp.compare.config import CompareConfig
from sandbox_lens.interp.compare.names import TWIN
from sandbox_lens.interp.model.hooked import backend

__all__ = ["require_time"]


def require_time(
    comparison: Any, models: dict, c: CompareConfig, seed: int, population_cells: dict | None = None
) -> None:
    """Refuse, before the analyses start, a comparison whose optimised parts would pass the time budget (one
    line naming them and the options that lower them): the head masks (per model, ``mask_steps`` steps per
    sparsity), Theorem 3's and Corollary 3's weight masks (on a random network of Theorem 3's shape, batches
    of 32), a head-mask step about four forward passes and a weight-mask step three, timed on this machine; and
    the causal section (:func:`sandbox_lens.interp.causal.align.align_seconds`)."""
    from sandbox_lens.interp.budget import require
    from sandbox_lens.interp.model.run import forward_seconds

    seconds, parts, options = 0.0, [], []
    if c.masks and c.mask_sparsities:
        words = comparison.train_words(0, seed)
        for model in models.values():
            tokens = comparison.inputs(model, words, with_latents=False).tokens
            seconds += len(c.mask_sparsities) * max(1, c.mask_steps) * 4 * forward_seconds(model, *tokens.shape)
        parts.append(f"{c.mask_steps} head-mask steps × {len(c.mask_sparsities)} sparsities × {len(models)} models")
        options += ["--mask-steps", "--mask-sparsity"]
    if comparison.theorem3 and c.theorem3_steps and backend() != "TransformerBridge":
        from sandbox_lens.probes.weight_mask import RandomShape, random_transformer

        target = models.get("stack") or next(m for n, m in models.items() if n != TWIN)
        shape = RandomShape(n_layers=2 * target.cfg.n_layers)
        large = random_transformer(target.cfg.d_vocab, target.cfg.d_vocab_out, comparison.length, shape, seed=seed)
        steps = c.theorem3_steps + (c.corollary3_steps or 0) * 2
        seconds += steps * 3 * forward_seconds(large, 32, comparison.length)
        parts.append(f"{c.theorem3_steps} + {c.corollary3_steps} weight-mask steps")
        options += ["--theorem3-steps", "--corollary3-steps"]
    if c.causal_pairs and TWIN in models and models[TWIN].card.task_kind.high_level is not None:
        from sandbox_lens.interp.causal.align import NULLS, align_seconds, high_level_of
        from sandbox_lens.interp.causal.interchange import pair_length

        twin = models[TWIN]
        variables, others = len(high_level_of(twin).variables), 1 + NULLS + len(models) - 1
        seconds += align_seconds(twin, c.causal_pairs, pair_length(twin), variables, others, 4, 100)
        parts.append(f"the causal section on {c.causal_pairs} pairs")
        options.append("--causal-pairs")
    if population_cells:
        from sandbox_lens.interp.compare.sweeps import causal_population_seconds

        seconds += causal_population_seconds(population_cells, c.causal_pairs or 128, 100, (1, 2, 4, 8))
        parts.append("the population's twins")
        options.append("--causal-pairs")
    if not parts:
        return
    names = list(dict.fromkeys(options))
    require(
        f"the comparison ({', '.join(parts)})",
        seconds=seconds,
        lower=", ".join(names[:-1]) + f" or {names[-1]}" if len(names) > 1 else names[0],
    )
