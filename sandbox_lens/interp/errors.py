"""Exception types. Every error a user can cause is a :class:`SandboxError`.

The CLI turns these into a one-line message and exit status 2; anything else is a bug.
"""

from __future__ import annotations

from typing import Any


class SandboxError(Exception):
    """Base class for errors caused by bad input (never by a bug)."""


class OptionError(SandboxError, ValueError):
    """A command-line option (or its Python keyword) that is refused: out of range, given without the option it
    needs, or one this task, model or TransformerLens cannot take. The message names the option."""


class AutomatonError(SandboxError, ValueError):
    """An automaton specification is invalid (unknown name, malformed JSON, bad transitions)."""


class ConstructionError(SandboxError, ValueError):
    """A construction cannot be built for this automaton or these options."""


class LengthError(ConstructionError):
    """A requested length lies outside the range a construction is verified for."""


class VocabularyError(SandboxError, ValueError):
    """An input contains a token or symbol the model does not know."""


class CheckpointError(SandboxError, OSError):
    """A saved model is missing, corrupt, or does not match what it claims to be."""


class ModelKindError(SandboxError, TypeError):
    """An analysis was asked of a model that lacks what it needs (e.g. attention, on an LSTM)."""


class FileFormatError(SandboxError, ValueError):
    """A file read back (a card, a run's metrics, a circuit, an experiment's results) is not what its format says:
    too large, nested too deeply, a number too long, a field missing or of the wrong type, a path leading out of
    its directory. The message names the file and the field."""


class OutputPathError(SandboxError, OSError):
    """An output path this project will not write: a device node, a pipe, a socket or a directory where a file
    belongs, or a symbolic link (a write never follows one out of ``--out``)."""


class Interrupted(KeyboardInterrupt):
    """A run stopped by SIGINT or SIGTERM after saving what it had; ``signum`` says which, ``str()`` what to do next."""

    def __init__(self, signum: int, message: str) -> None:
        super().__init__(message)
        self.signum = signum

    def __reduce__(self) -> tuple[Any, tuple[int, str]]:
        """Pickled with both arguments: a pool worker's run stopped by a signal reaches the parent as itself."""
        return type(self), (self.signum, str(self))
