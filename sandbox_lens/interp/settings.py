"""Configuration stated once: a dataclass field carries its default, its type and its help, and the
command line is derived from it (``sandbox_lens.interp.cli.common.add_settings``), as are a sweep's grid keys.

``setting(default, help, flag=..., metavar=..., choices=..., parse=..., cli=...)`` is a
``dataclasses.field`` whose metadata says how the field appears as an option. Floor 0: no project imports.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["setting", "Setting", "settings_of", "flag_of"]


def setting(
    default: Any,
    help: str,
    *,
    flag: str | None = None,
    metavar: str | None = None,
    choices: Sequence[Any] | None = None,
    parse: Callable[[str], Any] | None = None,
    cli: bool = True,
) -> Any:
    """A dataclass field with its command-line face (``cli=False``: a field no option sets)."""
    meta = {
        "help": help,
        "flag": flag,
        "metavar": metavar,
        "choices": tuple(choices) if choices else None,
        "parse": parse,
        "cli": cli,
    }
    if isinstance(default, (list, dict, set)):
        raise TypeError("a setting's default must be immutable (use a tuple)")
    return dataclasses.field(default=default, metadata={"setting": meta})


@dataclasses.dataclass(frozen=True)
class Setting:
    """One field as an option: its name, flag, value type, whether it takes several values, its default."""

    name: str
    flag: str
    type: Callable[[str], Any]
    many: bool
    default: Any
    help: str
    metavar: str | None
    choices: tuple[Any, ...] | None


def flag_of(f: dataclasses.Field) -> str:
    """The command-line flag of a settings field (its ``flag`` metadata, else ``--name-with-dashes``)."""
    meta = f.metadata.get("setting") or {}
    return meta.get("flag") or "--" + f.name.replace("_", "-")


def _value_type(annotation: Any) -> tuple[Callable[[str], Any], bool]:
    """(the type of one value, several values?) of ``int | None``, ``tuple[float, ...]``, ``str`` ..."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return _value_type(args[0])
    if origin in (tuple, list):
        inner = typing.get_args(annotation)[0]
        return _value_type(inner)[0], True
    return (annotation if annotation in (int, float, str) else str), False


def settings_of(cls: type) -> list[Setting]:
    """The fields of dataclass ``cls`` that appear on the command line, in declaration order."""
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        meta = f.metadata.get("setting")
        if not meta or not meta["cli"]:
            continue
        kind, many = _value_type(hints[f.name])
        out.append(
            Setting(
                f.name,
                flag_of(f),
                meta["parse"] or kind,
                many,
                f.default,
                meta["help"],
                meta["metavar"],
                meta["choices"],
            )
        )
    return out
