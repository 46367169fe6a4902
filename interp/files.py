"""File helpers."""

from __future__ import annotations

import contextlib
import os
import tempfile
from glob import escape as glob_escape
from pathlib import Path

__all__ = ["atomic_write", "remove_torn_writes", "read_text_limited", "MAX_TEXT_BYTES"]

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
