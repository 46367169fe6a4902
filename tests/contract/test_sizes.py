"""Readable units: no function over 70 statements and no module over 260 in the package.

Counted in statements (the AST's), not lines, so the formatter's layout does not move them; at the dense layout the
code had before `make check` formatted it, these bounds were 90 and 400 lines."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_FUNCTION, MAX_MODULE = 70, 260
SOURCES = sorted(
    p
    for pkg in ("sandbox_lens/interp", "sandbox_lens/constructions", "sandbox_lens/probes")
    for p in (ROOT / pkg).rglob("*.py")
)


def statements(node: ast.AST) -> int:
    """The statements inside ``node`` (a function's own ``def`` not counted)."""
    inside = sum(isinstance(n, ast.stmt) for n in ast.walk(node))
    return inside - 1 if isinstance(node, ast.stmt) else inside


def test_no_module_is_over_260_statements():
    big = {
        p.relative_to(ROOT).as_posix(): n for p in SOURCES if (n := statements(ast.parse(p.read_text()))) > MAX_MODULE
    }
    assert big == {}, f"split these modules: {big}"


def test_no_function_is_over_70_statements():
    long = {}
    for p in SOURCES:
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and statements(node) > MAX_FUNCTION:
                long[f"{p.relative_to(ROOT).as_posix()}:{node.name}"] = statements(node)
    assert long == {}, f"split these functions: {long}"


def test_statements_are_counted_not_lines():
    one = ast.parse("def f(x):\n    return (\n        x\n        + 1\n    )\n").body[0]
    assert statements(one) == 1
