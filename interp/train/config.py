"""What a training run is: the twin's shape (:class:`ModelShape`) and the optimisation settings
(:class:`TrainConfig`), each checked when made, and what makes two runs the same run
(:func:`run_identity`)."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from typing import Any

from interp.errors import SandboxError

__all__ = ["ModelShape", "TrainConfig", "POSITIONAL", "ARCHS", "MAX_N_CTX", "FREE_TO_CHANGE", "run_identity"]

#: Position embeddings of a twin: learned (TransformerLens's default), fixed sinusoids, none (zeros),
#: or the thesis's linear code p_i = i / n_ctx in one coordinate. All but "learned" are frozen, so a
#: twin with a context longer than its training length can be evaluated on longer inputs.
POSITIONAL = ("learned", "sinusoidal", "none", "linear")
MAX_N_CTX = 8192
ARCHS = ("transformer", "lstm")


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


#: Settings a continued run may change: a new time budget or target does not make it another run.
FREE_TO_CHANGE = ("max_minutes", "target_accuracy")


def run_identity(task_dict: dict[str, Any], shape: Any, config: Any) -> dict[str, Any]:
    """What makes two runs the same run, as JSON holds it (``shape``/``config``: dataclasses or the
    dicts a checkpoint or ``metrics.json`` recorded): resuming or skipping a run needs all of it equal."""
    as_json = json.loads(json.dumps({"shape": shape if isinstance(shape, dict) else asdict(shape),
                                     "config": config if isinstance(config, dict) else asdict(config)}))
    config_d = {k: v for k, v in as_json["config"].items() if k not in FREE_TO_CHANGE}
    return {"task": task_dict, "shape": as_json["shape"], "config": config_d}
