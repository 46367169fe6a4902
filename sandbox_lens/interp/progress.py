"""Progress that stays, the same in every command.

* On a terminal: tqdm bars with their rate and ETA that remain on screen when done (``leave=True``).
* Off a terminal (a log, CI, ``nohup``): a plain line per bar at most every :data:`INTERVAL` seconds and when it
  ends (nothing for work shorter than that), and — while a command runs — a heartbeat line whenever nothing
  has been printed for :data:`INTERVAL` seconds (:func:`heartbeat`), so that ``interp compare parity 2>log``
  writes a line at least every 30 s.
* ``interp --quiet`` (:data:`QUIET_ENV`): none of it.

Floor 0: imports nothing of the project.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["bar", "wanted", "heartbeat", "INTERVAL", "QUIET_ENV"]

#: Seconds between progress lines off a terminal.
INTERVAL = 30.0
#: Set to 1 (by ``interp --quiet``) for no progress at all.
QUIET_ENV = "SANDBOX_LENS_QUIET"

_STATE: dict[str, Any] = {"printed": time.monotonic(), "status": ""}
_LOCK = threading.Lock()


def wanted() -> bool:
    """Whether a command shows progress (everything but ``--quiet``)."""
    return os.environ.get(QUIET_ENV, "") not in ("1", "true", "yes")


def _interactive() -> bool:
    return bool(getattr(sys.stderr, "isatty", lambda: False)())


def _line(text: str) -> None:
    with _LOCK:
        _STATE["printed"] = time.monotonic()
        sys.stderr.write(text + "\n")
        sys.stderr.flush()


def _bar_class() -> type:
    from tqdm import tqdm

    class LineBar(tqdm):  # type: ignore[misc, valid-type]
        """tqdm that writes whole lines (no carriage returns) for a log, at most one per :data:`INTERVAL` (also when
        ``set_postfix`` asks for a refresh), none for work shorter than that, and the final state when it ends."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self._born, self._printed_at, self._closing, self._last_line = time.monotonic(), None, False, None
            super().__init__(*args, **kwargs)

        def close(self) -> None:
            self._closing = True
            super().close()

        def display(self, msg: str | None = None, pos: int | None = None) -> bool:
            now = time.monotonic()
            if self._closing:
                if self._printed_at is None:  # short work: nothing to report
                    return True
            elif now - self._born < INTERVAL or (self._printed_at is not None and now - self._printed_at < INTERVAL):
                return True
            text = self.__str__().strip()
            if text != self._last_line:
                self._last_line, self._printed_at = text, now
                _STATE["status"] = text
                _line(text)
            return True

    return LineBar


def bar(iterable: Any = None, *, disable: bool = False, **kwargs: Any) -> Any:
    """A progress bar as tqdm takes it (wrap an iterable, or ``update`` by hand): kept on screen on a terminal,
    plain lines every :data:`INTERVAL` seconds off one, nothing when ``disable`` or ``--quiet``."""
    from tqdm import tqdm

    kwargs.pop("leave", None)
    if disable or not wanted():
        return tqdm(iterable, disable=True, **kwargs)
    if _interactive():
        kwargs.setdefault("dynamic_ncols", True)
        return tqdm(iterable, leave=True, **kwargs)
    kwargs["delay"] = max(float(kwargs.get("delay", 0.0)), INTERVAL)
    kwargs["file"] = _Sink()  # tqdm's own writes (carriage returns, the closing newline) go nowhere
    return _bar_class()(iterable, leave=True, mininterval=INTERVAL, maxinterval=INTERVAL, **kwargs)


class _Sink:
    """A stream that drops what tqdm writes itself (the lines come from ``display``)."""

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass


@contextmanager
def heartbeat(what: str) -> Iterator[None]:
    """While the block runs off a terminal: a line ``what: still working (elapsed …; last: …)`` whenever no
    progress line has been printed for :data:`INTERVAL` seconds."""
    if _interactive() or not wanted():
        yield
        return
    stop = threading.Event()
    start = time.monotonic()
    _STATE["printed"] = start

    def beat() -> None:
        while not stop.wait(min(5.0, INTERVAL / 2)):
            if time.monotonic() - _STATE["printed"] >= INTERVAL:
                elapsed = int(time.monotonic() - start)
                last = f"; last: {_STATE['status']}" if _STATE["status"] else ""
                _line(f"{what}: still working ({elapsed // 60}m{elapsed % 60:02d}s{last})")

    thread = threading.Thread(target=beat, name="sandbox-lens-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        _STATE["status"] = ""
