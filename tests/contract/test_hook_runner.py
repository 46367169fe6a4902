"""Every forward with hooks goes through ``sandbox_lens.interp.model.run.run_with_hooks`` (which keeps
TransformerLens 3.9's meaning on 4.x's bridge), except the hook patching engine, which refuses the bridge."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "sandbox_lens"
ALLOWED = {"interp/model/run.py", "interp/circuits/patching.py"}


def test_no_direct_run_with_hooks_outside_the_helper():
    direct = []
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE).as_posix()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                if node.func.attr == "run_with_hooks" and rel not in ALLOWED:
                    direct.append(f"{rel}:{node.lineno}")
    assert not direct, direct
