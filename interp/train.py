"""Train HookedTransformers on the same tasks as the constructions: seeded, resumable, replicated.

* :func:`build_model` — a ``HookedTransformer`` of a :class:`ModelShape` (layers, width, heads,
  LayerNorm or none, learned / sinusoidal / no positional embedding) for a task.
* :func:`train` — AdamW with linear warm-up and cosine (or linear) decay, gradient clipping,
  online batches (a pure function of (seed, step)), evaluation every k steps on a fixed held-out
  set, early stop at a target accuracy, a time budget, a tqdm bar; a checkpoint at every evaluation
  and on SIGINT / SIGTERM (after the current step). ``resume=True`` continues from the checkpoint
  and ends with the same bits as an uninterrupted run (with the same number of torch threads).
* several seeds and a grid of settings: :mod:`interp.sweep`.

Output directory: ``checkpoint.safetensors`` (model and optimizer state, with task, shape, config,
step and history in its header: one atomic file, so a kill at any instant leaves a whole checkpoint;
what ``resume`` reads) + ``checkpoint.json`` (a readable copy of the header), ``model.safetensors`` + ``model.json``
(a transformer's final weights, config and card in :mod:`interp.model.saved`'s format, no optimizer
state) and ``metrics.json`` (task, final_accuracy, best_accuracy, steps, wall_seconds, seed, history). :func:`load_trained` gives the model back with a ``card``,
so the probes and visualisers work on it like on a construction.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import signal
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from interp.errors import CheckpointError, Interrupted, SandboxError
from interp.files import atomic_write, remove_torn_writes
from interp.model.card import normalise_task
from interp.tasks.batches import step_rng
from interp.tasks.kinds import task_from_dict, task_kind

__all__ = ["ModelShape", "TrainConfig", "build_model", "train", "load_trained", "default_shape", "evaluate",
           "task_defaults", "has_checkpoint"]

#: Position embeddings of a twin: learned (TransformerLens's default), fixed sinusoids, none (zeros),
#: or the thesis's linear code p_i = i / n_ctx in one coordinate. All but "learned" are frozen, so a
#: twin with a context longer than its training length can be evaluated on longer inputs.
POSITIONAL = ("learned", "sinusoidal", "none", "linear")
MAX_N_CTX = 8192
ARCHS = ("transformer", "lstm")

FORMAT = "sandbox-lens-training"
FORMAT_VERSION = 2  # 2: the metadata also travels in the safetensors header, with a digest of the tensors
HEADER_KEY = "sandbox_lens_checkpoint"
CKPT_WEIGHTS, CKPT_META, METRICS = "checkpoint.safetensors", "checkpoint.json", "metrics.json"


@dataclass(frozen=True)
class ModelShape:
    n_layers: int = 2
    d_model: int = 64
    n_heads: int = 2
    d_head: int | None = None  # default d_model // n_heads
    d_mlp: int | None = None  # default 4 · d_model
    normalization: str = "LN"  # "LN" or "none"
    positional: str = "learned"  # see POSITIONAL
    n_ctx: int | None = None  # default: the task's training context; larger to evaluate longer inputs
    arch: str = "transformer"  # or "lstm": d_model = embedding width, hidden = LSTM width, n_layers = LSTM layers
    hidden: int | None = None  # lstm only (default 128)

    def __post_init__(self) -> None:
        if self.normalization not in ("LN", "none"):
            raise SandboxError(f"normalization must be LN or none, got {self.normalization!r}")
        if self.positional not in POSITIONAL:
            raise SandboxError(f"positional must be one of {', '.join(POSITIONAL)}, got {self.positional!r}")
        if min(self.n_layers, self.d_model, self.n_heads) < 1:
            raise SandboxError("layers, d_model and heads must be ≥ 1")
        for name in ("d_head", "d_mlp"):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise SandboxError(f"{name} must be ≥ 1, got {getattr(self, name)}")
        if self.n_ctx is not None and not 1 <= self.n_ctx <= MAX_N_CTX:
            raise SandboxError(f"n_ctx must be between 1 and {MAX_N_CTX}, got {self.n_ctx}")
        if self.arch not in ARCHS:
            raise SandboxError(f"arch must be one of {', '.join(ARCHS)}, got {self.arch!r}")
        if self.hidden is not None and (self.arch != "lstm" or self.hidden < 1):
            raise SandboxError("hidden is the LSTM's width (≥ 1); it goes with arch lstm")

    def context(self, task) -> int:
        """The model's context: ``n_ctx`` when given (at least the task's), else the task's."""
        if self.n_ctx is None:
            return task.n_ctx
        if self.n_ctx < task.n_ctx:
            raise SandboxError(f"--n-ctx {self.n_ctx} is shorter than the task's context ({task.n_ctx} tokens)")
        return self.n_ctx


@dataclass(frozen=True)
class TrainConfig:
    steps: int = 2000
    batch: int = 32
    lr: float = 1e-3
    weight_decay: float = 0.01
    warmup: int = 100
    schedule: str = "cosine"  # or "linear"
    clip: float = 1.0
    eval_every: int = 100
    eval_size: int = 512
    target_accuracy: float | None = None
    max_minutes: float | None = None
    seed: int = 0
    dropout: float = 0.0  # on every block's attention and MLP output, during training
    embed_dropout: float = 0.0  # on the embeddings entering block 0
    sharpen: float = 0.0  # λ: nats of attention entropy added to the loss (thesis §3.5's sharpening)
    ema: float = 0.0  # decay γ of a moving average of the weights (0: off); evaluated and kept
    pos_shift: int = 0  # each batch adds a random 0..pos_shift to the position indices (length generalisation)
    contrastive: float = 0.0  # λ of the Dyck balance regulariser (eq. 3.40); needs n_ctx ≥ length + 2D
    init: str = ""  # what the initial weights of ``init_layers`` came from (e.g. "dyck variant=stack")
    init_layers: tuple[str, ...] = ()  # parameter-name prefixes copied from that construction
    freeze: tuple[str, ...] = ()  # parameter-name prefixes left untrained (e.g. "embed", "blocks.0")

    def __post_init__(self) -> None:
        if self.steps < 1 or self.batch < 1 or self.eval_every < 1 or self.eval_size < 1:
            raise SandboxError("steps, batch, eval_every and eval_size must be ≥ 1")
        if not (math.isfinite(self.lr) and self.lr > 0):
            raise SandboxError(f"the learning rate must be a positive number, got {self.lr}")
        if not (math.isfinite(self.weight_decay) and self.weight_decay >= 0):
            raise SandboxError(f"weight_decay must be ≥ 0, got {self.weight_decay}")
        if self.warmup < 0:
            raise SandboxError(f"warmup must be ≥ 0 steps, got {self.warmup}")
        if not (math.isfinite(self.clip) and self.clip >= 0):
            raise SandboxError(f"clip (the gradient-norm bound; 0 = none) must be ≥ 0, got {self.clip}")
        if self.target_accuracy is not None and not 0 < self.target_accuracy <= 1:
            raise SandboxError(f"the target accuracy must lie in (0, 1], got {self.target_accuracy}")
        if self.max_minutes is not None and not (math.isfinite(self.max_minutes) and self.max_minutes >= 0):
            raise SandboxError(f"max_minutes must be ≥ 0 (0: stop at the first evaluation), got {self.max_minutes}")
        if self.schedule not in ("cosine", "linear"):
            raise SandboxError(f"schedule must be cosine or linear, got {self.schedule!r}")
        for name in ("dropout", "embed_dropout"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise SandboxError(f"{name} must be in [0, 1), got {getattr(self, name)}")
        if not 0.0 <= self.ema < 1.0:
            raise SandboxError(f"ema (a decay) must be in [0, 1), got {self.ema}")
        if not self.sharpen >= 0.0:
            raise SandboxError(f"sharpen (λ) must be ≥ 0, got {self.sharpen}")
        if not self.contrastive >= 0.0:
            raise SandboxError(f"contrastive (λ) must be ≥ 0, got {self.contrastive}")
        if self.pos_shift < 0:
            raise SandboxError(f"pos_shift must be ≥ 0, got {self.pos_shift}")
        if bool(self.init) != bool(self.init_layers):
            raise SandboxError("init (where weights come from) and init_layers (which ones) go together")
        object.__setattr__(self, "init_layers", tuple(self.init_layers))
        object.__setattr__(self, "freeze", tuple(self.freeze))

    @property
    def hooked_training(self) -> bool:
        """True when a training step needs forward hooks (dropout or the entropy penalty)."""
        return bool(self.dropout or self.embed_dropout or self.sharpen or self.pos_shift)

    def lr_at(self, step: int) -> float:
        if step < self.warmup:
            return self.lr * (step + 1) / self.warmup
        frac = (step - self.warmup) / max(1, self.steps - self.warmup)
        return self.lr * (0.5 * (1 + math.cos(math.pi * frac)) if self.schedule == "cosine" else 1 - frac)


def task_defaults(task) -> dict[str, Any]:
    """Steps, learning rate and target accuracy of a twin of ``task``'s kind (`interp train` and `interp
    compare`'s twin share them; the registry holds them)."""
    return dict(task_kind(task).train_defaults)


def default_shape(task, arch: str = "transformer") -> ModelShape:
    """The kind's twin shape (the thesis's Dyck models: 2 layers, 1 head, width 50; small GPT-style
    models otherwise); the thesis's LSTM baseline (embedding 64, hidden 128, 1 layer) for ``arch="lstm"``."""
    if arch == "lstm":
        return ModelShape(n_layers=1, d_model=64, n_heads=1, arch="lstm", hidden=128)
    return ModelShape(**task_kind(task).twin_shape)


def _sinusoid(n_ctx: int, d: int) -> np.ndarray:
    pos = np.arange(n_ctx)[:, None]
    freq = np.exp(-math.log(10000.0) * (np.arange(0, d, 2) / d))
    out = np.zeros((n_ctx, d))
    out[:, 0::2] = np.sin(pos * freq)
    out[:, 1::2] = np.cos(pos * freq)[:, : d // 2]
    return out


def build_model(task, shape: ModelShape, seed: int = 0):
    import torch

    torch.manual_seed(seed)
    if shape.arch == "lstm":
        from interp.model.lstm import LSTMConfig, LSTMModel

        return LSTMModel(LSTMConfig(d_vocab=task.d_vocab, d_vocab_out=task.d_vocab_out, d_model=shape.d_model,
                                    hidden=shape.hidden or 128, n_layers=shape.n_layers, n_ctx=MAX_N_CTX))
    from interp.model.hooked import new_model

    n_ctx = shape.context(task)
    # the installed TransformerLens's model: a HookedTransformer (3.9) or a native TransformerBridge (4.x)
    cfg = {
        "n_layers": shape.n_layers, "d_model": shape.d_model, "n_heads": shape.n_heads,
        "d_head": shape.d_head or max(1, shape.d_model // shape.n_heads), "d_mlp": shape.d_mlp or 4 * shape.d_model,
        "n_ctx": n_ctx, "d_vocab": task.d_vocab, "d_vocab_out": task.d_vocab_out, "act_fn": "relu",
        "normalization_type": "LN" if shape.normalization == "LN" else None, "default_prepend_bos": False,
        "seed": seed, "dtype": "float32"}
    model = new_model(cfg)
    model.sandbox_config = cfg  # what save_model writes: a trained twin saves like a construction
    if shape.positional != "learned":
        values = np.zeros((n_ctx, shape.d_model))
        if shape.positional == "sinusoidal":
            values = _sinusoid(n_ctx, shape.d_model)
        elif shape.positional == "linear":
            values[:, 0] = np.arange(n_ctx) / n_ctx
        with torch.no_grad():
            model.pos_embed.W_pos.copy_(torch.as_tensor(values, dtype=model.pos_embed.W_pos.dtype))
        model.pos_embed.W_pos.requires_grad_(False)
    return model


def _loss(model, batch, config: "TrainConfig | None" = None, step: int = 0, task: Any = None) -> tuple[Any, Any]:
    """Cross-entropy on the batch's loss mask; with ``config``, the training-time regularisers too."""
    import torch

    tokens = torch.from_numpy(batch.tokens)
    patterns: list = []
    if config is not None and config.hooked_training:
        from interp.regularise import training_hooks

        logits = model.run_with_hooks(tokens, return_type="logits",
                                      fwd_hooks=training_hooks(model, config, step, patterns))
    else:
        logits = model(tokens, return_type="logits")
    mask = torch.from_numpy(batch.loss_mask)
    loss = torch.nn.functional.cross_entropy(logits[mask], torch.from_numpy(batch.targets)[mask])
    if patterns:
        from interp.regularise import attention_entropy

        loss = loss + config.sharpen * attention_entropy(patterns)
    if config is not None and config.contrastive:
        from interp.regularise import contrastive_penalty

        loss = loss + config.contrastive * contrastive_penalty(model, batch.tokens, logits, task.lang, config.seed, step)
    return loss, logits


def _loss_and_accuracy(model, batch) -> tuple[Any, float, int]:
    import torch

    loss, logits = _loss(model, batch)
    targets = torch.from_numpy(batch.targets)
    score = torch.from_numpy(batch.score_mask)
    correct = (logits.argmax(-1) == targets)[score]
    return loss, float(correct.float().mean()) if correct.numel() else 1.0, int(correct.numel())


def evaluate(model, task, size: int = 512, seed: int = 0) -> dict[str, float]:
    """Loss and accuracy on the fixed held-out set of ``seed`` (not a training batch)."""
    import torch

    batch = task.batch(step_rng(seed, 0, stream=1), size)
    with torch.inference_mode():
        loss, acc, n = _loss_and_accuracy(model, batch)
    return {"loss": float(loss), "accuracy": acc, "scored": n}


# -- checkpoints -----------------------------------------------------------------------------------
def _tensor_digest(tensors: dict[str, Any]) -> str:
    """sha256 over the names and bytes of ``tensors`` in name order (what a checkpoint's header vouches for)."""
    import torch

    h = hashlib.sha256()
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous().reshape(-1)
        h.update(f"{name}:{t.dtype}:{tuple(tensors[name].shape)};".encode())
        h.update(t.view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def _save_checkpoint(out: Path, model, opt, meta: dict[str, Any], ema=None) -> None:
    """One atomic file holds the weights, the optimizer state and the metadata (in the safetensors header),
    so a kill at any instant leaves either the previous checkpoint or this one, never half of each.
    ``checkpoint.json`` is a readable copy of the metadata, written after."""
    import torch
    from safetensors.torch import save

    from interp.model.hooked import tl_state_dict

    # TransformerLens 3.9 names on either back end: a twin trained on the bridge loads under 3.9 too
    tensors = {f"model.{k}": v.contiguous().clone() for k, v in tl_state_dict(model).items()}
    if ema is not None:
        tensors.update({f"ema.{k}": v.detach().contiguous().clone() for k, v in ema.state.items()})
    for i, state in opt.state_dict()["state"].items():
        for name, value in state.items():
            tensors[f"optim.{i}.{name}"] = torch.as_tensor(value).contiguous().clone()
    meta = dict(meta, format=FORMAT, version=FORMAT_VERSION, tensors_sha256=_tensor_digest(tensors))
    atomic_write(out / CKPT_WEIGHTS, save(tensors, metadata={HEADER_KEY: json.dumps(meta)}))
    atomic_write(out / CKPT_META, json.dumps(meta, indent=1).encode())


def has_checkpoint(directory: str | Path) -> bool:
    """Whether ``directory`` holds a training checkpoint to resume."""
    return (Path(directory) / CKPT_WEIGHTS).exists() or (Path(directory) / CKPT_META).exists()


def _header_meta(data: bytes) -> dict[str, Any] | None:
    """The metadata a checkpoint carries in its safetensors header (None for version-1 checkpoints)."""
    try:
        n = int.from_bytes(data[:8], "little")
        header = json.loads(data[8:8 + n]) if 0 < n <= len(data) - 8 else {}
        text = (header.get("__metadata__") or {}).get(HEADER_KEY) if isinstance(header, dict) else None
        return json.loads(text) if text else None
    except (ValueError, UnicodeDecodeError, AttributeError):
        return None


def _read_checkpoint(out: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    from safetensors.torch import load

    try:
        data = (out / CKPT_WEIGHTS).read_bytes()
    except FileNotFoundError as e:
        raise CheckpointError(f"{out}: no checkpoint ({Path(e.filename).name} missing)") from None
    meta = _header_meta(data)
    if meta is None:  # version 1: the metadata lives only in checkpoint.json, with the file's sha256
        try:
            meta = json.loads((out / CKPT_META).read_text())
        except FileNotFoundError as e:
            raise CheckpointError(f"{out}: no checkpoint ({Path(e.filename).name} missing)") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise CheckpointError(f"{out / CKPT_META}: corrupt checkpoint metadata ({e})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise CheckpointError(f"{out}: not a sandbox-lens training checkpoint")
    if "tensors_sha256" not in meta and hashlib.sha256(data).hexdigest() != meta.get("sha256"):
        raise CheckpointError(f"{out / CKPT_WEIGHTS}: checksum mismatch (corrupt or partly written file)")
    try:
        tensors = load(data)
    except Exception as e:  # safetensors raises its own error types
        raise CheckpointError(f"{out / CKPT_WEIGHTS}: unreadable ({e})") from None
    if "tensors_sha256" in meta and _tensor_digest(tensors) != meta["tensors_sha256"]:
        raise CheckpointError(f"{out / CKPT_WEIGHTS}: checksum mismatch (corrupt or partly written file)")
    if isinstance(meta.get("task"), dict):
        meta["task"] = normalise_task(meta["task"])  # checkpoints written when FFL was "flipflop"
    if isinstance(meta.get("shape"), dict):
        try:  # fields added since (e.g. n_ctx) take their defaults
            meta["shape"] = asdict(ModelShape(**meta["shape"]))
        except TypeError as e:
            raise CheckpointError(f"{out / CKPT_META}: unreadable model shape ({e})") from None
    return meta, tensors


def load_trained(directory: str | Path, expect_task: dict[str, Any] | None = None):
    """The trained model of ``directory`` (its last checkpoint), with a ``card`` for the analyses."""
    out = Path(directory)
    meta, tensors = _read_checkpoint(out)
    if expect_task is not None and meta.get("task") != expect_task:
        raise CheckpointError(f"{out}: the checkpoint was trained on {meta.get('task', {}).get('kind')} "
                              f"({_task_label(meta.get('task'))}), not on the requested task")
    task = task_from_dict(meta["task"])
    model = build_model(task, ModelShape(**meta["shape"]), meta["config"]["seed"])
    # a run with a moving average keeps the averaged weights (the ones it was evaluated with)
    prefix = "ema." if any(k.startswith("ema.") for k in tensors) else "model."
    state = {k[len(prefix):]: v for k, v in tensors.items() if k.startswith(prefix)}
    _load_weights(model, state, out)
    model.card = _card(task, meta)
    from interp.model.tokens import attach_tokenizer

    return attach_tokenizer(model)


def _load_weights(model, state: dict[str, Any], where: Path) -> None:
    """Checkpoint weights into ``model``: TransformerLens 3.9 names (what is saved now, from either back
    end; older checkpoints also hold the causal-mask buffers) or the back end's own names (an EMA state)."""
    from interp.model.hooked import load_strict

    tl_names = any(k == "embed.W_E" or ".attn.W_Q" in k for k in state)
    try:
        if tl_names:
            params = {k: v for k, v in state.items() if not k.endswith((".attn.mask", ".attn.IGNORE"))}
            load_strict(model, params)
        else:
            model.load_state_dict(state, strict=True)
    except (RuntimeError, CheckpointError) as e:
        raise CheckpointError(f"{where}: weights do not fit the recorded shape ({str(e).splitlines()[0]})") from None


def _task_label(d: Any) -> str:
    try:
        return task_from_dict(d).name
    except Exception:
        return "unknown task"


def _card(task, meta: dict[str, Any]):
    from interp.model.card import ModelCard, TokenIO

    layout = task.token_layout()
    io = TokenIO(layout.prefix, layout.symbol_tokens)
    shape = ModelShape(**meta["shape"])
    # Learned positions past the training context never received a gradient: such a twin is only
    # defined up to its training length. Fixed codes (sinusoidal, linear, none) reach n_ctx.
    capacity = (MAX_N_CTX if shape.arch == "lstm" else shape.context(task)) - len(io.prefix)
    if task_kind(task).next_token:
        capacity += 1  # the last token (a read's answer, the closing bracket) is predicted, never read
    config = meta.get("config", {})
    # positions copied from a construction and frozen are the construction's: defined over the whole context
    frozen_positions = any(p in ("pos_embed", "pos_embed.W_pos") for p in config.get("freeze", ())) and any(
        p in ("pos_embed", "pos_embed.W_pos") for p in config.get("init_layers", ()))
    positional = "construction (frozen)" if frozen_positions else shape.positional
    trained_positions = positional == "learned" and shape.arch != "lstm"
    # learned positions are trained up to the training length, plus the random shifts when there are any
    reach = task.length + int(config.get("pos_shift", 0) or 0)
    max_length = min(max(task.length, capacity), reach) if trained_positions else max(task.length, capacity)
    return ModelCard(
        construction="trained", theorem="", task=task.to_dict(), io=io,
        max_length=max_length, verified_dtypes=("float32",),
        input_tokens=layout.input_names, output_names=layout.output_names, residual_labels=[], block_labels=[],
        attention_blocks=list(range(meta["shape"]["n_layers"])) if shape.arch == "transformer" else [],
        options={"step": meta["step"], "trained_length": task.length, "arch": shape.arch,
                 "positional": positional if shape.arch == "transformer" else "none (recurrent)",
                 "n_ctx": shape.context(task) if shape.arch == "transformer" else MAX_N_CTX},
        notes="trained model",
    )


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
        per_token = shape.n_layers * (16 * shape.d_model + 2 * shape.n_heads * n_ctx + 2 * (shape.d_mlp or 4 * shape.d_model))
    return 4 * batch * n_ctx * (per_token + 2 * task.d_vocab_out)


def check_resources(task, shape: ModelShape, config: TrainConfig) -> None:
    """Refuse, in one line, a run whose inputs or activations cannot fit (before allocating any)."""
    if task.n_ctx > MAX_N_CTX:
        raise SandboxError(f"a training length of {task.length} needs {task.n_ctx} positions; at most {MAX_N_CTX} "
                           f"are supported")
    for what, n in (("--batch", config.batch), ("--eval-size", config.eval_size)):
        need = step_bytes(task, shape, n)
        if need > MAX_STEP_BYTES:
            raise SandboxError(f"{what} {n} at {task.n_ctx} positions would need about {need / 2**30:,.0f} GiB of "
                               f"activations (limit {MAX_STEP_BYTES // 2**30} GiB); use a smaller {what}")


def train(task, shape: ModelShape, config: TrainConfig, out: str | Path, resume: bool = False,
          progress: bool = True, init_spec: Any = None) -> dict[str, Any]:
    """Train one model; returns (and writes) its metrics. See the module docstring.

    ``init_spec`` (a construction's :class:`~interp.model.spec.ConstructionSpec` of the same shape)
    supplies the starting weights of ``config.init_layers``; ``config.freeze`` keeps parameters fixed.
    """
    import torch
    from tqdm import tqdm

    check_resources(task, shape, config)  # before anything is allocated or written
    out = Path(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise SandboxError(f"--out {out} is a file or lies under one") from None
    except PermissionError:
        raise SandboxError(f"--out {out}: permission denied") from None
    if shape.arch != "transformer" and config.hooked_training:
        raise SandboxError("dropout, embed_dropout and sharpen act on a transformer's hook points; an LSTM has none")
    model = build_model(task, shape, config.seed)
    if config.pos_shift and model.cfg.n_ctx < task.n_ctx + config.pos_shift:
        raise SandboxError(f"--pos-shift {config.pos_shift} needs a context of at least "
                           f"{task.n_ctx + config.pos_shift} positions (--n-ctx)")
    if config.contrastive:
        room = getattr(task, "contrastive_room", None)
        if room is None:
            raise SandboxError("the contrastive (balance) regulariser is defined for Dyck tasks")
        if shape.arch != "transformer" or model.cfg.n_ctx < task.n_ctx + room:
            raise SandboxError(f"--contrastive puts up to {room // 2} matched pairs before each input: it needs a "
                               f"transformer with --n-ctx ≥ {task.n_ctx + room}")
    _initialise_and_freeze(model, config, init_spec)
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise SandboxError("every parameter is frozen: nothing to train")
    opt = torch.optim.AdamW(params, lr=config.lr, weight_decay=config.weight_decay)
    ema = None
    if config.ema:
        from interp.regularise import EMA

        ema = EMA(model, config.ema)
    step, history, wall_before = 0, [], 0.0
    identity = run_identity(task.to_dict(), shape, config)
    if resume and has_checkpoint(out):
        meta, tensors = _read_checkpoint(out)
        for name in (CKPT_WEIGHTS, CKPT_META):  # a save that SIGKILL cut short; the checkpoint itself is whole
            remove_torn_writes(out / name)
        for key, value in identity.items():
            if meta.get(key) != value:
                raise CheckpointError(f"{out}: cannot resume, the checkpoint has a different {key} "
                                      f"({_task_label(meta.get('task')) if key == 'task' else meta.get(key)})")
        _load_weights(model, {k[6:]: v for k, v in tensors.items() if k.startswith("model.")}, out)
        state = {}
        for k, v in tensors.items():
            if k.startswith("optim."):
                _, i, name = k.split(".", 2)
                state.setdefault(int(i), {})[name] = v
        sd = opt.state_dict()
        sd["state"] = state
        opt.load_state_dict(sd)
        if ema is not None:
            ema.state = {k[4:]: v.clone() for k, v in tensors.items() if k.startswith("ema.")}
        step, history, wall_before = meta["step"], meta["history"], meta["wall_seconds"]
        if meta.get("threads", torch.get_num_threads()) != torch.get_num_threads():
            import warnings

            warnings.warn(f"{out} was trained with {meta['threads']} torch thread(s), resumed with "
                          f"{torch.get_num_threads()}: sums split differently, so the weights will not match an "
                          f"uninterrupted run bit for bit (use --threads {meta['threads']})", stacklevel=2)
    elif not resume and has_checkpoint(out):
        raise CheckpointError(f"{out} already holds a training run; use --resume to continue it or another --out")

    start = time.perf_counter()
    best = max([h["accuracy"] for h in history], default=0.0)
    stop_reason = "steps" if step >= config.steps else ""
    bar = tqdm(total=config.steps, initial=step, disable=not progress, desc=f"seed {config.seed}", unit="step",
               dynamic_ncols=True)

    def wall() -> float:
        return wall_before + time.perf_counter() - start

    def checkpoint() -> None:
        _save_checkpoint(out, model, opt, {**identity, "step": step, "history": history, "wall_seconds": wall(),
                                           "threads": torch.get_num_threads()}, ema)

    def evaluated():  # the weights a run is judged by: the moving average when there is one
        return ema.averaged(model) if ema is not None else model

    with _stop_requests() as stop:
        while step < config.steps:
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
            step += 1
            bar.update(1)
            if step % config.eval_every == 0 or step == config.steps:
                ev = evaluate(evaluated(), task, config.eval_size, config.seed)
                history.append({"step": step, "train_loss": loss.item(), "loss": ev["loss"], "accuracy": ev["accuracy"],
                                "wall_seconds": round(wall(), 3)})
                best = max(best, ev["accuracy"])
                bar.set_postfix(loss=f"{ev['loss']:.4f}", acc=f"{ev['accuracy']:.4f}", best=f"{best:.4f}")
                checkpoint()
                if config.target_accuracy is not None and ev["accuracy"] >= config.target_accuracy:
                    stop_reason = "target"
                    break
                if config.max_minutes is not None and wall() >= 60 * config.max_minutes:
                    stop_reason = "time"
                    break
            if stop:  # SIGINT / SIGTERM: keep this step's state, then stop (resume continues bit for bit)
                checkpoint()
                bar.close()
                raise Interrupted(stop[0], f"interrupted at step {step} of {config.steps}; the checkpoint in {out} "
                                           "is saved: the same command with --resume continues it")
    bar.close()
    if not history or history[-1]["step"] != step:
        ev = evaluate(evaluated(), task, config.eval_size, config.seed)
        history.append({"step": step, "loss": ev["loss"], "accuracy": ev["accuracy"], "wall_seconds": round(wall(), 3)})
        best = max(best, ev["accuracy"])
        checkpoint()
    if shape.arch == "transformer":
        # the weights it was evaluated with (the moving average when kept), config and card, apart from
        # the optimizer state: `load_model(out)`, `interp verify --model out`, or plain TransformerLens
        from interp.model.saved import save_model

        save_model(load_trained(out), out)
    metrics = {
        "task": task.to_dict(), "task_name": task.name, "seed": config.seed, "steps": step,
        "final_accuracy": history[-1]["accuracy"], "best_accuracy": best,
        "wall_seconds": round(wall(), 3), "stopped_by": stop_reason or "steps",
        "minutes_to_best": round(next(h["wall_seconds"] for h in history if h["accuracy"] == best) / 60, 3),
        "shape": asdict(shape), "config": asdict(config), "history": history,
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


def _initialise_and_freeze(model, config: TrainConfig, init_spec: Any) -> None:
    """Copy ``config.init_layers`` from the construction ``init_spec`` (its exact TransformerLens
    weights, same shapes) and freeze ``config.freeze``; a prefix that names no parameter is refused."""
    import torch

    from interp.model.hooked import is_bridge

    if (config.init_layers or config.freeze) and is_bridge(model):
        raise SandboxError("--init-from and --freeze name HookedTransformer parameters (blocks.0.attn, ...): run them "
                           "under TransformerLens 3.9 (the twin it trains loads under 4.x)")
    names = [n for n, _ in model.named_parameters()]
    for prefix in (*config.init_layers, *config.freeze):
        if not any(n == prefix or n.startswith(prefix + ".") for n in names):
            raise SandboxError(f"{prefix!r} names no parameter of the model (e.g. embed, pos_embed, blocks.0, "
                               f"blocks.1.attn, unembed)")
    if config.init_layers:
        if init_spec is None:
            raise SandboxError(f"the config starts from {config.init!r}, but no construction was given")
        from interp.model.hooked import state_dict_arrays

        arrays = state_dict_arrays(init_spec)
        params = dict(model.named_parameters())
        with torch.no_grad():
            for name, p in params.items():
                if any(name == x or name.startswith(x + ".") for x in config.init_layers):
                    if name not in arrays or tuple(arrays[name].shape) != tuple(p.shape):
                        got = tuple(arrays[name].shape) if name in arrays else "nothing"
                        raise SandboxError(f"cannot start {name} {tuple(p.shape)} from {config.init} ({got}): "
                                           f"the twin needs the construction's shape")
                    p.copy_(torch.as_tensor(arrays[name], dtype=p.dtype))
    for name, p in model.named_parameters():
        if any(name == x or name.startswith(x + ".") for x in config.freeze):
            p.requires_grad_(False)


#: Settings a continued run may change: a new time budget or target does not make it another run.
FREE_TO_CHANGE = ("max_minutes", "target_accuracy")


def run_identity(task_dict: dict[str, Any], shape: Any, config: Any) -> dict[str, Any]:
    """What makes two runs the same run, as JSON holds it (``shape``/``config``: dataclasses or the
    dicts a checkpoint or ``metrics.json`` recorded): resuming or skipping a run needs all of it equal."""
    as_json = json.loads(json.dumps({"shape": shape if isinstance(shape, dict) else asdict(shape),
                                     "config": config if isinstance(config, dict) else asdict(config)}))
    config_d = {k: v for k, v in as_json["config"].items() if k not in FREE_TO_CHANGE}
    return {"task": task_dict, "shape": as_json["shape"], "config": config_d}
