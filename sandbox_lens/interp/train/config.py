"""What a training run is: the twin's shape (:class:`ModelShape`) and the optimisation settings
(:class:`TrainConfig`), each checked when made, and what makes two runs the same run
(:func:`run_identity`)."""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import asdict, dataclass
from typing import Any

from sandbox_lens.interp.errors import OptionError, SandboxError
from sandbox_lens.interp.settings import setting

__all__ = ["ModelShape", "TrainConfig", "POSITIONAL", "ARCHS", "MAX_N_CTX", "FREE_TO_CHANGE", "run_identity"]

#: Position embeddings of a twin: learned (TransformerLens's default), fixed sinusoids, none (zeros),
#: or the thesis's linear code p_i = i / n_ctx in one coordinate. All but "learned" are frozen, so a
#: twin with a context longer than its training length can be evaluated on longer inputs.
POSITIONAL = ("learned", "sinusoidal", "none", "linear", "alibi")
MAX_N_CTX = 8192
ARCHS = ("transformer", "lstm")


def _target(text: str) -> float | str:
    """``--target``: an accuracy, or ``none`` (train every step)."""
    if text.strip().lower() == "none":
        return "none"
    try:
        return float(text)  # its range is TrainConfig's to check, like every setting's
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an accuracy in (0, 1] or none, got {text!r}") from None


@dataclass(frozen=True)
class ModelShape:
    """The twin's architecture (a ``HookedTransformer``, or the thesis's LSTM baseline)."""

    n_layers: int = setting(2, "transformer blocks (lstm: LSTM layers)", flag="--layers")
    d_model: int = setting(64, "residual width (lstm: embedding width)")
    n_heads: int = setting(2, "attention heads per block", flag="--heads")
    d_head: int | None = setting(None, "width of a head (default d_model / heads)")
    d_mlp: int | None = setting(None, "MLP hidden units (auto: 4 × d_model)")
    normalization: str = setting("LN", "LayerNorm before each sublayer, or none", flag="--norm", choices=("LN", "none"))
    positional: str = setting(
        "learned",
        "position embedding (learned; the others are fixed, so longer inputs can be evaluated; alibi: none, and "
        "every head's scores get ALiBi's recency bias −m·(query − key), m = 2^(−8h/heads) (Press et al. 2022))",
        flag="--pos",
        choices=POSITIONAL,
    )
    n_ctx: int | None = setting(
        None,
        "model context (default: the training length's); larger, with --pos other "
        "than learned, lets `interp evaluate --length` go past the training length",
        metavar="N",
    )
    arch: str = setting(
        "transformer",
        "transformer (a HookedTransformer) or the thesis's LSTM baseline (embedding 64, hidden 128, 1 layer)",
        choices=ARCHS,
    )
    hidden: int | None = setting(None, "lstm: hidden width (default 128)", metavar="H")

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
        if self.arch == "transformer" and self.d_head is None and self.d_model % self.n_heads:
            raise OptionError(
                f"--d-model {self.d_model} does not split into {self.n_heads} heads; choose a multiple of "
                f"{self.n_heads} or give --d-head"
            )
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
            raise OptionError(f"--n-ctx {self.n_ctx} is shorter than the task's context ({task.n_ctx} tokens)")
        return self.n_ctx


@dataclass(frozen=True)
class TrainConfig:
    """How a twin is trained: AdamW with warm-up and decay, held-out evaluation, early stop, regularisers."""

    steps: int = setting(2000, "optimizer steps at most")
    batch: int = setting(32, "words per step")
    lr: float = setting(1e-3, "peak learning rate of AdamW")
    weight_decay: float = setting(0.01, "AdamW's decoupled weight decay")
    warmup: int = setting(100, "steps of linear warm-up to the peak learning rate")
    schedule: str = setting("cosine", "decay after the warm-up", choices=("cosine", "linear"))
    clip: float = setting(1.0, "gradient norm clipping (0: none)")
    eval_every: int = setting(100, "steps between held-out evaluations (each writes a checkpoint)")
    eval_size: int = setting(512, "words in the fixed held-out set")
    keep_checkpoints: int = setting(
        0,
        "keep the model at N log-spaced evaluations in checkpoints/step_<S>/ (interp "
        "align --run DIR --checkpoints aligns each; 0: none)",
        metavar="N",
    )
    target_accuracy: float | None = setting(
        None,
        "stop once held-out accuracy reaches ACC; `none` trains every step",
        flag="--target",
        metavar="ACC",
        parse=_target,
    )
    max_minutes: float | None = setting(None, "time budget per run (a checkpoint is kept)", metavar="M")
    seed: int = setting(0, "the run's seed (initialisation, batches, held-out set)", cli=False)
    dropout: float = setting(0.0, "dropout on every block's attention and MLP output")
    embed_dropout: float = setting(0.0, "dropout on the embeddings entering block 0")
    sharpen: float = setting(
        0.0, "attention sharpening: λ × mean attention entropy (nats) added to the loss (thesis §3.5)", metavar="λ"
    )
    ema: float = setting(
        0.0, "keep and evaluate a moving average of the weights with decay γ (the thesis: 0.9; 0: off)", metavar="γ"
    )
    pos_shift: int = setting(
        0, "add a random 0..S to the position indices of each batch (needs --n-ctx ≥ length + S)", metavar="S"
    )
    contrastive: float = setting(
        0.0, "dyck: the balance regulariser (thesis eq. 3.40) with weight λ; needs --n-ctx ≥ length + 2D", metavar="λ"
    )
    init: str = setting("", "what the initial weights of init_layers came from (e.g. 'dyck variant=stack')", cli=False)
    init_layers: tuple[str, ...] = setting((), "parameter-name prefixes copied from that construction", cli=False)
    freeze: tuple[str, ...] = setting(
        (),
        "parameters left untrained, e.g. embed pos_embed blocks.0 (default with --init-from: the copied ones)",
        metavar="PREFIX",
    )
    attention: str = setting(
        "learned",
        "uniform: every head's query and key weights and biases set to 0 and kept there, so each position attends "
        "equally to itself and everything before it (Corollary 1's uniform attention)",
        choices=("learned", "uniform"),
    )
    alignment: Any = setting(None, "the imposed correspondence of --align (sandbox_lens.interp.train.align)", cli=False)
    iit_weight: float = setting(1.0, "--align: weight of the interchange-intervention loss", metavar="λ")
    align_target: float = setting(
        0.95,
        "--align: with --target, keep training until every imposed variable's "
        "held-out IIA at its imposed site reaches this too",
        metavar="IIA",
    )
    iit_variables: str = setting(
        "turns",
        "--align: what a step's IIT loss swaps: one imposed variable per step in turn, all of them every step "
        "(their mean; one more forward per variable), or all of them and every edge of the algorithm's graph "
        "between them by a path interchange (graph; two more forwards per edge)",
        choices=("turns", "all", "graph"),
    )
    strict_weight: float = setting(
        1.0,
        "--align: weight of the strictness loss (off-circuit heads and MLPs resampled must not move the answer)",
        metavar="λ",
    )
    strict_target: float | None = setting(
        None,
        "--align: with --target, keep training until the strictness loss on the held-out pairs is at most this too "
        "(nats; default: no target on it)",
        metavar="NATS",
    )
    strict_nodes: str = setting(
        "all",
        "--align: which off-circuit heads and MLPs the strictness term resamples: all of them in every pair (SIIT), "
        "or each in a random half of the pairs (subsets: single nodes are held irrelevant too, so off-circuit parts "
        "cannot matter alone and cancel together)",
        choices=("all", "subsets"),
    )
    strict_on: str = setting(
        "answers",
        "--align: what the strictness term holds when the off-circuit heads and MLPs are resampled: the base "
        "word's answers (SIIT's cross-entropy; the off-circuit nodes may still move the logits) or its whole "
        "output distribution (outputs: the KL from the unablated run, so that they move no logit a metric reads)",
        choices=("answers", "outputs"),
    )

    def kept_steps(self) -> list[int]:
        """The evaluation steps whose model is kept (``keep_checkpoints`` of them, log-spaced from the first
        evaluation to the last step; fewer where evaluations are fewer)."""
        import numpy as np

        if not self.keep_checkpoints:
            return []
        evaluations = sorted({*range(self.eval_every, self.steps + 1, self.eval_every), self.steps})
        picks = np.unique(np.round(np.geomspace(1, len(evaluations), self.keep_checkpoints)).astype(int)) - 1
        return [evaluations[i] for i in picks]

    def __post_init__(self) -> None:
        if not 0 < self.align_target <= 1:
            raise SandboxError(f"align_target must be in (0, 1], got {self.align_target}")
        if self.keep_checkpoints < 0:
            raise SandboxError(f"keep_checkpoints must be ≥ 0, got {self.keep_checkpoints}")
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
        if self.attention not in ("learned", "uniform"):
            raise SandboxError(f"attention must be learned or uniform, got {self.attention!r}")
        if self.strict_nodes not in ("all", "subsets"):
            raise SandboxError(f"strict_nodes must be all or subsets, got {self.strict_nodes!r}")
        if self.strict_on not in ("answers", "outputs"):
            raise SandboxError(f"strict_on must be answers or outputs, got {self.strict_on!r}")
        if self.iit_variables not in ("turns", "all", "graph"):
            raise SandboxError(f"iit_variables must be turns, all or graph, got {self.iit_variables!r}")
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
        if self.strict_target is not None and not (math.isfinite(self.strict_target) and self.strict_target >= 0):
            raise SandboxError(f"strict_target (nats) must be ≥ 0, got {self.strict_target}")
        for name in ("iit_weight", "strict_weight"):
            if not (math.isfinite(getattr(self, name)) and getattr(self, name) >= 0):
                raise SandboxError(f"{name} must be ≥ 0, got {getattr(self, name)}")
        if bool(self.init) != bool(self.init_layers):
            raise SandboxError("init (where weights come from) and init_layers (which ones) go together")
        object.__setattr__(self, "init_layers", tuple(self.init_layers))
        object.__setattr__(self, "freeze", tuple(self.freeze))

    @property
    def hooked_training(self) -> bool:
        """True when a training step needs forward hooks (dropout or the entropy penalty)."""
        return bool(self.dropout or self.embed_dropout or self.sharpen or self.pos_shift)

    @property
    def reads_activations(self) -> bool:
        """True when a training step reads an activation: the hooks of :attr:`hooked_training`, the contrastive
        penalty or an imposed alignment (a twin without hook points cannot train such a run)."""
        return bool(self.hooked_training or self.contrastive or self.alignment)

    def lr_at(self, step: int) -> float:
        if step < self.warmup:
            return self.lr * (step + 1) / self.warmup
        frac = (step - self.warmup) / max(1, self.steps - self.warmup)
        return self.lr * (0.5 * (1 + math.cos(math.pi * frac)) if self.schedule == "cosine" else 1 - frac)


#: Settings a continued run may change: a new time budget or target does not make it another run.
FREE_TO_CHANGE = ("max_minutes", "target_accuracy", "keep_checkpoints", "align_target", "strict_target")


def run_identity(task_dict: dict[str, Any], shape: Any, config: Any) -> dict[str, Any]:
    """What makes two runs the same run, as JSON holds it (``shape``/``config``: dataclasses or the
    dicts a checkpoint or ``metrics.json`` recorded): resuming or skipping a run needs all of it equal."""
    config = {**asdict(TrainConfig()), **config} if isinstance(config, dict) else asdict(config)  # fields added since
    as_json = json.loads(json.dumps({"shape": shape if isinstance(shape, dict) else asdict(shape), "config": config}))
    config_d = {k: v for k, v in as_json["config"].items() if k not in FREE_TO_CHANGE}
    return {"task": task_dict, "shape": as_json["shape"], "config": config_d}
