"""Which algorithm, over training: :func:`~sandbox_lens.interp.causal.identify.identify` at every model a run kept
(``interp train --keep-checkpoints N``) and at its last step, on the same pairs beside the same nulls
(``interp align --run DIR --checkpoints``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sandbox_lens.interp.causal.align import nulls_of
from sandbox_lens.interp.causal.identify import candidates_of, identify
from sandbox_lens.interp.errors import OptionError, SandboxError
from sandbox_lens.interp.progress import bar as progress_bar
from sandbox_lens.interp.train import has_checkpoint, kept_models, open_model
from sandbox_lens.interp.train.checkpoint import read_checkpoint

__all__ = ["over_training"]


def over_training(
    run: str | Any,
    candidates: str | Sequence[str] = "all",
    pairs: int = 128,
    seed: int = 0,
    progress: bool = False,
    nulls: int | None = None,
    **das: Any,
) -> dict[str, Any]:
    """:func:`identify` at every model a run kept (``interp train --keep-checkpoints N``) and at its last step, on
    the same pairs beside the same nulls (``nulls`` random-init models; default five): per step the identification,
    its stability and each candidate's status and abstraction score, with the run's held-out loss and accuracy at
    that step. ``das``: :func:`identify`'s ``das`` and ``das_steps``. Refuses a run that kept none."""
    from pathlib import Path

    run = Path(run)
    if not has_checkpoint(run):
        raise OptionError(f"--checkpoints reads a run directory of interp train; {run} holds none")
    kept = kept_models(run)
    if not kept:
        raise SandboxError(f"{run} kept no checkpoints: train it with --keep-checkpoints N (N log-spaced models)")
    meta, _ = read_checkpoint(run)
    history = {h["step"]: h for h in meta.get("history", [])}
    last = open_model(run)
    candidates_of(last, candidates)  # refused before any work
    null_models = nulls_of(last, seed) if nulls is None else nulls_of(last, seed, n=nulls)
    steps = [(step, directory) for step, directory in kept if step != meta["step"]] + [(int(meta["step"]), run)]
    rows = []
    bar = progress_bar(total=len(steps), disable=not progress, desc="checkpoints", unit="model")
    for step, directory in steps:
        found = identify(open_model(directory), candidates, nulls=null_models, pairs=pairs, seed=seed, **das)
        h = history.get(step, {})
        rows.append(
            {
                "step": step,
                "loss": h.get("loss"),
                "accuracy": h.get("accuracy"),
                "identified": found["identified"],
                "stability": found["stability"],
                "candidates": {
                    c["algorithm"]: {
                        "status": c["status"],
                        "score": c["score"]["iia"],
                        "interval": c["score"]["interval"],
                        "null_score": c["null_score"],
                    }
                    for c in found["candidates"]
                },
            }
        )
        bar.update(1)
    bar.close()
    return {
        "run": str(run),
        "steps": rows,
        "history": meta.get("history", []),
        "pairs": pairs,
        "seed": seed,
        "nulls": len(null_models),
        "das": bool(das.get("das")),
        "chance": found["chance"],
        "not_applicable": found["not_applicable"],
    }
