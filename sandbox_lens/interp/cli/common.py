"""What the commands share: a parser that fails in one line, the automaton and construction
arguments, ``-O KEY=VALUE`` options."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from sandbox_lens.interp.errors import SandboxError
from sandbox_lens.interp.model.hooked import BRIDGE_LACKS

__all__ = [
    "Parser",
    "LIMITS",
    "bound_numbers",
    "automaton_args",
    "construction_args",
    "parse_options",
    "load_automaton",
    "add_kind_options",
    "refuse_other_kinds_options",
]


class _HelpWithDefaults(argparse.HelpFormatter):
    """Every option's help ends with its default, unless the text already says it (or there is none)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if (
            default in (None, False, [], argparse.SUPPRESS)
            or "default" in text
            or not action.option_strings
            or isinstance(action, (argparse._HelpAction, argparse._VersionAction))
        ):
            return text
        shown = " ".join(map(str, default)) if isinstance(default, (list, tuple)) else default
        return f"{text} (default: {str(shown).replace('%', '%%')})"


class Parser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` whose errors are one line on stderr and exit status 2."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _HelpWithDefaults)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # one line, exit status 2 (argparse's default status)
        self.exit(2, f"{self.prog}: error: {message}\n")


_INT = 2**31 - 1
_SEED = 2**32 - 1  # numpy's seeds
#: The range of every numeric option, by its destination (low, high, what it counts). An option not named here is
#: an integer in 0..2^31−1 or a number in 0..10^6 (a weight, a scale: nothing here is meaningful past that). Values outside are refused by the parser, before any work, in one
#: line; counts that multiply into work (steps × pairs × sites) are bounded here and estimated where they are used.
LIMITS: dict[str, tuple[float, float, str]] = {
    "seed": (0, _SEED, "a seed"),
    "rotate_seed": (0, _SEED, "a seed"),
    "steps": (0, 10**8, "steps"),
    "train_steps": (0, 10**8, "training steps"),
    "das_steps": (1, 100_000, "optimiser steps"),
    "mask_steps": (0, 100_000, "optimiser steps"),
    "corollary3_steps": (0, 100_000, "optimiser steps"),
    "theorem3_steps": (0, 100_000, "optimiser steps"),
    "samples": (0, 1_000_000, "words"),
    "examples": (0, 1_000, "words"),
    "eval_size": (1, 1_000_000, "words"),
    "batch": (1, 100_000, "words"),
    "pairs": (1, 100_000, "pairs"),
    "causal_pairs": (0, 100_000, "pairs"),
    "circuit_pairs": (0, 100_000, "pairs"),
    "workers": (1, 1024, "processes"),
    "threads": (1, 1024, "threads"),
    "n_layers": (1, 256, "layers"),
    "n_heads": (1, 1024, "heads"),
    "d_model": (1, 65_536, "dimensions"),
    "d_head": (1, 65_536, "dimensions"),
    "d_mlp": (1, 2**20, "units"),
    "hidden": (1, 65_536, "units"),
    "n_ctx": (1, 10**6, "positions"),
    "length": (1, 10**7, "positions"),
    "pair_length": (1, 10**7, "positions"),
    "keep_checkpoints": (0, 1_000, "checkpoints"),
    "eval_every": (1, 10**8, "steps"),
    "q": (0, 1, "a probability"),
    "ffl": (0, 1, "a probability"),
    "dropout": (0, 1, "a probability"),
    "embed_dropout": (0, 1, "a probability"),
    "ema": (0, 1, "a decay"),
    "align_target": (0, 1, "an accuracy"),
    "strict_target": (0, 10**3, "nats"),
    "max_minutes": (0, 10**6, "minutes"),
    "lr": (0, 10, "a learning rate"),
    "threshold": (0, 10**3, "an effect"),
    "mask_sparsities": (0, 100, "nats per open head"),
    "train_minutes": (0, 10**6, "minutes"),
}


def _bounded(kind: type, dest: str) -> Any:
    import math

    low, high, what = LIMITS.get(dest, (0, _INT if kind is int else 10**6, ""))

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except (TypeError, ValueError):
            raise argparse.ArgumentTypeError(
                f"expected {'an integer' if kind is int else 'a number'}, got {text!r}"
            ) from None
        if isinstance(value, float) and not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
        if not low <= value <= high:
            unit = f" ({what})" if what else ""
            where = (
                f"be ≥ {_number_text(low)}" if math.isinf(high) else f"lie in {_number_text(low)}..{_number_text(high)}"
            )
            raise argparse.ArgumentTypeError(f"must {where}{unit}, got {text!r}")
        return value

    parse.__name__ = kind.__name__  # argparse names the type in its messages
    parse.kind = kind  # type: ignore[attr-defined]  # what it parses, for the settings' test
    return parse


def _number_text(x: float) -> str:
    return f"{int(x):,}" if float(x).is_integer() else f"{x:g}"


def bound_numbers(parser: argparse.ArgumentParser) -> None:
    """Give every ``int`` and ``float`` option of ``parser`` and its subcommands its range (:data:`LIMITS`): one
    mechanism for every numeric option, so no command meets inf, nan, a negative count or 10^12 steps."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                bound_numbers(sub)
        elif action.type in (int, float):
            action.type = _bounded(action.type, action.dest)


def automaton_args(p: argparse.ArgumentParser, saved_model: bool = False, cascade: bool = False) -> None:
    """Add ``--automaton`` / ``--automaton-file`` (one or the other) to a parser."""
    # Constructions check for themselves (ffl needs no automaton); `info` always needs one.
    g = p.add_mutually_exclusive_group(required=not cascade)
    g.add_argument("--automaton", metavar="NAME", help="catalogue name (see `interp list`)")
    g.add_argument("--automaton-file", metavar="PATH", help="JSON automaton file (format: docs/automata.md)")
    if cascade:
        g.add_argument(
            "--cascade-file",
            metavar="PATH",
            help="krohn_rhodes: a cascade JSON file (format: docs/constructions.md), simulated instead of an automaton",
        )
        g.add_argument("--dyck", metavar="K,D", help="dyck: the language Dyck_{K,D} (K bracket types, depth ≤ D)")
    if saved_model:
        g.add_argument("--model", metavar="DIR", help="a model saved by `interp build` (instead of building one)")


def construction_args(p: argparse.ArgumentParser, saved_model: bool = False) -> None:
    """Add a construction's task and build options (``--length``, ``-O KEY=VALUE``, …) to a parser."""
    p.add_argument("construction", nargs="?" if saved_model else None, help="construction name (see `interp list`)")
    automaton_args(p, saved_model, cascade=True)
    p.add_argument(
        "--length",
        "-T",
        type=int,
        required=not saved_model,
        metavar="T",
        help="maximum input length" + (" (with --model: defaults to the model's)" if saved_model else ""),
    )
    p.add_argument(
        "--option",
        "-O",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="construction option, e.g. -O code=circle (repeatable)",
    )
    p.add_argument(
        "--variant", help="dyck: the second layer's attention (the dyck construction's variant option; interp list)"
    )


def parse_options(pairs: Sequence[str]) -> dict[str, Any]:
    """``-O KEY=VALUE`` pairs as a dict, values as numbers where they parse as one."""
    opts: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SandboxError(f"option {pair!r} must look like KEY=VALUE")
        opts[key.replace("-", "_")] = _number(value)
    return opts


def _number(value: str) -> Any:
    try:
        return int(value)
    except ValueError:
        pass
    try:
        return float(value)
    except ValueError:
        return value


def load_automaton(args: argparse.Namespace):
    """The automaton ``--automaton`` or ``--automaton-file`` names (the automaton kind reads them)."""
    from sandbox_lens.interp.tasks.kinds import AUTOMATON

    return AUTOMATON.automaton(vars(args))


def add_kind_options(p: argparse.ArgumentParser, attribute: str) -> None:
    """Add every task kind's options (``train_options`` or ``shift_options`` of the registry) to ``p``:
    one argument per flag, whichever kinds read it; options of one group exclude each other."""
    from sandbox_lens.interp.tasks.kinds import all_kinds

    seen: set[str] = set()
    groups: dict[str, Any] = {}
    for kind in all_kinds():
        for opt in getattr(kind, attribute):
            if opt.flags[0] in seen:
                continue
            seen.add(opt.flags[0])
            where = p
            if opt.group:
                if opt.group not in groups:
                    groups[opt.group] = p.add_mutually_exclusive_group()
                where = groups[opt.group]
            where.add_argument(*opt.flags, **opt.argparse_kwargs())


def refuse_other_kinds_options(args: argparse.Namespace, kind: Any, attribute: str, message: str) -> None:
    """One line for an option that only another task kind reads (set to other than its default):
    ``message`` formatted with ``flag``, ``other`` (the kind that reads it) and ``kind``."""
    from sandbox_lens.interp.tasks.kinds import all_kinds

    mine = {opt.flags[0] for opt in getattr(kind, attribute)}
    values = vars(args)
    for other in all_kinds():
        for opt in getattr(other, attribute):
            if opt.flags[0] not in mine and opt.given(values):
                raise SandboxError(message.format(flag=opt.flags[0], other=other.name, kind=kind.name))


def add_settings(
    p: argparse.ArgumentParser, cls: type, unset: Sequence[str] = (), helps: dict[str, str] | None = None
) -> None:
    """One option per setting of dataclass ``cls`` (:mod:`sandbox_lens.interp.settings`): its flag, type, choices, help and
    default come from the field. Names in ``unset`` default to None — "not given": the caller fills them
    (e.g. from the task kind); ``helps`` adds a sentence to a field's help (e.g. the per-kind defaults)."""
    from sandbox_lens.interp.settings import settings_of

    for s in settings_of(cls):
        kw: dict[str, Any] = {
            "dest": s.name,
            "type": s.type,
            "help": s.help + ((helps or {}).get(s.name, "")),
            "default": None
            if s.name in unset
            else (list(s.default) if s.many and s.default is not None else s.default),
        }
        if s.many:
            kw["nargs"] = "+"
        if s.metavar:
            kw["metavar"] = s.metavar
        if s.choices:
            kw["choices"] = s.choices
        p.add_argument(s.flag, **kw)


def settings_given(args: argparse.Namespace, cls: type) -> dict[str, Any]:
    """The values of ``cls``'s settings that ``args`` holds (None: not given, left out), as the field types."""
    from sandbox_lens.interp.settings import settings_of

    out = {}
    for s in settings_of(cls):
        value = getattr(args, s.name, None)
        if value is not None:
            out[s.name] = tuple(value) if s.many else value
    return out


#: What TransformerLens 4.x's native ``TransformerBridge`` cannot do, as (option's destination, test of its value,
#: the refusal): refused before any work, since the back end is read from the package metadata without importing
#: TransformerLens (:func:`sandbox_lens.interp.model.hooked.backend`). Everything else runs on either version.
BRIDGE_REFUSALS: tuple[tuple[str, Any, str], ...] = (
    ("init_from", bool, BRIDGE_LACKS["init_from"]),
    ("align", bool, BRIDGE_LACKS["align"]),
    ("engine", lambda v: v == "hooks", BRIDGE_LACKS["engine"]),
    ("positional", lambda v: v == "alibi", BRIDGE_LACKS["alibi"]),
)


def bridge_refusal(args: argparse.Namespace) -> str | None:
    """The one-line refusal of an option the installed TransformerLens (4.x) cannot serve, naming the version that
    can; None where every option given runs here."""
    asked = [why for dest, wants, why in BRIDGE_REFUSALS if wants(getattr(args, dest, None))]
    if not asked:
        return None
    from sandbox_lens.interp.model.hooked import backend

    return asked[0] if backend() == "TransformerBridge" else None
