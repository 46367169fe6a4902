"""File helpers."""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
import tempfile
import uuid
from glob import escape as glob_escape
from pathlib import Path
from typing import Any

from sandbox_lens.interp.errors import OutputPathError

__all__ = [
    "atomic_write",
    "check_writable",
    "check_output_path",
    "atomic_write_all",
    "remove_torn_writes",
    "read_text_limited",
    "write_json",
    "jsonable",
    "exclusive",
    "claimed",
    "InUseError",
    "LOCK_NAME",
    "MAX_READ_BYTES",
]

#: the file in an output directory whose lock says a process is writing there
LOCK_NAME = ".lock"

#: The one bound on the size of every file read back (automata, cascades, cards, checkpoints' headers, metrics,
#: results, circuit files): far above any real one (a 16-block scan's complete circuit graph is about 60 kB).
MAX_READ_BYTES = 64 * 2**20


def _temporary_affixes(path: Path) -> tuple[str, str]:
    return f".{path.name}.", ".tmp"


def check_writable(path: Path) -> None:
    """Refuse (:class:`OutputPathError`) to replace ``path`` unless it is absent or a regular file: a rename over a
    device node, a pipe or a socket would turn it into a file, and a symbolic link is never written through or
    replaced (whatever it points at stays as it is)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode):
        raise OutputPathError(f"{path} is a symbolic link; sandbox-lens does not write through or over links")
    if not stat.S_ISREG(st.st_mode):
        kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file (a device, pipe or socket)"
        raise OutputPathError(f"{path} is {kind}; refusing to replace it with a file")


def check_output_path(path: Path) -> None:
    """Refuse (:class:`OutputPathError`) an ``--out`` that is a symbolic link or exists as anything but a directory
    or a regular file — before any work, so nothing is computed only to be refused at the end."""
    path = Path(path)
    if path.is_symlink():
        raise OutputPathError(f"--out {path} is a symbolic link; name the directory or file itself")
    if path.exists() and not path.is_dir():
        check_writable(path)


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temporary file and a rename: readers never see half a file. A ``path`` that
    is anything but absent or a regular file is refused first (:func:`check_writable`)."""
    atomic_write_all([(Path(path), data)])


def atomic_write_all(items: list[tuple[Path, bytes]]) -> None:
    """Write several files as one unit: every temporary is written and flushed before the first rename, so a failure
    while writing (a full disk) replaces none of them, and the renames, which need no space, follow in order."""
    items = [(Path(path), data) for path, data in items]
    for path, _ in items:
        check_writable(path)
    written: list[tuple[str, Path]] = []
    umask = os.umask(0)
    os.umask(umask)
    try:
        for path, data in items:
            prefix, suffix = _temporary_affixes(path)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=prefix, suffix=suffix)
            written.append((tmp, path))
            os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600; give the file normal permissions
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
        while written:
            tmp, path = written[0]
            os.replace(tmp, path)
            written.pop(0)
    finally:
        for tmp, _ in written:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)


def remove_torn_writes(path: Path) -> None:
    """Delete the temporary files of :func:`atomic_write` calls on ``path`` that a SIGKILL cut short
    (``path`` itself is whole: the rename never happened). Only a writer that holds ``path``'s directory
    (:func:`exclusive`) calls this: a write in progress elsewhere cannot be one of them."""
    prefix, suffix = _temporary_affixes(path)
    for torn in path.parent.glob(f"{glob_escape(prefix)}*{suffix}"):
        with contextlib.suppress(FileNotFoundError):
            torn.unlink(missing_ok=True)


def read_text_limited(path: Path, limit: int | None = None) -> str:
    """The UTF-8 text of ``path``, refusing (ValueError) a file longer than ``limit`` bytes (default
    :data:`MAX_READ_BYTES`) before reading more than that (``/dev/zero`` included). OSError and UnicodeDecodeError
    pass through."""
    limit = MAX_READ_BYTES if limit is None else limit
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


def write_json(path: Path, obj: Any, indent: int = 1, strict: bool = True) -> Any:
    """Write ``obj`` as JSON, atomically; numpy values through :func:`jsonable`. ``strict``: a number that
    could not be measured (NaN, ±inf) is written as null, so the file is standard JSON. Indented, except that a list
    of numbers (or of booleans and nulls) stands on one line. Returns what was written."""
    text = json.dumps(obj, default=jsonable)
    data = json.loads(text, parse_constant=lambda _: None) if strict else json.loads(text)
    atomic_write(Path(path), (dumps_folded(data, indent, allow_nan=not strict) + "\n").encode())
    return data


def dumps_folded(data: Any, indent: int = 1, allow_nan: bool = False) -> str:
    """``json.dumps(data, indent=indent)`` with every non-empty list of numbers, booleans and nulls on one line:
    those are encoded by the C encoder (an indented dump runs Python's, element by element), the rest indented."""
    nonce = uuid.uuid4().hex
    folded: list[str] = []

    def fold(x: Any) -> Any:
        if isinstance(x, dict):
            return {k: fold(v) for k, v in x.items()}
        if isinstance(x, list):
            if x and all(v is None or isinstance(v, (int, float)) for v in x):
                folded.append(json.dumps(x, allow_nan=allow_nan))
                return f"{nonce}:{len(folded) - 1}"
            return [fold(v) for v in x]
        return x

    text = json.dumps(fold(data), indent=indent, allow_nan=allow_nan)
    return re.sub(f'"{nonce}:([0-9]+)"', lambda m: folded[int(m.group(1))], text)


class InUseError(OSError):
    """An output directory another process is writing to (see :func:`exclusive`): an ``OSError``, which the
    CLI reports in one line with exit status 2."""


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
    check_writable(path)  # a planted link or device in its place is refused, never truncated
    fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
    if not stat.S_ISREG(os.fstat(fd).st_mode):  # swapped in after the check
        os.close(fd)
        raise OutputPathError(f"{path} is not a regular file; refusing to lock through it")
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


@contextlib.contextmanager
def claimed(directory: Path, what: str = "--out"):
    """:func:`exclusive` for a command that writes its results into ``directory`` at the end (``circuit``, ``align``):
    the directory is created and locked before the work, so a second process — or a training run writing there — is
    refused at once; if the block fails, a directory this call created is removed again when nothing else is in it."""
    directory = Path(directory)
    created = not directory.exists()
    directory.mkdir(parents=True, exist_ok=True)
    try:
        with exclusive(directory, what):
            yield directory
    except BaseException:
        if created:
            with contextlib.suppress(OSError):
                (directory / LOCK_NAME).unlink()
                directory.rmdir()  # only when empty: results already written stay
        raise
