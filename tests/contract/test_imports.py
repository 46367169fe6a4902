"""Where the package's own imports may sit inside a function (issue 45: a module's header shows what it depends on).

A function-level import of a project module is kept only where loading it eagerly would cost a user something
measurable:
- the target pulls a heavy library in at import time (torch, TransformerLens, transformers, …), read from the
  modules' top-level imports, transitively;
- the importing module is on the command line's start-up path (loaded by ``interp --help``; eager imports there
  would load the analyses before the parser answers) or is the command line itself;
- the module is one of :data:`KEPT`, each with the measured reason.
Everything else imports at the top. The count of the rest is held at 0.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: libraries whose import costs a user noticeable start-up time (each imported inside functions in the package)
HEAVY = {
    "torch",
    "transformer_lens",
    "transformers",
    "tokenizers",
    "circuitsvis",
    "matplotlib",
    "scipy",
    "sympy",
    "safetensors",
    "ray",
    "auto_circuit",
    "jsonschema",
    "tqdm",
}
#: importing module (a package covers its modules), or "module -> imported module": why the import stays inside
KEPT = {
    "sandbox_lens.interp.compare": "interp report re-renders a page from its files without loading the analyses "
    "(tests/compare/test_compare.py checks the modules it loads)",
    "sandbox_lens.interp.experiments.base": "the experiments' registry is read at the command line's start-up; base "
    "loads the training engine only when an experiment runs",
    "sandbox_lens.interp.tasks.catalogue -> sandbox_lens.interp.tasks.groups": "group theory only for the S_n "
    "entries: verifying a prefix scan loads no other construction's machinery (tests/contract/test_layers.py)",
}


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted((ROOT / "sandbox_lens").rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _target(module: str, name: str) -> str:
    return f"{module}.{name}" if f"{module}.{name}" in MODULES else module


def _top_imports(path: Path) -> set[str]:
    out: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.Import):
                out.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                out.update({node.module} | {_target(node.module, a.name) for a in node.names})
            elif isinstance(node, ast.If) and not (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"):
                visit(node.body + node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)

    visit(ast.parse(path.read_text()).body)
    return out


TOP = {m: _top_imports(p) for m, p in MODULES.items()}


def _heavy(module: str, seen: frozenset[str] = frozenset()) -> bool:
    """Whether importing ``module`` loads a heavy library (its package's ``__init__`` included)."""
    parts = module.split(".")
    deps = TOP.get(module, set()) | {".".join(parts[:i]) for i in range(1, len(parts))} & set(MODULES)
    for dep in deps:
        if dep.split(".")[0] in HEAVY:
            return True
        if dep in MODULES and dep not in seen and _heavy(dep, seen | {module}):
            return True
    return False


def _lazy_imports() -> list[tuple[str, int, str]]:
    """(importing module, line, imported module) for every project import inside a function."""
    out = []
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for inner in ast.walk(node):
                    if (
                        isinstance(inner, ast.ImportFrom)
                        and inner.level == 0
                        and (inner.module or "").startswith("sandbox_lens")
                    ):
                        out += [(module, inner.lineno, _target(inner.module, a.name)) for a in inner.names]
    return sorted(set(out))


def _start_up() -> set[str]:
    probe = (
        "import sys\nfrom sandbox_lens.interp.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "print(' '.join(m for m in sys.modules if m.startswith('sandbox_lens') or m == 'torch'))"
    )
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT)
    return set(r.stdout.strip().splitlines()[-1].split())


def _kept(module: str, target: str, start_up: set[str]) -> bool:
    return (
        module in start_up
        or module.startswith(("sandbox_lens.interp.cli", "sandbox_lens.interp.__main__", "sandbox_lens.interp.demo"))
        or f"{module} -> {target}" in KEPT
        or any(module == k or module.startswith(k + ".") for k in KEPT)
    )


def test_the_package_s_own_imports_sit_at_the_top_of_each_module():
    start_up = _start_up()
    assert "sandbox_lens.interp.cli" in start_up and "torch" not in start_up  # the start-up stays light
    loose = [
        f"{module}:{line} imports {target} inside a function"
        for module, line, target in _lazy_imports()
        if not _heavy(target) and not _kept(module, target, start_up)
    ]
    assert not loose, "move these to the module's top (or say in KEPT why not):\n" + "\n".join(loose)


def test_the_heaviness_reading_finds_the_heavy_modules():
    assert _heavy("sandbox_lens.interp.model.tokens")  # transformers' tokenizers
    assert not _heavy("sandbox_lens.interp.tasks.automata")
    assert not _heavy("sandbox_lens.interp.errors")
