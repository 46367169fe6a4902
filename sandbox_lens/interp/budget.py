"""Bounded work: what an input asks for is estimated before it is done, and refused in one line when it
would pass a stated limit — the message gives the estimate and the option that lowers it.

One helper for every piece of work whose size the input decides (sample and pair counts, semigroup
closures, enumerations): :func:`require` takes the estimated bytes and/or elementary operations and
the option to lower them. The limits are :data:`MEMORY_LIMIT` (half the memory the machine has
available, at most 16 GiB; ``SANDBOX_LENS_MEMORY_GB`` overrides it) and :data:`OPERATIONS_LIMIT`
(a few seconds of pure-Python work; ``SANDBOX_LENS_MAX_OPERATIONS`` overrides it) and
:func:`time_limit` for tensor work whose time is estimated (2 hours; ``SANDBOX_LENS_MAX_HOURS``).
"""

from __future__ import annotations

import os

from sandbox_lens.interp.errors import SandboxError
from sandbox_lens.interp.progress import bar as progress_bar

__all__ = [
    "BudgetError",
    "require",
    "progress",
    "memory_limit",
    "operations_limit",
    "time_limit",
    "human_bytes",
    "human_seconds",
]


class BudgetError(SandboxError, ValueError):
    """Work whose estimated size passes a limit, refused before it starts."""


def _available_bytes() -> float:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return float(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return float(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return 8.0 * 2**30


def memory_limit() -> float:
    """Bytes one piece of work may hold: ``SANDBOX_LENS_MEMORY_GB``, else half the available memory (≤ 16 GiB)."""
    env = os.environ.get("SANDBOX_LENS_MEMORY_GB")
    if env:
        try:
            return float(env) * 2**30
        except ValueError:
            raise BudgetError(f"SANDBOX_LENS_MEMORY_GB must be a number of GiB, got {env!r}") from None
    return min(_available_bytes() / 2, 16.0 * 2**30)


def operations_limit() -> float:
    """Elementary Python-level operations one piece of work may take (a few seconds of CPU)."""
    env = os.environ.get("SANDBOX_LENS_MAX_OPERATIONS")
    if env:
        try:
            return float(env)
        except ValueError:
            raise BudgetError(f"SANDBOX_LENS_MAX_OPERATIONS must be a number, got {env!r}") from None
    return 1e8


def time_limit() -> float:
    """Seconds one estimated piece of tensor work may take: ``SANDBOX_LENS_MAX_HOURS`` (default 2)."""
    env = os.environ.get("SANDBOX_LENS_MAX_HOURS")
    try:
        return float(env) * 3600 if env else 2 * 3600.0
    except ValueError:
        raise BudgetError(f"SANDBOX_LENS_MAX_HOURS must be a number of hours, got {env!r}") from None


def human_seconds(t: float) -> str:
    """A duration for a message: seconds, minutes or hours."""
    if t < 120:
        return f"{t:.0f} s"
    if t < 7200:
        return f"{t / 60:.0f} min"
    if t < 172800:
        return f"{t / 3600:.1f} h"
    return f"{t / 86400:.0f} days"


def human_bytes(n: float) -> str:
    """A size for a message, in binary units (B, KiB, MiB, …)."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(n) < 1024 or unit == "PiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} PiB"  # pragma: no cover


def require(what: str, *, memory: float = 0.0, operations: float = 0.0, seconds: float = 0.0, lower: str = "") -> None:
    """Refuse ``what`` (one line, :class:`BudgetError`) when its estimated ``memory`` (bytes), ``operations`` or
    ``seconds`` pass the limits; ``lower`` names the option or input that makes it smaller."""
    hint = f"; {lower} lowers it" if lower else ""
    limit = memory_limit()
    if memory > limit:
        raise BudgetError(
            f"{what} would need about {human_bytes(memory)} of memory, more than the "
            f"{human_bytes(limit)} allowed (SANDBOX_LENS_MEMORY_GB){hint}"
        )
    budget = time_limit()
    if seconds > budget:
        raise BudgetError(
            f"{what} would take about {human_seconds(seconds)}, more than the {human_seconds(budget)} "
            f"allowed (SANDBOX_LENS_MAX_HOURS){hint}"
        )
    cap = operations_limit()
    if operations > cap:
        raise BudgetError(
            f"{what} would take about {operations:.2g} operations, more than the {cap:.2g} allowed "
            f"(SANDBOX_LENS_MAX_OPERATIONS){hint}"
        )


def progress(
    iterable=None, *, total: int | None = None, desc: str = "", unit: str = "it", show: bool = True, at_least: int = 2
):
    """The bar for work that passed :func:`require`: a tqdm bar with its rate and ETA on stderr, shown when
    ``show`` (the caller's ``progress``) and the work has at least ``at_least`` steps (one step needs no
    ETA). Works as tqdm does: wrap an iterable, or ``update`` it by hand."""

    n = total if total is not None else (len(iterable) if hasattr(iterable, "__len__") else None)
    return progress_bar(
        iterable,
        total=n,
        desc=desc,
        unit=unit,
        dynamic_ncols=True,
        leave=False,
        disable=not show or (n is not None and n < at_least),
    )
