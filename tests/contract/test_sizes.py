"""Readable units: no function over 90 lines and no module over 400 in the package."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_FUNCTION, MAX_MODULE = 90, 400
SOURCES = sorted(p for pkg in ("sandbox_lens/interp", "sandbox_lens/constructions", "sandbox_lens/probes") for p in (ROOT / pkg).rglob("*.py"))


def test_no_module_is_over_400_lines():
    long = {p.relative_to(ROOT).as_posix(): n for p in SOURCES if (n := len(p.read_text().splitlines())) > MAX_MODULE}
    assert long == {}, f"split these modules: {long}"


def test_no_function_is_over_90_lines():
    long = {}
    for p in SOURCES:
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION:
                    long[f"{p.relative_to(ROOT).as_posix()}:{node.name}"] = n
    assert long == {}, f"split these functions: {long}"
