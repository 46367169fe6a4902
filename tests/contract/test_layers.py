"""The floors of the package, read from every module's imports (module-level and inside functions).

The floors are declared here (:data:`BASE`, :data:`PREFIXES`, :data:`ALLOWED`) and nowhere else:
docs/architecture.md's table is rendered from them (:func:`floor_table`) and checked.

Nothing imports upward, there is no import cycle, and the compare and experiment reports never import
the analyses.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("sandbox_lens.interp", "sandbox_lens.constructions", "sandbox_lens.probes")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


MODULES = {_module_name(p): p for pkg in PACKAGES for p in sorted((ROOT / pkg.replace(".", "/")).rglob("*.py"))}


def _resolve(name: str) -> str | None:
    """The project module an import names (``sandbox_lens.interp.model.run`` for ``from sandbox_lens.interp.model import run``)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(module: str) -> set[str]:
    tree = ast.parse(MODULES[module].read_text())
    out: set[str] = set()
    package = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else [])
                )
            names = [f"{base}.{a.name}" for a in node.names] + [base]
        for n in names:
            if n.startswith(tuple(p + "." for p in PACKAGES)) or n in PACKAGES:
                target = _resolve(n)
                if target and target != module:
                    out.add(target)
    return out


GRAPH = {m: _imports(m) for m in MODULES}


#: Floor 0: the modules that import nothing of the project (the interp package's own ``__init__`` aside).
BASE = (
    "sandbox_lens.interp",
    "sandbox_lens.interp.errors",
    "sandbox_lens.interp.files",
    "sandbox_lens.interp.jsonfile",
    "sandbox_lens.interp.viz",
    "sandbox_lens.interp.streams",
    "sandbox_lens.interp.html",
    "sandbox_lens.interp.settings",
    "sandbox_lens.interp.stats",
    "sandbox_lens.interp.provenance",
    "sandbox_lens.interp.budget",
    "sandbox_lens.interp.progress",
)
#: (package prefix, floor, group) above floor 0; a prefix covers the module and everything under it.
PREFIXES = (
    ("sandbox_lens.interp.tasks", 1, "tasks"),
    ("sandbox_lens.interp.model", 1, "model"),
    ("sandbox_lens.constructions", 2, "constructions"),
    ("sandbox_lens.probes", 2, "probes"),
    ("sandbox_lens.interp.verify", 2, "verify"),
    ("sandbox_lens.interp.train", 2, "train"),
    ("sandbox_lens.interp.compare", 3, "compare"),
    ("sandbox_lens.interp.evaluate", 3, "evaluate"),
    ("sandbox_lens.interp.experiments", 3, "experiments"),
    ("sandbox_lens.interp.init_from", 3, "init_from"),
    ("sandbox_lens.interp.circuits", 3, "circuits"),
    ("sandbox_lens.interp.causal", 3, "causal"),
    ("sandbox_lens.interp.demo", 4, "cli"),
    ("sandbox_lens.interp.cli", 4, "cli"),
    ("sandbox_lens.interp.__main__", 4, "cli"),
)


def floor(module: str) -> tuple[int, str]:
    """(floor, group) of a project module; groups on one floor may not import each other unless allowed."""
    if module in BASE:
        return 0, "base"
    for prefix, level, group in PREFIXES:
        if module == prefix or module.startswith(prefix + "."):
            return level, group
    raise AssertionError(f"{module} has no floor: place it in tests/contract/test_layers.py (BASE or PREFIXES)")


#: What a group may import besides floor 0 (and itself).
ALLOWED = {
    "tasks": set(),
    "model": {"tasks"},
    "constructions": {"tasks", "model"},
    "probes": {"tasks", "model"},
    "verify": {"tasks", "model"},
    "train": {"tasks", "model"},
    "compare": {"tasks", "model", "verify", "train", "constructions", "probes", "circuits", "causal", "evaluate"},
    "evaluate": {"tasks", "model", "verify", "train", "constructions"},
    "init_from": {"tasks", "model", "train", "constructions"},
    "circuits": {"tasks", "model", "verify", "constructions", "probes"},
    "causal": {"tasks", "model", "verify", "constructions", "probes", "train"},
    "experiments": {
        "tasks",
        "model",
        "verify",
        "train",
        "constructions",
        "probes",
        "compare",
        "evaluate",
        "init_from",
        "causal",
    },
    "cli": {
        "tasks",
        "model",
        "verify",
        "train",
        "constructions",
        "probes",
        "compare",
        "evaluate",
        "experiments",
        "init_from",
        "circuits",
        "causal",
    },
    "base": set(),
}


def test_every_module_has_a_floor():
    for module in MODULES:
        floor(module)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_go_down_only(module):
    level, group = floor(module)
    for target in GRAPH[module]:
        t_level, t_group = floor(target)
        if t_group == group:
            continue
        ok = t_group == "base" and (group != "base" or module == "sandbox_lens.interp") or t_group in ALLOWED[group]
        if module == "sandbox_lens.interp" and target == "sandbox_lens.interp.errors":
            ok = True
        assert ok, f"{module} (floor {level}, {group}) imports {target} (floor {t_level}, {t_group})"
        assert t_level <= level, f"{module} imports upward: {target}"


def test_floor_zero_imports_nothing_of_the_project():
    """Floor 0's leaves import nothing of the project, except that every module may raise the project's errors and
    write through files' atomic writes (errors imports nothing; files only errors)."""
    leaves = {"sandbox_lens.interp.errors": set(), "sandbox_lens.interp.files": {"sandbox_lens.interp.errors"}}
    for module in (
        "sandbox_lens.interp.errors",
        "sandbox_lens.interp.files",
        "sandbox_lens.interp.jsonfile",
        "sandbox_lens.interp.viz",
        "sandbox_lens.interp.streams",
        "sandbox_lens.interp.html",
        "sandbox_lens.interp.settings",
        "sandbox_lens.interp.progress",
    ):
        allowed = leaves.get(module, set(leaves))
        assert GRAPH[module] <= allowed, f"{module} imports {GRAPH[module] - allowed}"


def test_no_import_cycles():
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        path.append(m)
        for t in sorted(GRAPH[m]):
            if state.get(t) == 1:
                cycle = path[path.index(t) :] + [t]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if t not in state:
                visit(t)
        path.pop()
        state[m] = 2

    for m in sorted(MODULES):
        if m not in state:
            visit(m)


@pytest.mark.parametrize("report", ["sandbox_lens.interp.compare.report", "sandbox_lens.interp.experiments.report"])
def test_the_report_does_not_import_the_analysis(report):
    reachable, todo = set(), [report]
    while todo:
        m = todo.pop()
        for t in GRAPH[m]:
            if t not in reachable:
                reachable.add(t)
                todo.append(t)
    assert not reachable & {
        "sandbox_lens.interp.compare.analyse",
        "sandbox_lens.interp.compare.automaton",
        "sandbox_lens.interp.compare.dyck",
        "sandbox_lens.interp.compare.ffl",
        "sandbox_lens.interp.model.run",
        "sandbox_lens.interp.train",
        "sandbox_lens.interp.experiments.base",
        "sandbox_lens.interp.evaluate",
        "sandbox_lens.interp.train.sweep",
        "sandbox_lens.interp.train.loop",
        "sandbox_lens.interp.train.twin",
        "sandbox_lens.interp.causal.align",
    }
    assert not any(t.startswith(("sandbox_lens.constructions", "sandbox_lens.probes")) for t in reachable), reachable


def test_the_checker_sees_lazy_imports():
    """A function-level import counts (the exceptions, by importlib and name: the construction registry's
    builders, and what a task kind names on a higher floor — its verifier, evaluator, compare adapter)."""
    assert (
        "sandbox_lens.interp.model.hooked" in GRAPH["sandbox_lens.constructions"]
    )  # build_model imports it inside the function
    assert (
        "sandbox_lens.interp.tasks.dyck" in GRAPH["sandbox_lens.interp.tasks.kinds.dyck"]
    )  # DyckKind imports it inside its methods


def test_prefix_scan_verification_imports_no_other_construction(tmp_path):
    """`interp verify prefix_scan --automaton S5` loads neither the Krohn–Rhodes machinery (sympy), nor the
    gridworld or Dyck modules; building the spec imports no sympy at all (TransformerLens's own
    import of torch.fx pulls sympy in later, when the model is made)."""
    import subprocess
    import sys

    probe = """
import sys
from sandbox_lens.constructions import build
from sandbox_lens.interp.tasks.catalogue import get_automaton
build("prefix_scan", get_automaton("S5"), 16)
print("SYMPY_AFTER_SPEC", "sympy" in sys.modules)
from sandbox_lens.interp.cli import main
code = main(["verify", "prefix_scan", "--automaton", "S5", "--length", "16", "--samples", "10"])
mine = sorted(m for m in sys.modules if m.startswith(("sandbox_lens.interp", "sandbox_lens.constructions", "sandbox_lens.probes")))
print("PROJECT", " ".join(mine))
sys.exit(code)
"""
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, check=False)
    assert r.returncode == 0, r.stderr
    assert "SYMPY_AFTER_SPEC False" in r.stdout
    loaded = r.stdout.split("PROJECT", 1)[1].split()
    for unwanted in (
        "sandbox_lens.constructions.krohn_rhodes",
        "sandbox_lens.constructions.solvable",
        "sandbox_lens.constructions.gridworld",
        "sandbox_lens.constructions.dyck",
        "sandbox_lens.constructions.ffl",
        "sandbox_lens.interp.tasks.dyck",
        "sandbox_lens.interp.tasks.groups",
        "sandbox_lens.interp.tasks.cascade",
        "sandbox_lens.interp.verify.dyck",
        "sandbox_lens.interp.verify.ffl",
        "sandbox_lens.probes.dyck",
    ):
        assert unwanted not in loaded, unwanted
    assert "sandbox_lens.constructions.prefix_scan" in loaded and "sandbox_lens.interp.verify.automaton" in loaded


def test_nothing_in_the_packages_imports_the_front_door():
    """``sandbox_lens`` (the root: ``load`` and the names it re-exports) sits above every floor, like the CLI."""
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and not node.level
                else []
            )
            assert "sandbox_lens" not in names, f"{module} imports the root package sandbox_lens"


ARCHITECTURE = ROOT / "docs" / "architecture.md"
TABLE_START = "<!-- floors: rendered from tests/contract/test_layers.py by floor_table(); do not edit -->"
TABLE_END = "<!-- end of floors -->"


def floor_table() -> str:
    """The floors as a Markdown table: floor, group, its modules, what it may import besides floor 0."""
    rows = ["| floor | group | modules | may import (besides floor 0) |", "|---|---|---|---|"]
    rows.append(f"| 0 | base | {', '.join(f'`{m}`' for m in BASE)} | one another only |")
    groups: dict[tuple[int, str], list[str]] = {}
    for prefix, level, group in PREFIXES:
        groups.setdefault((level, group), []).append(f"`{prefix}`")
    for (level, group), prefixes in groups.items():
        allowed = ", ".join(sorted(ALLOWED[group])) or "floor 0 only"
        rows.append(f"| {level} | {group} | {', '.join(prefixes)} | {allowed} |")
    return "\n".join(rows)


def test_the_architecture_page_shows_these_floors():
    text = ARCHITECTURE.read_text()
    assert TABLE_START in text and TABLE_END in text, "docs/architecture.md lost its floors table"
    shown = text.split(TABLE_START)[1].split(TABLE_END)[0].strip()
    assert shown == floor_table(), (
        "rerender the floors table: python -c 'import test_layers; print(test_layers.floor_table())'"
    )
