"""One way to read a JSON file back: bounded, then validated against its format's schema.

Every file the project reads (automata, cascades, saved models' cards, checkpoints' headers, a run's
``metrics.json``, circuit files, experiments' ``experiment.json`` and ``results.json``, an adopted model's
config) goes through :func:`parse_json` or :func:`read_json`:

1. the size is bounded before anything is read (:data:`MAX_BYTES`);
2. the nesting depth is bounded before the parser recurses (:data:`MAX_DEPTH`);
3. every number's text is bounded before it is converted (:data:`MAX_NUMBER_CHARS`: Python refuses integers of
   over 4,300 digits with a ``ValueError`` the parsers never expected);
4. the result is checked against the format's JSON Schema (``jsonschema``, Draft 2020-12);
5. every failure is one :class:`~sandbox_lens.interp.errors.FileFormatError` (or the caller's own error class)
   naming the file and the field, e.g. ``run/metrics.json: history/3/step: 'x' is not of type 'integer'``.

:func:`inside` keeps a path named *inside* a file within the file's directory.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from sandbox_lens.interp.errors import FileFormatError, SandboxError
from sandbox_lens.interp.files import MAX_READ_BYTES

__all__ = [
    "MAX_BYTES",
    "MAX_DEPTH",
    "MAX_NUMBER_CHARS",
    "parse_json",
    "read_json",
    "inside",
    "check_schema",
    "beyond_schema",
]

#: the largest JSON file read whole (the one bound of files.MAX_READ_BYTES; a cascade with 10^4 states is ~2 MiB)
MAX_BYTES = MAX_READ_BYTES
#: the deepest nesting any format has is 6; 64 leaves room and keeps the parser's recursion shallow
MAX_DEPTH = 64
#: a number's text: a float64 needs 24 characters, an index or a seed 20
MAX_NUMBER_CHARS = 40
#: how much of a value a message quotes
_QUOTE = 80

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_BRACKET = re.compile(r"[\[\]{}]")


def _depth_exceeds(text: str, limit: int) -> bool:
    depth = 0
    for m in _BRACKET.finditer(_STRING.sub('""', text)):
        depth += 1 if m.group() in "[{" else -1
        if depth > limit:
            return True
    return False


def _number(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    def bounded(text: str) -> Any:
        if len(text) > MAX_NUMBER_CHARS:
            raise _TooLong(f"a number of {len(text)} characters (at most {MAX_NUMBER_CHARS})")
        return parse(text)

    return bounded


class _TooLong(ValueError):
    pass


def _short(text: str) -> str:
    return text if len(text) <= _QUOTE else text[: _QUOTE - 1] + "…"


def check_schema(data: Any, schema: dict[str, Any], source: str, error: type[Exception] = FileFormatError) -> None:
    """Refuse ``data`` that does not follow ``schema``: one ``error`` naming ``source`` and the first field at fault
    (the deepest, most relevant error jsonschema finds)."""
    import jsonschema

    found = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema).iter_errors(data))
    if found is None:
        return
    where = "/".join(str(p) for p in found.absolute_path) or "top level"
    message = found.message  # the value quoted first, what it should be last: keep both ends of a long one
    if len(message) > 2 * _QUOTE:
        message = message[:_QUOTE] + " … " + message[-_QUOTE:]
    raise error(f"{source}: {where}: {message}")


def parse_json(
    text: str | bytes,
    source: str,
    schema: dict[str, Any] | None = None,
    *,
    error: type[Exception] = FileFormatError,
    object_pairs_hook: Callable[[list[tuple[str, Any]]], Any] | None = None,
    what: str = "JSON",
) -> Any:
    """``text`` parsed with every bound of the module docstring, then checked against ``schema`` (when given).
    Any failure is one ``error`` whose message starts with ``source``; ``what`` names the format in it."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            raise error(f"{source}: not UTF-8 text, so not {what}") from None
    if len(text) > MAX_BYTES:
        raise error(f"{source}: larger than {MAX_BYTES // 2**20} MiB, too large to be {what}")
    if _depth_exceeds(text, MAX_DEPTH):
        raise error(f"{source}: nested more than {MAX_DEPTH} levels deep, too deep to be {what}")
    try:
        data = json.loads(
            text,
            parse_int=_number(int),
            parse_float=_number(float),
            object_pairs_hook=object_pairs_hook,
        )
    except json.JSONDecodeError as e:
        raise error(f"{source}: malformed JSON ({e.msg}; line {e.lineno}, column {e.colno})") from None
    except _TooLong as e:
        raise error(f"{source}: {e}, not {what}") from None
    except RecursionError:  # pragma: no cover - the depth bound comes first
        raise error(f"{source}: nested too deeply to be {what}") from None
    if schema is not None:
        check_schema(data, schema, source, error)
    return data


def read_json(
    path: str | Path,
    schema: dict[str, Any] | None = None,
    *,
    error: type[Exception] = FileFormatError,
    what: str = "JSON",
) -> Any:
    """The file at ``path`` through :func:`parse_json`. A missing file is ``FileNotFoundError`` (the caller knows what
    its absence means); one that cannot be read, or is larger than :data:`MAX_BYTES`, is one ``error``."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_BYTES + 1)
    except FileNotFoundError:
        raise
    except OSError as e:
        raise error(f"{path}: cannot be read ({e.strerror or e})") from None
    if len(data) > MAX_BYTES:
        raise error(f"{path}: larger than {MAX_BYTES // 2**20} MiB, too large to be {what}")
    return parse_json(data, str(path), schema, error=error, what=what)


def inside(directory: str | Path, name: Any, source: str, error: type[Exception] = FileFormatError) -> Path:
    """The file ``name`` (a relative path read from a file in ``directory``) resolved under ``directory``; a name that
    is not a string, is absolute, or leads out of the directory (``..``, a symbolic link) is one ``error``."""
    if not isinstance(name, str) or not name or "\0" in name:
        raise error(f"{source}: a file name must be a non-empty string, not {_short(repr(name))}")
    base = Path(directory).resolve()
    target = (base / name).resolve()
    if Path(name).is_absolute() or (target != base and base not in target.parents):
        raise error(f"{source}: {_short(name)!r} leads out of {directory}; files it names must lie inside it")
    return target


@contextlib.contextmanager
def beyond_schema(source: str | Path, what: str, error: type[Exception] = FileFormatError) -> Iterator[None]:
    """For code that reads a file deeper than its schema checks (a report rendered from it): a field of the wrong
    shape there (a ``KeyError``, ``TypeError``, ``ValueError``, ``IndexError`` or ``AttributeError``) is one ``error``
    saying ``source`` does not hold a complete ``what``, not a traceback. The project's own refusals pass through."""
    try:
        yield
    except SandboxError:
        raise
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as e:
        raise error(f"{source} does not hold a complete {what} ({type(e).__name__}: {str(e)[:120]})") from None
