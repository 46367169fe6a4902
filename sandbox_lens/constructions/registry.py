"""Construction names -> what each one takes and its options; builders imported only when asked for.

Every entry declares its input (``automaton``: a :class:`~sandbox_lens.interp.tasks.automata.Semiautomaton`;
``dyck``: a :class:`~sandbox_lens.interp.tasks.dyck.Dyck` language; ``ffl``: nothing, the flip-flop language)
and its options with their defaults and allowed values. :func:`build` validates a request once —
name, input, options — before importing the builder, so ``interp verify prefix_scan …`` never
imports the Krohn–Rhodes machinery (and sympy), the gridworld or the Dyck modules.

Negative controls have one spelling, ``as_printed=…`` (the thesis's printed, defective version, or
a control of the notes). The older spellings ``control=`` (dyck) and ``wiring=current``
(krohn_rhodes) are still accepted, with a deprecation warning.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sandbox_lens.constructions.negatives import DIALS, Dials, add_negatives, dials_of
from sandbox_lens.interp.errors import ConstructionError
from sandbox_lens.interp.model.spec import ConstructionSpec
from sandbox_lens.interp.tasks.kinds import task_kind

__all__ = ["REGISTRY", "build", "Entry", "Option"]


@dataclass(frozen=True)
class Option:
    """One keyword option: its default, its type, and either its allowed values or, for a
    comma-separated list (``subset=True``), the values each item may take."""

    default: Any
    type: type = str
    choices: tuple[Any, ...] = ()
    subset: bool = False
    cli: bool = True  # settable with -O KEY=VALUE (False: Python objects such as a cascade)
    help: str = ""

    def check(self, construction: str, name: str, value: Any) -> Any:
        if self.type is object:
            return value  # a Python object or a path (e.g. a Cascade); the builder checks it
        try:
            value = self.type(value)
        except (TypeError, ValueError):
            raise ConstructionError(
                f"{construction}: option {name} must be a {self.type.__name__}, got {value!r}"
            ) from None
        if self.subset:
            bad = [v for v in str(value).split(",") if v and v not in self.choices]
            if bad:
                raise ConstructionError(
                    f"{construction}: {name} takes a comma-separated subset of "
                    f"{', '.join(map(str, self.choices))}; unknown: {', '.join(bad)}"
                )
        elif self.choices and value not in self.choices:
            raise ConstructionError(
                f"{construction}: {name} must be one of {', '.join(map(str, self.choices))}, got {value!r}"
            )
        return value

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"default": self.default, "type": self.type.__name__}
        if self.choices:
            out["choices" if not self.subset else "comma-separated subset of"] = list(self.choices)
        if self.help:
            out["help"] = self.help
        return out


@dataclass(frozen=True)
class Entry:
    """One construction in the registry: where its builder lives, its theorem, a summary, the task kind it models, its
    options."""

    module: str
    function: str
    theorem: str
    summary: str
    takes: str  # the task kind it models (sandbox_lens.interp.tasks.kinds)
    options: dict[str, Option] = field(default_factory=dict)
    # old option spellings: name -> function(value) -> {new name: new value}
    deprecated: dict[str, Callable[[Any], dict[str, Any]]] = field(default_factory=dict)
    # the builder itself, for a construction registered from outside the package (docs/recipes.md); the
    # package's own entries name module and function so that a build imports only its own builder
    factory: Callable[..., ConstructionSpec] | None = None

    @property
    def builder(self) -> Callable[..., ConstructionSpec]:
        """The function that builds it: ``factory``, or ``function`` of ``module`` (imported on first use)."""
        if self.factory is not None:
            return self.factory
        return getattr(importlib.import_module(self.module), self.function)

    def describe(self) -> dict[str, Any]:
        return {
            "theorem": self.theorem,
            "summary": self.summary,
            "takes": self.takes,
            "options": {n: o.describe() for n, o in self.options.items() if o.cli},
        }


def _dyck_control(value: Any) -> dict[str, Any]:
    return {"as_printed": value}


def _kr_wiring(value: Any) -> dict[str, Any]:
    if value not in ("previous", "current"):
        raise ConstructionError(f"krohn_rhodes: wiring must be previous or current, got {value!r}")
    return {"as_printed": "wiring" if value == "current" else ""}


REGISTRY: dict[str, Entry] = {
    "prefix_scan": Entry(
        "sandbox_lens.constructions.prefix_scan",
        "build_prefix_scan",
        "Theorem 10",
        "any semiautomaton; ceil(log2 T) attention layers",
        "automaton",
        {
            "code": Option("rotary", choices=("rotary", "circle"), help="position code of the look-back heads"),
            "padding": Option("minimal", choices=("minimal", "thesis"), help="padding before the word"),
            "as_printed": Option(
                "",
                choices=("rotation_sign", "value_matrix", "readout"),
                subset=True,
                help="rebuild the thesis's printed defects (negative controls)",
            ),
        },
    ),
    "modular_counter": Entry(
        "sandbox_lens.constructions.counter",
        "build_modular_counter",
        "Lemma 15",
        "C<n> / parity; 1 attention layer",
        "automaton",
    ),
    "memory": Entry(
        "sandbox_lens.constructions.memory",
        "build_memory",
        "Lemma 16",
        "memory<n> / flipflop; 1 attention layer",
        "automaton",
    ),
    "gridworld": Entry(
        "sandbox_lens.constructions.gridworld",
        "build_gridworld",
        "Theorem 12",
        "grid<n>, grid<a>x<b> (+noop); 2 attention layers at every n and T",
        "automaton",
        {"as_printed": Option("", choices=("no_padding",), subset=True, help="drop the padding (negative control)")},
    ),
    "dyck": Entry(
        "sandbox_lens.constructions.dyck",
        "build_dyck",
        "Theorem 1",
        "Dyck_{k,D} next-token prediction (--dyck K,D); 2 attention layers",
        "dyck",
        {
            "variant": Option("stack", choices=("stack", "uniform", "balanced"), help="the second layer's attention"),
            "seed": Option(0, int, help="seed of the balanced variant's random scores"),
            "sigma": Option(1.0, float, help="scale of the balanced variant's random scores, in (0, 10]"),
            "as_printed": Option(
                "",
                choices=("", "unscaled", "zeroed"),
                help="negative controls: unscaled (with variant=balanced), zeroed (with variant=uniform)",
            ),
            "first_layer": Option(
                "full",
                choices=("full", "minimal"),
                help="minimal: layer 1 erases the positions once read, so layer 2 sees only type and "
                "depth (Assumption 10; not with variant=stack)",
            ),
        },
        {"control": _dyck_control},
    ),
    "ffl": Entry(
        "sandbox_lens.constructions.ffl",
        "build_ffl",
        "Proposition 3",
        "the flip-flop language FFL over w r i 0 1 (no automaton); 2 attention layers, 1 head each",
        "ffl",
    ),
    "krohn_rhodes": Entry(
        "sandbox_lens.constructions.krohn_rhodes",
        "build_krohn_rhodes",
        "Theorem 11",
        "any solvable automaton: groups, permutation-reset, cascades (--cascade-file), grid<n>, the rest by the holonomy "
        "decomposition; depth independent of T",
        "automaton",
        {
            "cascade": Option(None, object, cli=False, help="a Cascade (or a cascade JSON file) to simulate"),
            "as_printed": Option(
                "",
                choices=("", "wiring"),
                help="wiring: Lemma 21's printed wiring, which reads the states after σ_t (negative control)",
            ),
        },
        {"wiring": _kr_wiring},
    ),
}


#: Every construction takes informative negatives (parts outside its circuit; sandbox_lens.constructions.negatives).
NEGATIVES_OPTION = Option(
    "",
    choices=("distractor", "cancel", "constant", "backup"),
    subset=True,
    help="informative negatives for circuit scoring: parts that keep the model exact but "
    "are outside its circuit (distractor, cancel, constant), or redundant (backup)",
)
#: ... and their dials (sandbox_lens.constructions.negatives.DIALS): the gadgets' constants, swept by the leaderboard.
DIAL_OPTIONS = {
    name: Option(getattr(Dials(), field_name), type=float, help=f"negatives: {what} ({lo:g} to {hi:g})")
    for name, (field_name, _, lo, hi, what) in DIALS.items()
}
for _entry in REGISTRY.values():
    _entry.options["negatives"] = NEGATIVES_OPTION
    _entry.options.update(DIAL_OPTIONS)


def _unknown(name: str) -> ConstructionError:
    return ConstructionError(f"unknown construction {name!r} (choose from {', '.join(REGISTRY)})")


def validate(name: str, source: Any, options: dict[str, Any]) -> tuple[Entry, dict[str, Any]]:
    """The entry and the checked options of a request, or a :class:`ConstructionError` saying what is wrong."""
    entry = REGISTRY.get(name)
    if entry is None:
        raise _unknown(name)
    options = dict(options)
    for old, convert in entry.deprecated.items():
        if old in options:
            new = convert(options.pop(old))
            warnings.warn(
                f"{name}: option {old}= is deprecated; use {', '.join(f'{k}={v!r}' for k, v in new.items())}",
                FutureWarning,
                stacklevel=3,
            )
            for key, value in new.items():
                if options.get(key, value) != value:
                    raise ConstructionError(f"{name}: {old}= and {key}= disagree")
                options[key] = value
    unknown = sorted(set(options) - set(entry.options))
    if unknown:
        allowed = ", ".join(entry.options) or "none"
        raise ConstructionError(f"{name}: unknown option(s) {', '.join(unknown)} (allowed: {allowed})")
    checked = {key: entry.options[key].check(name, key, value) for key, value in options.items()}
    _check_source(name, entry.takes, source)
    return entry, checked


def _check_source(name: str, takes: str, source: Any) -> None:
    """The construction's task kind refuses a source it cannot be built from (one line)."""
    task_kind(takes).check_source(name, source)


def build(name: str, source: Any, length: int, **options: Any) -> ConstructionSpec:
    """Build construction ``name`` as exact weights (a spec: named residual subspaces, per-block matrices).

    Args:
        name: a name from ``REGISTRY`` (``prefix_scan``, ``krohn_rhodes``, ``modular_counter``, ``memory``,
            ``gridworld``, ``dyck``, ``ffl``).
        source: what it is built for — a ``Semiautomaton``, a ``Dyck`` language for ``dyck``, ``None`` for ``ffl``.
        length: the longest input, in symbols.
        **options: the construction's options (``REGISTRY[name].describe()``); on any construction
            ``negatives="cancel,constant"`` adds informative negatives (:mod:`sandbox_lens.constructions.negatives`)
            and ``negative_gain`` and ``negative_sharpness`` dial them.

    Returns:
        The :class:`~sandbox_lens.interp.model.spec.ConstructionSpec` (``build_model`` makes it a model).

    Raises:
        sandbox_lens.interp.errors.ConstructionError: an unknown name or option, a source it cannot take, or a
            length past what float32 keeps exact."""
    entry, checked = validate(name, source, options)
    chosen = [n for n in str(checked.pop("negatives", "")).split(",") if n]
    dials = dials_of({k: checked.pop(k) for k in list(checked) if k in DIALS}, chosen)  # refused before the build
    spec = entry.builder(source, length, **checked)
    if chosen:
        spec = add_negatives(spec, chosen, dials)
    return spec
