"""File helpers."""

from __future__ import annotations

import contextlib
import json
import math
import os
import tempfile
from glob import escape as glob_escape
from pathlib import Path
from typing import Any

__all__ = [
    "atomic_write",
    "remove_torn_writes",
    "read_text_limited",
    "write_json",
    "jsonable",
    "MAX_TEXT_BYTES",
    "exclusive",
    "InUseError",
    "LOCK_NAME",
]

#: the file in an output directory whose lock says a process is writing there
LOCK_NAME = ".lock"

#: the largest JSON or text input read whole (automaton and cascade files, cards): far above any real one
MAX_TEXT_BYTES = 16 * 2**20


def _temporary_affixes(path: Path) -> tuple[str, str]:
    return f".{path.name}.", ".tmp"


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temporary file and a rename: readers never see half a file."""
    prefix, suffix = _temporary_affixes(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=prefix, suffix=suffix)
    umask = os.umask(0)
    os.umask(umask)
    try:
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600; give the file normal permissions
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def remove_torn_writes(path: Path) -> None:
    """Delete the temporary files of :func:`atomic_write` calls on ``path`` that a SIGKILL cut short
    (``path`` itself is whole: the rename never happened). Only for a writer that owns ``path``."""
    prefix, suffix = _temporary_affixes(path)
    for torn in path.parent.glob(f"{glob_escape(prefix)}*{suffix}"):
        torn.unlink(missing_ok=True)


def read_text_limited(path: Path, limit: int = MAX_TEXT_BYTES) -> str:
    """The UTF-8 text of ``path``, refusing (ValueError) a file longer than ``limit`` bytes before
    reading more than that (``/dev/zero`` included). OSError and UnicodeDecodeError pass through."""
    with open(path, "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"{path} is larger than {limit // 2**20} MiB")
    return data.decode("utf-8")


def jsonable(x: Any) -> Any:
    """``json.dumps``'s ``default``: numpy scalars and arrays as numbers and lists, paths as text, tuples as lists."""
    import numpy as np

    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, Path):
        return str(x)
    if isinstance(x, tuple):
        return list(x)
    raise TypeError(f"{type(x).__name__} is not JSON serialisable")


def _finite(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_finite(v) for v in x]
    return x


def write_json(path: Path, obj: Any, indent: int = 1, strict: bool = True) -> Any:
    """Write ``obj`` as JSON, atomically; numpy values through :func:`jsonable`. ``strict``: a number that
    could not be measured (NaN, ±inf) is written as null, so the file is standard JSON. Returns what was written."""
    data = json.loads(json.dumps(obj, default=jsonable))
    if strict:
        data = _finite(data)
    atomic_write(Path(path), (json.dumps(data, indent=indent, allow_nan=not strict) + "\n").encode())
    return data


class InUseError(OSError):
    """An output directory another process is writing to (see :func:`exclusive`): an ``OSError``, which the
    CLI reports in one line with exit status 2 (floor 0 imports nothing of the project, not even its errors)."""


@contextlib.contextmanager
def exclusive(directory: Path, what: str = "--out"):
    """Hold ``directory`` for this process while the block writes to it: an advisory lock (``flock``) on
    ``directory/.lock``, which the kernel releases when the process ends however it ends (a SIGKILLed
    run leaves nothing to clean up, and the rerun that resumes it gets the lock). A second process that
    asks for the same directory is refused at once with :class:`InUseError`, before it writes anything.
    Where ``flock`` does not exist (not POSIX) the block runs unguarded."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    directory = Path(directory)
    path = directory / LOCK_NAME
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        holder = ""
        with contextlib.suppress(OSError, ValueError):
            holder = f" (process {int(os.pread(fd, 32, 0).decode().split()[0])})"
        os.close(fd)
        raise InUseError(
            f"{directory} is being written by another interp process{holder}; wait for it to finish or "
            f"choose another {what}"
        ) from None
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
