"""The task-kind registry: one object per kind of task, the one home of every per-kind fact.

A *task kind* (automaton, Dyck, the flip-flop language, ...) is what a model card's ``task["kind"]``
names. Its :class:`TaskKind` knows

* what a card's task dict means: the task's *source* (the automaton, the Dyck language, ...) and the
  training task it describes (:meth:`TaskKind.task_from_dict`), with the kind's older names;
* its training task at a length, from command-line values (:attr:`TaskKind.train_options`,
  :meth:`TaskKind.task_from_options`), its default length and training defaults (steps, learning
  rate, target accuracy) and the twin's default shape;
* the constructions that model it (in the order the exact "skyline" is chosen) and how a
  construction is built for a training task (:meth:`TaskKind.construction_input`);
* how a model of it is verified (:attr:`TaskKind.verifier`) and how many random inputs a check takes;
* its evaluation shifts (:attr:`TaskKind.shift_options`, :meth:`TaskKind.shifts`), the inputs a
  shift draws (:meth:`TaskKind.draw`) and how outputs are scored (:attr:`TaskKind.evaluator`);
* its corruptions for circuit discovery (:attr:`TaskKind.corruptions`, :meth:`TaskKind.pair_words`);
* the ``interp compare`` adapter (:attr:`TaskKind.comparison`).

What runs a model lives on higher floors; a kind names it by ``"module:function"`` (resolved with
:func:`resolve`), so this floor imports nothing above it. A kind that names none gets the generic
paths: verification and evaluation on its training task's own batches (argmax at the scored
positions), so a new kind needs only an entry here (:func:`register`) to be trained, evaluated and
verified.

Every dispatch on a kind outside ``interp.tasks`` is a lookup here (``tests/tasks/test_kinds.py``
counts the comparisons with a kind's name that remain outside this floor: none).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Mapping, Sequence

import numpy as np

from interp.streams import Stream
from interp.errors import AutomatonError, CheckpointError, ConstructionError, SandboxError

__all__ = ["TaskKind", "Option", "TaskKindError", "register", "task_kind", "task_from_dict", "kind_names", "all_kinds",
           "resolve",
           "AUTOMATON", "DYCK", "FFL"]


class TaskKindError(CheckpointError):
    """A task kind that is not registered (in a card, a checkpoint, or on the command line)."""


@dataclass(frozen=True)
class Option:
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

    def argparse_kwargs(self) -> dict[str, Any]:
        kw: dict[str, Any] = {"dest": self.dest, "help": self.help, "default": self.default}
        for key in ("metavar", "type", "nargs"):
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
    #: fields of the twin's default :class:`~interp.train.ModelShape` that differ from the class's
    twin_shape: ClassVar[Mapping[str, Any]] = {}
    #: options of `interp train KIND` (the task's parameters)
    train_options: ClassVar[tuple[Option, ...]] = ()
    #: options of `interp evaluate` on a model of this kind (its shifts)
    shift_options: ClassVar[tuple[Option, ...]] = ()
    #: options of `interp compare KIND` (the language compared)
    compare_options: ClassVar[tuple[Option, ...]] = ()
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

    def source_name(self, source: Any) -> str:
        return str(getattr(source, "name", self.name))

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
        from interp.tasks.shifts import Shift

        return [Shift(f"in distribution, T={length}", self.name, {"length": int(length)})]

    def draw(self, task: Mapping[str, Any], shift: Any, n: int, seed: int) -> Any:
        """``n`` inputs of ``shift`` for a model of ``task`` (generic: the training task's batch)."""
        from interp.tasks.batches import step_rng

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


def _checked(kind: TaskKind, build: Callable[[], Any]) -> Any:
    try:
        return build()
    except (KeyError, TypeError) as e:
        raise CheckpointError(f"{kind.name} task description is incomplete: {e}") from None


# -- the three kinds of the thesis ------------------------------------------------------------------
class AutomatonKind(TaskKind):
    """Predict q_t at every position of BOS + σ_1..σ_T (thesis §3.4.2)."""

    name = "automaton"
    summary = "predict the state of a semiautomaton after every symbol"
    default_length, compare_length = 32, 16
    train_defaults = {"steps": 3000, "lr": 1e-3, "target_accuracy": 0.99}
    train_options = (
        Option(("--automaton",), "automaton", "automaton task: catalogue name", "NAME", group="automaton"),
        Option(("--automaton-file",), "automaton_file", "automaton task: JSON automaton file", "PATH",
               group="automaton"),
    )
    shift_options = (
        Option(("--probs",), "probs", "automata: symbol distributions, each comma-separated over the alphabet "
               "(e.g. 0.95,0.05)", "P", nargs="+", default=[]),
        Option(("--counts",), "counts", "automata: words with exactly N occurrences of --count-symbol "
               "(e.g. 0 2 14 16)", "N", type=int, nargs="+", default=[]),
        Option(("--count-symbol",), "count_symbol", "automata: the symbol --counts counts (default: the second)",
               "SYM"),
    )
    verify_samples = 1000
    verify_accepts = frozenset({"automaton", "length", "batch_size", "progress"})
    verifier = "interp.verify.automaton:verify_automaton"
    evaluator = "interp.evaluate:score_automaton"
    comparison = "interp.compare.automaton:AutomatonComparison"
    constructions = ("modular_counter", "memory", "gridworld", "krohn_rhodes", "prefix_scan")
    corruptions = ("symbol", "resample")

    def task_from_dict(self, d: Mapping[str, Any]) -> Any:
        import json

        from interp.tasks.automata import parse_automaton_json
        from interp.tasks.batches import AutomatonTask

        return _checked(self, lambda: AutomatonTask(parse_automaton_json(json.dumps(d["automaton"]), "<checkpoint>"),
                                                    d["length"]))

    def source(self, task: Mapping[str, Any]) -> Any:
        import json

        from interp.tasks.automata import parse_automaton_json

        return _checked(self, lambda: parse_automaton_json(json.dumps(task["automaton"]), "<model card>"))

    def task_from_options(self, values: Mapping[str, Any], length: int | None) -> Any:
        from interp.tasks.batches import AutomatonTask

        if values.get("automaton_file"):
            from interp.tasks.automata import load_automaton_file

            automaton = load_automaton_file(values["automaton_file"])
        elif values.get("automaton"):
            from interp.tasks.catalogue import get_automaton

            automaton = get_automaton(values["automaton"])
        else:
            raise SandboxError("train automaton needs --automaton NAME or --automaton-file PATH")
        return AutomatonTask(automaton, length or self.default_length)

    def check_source(self, construction: str, source: Any) -> None:
        from interp.tasks.automata import Semiautomaton

        if not isinstance(source, Semiautomaton):
            what = "a Dyck language" if type(source).__name__ == "Dyck" else type(source).__name__
            raise ConstructionError(f"{construction} needs an automaton, not {what}")

    def construction_source(self, construction: str, values: Mapping[str, Any], options: dict[str, Any]) -> Any:
        if values.get("dyck"):
            raise SandboxError("the dyck construction needs --dyck K,D (and --dyck goes only with dyck)")
        if values.get("cascade_file"):
            from interp.tasks.cascade import load_cascade_file

            options["cascade"] = load_cascade_file(values["cascade_file"])
            return options["cascade"].automaton()
        if values.get("automaton_file"):
            from interp.tasks.automata import load_automaton_file

            return load_automaton_file(values["automaton_file"])
        if values.get("automaton"):
            from interp.tasks.catalogue import get_automaton

            return get_automaton(values["automaton"])
        raise SandboxError(_NO_SOURCE + values.get("_source_hint", ""))

    def shifts(self, source: Any, length: int, values: Mapping[str, Any]) -> list[Any]:
        from interp.tasks.shifts import automaton_shifts, parse_probs

        sym = 1 if source.n_symbols > 1 else 0
        if values.get("count_symbol") is not None:
            if values["count_symbol"] not in source.alphabet:
                raise SandboxError(f"--count-symbol {values['count_symbol']!r} is not a symbol of {source.name} "
                                   f"({', '.join(source.alphabet)})")
            sym = source.alphabet.index(values["count_symbol"])
        return automaton_shifts(source, length, [parse_probs(p, source.n_symbols) for p in values.get("probs") or ()],
                                values.get("counts") or (), sym)

    def draw(self, task: Mapping[str, Any], shift: Any, n: int, seed: int) -> Any:
        from interp.tasks.batches import step_rng
        from interp.tasks.shifts import automaton_words

        return automaton_words(self.source(task), shift, n, step_rng(seed, 0, Stream.EVALUATION))

    def pair_words(self, source: Any, n: int, length: int, corruption: str, rng: np.random.Generator):
        clean = source.sample(n, length, rng)
        corrupt = corrupt_symbol(clean, source.n_symbols, rng) if corruption == "symbol" else source.sample(n, length, rng)
        read = np.ones(clean.shape, dtype=bool)
        return clean, corrupt, read, read, None


class DyckKind(TaskKind):
    """Next-token prediction of Dyck_{k,D} prefixes; scored at the closing brackets (thesis §3.6)."""

    name = "dyck"
    summary = "next-token prediction of bounded Dyck prefixes"
    default_length = 28
    train_defaults = {"steps": 1500, "lr": 3e-3, "target_accuracy": 0.97}
    twin_shape = {"n_layers": 2, "d_model": 50, "n_heads": 1, "d_mlp": 50}  # the thesis's Dyck models
    train_options = (
        Option(("--dyck",), "dyck", "dyck task: Dyck_{K,D}", "K,D"),
        Option(("--q",), "q", "dyck: probability of an open bracket", type=float, default=0.5),
    )
    shift_options = (
        Option(("--bands",), "bands", "dyck: length bands (default: as `verify dyck`)", "LO-HI", nargs="+"),
        Option(("--q",), "q", "dyck: other open-bracket probabilities", "Q", type=float, nargs="+", default=[]),
        Option(("--depths",), "depths", "dyck: prefixes of a shallower language Dyck_{k,D} (D below the model's)",
               "D", type=int, nargs="+", default=[]),
    )
    compare_options = (Option(("--dyck",), "dyck", "dyck: the language (default 2,4)", "K,D", default="2,4"),)
    construction_task_options = ("q",)
    verify_accepts = frozenset({"bands"})
    verifier = "interp.verify.dyck:verify_dyck"
    evaluator = "interp.evaluate:score_dyck"
    comparison = "interp.compare.dyck:DyckComparison"
    constructions = ("dyck",)
    skyline_options = {"variant": "stack"}
    corruptions = ("bracket-type", "resample")
    next_token = True

    def task_from_dict(self, d: Mapping[str, Any]) -> Any:
        from interp.tasks.batches import DyckTask
        from interp.tasks.dyck import Dyck

        return _checked(self, lambda: DyckTask(Dyck(d["k"], d["D"], d["q"]), d["length"]))

    def source(self, task: Mapping[str, Any]) -> Any:
        from interp.tasks.dyck import Dyck

        return _checked(self, lambda: Dyck(task["k"], task["D"], task["q"]))

    def task_from_options(self, values: Mapping[str, Any], length: int | None) -> Any:
        from interp.tasks.batches import DyckTask
        from interp.tasks.dyck import Dyck, parse_dyck_spec

        if not values.get("dyck"):
            raise SandboxError("train dyck needs --dyck K,D")
        k, D = parse_dyck_spec(values["dyck"])
        return DyckTask(Dyck(k, D, values.get("q", 0.5)), length or self.default_length)

    def check_source(self, construction: str, source: Any) -> None:
        from interp.tasks.dyck import Dyck

        if not isinstance(source, Dyck):
            raise ConstructionError(f"{construction} needs a Dyck language (--dyck K,D), not {type(source).__name__}")

    def construction_source(self, construction: str, values: Mapping[str, Any], options: dict[str, Any]) -> Any:
        from interp.tasks.dyck import Dyck, parse_dyck_spec

        if not any(values.get(s) for s in _SOURCES):
            raise SandboxError(_NO_SOURCE + values.get("_source_hint", ""))
        if not values.get("dyck"):
            raise SandboxError("the dyck construction needs --dyck K,D (and --dyck goes only with dyck)")
        k, D = parse_dyck_spec(values["dyck"])
        try:
            q = float(options.pop("q", 0.5))
        except ValueError:
            raise SandboxError("dyck: option q must be a number in (0, 1)") from None
        return Dyck(k, D, q)

    def shifts(self, source: Any, length: int, values: Mapping[str, Any]) -> list[Any]:
        from interp.tasks.dyck import default_bands
        from interp.tasks.shifts import dyck_shifts, parse_bands

        bands = parse_bands(values["bands"]) if values.get("bands") else default_bands(length)
        return dyck_shifts(source, bands, values.get("q") or (), values.get("depths") or ())

    def draw(self, task: Mapping[str, Any], shift: Any, n: int, seed: int) -> Any:
        from interp.tasks.dyck import Dyck

        source = self.source(task)
        lang = Dyck(source.k, shift.params.get("D", source.D), shift.params["q"])
        return lang.closing_prefixes(n, shift.params["band"], seed=seed)

    def pair_words(self, source: Any, n: int, length: int, corruption: str, rng: np.random.Generator):
        clean = source.sample(n, length, seed=int(rng.integers(2**31)))
        if corruption == "bracket-type":
            if source.k < 2:
                raise SandboxError(f"{source.name} has one bracket type: no bracket-type swap (use --corrupt resample)")
            corrupt = swap_bracket_type(clean, source.k, rng)
        else:
            corrupt = source.sample(n, length, seed=int(rng.integers(2**31)))
        # read where an open bracket is on the stack, over the closing brackets (the stack top decides)
        return clean, corrupt, open_stack(clean), open_stack(corrupt), np.arange(1, 2 * source.k, 2)


class FFLKind(TaskKind):
    """Language modelling of the flip-flop language FFL(T, p); scored at the reads (thesis §3.5)."""

    name = "ffl"
    aliases = ("flipflop",)
    summary = "the flip-flop language: repeat the latest written bit at every read"
    default_length = 64
    train_defaults = {"steps": 3000, "lr": 1e-3, "target_accuracy": 0.999}
    train_options = (
        Option(("--ffl", "--flipflop"), "ffl", "ffl task: FFL(P), P = p_i (default 0.8); several: a mixture, "
               "e.g. 0.9,0.98,0.1", "P[,P...]"),
    )
    shift_options = (
        Option(("--ffl",), "ffl", "ffl: the ignore probabilities p of FFL(p) (default 0.8,0.98,0.1)", "P,P,..."),
    )
    compare_options = (Option(("--ffl",), "ffl", "ffl: the language FFL(P), P = p_i (default 0.8)", "P", type=float,
                              default=0.8),)
    verifier = "interp.verify.ffl:verify_ffl"
    evaluator = "interp.evaluate:score_ffl"
    comparison = "interp.compare.ffl:FFLComparison"
    constructions = ("ffl",)
    min_length = 2
    corruptions = ("bit", "instruction", "resample")
    next_token = True

    def task_from_dict(self, d: Mapping[str, Any]) -> Any:
        from interp.tasks.batches import FFLTask

        return _checked(self, lambda: FFLTask(d["p"], d["length"]))

    def source(self, task: Mapping[str, Any]) -> Any:
        return None  # one language; p is a training setting, not what a model computes

    def source_name(self, source: Any) -> str:
        return "flip-flop language"

    def task_from_options(self, values: Mapping[str, Any], length: int | None) -> Any:
        from interp.tasks.batches import FFLTask

        ps = _probabilities(values.get("ffl"), "--ffl") if values.get("ffl") is not None else [0.8]
        return FFLTask(ps if len(ps) > 1 else ps[0], length or self.default_length)

    def construction_input(self, task: Any) -> tuple[Any, int]:
        return None, task.length - 1

    def check_source(self, construction: str, source: Any) -> None:
        if source is not None and canonical_name(getattr(source, "kind", None)) != self.name:
            raise ConstructionError(f"{construction} models the flip-flop language and takes no automaton "
                                    "(for the flip-flop automaton: the memory construction)")

    def construction_source(self, construction: str, values: Mapping[str, Any], options: dict[str, Any]) -> Any:
        if any(values.get(s) for s in _SOURCES):
            raise SandboxError(f"the {construction} construction models the flip-flop language and takes no automaton "
                               "(for the flip-flop automaton: `memory --automaton flipflop`)")
        return None

    def shifts(self, source: Any, length: int, values: Mapping[str, Any]) -> list[Any]:
        from interp.tasks.shifts import ffl_shifts

        ps = _probabilities(values["ffl"], "--ffl") if values.get("ffl") else [0.8, 0.98, 0.1]
        return ffl_shifts(length, ps)

    def draw(self, task: Mapping[str, Any], shift: Any, n: int, seed: int) -> Any:
        from interp.tasks.batches import step_rng
        from interp.tasks.ffl import sample_ffl

        return sample_ffl(shift.params["p"], n, shift.params["length"], step_rng(seed, 0, Stream.EVALUATION))

    def pair_words(self, source: Any, n: int, length: int, corruption: str, rng: np.random.Generator):
        from interp.tasks.ffl import R, corrupt_ffl, sample_ffl

        clean = sample_ffl(0.8, n, length, rng)
        corrupt = corrupt_ffl(clean, corruption, rng)
        read = clean == R
        return clean, corrupt, read, read, None


#: the command line's ways to name what a construction is built from
_SOURCES = ("automaton", "automaton_file", "cascade_file", "dyck")
_NO_SOURCE = "one of --automaton NAME, --automaton-file PATH, --cascade-file PATH, --dyck K,D is required"


def _probabilities(text: str, flag: str) -> list[float]:
    try:
        return [float(x) for x in str(text).split(",")]
    except ValueError:
        raise SandboxError(f"{flag} takes probabilities separated by commas, got {text!r}") from None


# -- corruptions (what a counterfactual pair is, per kind) -------------------------------------------
def corrupt_symbol(words: np.ndarray, n_symbols: int, rng: np.random.Generator) -> np.ndarray:
    """One symbol of each word replaced by another (position and new symbol uniform)."""
    if n_symbols < 2:
        raise AutomatonError("the automaton has one symbol: no word differs from another in one symbol")
    out = words.copy()
    rows = np.arange(len(words))
    pos = rng.integers(words.shape[1], size=len(words))
    out[rows, pos] = (words[rows, pos] + rng.integers(1, n_symbols, size=len(words))) % n_symbols
    return out


def swap_bracket_type(words: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """One open bracket of each Dyck prefix and its matching close change type together (depths unchanged)."""
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
    return np.cumsum(np.where(words % 2 == 0, 1, -1), axis=1) > 0


AUTOMATON = register(AutomatonKind())
DYCK = register(DyckKind())
FFL = register(FFLKind())


def kinds_help(attribute: str, fmt: Callable[[Any], str] = str, kinds: Sequence[TaskKind] | None = None) -> str:
    """``"automaton 32, dyck 28, ffl 64"``: one fact of every kind, for ``--help`` texts."""
    return ", ".join(f"{k.name} {fmt(getattr(k, attribute))}" for k in (kinds or all_kinds()))
