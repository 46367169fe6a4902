"""The flip-flop kind: language modelling of FFL(T, p), scored at the reads (thesis §3.5)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from sandbox_lens.interp.errors import ConstructionError, SandboxError
from sandbox_lens.interp.streams import Stream
from sandbox_lens.interp.tasks.kinds.base import SOURCE_OPTIONS, CommandLineOption, TaskKind, canonical_name, checked

if TYPE_CHECKING:
    import numpy as np

__all__ = ["FFLKind"]


class FFLKind(TaskKind):
    """Language modelling of the flip-flop language FFL(T, p); scored at the reads (thesis §3.5)."""

    name = "ffl"
    aliases = ("flipflop",)
    summary = "the flip-flop language: repeat the latest written bit at every read"
    default_length = 64
    train_defaults = {"steps": 3000, "lr": 1e-3, "target_accuracy": 0.999}
    train_options = (
        CommandLineOption(
            ("--ffl", "--flipflop"),
            "ffl",
            "ffl task: FFL(P), P = p_i (default 0.8); several: a mixture, e.g. 0.9,0.98,0.1",
            "P[,P...]",
        ),
    )
    shift_options = (
        CommandLineOption(
            ("--ffl",), "ffl", "ffl: the ignore probabilities p of FFL(p) (default 0.8,0.98,0.1)", "P,P,..."
        ),
    )
    compare_options = (
        CommandLineOption(
            ("--ffl",), "ffl", "ffl: the language FFL(P), P = p_i (default 0.8)", "P", type=float, default=0.8
        ),
    )
    verifier = "sandbox_lens.interp.verify.ffl:verify_ffl"
    evaluator = "sandbox_lens.interp.evaluate:score_ffl"
    comparison = "sandbox_lens.interp.compare.ffl:FFLComparison"
    high_level = "sandbox_lens.interp.tasks.highlevel:FFLModel"
    constructions = ("ffl",)
    min_length = 2
    corruptions = ("bit", "instruction", "resample")
    next_token = True

    def task_from_dict(self, d: Mapping[str, Any]) -> Any:
        from sandbox_lens.interp.tasks.batches import FFLTask

        return checked(self, lambda: FFLTask(d["p"], d["length"]))

    def chance(self, task: Mapping[str, Any]) -> float:
        """A read answered by one of two bits: 1 / 2."""
        return 0.5

    def source(self, task: Mapping[str, Any]) -> Any:
        return None  # one language; p is a training setting, not what a model computes

    def task_from_options(self, values: Mapping[str, Any], length: int | None) -> Any:
        from sandbox_lens.interp.tasks.batches import FFLTask

        ps = _probabilities(values.get("ffl"), "--ffl") if values.get("ffl") is not None else [0.8]
        return FFLTask(ps if len(ps) > 1 else ps[0], length or self.default_length)

    def construction_input(self, task: Any) -> tuple[Any, int]:
        return None, task.length - 1

    def check_source(self, construction: str, source: Any) -> None:
        if source is not None and canonical_name(getattr(source, "kind", None)) != self.name:
            raise ConstructionError(
                f"{construction} models the flip-flop language and takes no automaton "
                "(for the flip-flop automaton: the memory construction)"
            )

    def construction_source(self, construction: str, values: Mapping[str, Any], options: dict[str, Any]) -> Any:
        if any(values.get(s) for s in SOURCE_OPTIONS):
            raise SandboxError(
                f"the {construction} construction models the flip-flop language and takes no automaton "
                "(for the flip-flop automaton: `memory --automaton flipflop`)"
            )
        return None

    def shifts(self, source: Any, length: int, values: Mapping[str, Any]) -> list[Any]:
        from sandbox_lens.interp.tasks.shifts import ffl_shifts

        ps = _probabilities(values["ffl"], "--ffl") if values.get("ffl") else [0.8, 0.98, 0.1]
        return ffl_shifts(length, ps)

    def draw(self, task: Mapping[str, Any], shift: Any, n: int, seed: int) -> Any:
        from sandbox_lens.interp.tasks.batches import step_rng
        from sandbox_lens.interp.tasks.ffl import sample_strings

        # whole strings of FFL(T, p): the forced final read and its answer are the last two tokens (a twin
        # reads T − 1 tokens, so the final read is its last input and is scored)
        return sample_strings(shift.params["p"], n, shift.params["length"], step_rng(seed, 0, Stream.EVALUATION))

    def pair_words(self, source: Any, n: int, length: int, corruption: str, rng: np.random.Generator):
        from sandbox_lens.interp.tasks.ffl import R, corrupt_ffl, sample_ffl

        clean = sample_ffl(0.8, n, length, rng)
        corrupt = corrupt_ffl(clean, corruption, rng)
        read = clean == R
        return clean, corrupt, read, read, None


def _probabilities(text: str, flag: str) -> list[float]:
    try:
        return [float(x) for x in str(text).split(",")]
    except ValueError:
        raise SandboxError(f"{flag} takes probabilities separated by commas, got {text!r}") from None
