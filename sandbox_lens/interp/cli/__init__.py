"""The ``interp`` command (also ``python -m sandbox_lens.interp``).

Every error a user can cause prints one line on stderr and exits with status 2; ``verify``
exits 1 when the model is not exact. Heavy imports (torch, TransformerLens) happen only in
the commands that build or run models, so ``interp list`` starts fast. Each module registers
its commands: :mod:`~sandbox_lens.interp.cli.constructions` (list, info, build, verify, decompose),
:mod:`~sandbox_lens.interp.cli.training` (train, population, adopt), :mod:`~sandbox_lens.interp.cli.analysis`
(compare, evaluate, report, demo), :mod:`~sandbox_lens.interp.cli.circuits` (circuit),
:mod:`~sandbox_lens.interp.cli.causal` (align), :mod:`~sandbox_lens.interp.cli.experiments` (experiment),
:mod:`~sandbox_lens.interp.cli.batch` (batch: many commands in one process).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from sandbox_lens.interp.cli import analysis, batch, causal, circuits, constructions, experiments, training
from sandbox_lens.interp.cli.common import Parser, bound_numbers, bridge_refusal
from sandbox_lens.interp.errors import Interrupted, OutputPathError, SandboxError
from sandbox_lens.interp.files import check_output_path
from sandbox_lens.interp.progress import QUIET_ENV, heartbeat

__all__ = ["main"]


def parser() -> argparse.ArgumentParser:
    """The ``interp`` command line's argument parser (the docs' CLI reference is generated from it)."""
    return _parser()[0]


def _parser() -> tuple[argparse.ArgumentParser, dict[str, Callable[[argparse.Namespace], int]]]:
    p = Parser(prog="interp", description="sandbox-lens: exact transformer constructions for automata.")
    from sandbox_lens.interp import __version__

    p.add_argument("--version", action="version", version=f"sandbox-lens {__version__}")
    p.add_argument(
        "--threads",
        type=int,
        metavar="N",
        help="torch CPU threads (default: 1 for the commands that train or analyse small models — "
        f"{', '.join(sorted(ONE_THREAD))} —, torch's choice for the others; see `make bench`)",
    )
    p.add_argument(
        "--quiet",
        "-q",
        action="store_true",
        help="no progress bars or progress lines (off a terminal, long work prints a line at least every "
        "30 s otherwise)",
    )
    p.add_argument(
        "--device",
        metavar="cpu|cuda|auto",
        help="where models run (default cpu; auto: CUDA when present). Honoured by "
        f"{', '.join(sorted(ON_DEVICE))}; the other commands run no model",
    )
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)
    handlers: dict[str, Callable[[argparse.Namespace], int]] = {}
    for module in (constructions, training, analysis, circuits, causal, experiments):
        handlers.update(module.register(sub))
    handlers.update(batch.register(sub, main, parser))
    bound_numbers(p)  # every numeric option in its range (cli.common.LIMITS), refused by the parser
    return p, handlers


#: Commands whose work is many small models' steps and forward passes. Measured (benchmarks/threads.py,
#: 2 cores): 2 threads train a Dyck twin only 7% faster on an idle machine and 3.7× slower beside one
#: busy core, so these default to one thread; verify and build (long single forwards: 2 threads 35%
#: faster when idle) keep torch's choice.
ONE_THREAD = frozenset({"train", "population", "compare", "demo", "experiment", "circuit", "evaluate", "align"})


#: Commands that run a model, and so follow ``--device``: every tensor they make is put on the model's device
#: (``sandbox_lens.interp.model.device.on``; tests/contract/test_devices.py keeps it so). The others run no model.
ON_DEVICE = frozenset(
    {"train", "evaluate", "verify", "compare", "demo", "circuit", "align", "experiment", "population"}
)


def _device(command: str, requested: str | None) -> str | None:
    """The device a command runs on: None for the CPU default, else ``--device`` resolved (one-line refusals:
    no CUDA, or a command that runs on the CPU only)."""
    from sandbox_lens.interp.model.device import resolve

    if requested is None:
        return None
    device = resolve(requested)
    if command not in ON_DEVICE and device != "cpu":
        if requested.strip().lower() == "auto":
            return None
        raise SandboxError(
            f"interp {command} runs no model, so --device {requested} means nothing to it; it is "
            f"honoured by {', '.join(sorted(ON_DEVICE))}"
        )
    return device


def default_threads(command: str, requested: int | None) -> int | None:
    """The torch thread count a command runs with (None: torch's own choice)."""
    if requested is not None:
        return requested
    return 1 if command in ONE_THREAD else None


def _one_line_warning(message, category, filename, lineno, file=None, line=None) -> None:
    print(f"interp: warning: {message}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``interp`` command line on ``argv`` (default: ``sys.argv[1:]``); returns the exit status (0, 1 for a
    model that is not exact, 2 for bad input)."""
    parser, handlers = _parser()
    if not (sys.argv[1:] if argv is None else list(argv)):
        parser.print_help()  # a bare `interp` shows what it can do
        return 0
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # --help, --version, or a refusal already printed in one line: its status, not an exit
        return e.code if isinstance(e.code, int) else 2
    handler = handlers[args.command]
    if args.threads is not None and args.threads < 1:
        print("interp: error: --threads must be ≥ 1", file=sys.stderr)
        return 2
    if getattr(args, "out", None) is not None:
        try:
            check_output_path(Path(args.out))
        except OutputPathError as e:
            print(f"interp: error: {e}", file=sys.stderr)
            return 2
    try:
        refused = bridge_refusal(args)
    except SandboxError as e:  # no TransformerLens, or one this package does not run on
        refused = str(e)
    if refused is not None:
        print(f"interp: error: {refused}", file=sys.stderr)
        return 2
    # process-wide settings a command changes, put back when it returns (main may run in-process:
    # a notebook, a test, another program)
    previous_showwarning, previous_threads = warnings.showwarning, None
    warnings.showwarning = _one_line_warning
    threads = default_threads(args.command, args.threads)
    if threads is not None:
        import torch

        previous_threads = torch.get_num_threads()
        torch.set_num_threads(threads)
    previous_term = _terminate_like_interrupt()
    from sandbox_lens.interp.model.device import ENV

    previous_device, previous_quiet = os.environ.get(ENV), os.environ.get(QUIET_ENV)
    try:
        device = _device(args.command, args.device)
        if device is not None:
            os.environ[ENV] = device  # inherited by a sweep's worker processes
        if args.quiet:
            os.environ[QUIET_ENV] = "1"  # inherited by a sweep's worker processes too
        with heartbeat(f"interp {args.command}"):
            return handler(args)
    except Interrupted as e:
        print(f"interp: {e}", file=sys.stderr)
        return 128 + e.signum
    except SandboxError as e:
        print(f"interp: error: {e}", file=sys.stderr)
        return 2
    except (FileExistsError, NotADirectoryError, IsADirectoryError, PermissionError) as e:
        # an output path that is a file, lies under one, or may not be written: the user's to fix
        print(f"interp: error: cannot write {e.filename}: {e.strerror}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interp: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `interp list | head`: the reader left, nothing to report
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - keep Python's exit flush quiet
        return 0
    except OSError as e:
        # any other file-system failure (a path on /proc, a read-only file system, a full disk): writes are
        # atomic, so nothing half-written is left; one line, the path and the system's reason
        where = f" at {e.filename}" if getattr(e, "filename", None) else ""
        print(f"interp: error: file-system error{where}: {e.strerror or e}", file=sys.stderr)
        return 2
    finally:
        for name, value in ((ENV, previous_device), (QUIET_ENV, previous_quiet)):
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        if previous_term is not None:
            signal.signal(signal.SIGTERM, previous_term)
        warnings.showwarning = previous_showwarning
        if previous_threads is not None:
            import torch

            torch.set_num_threads(previous_threads)


def _terminate_like_interrupt() -> Any:
    """SIGTERM unwinds like Ctrl-C (temporary files removed, a training run checkpointed); the previous
    handler is returned for restoring (None off the main thread, where signals cannot be set)."""
    if threading.current_thread() is not threading.main_thread():
        return None

    def stop(signum: int, frame: Any) -> None:
        raise Interrupted(signum, "terminated")

    previous = signal.signal(signal.SIGTERM, stop)
    return previous if previous is not None else signal.SIG_DFL
