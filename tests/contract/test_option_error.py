"""One exception for a refused option: every ``raise`` in the package whose message starts with a flag (``--…``)
raises :class:`~sandbox_lens.interp.errors.OptionError` (or a narrower error of its own module), never the bare
``SandboxError``; and an OptionError is a SandboxError, so the command line still prints it in one line."""

import ast
from pathlib import Path

from sandbox_lens.interp.errors import OptionError, SandboxError

PACKAGE = Path(__file__).resolve().parents[2] / "sandbox_lens"


def _message_start(call: ast.Call) -> str:
    if not call.args:
        return ""
    first = call.args[0]
    if isinstance(first, ast.Constant) and isinstance(first.value, str):
        return first.value
    if isinstance(first, ast.JoinedStr) and first.values and isinstance(first.values[0], ast.Constant):
        return str(first.values[0].value)
    return ""


def test_no_option_is_refused_with_the_bare_base_class():
    bare = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
                name = getattr(node.exc.func, "id", "")
                if name == "SandboxError" and _message_start(node.exc).startswith("--"):
                    bare.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert not bare, bare
    assert issubclass(OptionError, SandboxError) and issubclass(OptionError, ValueError)
