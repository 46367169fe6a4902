"""`interp batch FILE`: many `interp` commands in one process, so torch and TransformerLens are imported once.

A small command spends most of its time importing (measured in `benchmarks/batch.py`); a user who runs dozens of
`verify`, `build` or `info` commands pays that once here. FILE holds one command per line, as it would be typed
after `interp` (a leading `interp` is dropped, `#` starts a comment). Every line is parsed before any runs, so a
typo on the last line costs nothing; then each runs in turn through :func:`sandbox_lens.interp.cli.main`, which puts
back every process-wide setting a command changes. A failing command does not stop the others (``--stop`` does);
the exit status is the largest of theirs.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import shlex
import sys
from collections.abc import Callable
from pathlib import Path

from sandbox_lens.interp.errors import SandboxError

__all__ = ["register", "read_batch", "MAX_COMMANDS"]

#: The most commands one batch file may hold.
MAX_COMMANDS = 10_000


def register(
    sub, run: Callable[[list[str]], int], parser: Callable[[], argparse.ArgumentParser]
) -> dict[str, Callable[[argparse.Namespace], int]]:
    """Add this module's commands to the ``interp`` parser; returns {command: handler}. ``run`` is the command
    line's ``main`` and ``parser`` its parser's maker (passed in: this module sits below the package that has
    them)."""
    s = sub.add_parser(
        "batch",
        help="run the interp commands in FILE (one per line) in one process: the imports are paid once",
        description="Run the `interp` commands in FILE, one per line as typed after `interp` (`#` starts a "
        "comment; `-` reads standard input), in one process, so torch and TransformerLens are imported once. "
        "Every line is parsed before any runs; a failing command does not stop the others unless --stop is "
        "given. The exit status is the largest of the commands'.",
    )
    s.add_argument("file", metavar="FILE", help="the commands, one per line (`-`: standard input)")
    s.add_argument("--stop", action="store_true", help="stop at the first command that does not exit 0")
    return {"batch": lambda args: _cmd_batch(args, run, parser)}


def read_batch(text: str, source: str) -> list[tuple[int, list[str]]]:
    """(line number, argv) of every command in a batch file's ``text``; a line that is not one command is one
    :class:`SandboxError` naming ``source`` and the line."""
    commands = []
    for number, line in enumerate(text.splitlines(), 1):
        try:
            argv = shlex.split(line, comments=True)
        except ValueError as e:
            raise SandboxError(f"{source}, line {number}: {e}") from None
        if argv[:1] == ["interp"]:
            argv = argv[1:]
        if not argv:
            continue
        commands.append((number, argv))
        if len(commands) > MAX_COMMANDS:
            raise SandboxError(f"{source} holds more than {MAX_COMMANDS:,} commands; split it")
    if not commands:
        raise SandboxError(f"{source} holds no command (one per line, as typed after `interp`)")
    return commands


def _cmd_batch(
    args: argparse.Namespace, main: Callable[[list[str]], int], parser: Callable[[], argparse.ArgumentParser]
) -> int:
    from sandbox_lens.interp.files import read_text_limited

    source = "standard input" if args.file == "-" else args.file
    try:
        text = sys.stdin.read() if args.file == "-" else read_text_limited(Path(args.file))
    except FileNotFoundError:
        raise SandboxError(f"no batch file at {args.file}") from None
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise SandboxError(f"cannot read the batch file {source}: {getattr(e, 'strerror', None) or e}") from None
    commands = read_batch(text, source)
    check = parser()
    for number, argv in commands:  # every line parsed before any runs: a typo costs nothing
        message = io.StringIO()
        try:
            with contextlib.redirect_stderr(message), contextlib.redirect_stdout(io.StringIO()):
                parsed = check.parse_args(argv)
        except SystemExit as e:
            if e.code:
                why = message.getvalue().strip().splitlines()
                text = why[-1].split("error: ", 1)[-1] if why else "not an interp command"
                raise SandboxError(f"{source}, line {number}: {text}") from None
            raise SandboxError(f"{source}, line {number}: --help and --version do not run anything") from None
        if parsed.command == "batch":
            raise SandboxError(f"{source}, line {number}: a batch cannot run another batch")
    worst, failed = 0, []
    for i, (number, argv) in enumerate(commands, 1):
        print(f"interp batch [{i}/{len(commands)}] line {number}: interp {shlex.join(argv)}", file=sys.stderr)
        code = main(argv)
        if code:
            failed.append(f"line {number} (exit {code})")
            worst = max(worst, code)
            if args.stop:
                break
    ran = i
    print(
        f"interp batch: {ran} of {len(commands)} commands run, {ran - len(failed)} exited 0"
        + (f"; not: {', '.join(failed)}" if failed else ""),
        file=sys.stderr,
    )
    return worst
