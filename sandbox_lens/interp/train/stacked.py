"""Seeds of one setting trained as one stacked ensemble: what ``interp train --seeds`` does where it is faster.

Each member is the run it would be alone: its own initialisation, its own batches (a pure function of (seed,
step)), its own held-out set, learning-rate schedule, gradient clipping, early stop, checkpoints, kept models and
``metrics.json`` in its own directory. But the members' weights lie on a leading dimension, and every step is one
forward (:func:`~sandbox_lens.interp.model.fast.stacked_forward`: batched matmuls), one backward and one AdamW over
the stacked weights. The loss is the sum of the members' own losses, so each member's gradient is its single run's;
AdamW and its weight decay act element by element, so one optimizer over the stack is E independent ones; the
gradient norm is clipped member by member. Only float rounding differs from separate runs (the batched matmuls sum
in another order): ``tests/train/test_stacked.py`` states the tolerance.

A member that stops (its target reached) is finished as a single run is, and the others go on as a smaller stack.
A member's checkpoint is a single run's checkpoint (its weights, its slice of the optimizer state) whose metadata
names the seeds stacked at that moment: a sweep resumes runs whose checkpoints name the same stack at the same step
as that stack again, bit for bit, and any other as a single run. The members' checkpoints of one evaluation are
written as one unit (:mod:`~sandbox_lens.interp.train.checkpoint_unit`: staged, a commit mark, then moved in), so a
kill never leaves a stack's members at different steps; ``settle`` finishes or undoes a unit that a kill interrupted.

Stacked are only steps that read no activation (no dropout, sharpening, position shift, contrastive penalty or
alignment), without a moving average, on a transformer the hook-free twin builds. Whether stacking pays is a matter
of shape: it saves the fixed cost of each small operation, which dominates a step only when the matmuls are small
(``benchmarks/populations.py``; :func:`stack_size` holds the rule).
"""

from __future__ import annotations

import contextlib
import math
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from sandbox_lens.interp.errors import CheckpointError, Interrupted, SandboxError
from sandbox_lens.interp.files import exclusive
from sandbox_lens.interp.model.fast import stacked_forward
from sandbox_lens.interp.tasks.batches import step_rng
from sandbox_lens.interp.train.checkpoint import has_checkpoint, restore, save_checkpoint
from sandbox_lens.interp.train.checkpoint_unit import STAGE, commit_unit, settle
from sandbox_lens.interp.train.config import ModelShape, TrainConfig, run_identity
from sandbox_lens.interp.train.loop import (
    MAX_STEP_BYTES,
    _finish,
    _prepare,
    _reached,
    _stop_requests,
    evaluate,
    keep_model,
    step_bytes,
    steps_bar,
)
from sandbox_lens.interp.train.twin import hook_free_possible

__all__ = ["STACK_MAX", "STACK_MACS", "STAGE", "settle", "stack_refusal", "stack_size", "step_macs", "train_stacked"]

#: The most members one stack holds (beyond 8 the gain falls back: ``docs/training.md``).
STACK_MAX = 8
#: The rule's threshold: a member's step whose matmuls do fewer multiply-adds than this is stacked (``auto``).
#: It lies between the two default twins ``benchmarks/stacked_seeds.py`` measures (its output, quoted in
#: docs/training.md): Dyck_{2,4}, which stacking speeds up, and parity at T = 32, which it barely does.
STACK_MACS = 5e7


def stack_refusal(shape: ModelShape, config: TrainConfig) -> str | None:
    """Why runs of ``shape`` and ``config`` cannot be stacked (None: they can)."""
    if shape.arch != "transformer":
        return "an LSTM is not stacked"
    if not hook_free_possible(shape):
        return "only the hook-free twin (TransformerLens 3.9's parameters, standard positions) is stacked"
    if config.reads_activations:
        return (
            "a step that reads activations (dropout, sharpening, position shift, contrastive, --align) is not stacked"
        )
    if config.ema:
        return "a run with a moving average is not stacked"
    return None


def step_macs(task: Any, shape: ModelShape, config: TrainConfig) -> float:
    """The multiply-adds of one member's forward over a training batch: per token and block the query, key, value
    and output projections and the MLP, and the unembedding (attention's scores aside)."""
    d_head = shape.d_head or shape.d_model // shape.n_heads
    d_mlp = shape.d_mlp or 4 * shape.d_model
    per_block = 4 * shape.d_model * shape.n_heads * d_head + 2 * shape.d_model * d_mlp
    return float(config.batch * task.n_ctx * (shape.n_layers * per_block + shape.d_model * task.d_vocab_out))


def stack_size(task: Any, shape: ModelShape, config: TrainConfig, runs: int, workers: int, request: str) -> int:
    """Members per stack for ``runs`` runs of one setting on ``workers`` processes (1: separate runs).

    ``request``: ``off`` (1), a number (at most that many, where the runs can be stacked at all), or ``auto``:
    stacks where a member's step is small (:func:`step_macs` below :data:`STACK_MACS`), as many members as spread
    the runs over the workers, at most :data:`STACK_MAX`. Always within the memory bound of one step."""
    if request == "off" or runs < 2 or stack_refusal(shape, config) is not None:
        return 1
    if request == "auto":
        if step_macs(task, shape, config) >= STACK_MACS:
            return 1
        size = min(STACK_MAX, math.ceil(runs / max(1, workers)))
    else:
        size = min(int(request), runs)
    while size > 1 and step_bytes(task, shape, size * config.batch) > MAX_STEP_BYTES:
        size -= 1
    return max(1, size)


@dataclass
class _Member:
    """One run of the stack: its config, directory, single-run model and optimizer (what its checkpoint holds)."""

    config: TrainConfig
    out: Path
    model: Any
    opt: Any
    identity: dict[str, Any]
    history: list[dict[str, Any]] = field(default_factory=list)
    best: float = 0.0


class _Stack:
    """The members' weights and AdamW moments stacked on a leading dimension, with one optimizer over them."""

    def __init__(self, members: list[_Member], config: TrainConfig):
        import torch

        self.members, self.config = members, config
        first = members[0].model
        self.cfg = first.cfg
        self.names = [n for n, _ in first.named_parameters()]
        self.trained = [n for n, p in first.named_parameters() if p.requires_grad]
        trained = set(self.trained)
        self.params = {
            n: torch.stack([m.model.get_parameter(n).detach() for m in members]).requires_grad_(n in trained)
            for n in self.names
        }
        self.opt = torch.optim.AdamW(
            [self.params[n] for n in self.trained], lr=config.lr, weight_decay=config.weight_decay
        )
        self.opt.param_groups[0]["lr"] = members[0].opt.param_groups[0]["lr"]
        for n in self.trained:  # resumed or restacked: each member's own moments
            own = [m.opt.state.get(m.model.get_parameter(n)) for m in members]
            if all(own):
                self.opt.state[self.params[n]] = {
                    k: own[0][k].clone() if k == "step" else torch.stack([o[k] for o in own]) for k in own[0]
                }

    def seeds(self) -> list[int]:
        return [m.config.seed for m in self.members]

    def step(self, task: Any, step: int) -> Any:
        """One optimizer step of every member on its batch of ``step``; the members' training losses ``[E]``."""
        import numpy as np
        import torch

        c = self.config
        for group in self.opt.param_groups:
            group["lr"] = c.lr_at(step)
        batches = [task.batch(step_rng(m.config.seed, step), c.batch) for m in self.members]
        device = self.params["embed.W_E"].device
        tokens, mask, targets = (
            torch.from_numpy(np.stack([getattr(b, f) for b in batches])).to(device)
            for f in ("tokens", "loss_mask", "targets")
        )
        logits = stacked_forward(self.params, tokens, self.cfg)
        per_token = torch.nn.functional.cross_entropy(logits[mask], targets[mask], reduction="none")
        losses = torch.stack([x.mean() for x in per_token.split(mask.flatten(1).sum(1).tolist())])
        self.opt.zero_grad(set_to_none=True)
        losses.sum().backward()  # each member's gradient is its own loss's
        if c.clip:  # torch's clip_grad_norm_, member by member
            grads = [g for g in (self.params[n].grad for n in self.trained) if g is not None]
            norms = torch.stack([g.flatten(1).norm(dim=1) for g in grads]).norm(dim=0)
            coef = (c.clip / (norms + 1e-6)).clamp(max=1.0)
            for g in grads:
                g.mul_(coef.view(-1, *[1] * (g.dim() - 1)))
        self.opt.step()
        return losses.detach()

    def unstack(self) -> None:
        """Copy each member's slice of the weights and moments into its own model and optimizer."""
        import torch

        with torch.no_grad():
            for e, m in enumerate(self.members):
                for n in self.names:
                    m.model.get_parameter(n).copy_(self.params[n][e])
                for n in self.trained:
                    state = self.opt.state.get(self.params[n])
                    if state:
                        m.opt.state[m.model.get_parameter(n)] = {
                            k: v.clone() if k == "step" else v[e].clone() for k, v in state.items()
                        }
                m.opt.param_groups[0]["lr"] = self.opt.param_groups[0]["lr"]


def train_stacked(
    task: Any,
    shape: ModelShape,
    configs: list[TrainConfig],
    outs: list[str | Path],
    resume: bool = False,
    progress: bool = False,
    init_spec: Any = None,
) -> list[dict[str, Any]]:
    """Train runs that differ only by seed as one stacked ensemble (see the module docstring).

    Args:
        task: the task.
        shape: the model's shape (a transformer :func:`stack_refusal` accepts).
        configs: one config per member, equal but for the seed.
        outs: one run directory per member.
        resume: continue every member from its checkpoint (all at the same step).
        progress: show one progress bar for the stack.
        init_spec: as for :func:`~sandbox_lens.interp.train.loop.train`.

    Returns:
        Each member's metrics (as written to its ``metrics.json``), in the order of ``configs``.
    """

    if not configs or len(configs) != len(outs):
        raise SandboxError("a stack needs one run directory per config, and at least one config")
    config = configs[0]
    if any(replace(c, seed=config.seed) != config for c in configs):
        raise SandboxError("the runs of a stack may differ only by seed")
    if len({c.seed for c in configs}) != len(configs):
        raise SandboxError("the runs of a stack need distinct seeds")
    reason = stack_refusal(shape, config)
    if reason:
        raise SandboxError(reason)
    need = step_bytes(task, shape, len(configs) * config.batch)
    if need > MAX_STEP_BYTES:
        raise SandboxError(
            f"{len(configs)} stacked runs would need about {need / 2**30:,.0f} GiB of activations a step "
            f"(limit {MAX_STEP_BYTES // 2**30} GiB); stack fewer"
        )
    members: list[_Member] = []
    for c, o in zip(configs, outs):
        model, _, opt, _ = _prepare(task, shape, c, Path(o), init_spec)
        members.append(_Member(c, Path(o), model, opt, run_identity(task.to_dict(), shape, c)))
    with contextlib.ExitStack() as locks:
        for m in members:
            locks.enter_context(exclusive(m.out))
        settle([m.out for m in members])
        step, wall_before = 0, 0.0
        if resume:
            steps = set()
            for m in members:
                s, m.history, w = restore(m.out, m.model, m.opt, None, m.identity)
                steps.add(s)
                wall_before = max(wall_before, w)
                m.best = max([h["accuracy"] for h in m.history], default=0.0)
            if len(steps) != 1:
                raise CheckpointError("the runs of a stack must be resumed from the same step; resume them apart")
            step = steps.pop()
        elif any(has_checkpoint(m.out) for m in members):
            raise CheckpointError("a run directory of the stack already holds a training run; resume it or use another")
        return _loop(task, shape, config, members, step, wall_before, progress)


def _loop(
    task: Any,
    shape: ModelShape,
    config: TrainConfig,
    members: list[_Member],
    step: int,
    wall_before: float,
    progress: bool,
) -> list[dict[str, Any]]:
    """The stacked training loop from ``step``: every member's metrics, in the members' order."""
    import torch

    order = [m.out for m in members]
    results: dict[Path, dict[str, Any]] = {}
    stacked_with = [m.config.seed for m in members]
    start = time.perf_counter()
    kept = set(config.kept_steps())
    stack = _Stack(members, config)
    bar = steps_bar(config, step, progress, f"{len(members)} stacked seeds")

    def wall() -> float:
        return wall_before + time.perf_counter() - start

    def checkpoint(members: list[_Member]) -> None:
        def write(m: _Member, directory: Path) -> None:
            meta = {
                **m.identity,
                "step": step,
                "history": m.history,
                "wall_seconds": wall(),
                "threads": torch.get_num_threads(),
                "stack": stack.seeds(),
                "stack_lead": str(members[0].out.resolve()),
            }
            save_checkpoint(directory, m.model, m.opt, meta)

        commit_unit([m.out for m in members], lambda i, directory: write(members[i], directory))

    def held_out(m: _Member, train_loss: float | None = None) -> None:
        ev = evaluate(m.model, task, config.eval_size, m.config.seed)
        m.history.append(
            {
                "step": step,
                **({"train_loss": train_loss} if train_loss is not None else {}),
                "loss": ev["loss"],
                "accuracy": ev["accuracy"],
                "wall_seconds": round(wall(), 3),
            }
        )
        m.best = max(m.best, ev["accuracy"])

    def evaluated(members: list[_Member]) -> None:  # after an evaluation: the checkpoints, then the kept models
        checkpoint(members)
        if step in kept:
            for m in members:
                keep_model(m.out, step)

    def finish(m: _Member, reason: str) -> None:
        results[m.out] = _finish(
            task, shape, m.config, m.out, m.history, m.best, step, reason, wall(), {"stacked_with": stacked_with}
        )

    with _stop_requests() as stop:
        while stack.members and step < config.steps:
            losses = stack.step(task, step).tolist()
            step += 1
            bar.update(1)
            if step % config.eval_every == 0 or step == config.steps:
                stack.unstack()
                for m, loss in zip(stack.members, losses):
                    held_out(m, loss)
                evaluated(stack.members)
                going = []
                for m in stack.members:
                    if config.target_accuracy is not None and _reached(m.history[-1], config):
                        finish(m, "target")
                    elif config.max_minutes is not None and wall() >= 60 * config.max_minutes:
                        finish(m, "time")
                    else:
                        going.append(m)
                if not going:
                    stack.members = []
                elif len(going) < len(stack.members):  # the rest go on as a smaller stack
                    stack = _Stack(going, config)
                if going:
                    bar.set_postfix(best=f"{max(m.best for m in going):.4f}", running=len(going))
            if stop and stack.members:  # SIGINT / SIGTERM: keep every member's state, then stop
                stack.unstack()
                checkpoint(stack.members)
                bar.close()
                raise Interrupted(
                    stop[0],
                    f"interrupted at step {step} of {config.steps}; every stacked run's checkpoint is saved: the "
                    "same command continues them",
                )
    bar.close()
    if stack.members:
        stack.unstack()
    last = [m for m in stack.members if not m.history or m.history[-1]["step"] != step]
    for m in last:
        held_out(m)
    if last:
        evaluated(last)
    for m in stack.members:
        finish(m, "steps")
    return [results[o] for o in order]
