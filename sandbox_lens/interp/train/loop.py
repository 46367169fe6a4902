"""The training loop: AdamW with linear warm-up and cosine (or linear) decay, gradient clipping,
online batches (a pure function of (seed, step)), a hand-written forward with fused kernels
(:func:`sandbox_lens.interp.model.fast.training_forward`; LayerNorm fused where hooks need TransformerLens's forward),
evaluation every k steps on a fixed held-out set,
early stop at a target accuracy, a time budget, a tqdm bar; a checkpoint at every evaluation and on
SIGINT / SIGTERM (after the current step). ``resume=True`` continues from the checkpoint and ends with
the same bits as an uninterrupted run (with the same number of torch threads)."""

from __future__ import annotations

import contextlib
import json
import signal
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from sandbox_lens.interp.errors import CheckpointError, Interrupted, OptionError, SandboxError
from sandbox_lens.interp.files import atomic_write, exclusive
from sandbox_lens.interp.model.fast import training_forward
from sandbox_lens.interp.model.hooked import BRIDGE_LACKS, fused_layernorm, is_bridge
from sandbox_lens.interp.model.run import run_with_hooks
from sandbox_lens.interp.model.saved import save_model
from sandbox_lens.interp.progress import bar as progress_bar
from sandbox_lens.interp.streams import Stream
from sandbox_lens.interp.tasks.batches import step_rng
from sandbox_lens.interp.train.align import aligned_losses, check_alignment, held_out_strictness, imposed_iia
from sandbox_lens.interp.train.checkpoint import METRICS, has_checkpoint, restore, save_checkpoint
from sandbox_lens.interp.train.config import MAX_N_CTX, ModelShape, TrainConfig, run_identity
from sandbox_lens.interp.train.regularise import EMA, attention_entropy, contrastive_penalty, training_hooks
from sandbox_lens.interp.train.twin import build_twin, initialise_and_freeze, load_trained

__all__ = ["train", "evaluate", "check_resources", "step_bytes", "MAX_STEP_BYTES", "keep_model", "kept_models", "KEPT"]


def _loss(model, batch, config: TrainConfig | None = None, step: int = 0, task: Any = None) -> tuple[Any, Any]:
    """Cross-entropy on the batch's loss mask; with ``config``, the training-time regularisers too."""
    import torch

    tokens = torch.from_numpy(batch.tokens)
    patterns: list = []
    if config is not None and config.hooked_training:
        logits = run_with_hooks(
            model, tokens, return_type="logits", fwd_hooks=training_hooks(model, config, step, patterns)
        )
    else:
        logits = model(tokens, return_type="logits")
    mask = torch.from_numpy(batch.loss_mask).to(logits.device)
    loss = torch.nn.functional.cross_entropy(logits[mask], torch.from_numpy(batch.targets).to(logits.device)[mask])
    if patterns:
        loss = loss + config.sharpen * attention_entropy(patterns)
    if config is not None and config.contrastive:
        loss = loss + config.contrastive * contrastive_penalty(
            model, batch.tokens, logits, task.lang, config.seed, step
        )
    if config is not None and config.alignment:
        iit, strict = _aligned_losses(model, task, config, step)
        loss = loss + config.iit_weight * iit + config.strict_weight * strict
    return loss, logits


def _loss_and_accuracy(model, batch) -> tuple[Any, float, int]:
    import torch

    loss, logits = _loss(model, batch)
    targets = torch.from_numpy(batch.targets).to(logits.device)
    score = torch.from_numpy(batch.score_mask).to(logits.device)
    correct = (logits.argmax(-1) == targets)[score]
    return loss, float(correct.float().mean()) if correct.numel() else 1.0, int(correct.numel())


def evaluate(model, task, size: int = 512, seed: int = 0) -> dict[str, float]:
    """Loss and accuracy on the fixed held-out set of ``seed`` (not a training batch)."""
    import torch

    batch = task.batch(step_rng(seed, 0, Stream.HELD_OUT), size)
    with torch.inference_mode():
        loss, acc, n = _loss_and_accuracy(model, batch)
    return {"loss": float(loss), "accuracy": acc, "scored": n}


# -- training ------------------------------------------------------------------------------------
#: the most memory one training step (or the held-out evaluation) may ask for, by the estimate below
MAX_STEP_BYTES = 8 * 2**30


def step_bytes(task, shape: ModelShape, batch: int) -> int:
    """A generous estimate of the activations one forward and backward pass over ``batch`` inputs
    keep: per token and layer about 16 vectors of d_model (or the LSTM's gates) and every head's
    n_ctx scores twice, in float32, plus the logits."""
    n_ctx = task.n_ctx
    if shape.arch == "lstm":
        per_token = shape.n_layers * 8 * (shape.hidden or 128) + 2 * shape.d_model
    else:
        per_token = shape.n_layers * (
            16 * shape.d_model + 2 * shape.n_heads * n_ctx + 2 * (shape.d_mlp or 4 * shape.d_model)
        )
    return 4 * batch * n_ctx * (per_token + 2 * task.d_vocab_out)


def check_resources(task, shape: ModelShape, config: TrainConfig) -> None:
    """Refuse, in one line, a run whose inputs or activations cannot fit (before allocating any)."""
    if task.n_ctx > MAX_N_CTX:
        raise SandboxError(
            f"a training length of {task.length} needs {task.n_ctx} positions; at most {MAX_N_CTX} are supported"
        )
    for what, n in (("--batch", config.batch), ("--eval-size", config.eval_size)):
        need = step_bytes(task, shape, n)
        if need > MAX_STEP_BYTES:
            raise SandboxError(
                f"{what} {n} at {task.n_ctx} positions would need about {need / 2**30:,.0f} GiB of "
                f"activations (limit {MAX_STEP_BYTES // 2**30} GiB); use a smaller {what}"
            )


def _prepare(task, shape: ModelShape, config: TrainConfig, out: Path, init_spec: Any):
    """The run directory, the model (started and frozen as ``config`` says), its optimizer and moving
    average — after every check that can refuse the run, before anything is written."""
    import torch

    check_resources(task, shape, config)  # before anything is allocated or written
    if config.alignment:
        check_alignment(config.alignment, shape, task)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise OptionError(f"--out {out} is a file or lies under one") from None
    except PermissionError:
        raise OptionError(f"--out {out}: permission denied") from None
    if shape.arch != "transformer" and config.hooked_training:
        raise SandboxError("dropout, embed_dropout and sharpen act on a transformer's hook points; an LSTM has none")
    # no step reads an activation: the twin without hook points (the same bits; TransformerLens is not imported)
    hook_free = not config.reads_activations
    model = build_twin(task, shape, config.seed, hook_free=hook_free)
    if config.pos_shift and model.cfg.n_ctx < task.n_ctx + config.pos_shift:
        raise OptionError(
            f"--pos-shift {config.pos_shift} needs a context of at least "
            f"{task.n_ctx + config.pos_shift} positions (--n-ctx)"
        )
    if config.contrastive:
        room = getattr(task, "contrastive_room", None)
        if room is None:
            raise SandboxError("the contrastive (balance) regulariser is defined for Dyck tasks")
        if shape.arch != "transformer" or model.cfg.n_ctx < task.n_ctx + room:
            raise OptionError(
                f"--contrastive puts up to {room // 2} matched pairs before each input: it needs a "
                f"transformer with --n-ctx ≥ {task.n_ctx + room}"
            )
    if config.alignment:
        if is_bridge(model):
            raise OptionError(BRIDGE_LACKS["align"])
    initialise_and_freeze(model, config, init_spec)
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise SandboxError("every parameter is frozen: nothing to train")
    opt = torch.optim.AdamW(params, lr=config.lr, weight_decay=config.weight_decay)
    ema = None
    if config.ema:
        ema = EMA(model, config.ema)
    return model, params, opt, ema


def _step(model, params, opt, ema, task, config: TrainConfig, step: int):
    """One optimizer step on the batch of ``step``; its training loss."""
    import torch

    for group in opt.param_groups:
        group["lr"] = config.lr_at(step)
    batch = task.batch(step_rng(config.seed, step), config.batch)
    loss, _ = _loss(model, batch, config, step, task)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    if config.clip:
        torch.nn.utils.clip_grad_norm_(params, config.clip)
    opt.step()
    if ema is not None:
        ema.update(model)
    return loss


def train(
    task,
    shape: ModelShape,
    config: TrainConfig,
    out: str | Path,
    resume: bool = False,
    progress: bool = True,
    init_spec: Any = None,
    on_checkpoint: Any = None,
) -> dict[str, Any]:
    """Train one model (see the module docstring).

    Args:
        task: the task (``AutomatonTask``, ``DyckTask``, ``FFLTask``).
        shape: the model's shape (:class:`~sandbox_lens.interp.train.config.ModelShape`: a transformer or an LSTM).
        config: the run's settings (:class:`~sandbox_lens.interp.train.config.TrainConfig`: steps, batch, learning
            rate, evaluation, seed, an alignment to impose).
        out: the run directory (checkpoints, ``metrics.json``, the model).
        resume: continue from the directory's last checkpoint.
        progress: show a progress bar.
        init_spec: a construction's :class:`~sandbox_lens.interp.model.spec.ConstructionSpec` of the same shape,
            which supplies the starting weights of ``config.init_layers`` (``config.freeze`` keeps them fixed).
        on_checkpoint: called with no arguments after every checkpoint is written (a Ray worker ships the run
            directory to the driver then: :mod:`sandbox_lens.interp.train.remote`).

    Returns:
        The run's metrics (as written to ``metrics.json``).
    """
    import torch

    out = Path(out)
    model, params, opt, ema = _prepare(task, shape, config, out, init_spec)
    # a second process on the same --out is refused before it writes anything; while training the model runs the
    # hand-written forward (sandbox_lens.interp.model.fast) and, where hooks make it fall back to TransformerLens's, fused LayerNorm
    with exclusive(out), fused_layernorm(model), training_forward(model):
        step, history, wall_before = 0, [], 0.0
        identity = run_identity(task.to_dict(), shape, config)
        if resume and has_checkpoint(out):
            step, history, wall_before = restore(out, model, opt, ema, identity)
        elif not resume and has_checkpoint(out):
            raise CheckpointError(f"{out} already holds a training run; use --resume to continue it or another --out")

        start = time.perf_counter()
        kept = set(config.kept_steps())
        best = max([h["accuracy"] for h in history], default=0.0)
        stop_reason = "steps" if step >= config.steps else ""
        bar = steps_bar(config, step, progress, f"seed {config.seed}")

        def wall() -> float:
            return wall_before + time.perf_counter() - start

        def checkpoint() -> None:
            save_checkpoint(
                out,
                model,
                opt,
                {
                    **identity,
                    "step": step,
                    "history": history,
                    "wall_seconds": wall(),
                    "threads": torch.get_num_threads(),
                },
                ema,
            )
            if on_checkpoint is not None:
                on_checkpoint()

        def held_out(train_loss: float | None = None) -> None:  # the moving average, when kept, is what is judged
            nonlocal best
            judged = ema.averaged(model) if ema is not None else model
            ev = evaluate(judged, task, config.eval_size, config.seed)
            history.append(
                {
                    "step": step,
                    **({"train_loss": train_loss} if train_loss is not None else {}),
                    "loss": ev["loss"],
                    "accuracy": ev["accuracy"],
                    "wall_seconds": round(wall(), 3),
                    **(_aligned_numbers(judged, task, config, step) if config.alignment else {}),
                }
            )
            best = max(best, ev["accuracy"])
            bar.set_postfix(loss=f"{ev['loss']:.4f}", acc=f"{ev['accuracy']:.4f}", best=f"{best:.4f}")
            checkpoint()
            if step in kept and shape.arch == "transformer":
                keep_model(out, step)

        with _stop_requests() as stop:
            while step < config.steps:
                loss = _step(model, params, opt, ema, task, config, step)
                step += 1
                bar.update(1)
                if step % config.eval_every == 0 or step == config.steps:
                    held_out(loss.item())
                    if config.target_accuracy is not None and _reached(history[-1], config):
                        stop_reason = "target"
                        break
                    if config.max_minutes is not None and wall() >= 60 * config.max_minutes:
                        stop_reason = "time"
                        break
                if stop:  # SIGINT / SIGTERM: keep this step's state, then stop (resume continues bit for bit)
                    checkpoint()
                    bar.close()
                    raise Interrupted(
                        stop[0],
                        f"interrupted at step {step} of {config.steps}; the checkpoint in {out} "
                        "is saved: the same command with --resume continues it",
                    )
        bar.close()
        if not history or history[-1]["step"] != step:
            held_out()
        return _finish(task, shape, config, out, history, best, step, stop_reason, wall())


def steps_bar(config: TrainConfig, step: int, progress: bool, desc: str) -> Any:
    """The progress bar of a training loop, from ``step`` of ``config.steps``."""
    return progress_bar(
        total=config.steps, initial=step, disable=not progress, desc=desc, unit="step", dynamic_ncols=True
    )


def _aligned_losses(model: Any, task: Any, config: TrainConfig, step: int) -> tuple[Any, Any]:
    """(IIT loss, strictness loss) of ``step`` under ``config``'s alignment settings."""
    return aligned_losses(
        model,
        task,
        config.alignment,
        config.seed,
        step,
        config.batch,
        config.iit_variables != "turns",
        config.strict_on,
        config.strict_nodes == "subsets",
    )


def _aligned_numbers(model: Any, task: Any, config: TrainConfig, step: int) -> dict[str, Any]:
    """An aligned run's evaluation: the imposed variables' held-out IIA (and their least), the IIT and strictness
    losses of this step's pairs, and the strictness loss on the held-out pairs (None: nothing is off the circuit)."""
    import torch

    iia = imposed_iia(model, task, config.alignment, config.seed)
    with torch.no_grad():
        iit, strict = _aligned_losses(model, task, config, step)
    rates = [v["iia"] for v in iia.values() if v["iia"] is not None]
    return {
        "imposed_iia": {k: v["iia"] for k, v in iia.items()},
        "imposed_outputs": {k: v["outputs"] for k, v in iia.items()},
        "imposed_iia_min": min(rates) if rates else None,
        "iit_loss": float(iit),
        "strict_loss": float(strict),
        "strict_held_out": held_out_strictness(model, task, config.alignment, config.seed, config.strict_on),
    }


def _reached(last: dict[str, Any], config: TrainConfig) -> bool:
    """Whether an evaluation meets the stop target: the accuracy, and for an aligned run every imposed variable's
    held-out IIA at its imposed site too, and the held-out strictness loss at most ``strict_target`` where one is
    set (a circuit with nothing off it has no strictness to reach)."""
    if last["accuracy"] < config.target_accuracy:
        return False
    if not config.alignment:
        return True
    if last.get("imposed_iia_min") is None or last["imposed_iia_min"] < config.align_target:
        return False
    strict = last.get("strict_held_out")
    return config.strict_target is None or strict is None or strict <= config.strict_target


#: Where a run keeps the models of ``--keep-checkpoints`` (one saved model per kept step).
KEPT = "checkpoints"


def keep_model(out: Path, step: int) -> Path:
    """Save the model just checkpointed in ``out`` (the moving average when kept) as ``out/checkpoints/step_<S>``:
    a saved model every ``--model`` command takes."""

    return save_model(load_trained(out, hook_free=True), out / KEPT / f"step_{step:06d}")


def kept_models(out: str | Path) -> list[tuple[int, Path]]:
    """The (step, directory) of every model a run kept, in step order."""
    root = Path(out) / KEPT
    found = []
    for d in sorted(root.glob("step_*")) if root.is_dir() else []:
        if d.is_dir() and not d.is_symlink() and d.name[5:].isdigit() and (d / "model.json").is_file():
            found.append((int(d.name[5:]), d))
    return found


def _finish(
    task,
    shape: ModelShape,
    config: TrainConfig,
    out: Path,
    history: list[dict[str, Any]],
    best: float,
    step: int,
    stop_reason: str,
    wall: float,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Save the finished transformer apart from its optimizer state and write ``metrics.json`` (with ``extra``'s
    keys: a stacked run's ``stacked_with``)."""
    if shape.arch == "transformer":
        # the weights it was evaluated with (the moving average when kept), config and card, apart from
        # the optimizer state: `load_model(out)`, `interp verify --model out`, or plain TransformerLens

        save_model(load_trained(out, hook_free=True), out)
    metrics = {
        "task": task.to_dict(),
        "task_name": task.name,
        "seed": config.seed,
        "steps": step,
        "final_accuracy": history[-1]["accuracy"],
        "best_accuracy": best,
        "wall_seconds": round(wall, 3),
        "stopped_by": stop_reason or "steps",
        "minutes_to_best": round(next(h["wall_seconds"] for h in history if h["accuracy"] == best) / 60, 3),
        "shape": asdict(shape),
        "config": asdict(config),
        "history": history,
        **(extra or {}),
    }
    atomic_write(out / METRICS, json.dumps(metrics, indent=1).encode())
    return metrics


@contextlib.contextmanager
def _stop_requests():
    """SIGINT and SIGTERM while training ask the loop to stop after the step it is in (the list it yields
    fills with the signal); a second signal stops at once, keeping the last checkpoint. Only the main
    thread can take signals: elsewhere (a Ray worker's thread) the list stays empty."""
    requested: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield requested
        return

    def ask(signum: int, frame: Any) -> None:
        if requested:
            raise Interrupted(signum, "interrupted twice: stopped at once; the last checkpoint is kept (--resume)")
        requested.append(signum)

    previous = {sig: signal.signal(sig, ask) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield requested
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
