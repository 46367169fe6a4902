"""The generic verification: a model of any task kind against its training task's own batches.

A kind that names no verifier of its own in the registry (:mod:`sandbox_lens.interp.tasks.kinds`) is checked
here: ``samples`` random inputs of the task at the model's length, the argmax at every scored
position against the task's target. There is no exhaustive part (a kind that can enumerate its
inputs names a verifier that does).
"""

from __future__ import annotations

import numpy as np

from sandbox_lens.interp.errors import ConstructionError
from sandbox_lens.interp.model.checked import CheckedForward
from sandbox_lens.interp.model.run import logits
from sandbox_lens.interp.streams import Stream
from sandbox_lens.interp.tasks.batches import step_rng
from sandbox_lens.interp.verify.result import Mismatch, Verification, model_shape

__all__ = ["verify_batches"]


def verify_batches(
    model,
    dtype: str,
    *,
    samples: int = 200,
    exhaustive_upto: int | None = None,
    seed: int = 0,
    max_mismatches: int = 5,
    checker: CheckedForward | None = None,
) -> Verification:
    """Check ``model`` on ``samples`` batches' worth of its task's inputs (see the module docstring)."""
    card = model.card
    kind = card.task_kind
    if exhaustive_upto:
        raise ConstructionError(f"{kind.name} tasks have no exhaustive check (their kind names no verifier)")
    if samples < 1:
        raise ConstructionError("nothing to check: samples must be ≥ 1")
    task = kind.task_from_dict({**card.task, "length": card.task.get("length", card.max_length)})
    batch = task.batch(step_rng(seed, 0, Stream.GENERIC_VERIFY), samples)
    if checker is not None:
        checker.cross_check(batch.tokens)
    pred = np.empty(batch.targets.shape, dtype=np.int64)
    for start, lg in logits(model, batch.tokens, forward=checker.forward if checker is not None else None):
        pred[start : start + len(lg)] = lg.argmax(-1).cpu().numpy()
    ok = (pred == batch.targets) | ~batch.score_mask
    mismatches = [
        Mismatch(
            position=int(t),
            inputs=[card.input_tokens[x] for x in batch.tokens[b, : t + 1]],
            expected=card.output_names[batch.targets[b, t]],
            predicted=card.output_names[pred[b, t]],
        )
        for b, t in np.argwhere(~ok)[:max_mismatches]
    ]
    checked = int(batch.score_mask.sum())
    return Verification(
        construction=card.construction,
        kind=kind.name,
        task=getattr(task, "name", kind.name),
        length=task.length,
        dtype=dtype,
        accuracy=float(ok[batch.score_mask].mean()) if checked else 0.0,
        checked=checked,
        checked_unit="scored positions",
        sequences=samples,
        exhaustive_upto=0,
        samples=samples,
        seed=seed,
        **model_shape(model),
        mismatches=mismatches,
    )
