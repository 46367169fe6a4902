"""What `interp compare` measures and at what scale, stated once: :class:`CompareConfig`'s fields are
the Python keywords of :func:`~sandbox_lens.interp.compare.analyse.compare` and the options of `interp compare`."""

from __future__ import annotations

from dataclasses import dataclass

from sandbox_lens.interp.errors import OptionError, SandboxError
from sandbox_lens.interp.settings import setting

__all__ = ["CompareConfig"]


@dataclass(frozen=True)
class CompareConfig:
    """The settings of one comparison (the task and OUT are given apart)."""

    constructions: tuple[str, ...] | None = setting(
        None,
        "constructions to compare (dyck: stack uniform balanced; automata: registry names; default: all that apply)",
        flag="--construction",
        metavar="NAME",
    )
    trained: str | None = setting(
        None,
        "the model to compare, of the same task: a run directory of `interp train`, or a saved model (`interp build`, "
        "`interp adopt`, `save_model`); default: train a twin in OUT/twin",
        metavar="DIR",
    )
    samples: int = setting(200, "sampled words for probes, ablation and pruning")
    examples: int = setting(20, "example words for the attention scores")
    train_steps: int | None = setting(None, "steps of the twin trained here (default: the task kind's)")
    train_minutes: float = setting(5.0, "time budget when the twin is trained here")
    masks: bool = setting(True, "learn head masks (the option: --mask-steps 0 skips them)", cli=False)
    mask_steps: int = setting(150, "steps of learned head masks (0: skip)")
    mask_sparsities: tuple[float, ...] = setting(
        (0.1, 0.3, 1.0),
        "L0 penalties of the learned head masks, nats per open head",
        flag="--mask-sparsity",
        metavar="λ",
    )
    theorem3_steps: int = setting(1000, "dyck: steps of the random-network weight mask (0: skip)")
    corollary3_steps: int = setting(400, "dyck: steps of the two-target mask with one shared matrix (0: skip)")
    circuit_pairs: int = setting(64, "counterfactual pairs for the circuits section (ACDC on every model; 0: skip)")
    population: str | None = setting(
        None,
        "a sweep directory of `interp train --seeds` on the same task: every twin "
        "aligned causally beside its null and the construction, summarised over seeds "
        "in the report (the causal section's pairs)",
        metavar="DIR",
    )
    causal_pairs: int = setting(
        128, "pairs (and as many held out) for the causal section (every task kind with a high-level model); 0: skip"
    )
    seed: int = setting(0, "seed of the sampled words, the twin and the masks")

    def __post_init__(self) -> None:
        if self.samples < 8 or self.examples < 1:
            raise SandboxError("compare needs --samples ≥ 8 and at least one example word")
        for name in ("mask_steps", "theorem3_steps", "corollary3_steps", "circuit_pairs", "causal_pairs"):
            if getattr(self, name) is not None and getattr(self, name) < 0:
                raise OptionError(f"--{name.replace('_', '-')} must be ≥ 0, got {getattr(self, name)}")
        if self.train_steps is not None and self.train_steps < 1:
            raise OptionError(f"--train-steps must be ≥ 1, got {self.train_steps}")
        if not self.train_minutes >= 0:
            raise OptionError(f"--train-minutes must be ≥ 0, got {self.train_minutes}")
        if not self.mask_sparsities or any(not x >= 0 for x in self.mask_sparsities):
            raise OptionError("--mask-sparsity takes one or more penalties ≥ 0")
        if self.mask_steps == 0:
            object.__setattr__(self, "masks", False)
        if self.constructions is not None:
            object.__setattr__(self, "constructions", tuple(self.constructions))
        object.__setattr__(self, "mask_sparsities", tuple(float(x) for x in self.mask_sparsities))
