"""The task-kind base class, the command-line :class:`CommandLineOption` a kind reads, and the registry itself
(see :mod:`sandbox_lens.interp.tasks.kinds`)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from sandbox_lens.interp.errors import CheckpointError, SandboxError
from sandbox_lens.interp.streams import Stream

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "TaskKind",
    "CommandLineOption",
    "TaskKindError",
    "register",
    "unregister",
    "task_kind",
    "task_from_dict",
    "kind_names",
    "all_kinds",
    "canonical_name",
    "resolve",
    "kinds_help",
    "SOURCE_OPTIONS",
    "NO_SOURCE",
    "checked",
]


class TaskKindError(CheckpointError):
    """A task kind that is not registered (in a card, a checkpoint, or on the command line)."""


@dataclass(frozen=True)
class CommandLineOption:
    """A command-line option a kind reads: ``flags`` (the first is the name), ``dest`` (the value's key),
    argparse's ``type``/``nargs``/``metavar``/``default``/``help``. Options of one ``group`` exclude each
    other (e.g. an automaton from the catalogue or from a file)."""

    flags: tuple[str, ...]
    dest: str
    help: str
    metavar: str | None = None
    type: Callable[[str], Any] | None = None
    nargs: str | None = None
    default: Any = None
    group: str | None = None
    choices: tuple[str, ...] | None = None

    def argparse_kwargs(self) -> dict[str, Any]:
        kw: dict[str, Any] = {"dest": self.dest, "help": self.help, "default": self.default}
        for key in ("metavar", "type", "nargs", "choices"):
            if getattr(self, key) is not None:
                kw[key] = getattr(self, key)
        return kw

    def given(self, values: Mapping[str, Any]) -> bool:
        """Whether ``values`` (parsed arguments) set this option to something other than its default."""
        return values.get(self.dest, self.default) != self.default


class TaskKind:
    """A kind of task; subclass it and :func:`register` an instance (see the module docstring).

    The class attributes are the kind's facts; the methods turn a card's task dict or command-line
    values into the kind's objects. Defaults are the generic ones (a kind with nothing but a training
    task is trained, evaluated and verified on that task's batches).
    """

    name: ClassVar[str]
    #: older names, read from saved models, checkpoints and the command line
    aliases: ClassVar[tuple[str, ...]] = ()
    #: one line for ``--help``
    summary: ClassVar[str] = ""
    #: training length of `interp train` when none is given
    default_length: ClassVar[int]
    #: ... and of the twin `interp compare` trains (shorter where every construction is built beside it)
    compare_length: ClassVar[int | None] = None
    #: steps, peak learning rate and target accuracy of a twin (`interp train` and `interp compare`)
    train_defaults: ClassVar[Mapping[str, Any]] = {"steps": 2000, "lr": 1e-3, "target_accuracy": 0.99}
    #: fields of the twin's default :class:`~sandbox_lens.interp.train.ModelShape` that differ from the class's
    twin_shape: ClassVar[Mapping[str, Any]] = {}
    #: options of `interp train KIND` (the task's parameters)
    train_options: ClassVar[tuple[CommandLineOption, ...]] = ()
    #: options of `interp evaluate` on a model of this kind (its shifts)
    shift_options: ClassVar[tuple[CommandLineOption, ...]] = ()
    #: options of `interp compare KIND` (the language compared)
    compare_options: ClassVar[tuple[CommandLineOption, ...]] = ()
    #: `-O` options of a construction of this kind that describe the task, not the weights (Dyck's q)
    construction_task_options: ClassVar[tuple[str, ...]] = ()
    #: random inputs per verification check when the caller does not say
    verify_samples: ClassVar[int] = 200
    #: what `verify` accepts beside the model: ``automaton``, ``length`` (any length up to the model's),
    #: ``bands``, ``batch_size``, ``progress``
    verify_accepts: ClassVar[frozenset[str]] = frozenset()
    #: "module:function" of the verifier (floor 2); None: the generic one on the training task's batches
    verifier: ClassVar[str | None] = None
    #: "module:function" scoring a model on a shift's inputs (floor 3); None: the generic one
    evaluator: ClassVar[str | None] = None
    #: "module:Class" of the `interp compare` adapter (floor 3); None: not comparable
    comparison: ClassVar[str | None] = None
    #: "module:Class" of the high-level causal model `interp align` aligns a model to (floor 1), built from
    #: the task's source and a mode; None: no causal alignment for this kind yet
    high_level: ClassVar[str | None] = None
    #: registry constructions that model this kind, in the order the exact skyline is chosen
    constructions: ClassVar[tuple[str, ...]] = ()
    #: options of the skyline construction (e.g. Dyck's stack variant)
    skyline_options: ClassVar[Mapping[str, Any]] = {}
    #: counterfactual corruptions for circuit discovery; the first is the default
    corruptions: ClassVar[tuple[str, ...]] = ("resample",)
    #: the shortest input a model of this kind reads (a construction is built for at least this)
    min_length: ClassVar[int] = 1
    #: the last token is a target only (next-token tasks): inputs are one token shorter than the task
    next_token: ClassVar[bool] = False

    # -- what a card's task dict means ----------------------------------------------------------
    def task_from_dict(self, d: Mapping[str, Any]) -> Any:
        """The training task a ``task.to_dict()`` describes (e.g. from a checkpoint or a twin's card)."""
        raise NotImplementedError

    def source(self, task: Mapping[str, Any]) -> Any:
        """What the task is about (the automaton, the Dyck language; for a generic kind: its training task)."""
        return self.task_from_dict(task)

    # -- training ---------------------------------------------------------------------------------
    def task_from_options(self, values: Mapping[str, Any], length: int | None) -> Any:
        """The training task of `interp train KIND` with ``values`` (parsed :attr:`train_options`)."""
        return self.task_from_dict({"kind": self.name, "length": length or self.default_length})

    def construction_input(self, task: Any) -> tuple[Any, int]:
        """(what a construction is built from, the input length it must cover) for a training task."""
        return self.source(task.to_dict()), task.length - (1 if self.next_token else 0)

    def check_source(self, construction: str, source: Any) -> None:
        """Refuse, in one line, a source a construction of this kind cannot be built from."""

    def construction_source(self, construction: str, values: Mapping[str, Any], options: dict[str, Any]) -> Any:
        """What `interp build|verify CONSTRUCTION` builds from, read from the command line's ``values``
        (``--automaton``, ``--dyck``, ...); takes the kind's own entries out of ``options`` (``-O``)."""
        return None

    # -- evaluation -------------------------------------------------------------------------------
    def shifts(self, source: Any, length: int, values: Mapping[str, Any]) -> list[Any]:
        """The evaluation sets of `interp evaluate` at ``length`` with ``values`` (parsed :attr:`shift_options`)."""
        from sandbox_lens.interp.tasks.shifts import Shift

        return [Shift(f"in distribution, T={length}", self.name, {"length": int(length)})]

    def chance(self, task: Mapping[str, Any]) -> float:
        """The accuracy of a uniform guess among the outputs the task scores (the floor below which an
        accuracy says nothing): 1 / the number of scored outputs."""
        return 1.0 / self.task_from_dict(task).d_vocab_out

    def draw(self, task: Mapping[str, Any], shift: Any, n: int, seed: int) -> Any:
        """``n`` inputs of ``shift`` for a model of ``task`` (generic: the training task's batch)."""
        from sandbox_lens.interp.tasks.batches import step_rng

        at = self.task_from_dict({**task, "length": shift.length()})
        return at.batch(step_rng(seed, 0, Stream.EVALUATION), n)

    # -- circuits ---------------------------------------------------------------------------------
    def pair_words(self, source: Any, n: int, length: int, corruption: str, rng: np.random.Generator):
        """(clean words, corrupted words, read, read_corrupted, readout outputs or None) for circuit pairs:
        words in the model's symbol indices; ``read`` [n, length] marks the outputs the metric reads."""
        raise SandboxError(f"{self.name} tasks have no counterfactual pairs")

    def __repr__(self) -> str:
        return f"<task kind {self.name}>"


_REGISTRY: dict[str, TaskKind] = {}
_ALIASES: dict[str, str] = {}


def register(kind: TaskKind) -> TaskKind:
    """Add (or replace) a kind; its name and aliases then resolve to it everywhere."""
    for name in (kind.name, *kind.aliases):
        owner = _ALIASES.get(name, name if name in _REGISTRY else None)
        if owner is not None and owner != kind.name:
            raise ValueError(f"task kind name {name!r} is taken by {owner!r}")
    _REGISTRY[kind.name] = kind
    _ALIASES.update({a: kind.name for a in kind.aliases})
    return kind


def unregister(name: str) -> None:
    """Remove a kind (tests that register a toy kind clean up with this)."""
    kind = _REGISTRY.pop(name)
    for a in kind.aliases:
        _ALIASES.pop(a, None)


def kind_names(aliases: bool = False) -> tuple[str, ...]:
    """The registered kinds' names (and their older names)."""
    return tuple(_REGISTRY) + (tuple(_ALIASES) if aliases else ())


def all_kinds() -> tuple[TaskKind, ...]:
    """Every registered task kind, in registration order."""
    return tuple(_REGISTRY.values())


def canonical_name(name: Any) -> Any:
    """A kind's name as spelled today (an alias resolved; anything else unchanged)."""
    return _ALIASES.get(name, name) if isinstance(name, str) else name


def task_kind(what: Any) -> TaskKind:
    """The kind of ``what``: a kind's name or alias, a task dict (its ``"kind"``), a card or a task
    object (their ``kind``/``task``). Unknown kinds raise :class:`TaskKindError` in one line."""
    if isinstance(what, TaskKind):
        return what
    name = what
    if isinstance(what, Mapping):
        name = what.get("kind")
    elif not isinstance(what, str):
        name = getattr(what, "kind", None)
        if isinstance(name, TaskKind):
            return name
    name = canonical_name(name)
    if name not in _REGISTRY:
        raise TaskKindError(f"unknown task kind {name!r} (known: {', '.join(_REGISTRY)})")
    return _REGISTRY[name]


def task_from_dict(d: Mapping[str, Any]) -> Any:
    """Rebuild a training task from its ``to_dict()`` (e.g. from a checkpoint): its kind's."""
    return task_kind(d).task_from_dict(d)


def resolve(path: str) -> Any:
    """The object a kind names by ``"module:attribute"``."""
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


def checked(kind: TaskKind, build: Callable[[], Any]) -> Any:
    """``build()``, with a malformed task dict of ``kind`` turned into a one-line :class:`TaskKindError`."""
    try:
        return build()
    except (KeyError, TypeError) as e:
        raise CheckpointError(f"{kind.name} task description is incomplete: {e}") from None


#: the command line's ways to name what a construction is built from
SOURCE_OPTIONS = ("automaton", "automaton_file", "cascade_file", "dyck")
NO_SOURCE = "one of --automaton NAME, --automaton-file PATH, --cascade-file PATH, --dyck K,D is required"


def kinds_help(attribute: str, fmt: Callable[[Any], str] = str, kinds: Sequence[TaskKind] | None = None) -> str:
    """``"automaton 32, dyck 28, ffl 64"``: one fact of every kind, for ``--help`` texts."""
    return ", ".join(f"{k.name} {fmt(getattr(k, attribute))}" for k in (kinds or all_kinds()))
