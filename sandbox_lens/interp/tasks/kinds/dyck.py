"""The Dyck kind: next-token prediction of bounded Dyck prefixes (thesis §3.6)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from sandbox_lens.interp.errors import ConstructionError, OptionError, SandboxError
from sandbox_lens.interp.tasks.kinds.base import NO_SOURCE, SOURCE_OPTIONS, CommandLineOption, TaskKind, checked

if TYPE_CHECKING:
    import numpy as np

__all__ = ["DyckKind", "DyckCopyKind", "StackTopKind", "swap_bracket_type", "open_stack"]


class DyckKind(TaskKind):
    """Next-token prediction of Dyck_{k,D} prefixes; scored at the closing brackets (thesis §3.6)."""

    name = "dyck"
    summary = "next-token prediction of bounded Dyck prefixes"
    default_length = 28
    train_defaults = {"steps": 1500, "lr": 3e-3, "target_accuracy": 0.97}
    twin_shape = {"n_layers": 2, "d_model": 50, "n_heads": 1, "d_mlp": 50}  # the thesis's Dyck models
    train_options = (
        CommandLineOption(("--dyck",), "dyck", "dyck task: Dyck_{K,D}", "K,D"),
        CommandLineOption(("--q",), "q", "dyck: probability of an open bracket", type=float, default=0.5),
    )
    shift_options = (
        CommandLineOption(("--bands",), "bands", "dyck: length bands (default: as `verify dyck`)", "LO-HI", nargs="+"),
        CommandLineOption(
            ("--q",), "q", "dyck: other open-bracket probabilities", "Q", type=float, nargs="+", default=[]
        ),
        CommandLineOption(
            ("--depths",),
            "depths",
            "dyck: prefixes of a shallower language Dyck_{k,D} (D below the model's)",
            "D",
            type=int,
            nargs="+",
            default=[],
        ),
    )
    compare_options = (
        CommandLineOption(("--dyck",), "dyck", "dyck: the language (default 2,4)", "K,D", default="2,4"),
    )
    construction_task_options = ("q",)
    verify_accepts = frozenset({"bands"})
    verifier = "sandbox_lens.interp.verify.dyck:verify_dyck"
    evaluator = "sandbox_lens.interp.evaluate:score_dyck"
    comparison = "sandbox_lens.interp.compare.dyck:DyckComparison"
    high_level = "sandbox_lens.interp.tasks.highlevel:DyckModel"
    constructions = ("dyck",)
    skyline_options = {"variant": "stack"}
    corruptions = ("bracket-type", "resample")
    next_token = True

    def task_from_dict(self, d: Mapping[str, Any]) -> Any:
        from sandbox_lens.interp.tasks.batches import DyckTask
        from sandbox_lens.interp.tasks.dyck import Dyck

        return checked(self, lambda: DyckTask(Dyck(d["k"], d["D"], d["q"]), d["length"]))

    def source(self, task: Mapping[str, Any]) -> Any:
        from sandbox_lens.interp.tasks.dyck import Dyck

        return checked(self, lambda: Dyck(task["k"], task["D"], task["q"]))

    def chance(self, task: Mapping[str, Any]) -> float:
        """A closing bracket scored among the k closing brackets: 1 / k."""
        return 1.0 / int(task["k"])

    def task_from_options(self, values: Mapping[str, Any], length: int | None) -> Any:
        from sandbox_lens.interp.tasks.batches import DyckTask
        from sandbox_lens.interp.tasks.dyck import Dyck

        k, D = dyck_option(values, self.name)
        return DyckTask(Dyck(k, D, values.get("q", 0.5)), length or self.default_length)

    def check_source(self, construction: str, source: Any) -> None:
        from sandbox_lens.interp.tasks.dyck import Dyck

        if not isinstance(source, Dyck):
            raise ConstructionError(f"{construction} needs a Dyck language (--dyck K,D), not {type(source).__name__}")

    def construction_source(self, construction: str, values: Mapping[str, Any], options: dict[str, Any]) -> Any:
        from sandbox_lens.interp.tasks.dyck import Dyck, parse_dyck_spec

        if not any(values.get(s) for s in SOURCE_OPTIONS):
            raise SandboxError(NO_SOURCE + values.get("_source_hint", ""))
        if not values.get("dyck"):
            raise SandboxError("the dyck construction needs --dyck K,D (and --dyck goes only with dyck)")
        k, D = parse_dyck_spec(values["dyck"])
        try:
            q = float(options.pop("q", 0.5))
        except ValueError:
            raise SandboxError("dyck: option q must be a number in (0, 1)") from None
        return Dyck(k, D, q)

    def shifts(self, source: Any, length: int, values: Mapping[str, Any]) -> list[Any]:
        from sandbox_lens.interp.tasks.dyck import default_bands
        from sandbox_lens.interp.tasks.shifts import dyck_shifts, parse_bands

        bands = parse_bands(values["bands"]) if values.get("bands") else default_bands(length)
        return dyck_shifts(source, bands, values.get("q") or (), values.get("depths") or ())

    def draw(self, task: Mapping[str, Any], shift: Any, n: int, seed: int) -> Any:
        from sandbox_lens.interp.tasks.dyck import Dyck

        source = self.source(task)
        lang = Dyck(source.k, shift.params.get("D", source.D), shift.params["q"])
        return lang.closing_prefixes(n, shift.params["band"], seed=seed)

    def pair_words(self, source: Any, n: int, length: int, corruption: str, rng: np.random.Generator):
        import numpy as np

        clean = source.sample(n, length, seed=int(rng.integers(2**31)))
        if corruption == "bracket-type":
            if source.k < 2:
                raise SandboxError(f"{source.name} has one bracket type: no bracket-type swap (use --corrupt resample)")
            corrupt = swap_bracket_type(clean, source.k, rng)
        else:
            corrupt = source.sample(n, length, seed=int(rng.integers(2**31)))
        # read where an open bracket is on the stack, over the closing brackets (the stack top decides)
        return clean, corrupt, open_stack(clean), open_stack(corrupt), np.arange(1, 2 * source.k, 2)


class DyckCopyKind(TaskKind):
    """Copying Dyck prefixes: the output at every bracket is that bracket (thesis §3.6.5.1, Figs. 3.41–3.43).

    No construction models it (a copy needs no attention: the embedding read by the unembedding does it); models
    are trained, evaluated and verified on its own batches, and scored at every bracket."""

    name = "dyck-copy"
    summary = "copying bounded Dyck prefixes, bracket by bracket (thesis §3.6.5.1)"
    default_length = 28
    train_defaults = {"steps": 1000, "lr": 3e-3, "target_accuracy": 0.99}
    twin_shape = DyckKind.twin_shape
    train_options = DyckKind.train_options

    def task_from_dict(self, d: Mapping[str, Any]) -> Any:
        from sandbox_lens.interp.tasks.dyck import Dyck
        from sandbox_lens.interp.tasks.variants import DyckCopyTask

        return checked(self, lambda: DyckCopyTask(Dyck(d["k"], d["D"], d["q"]), d["length"]))

    def task_from_options(self, values: Mapping[str, Any], length: int | None) -> Any:
        from sandbox_lens.interp.tasks.dyck import Dyck
        from sandbox_lens.interp.tasks.variants import DyckCopyTask

        k, D = dyck_option(values, self.name, " (copying is defined on a Dyck language)")
        return DyckCopyTask(Dyck(k, D, values.get("q", 0.5)), length or self.default_length)


class StackTopKind(TaskKind):
    """The stack of Dyck_{k,D} observed through its top (Fig. 3.18's Dyck_{4,8} column); trained, evaluated and
    verified on its own batches."""

    name = "dyck-top"
    summary = "the type on top of a bounded Dyck stack after every bracket (thesis Fig. 3.18)"
    default_length = 16
    train_defaults = {"steps": 2000, "lr": 1e-3, "target_accuracy": 0.99}
    train_options = (DyckKind.train_options[0],)

    def task_from_dict(self, d: Mapping[str, Any]) -> Any:
        from sandbox_lens.interp.tasks.variants import StackTopTask

        return checked(self, lambda: StackTopTask(d["k"], d["depth"], d["length"]))

    def task_from_options(self, values: Mapping[str, Any], length: int | None) -> Any:
        from sandbox_lens.interp.tasks.variants import StackTopTask

        k, D = dyck_option(values, self.name, " (the bracket types and the depth bound)")
        try:
            return StackTopTask(k, D, length or self.default_length)
        except SandboxError as e:
            raise OptionError(str(e)) from None


def dyck_option(values: Mapping[str, Any], kind: str, why: str = "") -> tuple[int, int]:
    """(k, D) from ``--dyck K,D`` for ``interp train KIND``; without it, one line saying the kind needs it."""
    from sandbox_lens.interp.tasks.dyck import parse_dyck_spec

    if not values.get("dyck"):
        raise SandboxError(f"train {kind} needs --dyck K,D{why}")
    return parse_dyck_spec(values["dyck"])


def swap_bracket_type(words: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """One open bracket of each Dyck prefix and its matching close change type together (depths unchanged)."""
    import numpy as np

    out = words.copy()
    for b, w in enumerate(words):
        opens = np.flatnonzero(w % 2 == 0)
        if not len(opens):
            continue
        i = int(rng.choice(opens))
        new = (w[i] // 2 + int(rng.integers(1, k))) % k
        depth, j = 0, None
        for t in range(i, len(w)):  # the close that matches the open at i, if the prefix has it
            depth += 1 if w[t] % 2 == 0 else -1
            if depth == 0:
                j = t
                break
        out[b, i] = 2 * new
        if j is not None:
            out[b, j] = 2 * new + 1
    return out


def open_stack(words: np.ndarray) -> np.ndarray:
    """[n, T]: True after the brackets that leave an open bracket on the stack."""
    import numpy as np

    return np.cumsum(np.where(words % 2 == 0, 1, -1), axis=1) > 0
