"""The floors of the package, read from every module's imports (module-level and inside functions).

floor 0  interp.errors, interp.files, interp.viz,          no project imports
         interp.streams, interp.html, interp.settings,
         interp.stats, interp.provenance, interp.budget
floor 1  interp.tasks.*  (what is true; the task-kind registry)  floor 0 only
         interp.model.*  (how weights are held and run)      floor 0 and interp.tasks (a card's task kind) —
                                                             tasks never imports model
floor 2  constructions.*, probes.*                           interp.tasks, interp.model, interp.errors only
         interp.verify.*, interp.train.*                     floors 0-1
floor 3  interp.compare.*, interp.evaluate,                 the only parts of interp that import constructions / probes
         interp.experiments.*, interp.init_from,
         interp.circuits.*, interp.causal.*
floor 4  interp.demo, interp.cli.*, interp.__main__

Nothing imports upward, there is no import cycle, and the compare and experiment reports never import
the analyses.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("interp", "constructions", "probes")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


MODULES = {_module_name(p): p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))}


def _resolve(name: str) -> str | None:
    """The project module an import names (``interp.model.run`` for ``from interp.model import run``)."""
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
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            names = [f"{base}.{a.name}" for a in node.names] + [base]
        for n in names:
            if n.split(".")[0] in PACKAGES:
                target = _resolve(n)
                if target and target != module:
                    out.add(target)
    return out


GRAPH = {m: _imports(m) for m in MODULES}


def floor(module: str) -> tuple[int, str]:
    """(floor, group) of a project module; groups on one floor may not import each other unless allowed."""
    if module in ("interp", "interp.errors", "interp.files", "interp.viz", "interp.streams", "interp.html",
                  "interp.settings", "interp.stats", "interp.provenance", "interp.budget"):
        return 0, "base"
    for prefix, where in (("interp.tasks", (1, "tasks")), ("interp.model", (1, "model")),
                          ("constructions", (2, "constructions")), ("probes", (2, "probes")),
                          ("interp.verify", (2, "verify")), ("interp.train", (2, "train")),
                          ("interp.compare", (3, "compare")), ("interp.evaluate", (3, "evaluate")),
                          ("interp.experiments", (3, "experiments")), ("interp.init_from", (3, "init_from")),
                          ("interp.circuits", (3, "circuits")), ("interp.causal", (3, "causal"))):
        if module == prefix or module.startswith(prefix + "."):
            return where
    if module in ("interp.demo", "interp.cli", "interp.__main__") or module.startswith("interp.cli."):
        return 4, "cli"
    raise AssertionError(f"{module} has no floor: place it in tests/contract/test_layers.py and the README")


#: What a group may import besides floor 0 (and itself).
ALLOWED = {
    "tasks": set(), "model": {"tasks"},
    "constructions": {"tasks", "model"}, "probes": {"tasks", "model"},
    "verify": {"tasks", "model"}, "train": {"tasks", "model"},
    "compare": {"tasks", "model", "verify", "train", "constructions", "probes", "circuits", "causal", "evaluate"},
    "evaluate": {"tasks", "model", "verify", "train", "constructions"},
    "init_from": {"tasks", "model", "train", "constructions"},
    "circuits": {"tasks", "model", "verify", "constructions", "probes"},
    "causal": {"tasks", "model", "verify", "constructions", "probes", "train"},
    "experiments": {"tasks", "model", "verify", "train", "constructions", "probes", "compare", "evaluate", "init_from"},
    "cli": {"tasks", "model", "verify", "train", "constructions", "probes", "compare", "evaluate", "experiments",
            "init_from", "circuits", "causal"},
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
        ok = t_group == "base" and (group != "base" or module == "interp") or t_group in ALLOWED[group]
        if module == "interp" and target == "interp.errors":
            ok = True
        assert ok, f"{module} (floor {level}, {group}) imports {target} (floor {t_level}, {t_group})"
        assert t_level <= level, f"{module} imports upward: {target}"


def test_floor_zero_imports_nothing_of_the_project():
    for module in ("interp.errors", "interp.files", "interp.viz", "interp.streams", "interp.html",
                  "interp.settings"):
        assert GRAPH[module] == set(), f"{module} imports {GRAPH[module]}"


def test_no_import_cycles():
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        path.append(m)
        for t in sorted(GRAPH[m]):
            if state.get(t) == 1:
                cycle = path[path.index(t):] + [t]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if t not in state:
                visit(t)
        path.pop()
        state[m] = 2

    for m in sorted(MODULES):
        if m not in state:
            visit(m)


@pytest.mark.parametrize("report", ["interp.compare.report", "interp.experiments.report"])
def test_the_report_does_not_import_the_analysis(report):
    reachable, todo = set(), [report]
    while todo:
        m = todo.pop()
        for t in GRAPH[m]:
            if t not in reachable:
                reachable.add(t)
                todo.append(t)
    assert not reachable & {"interp.compare.analyse", "interp.compare.automaton", "interp.compare.dyck",
                            "interp.compare.ffl", "interp.model.run", "interp.train", "interp.experiments.base",
                            "interp.evaluate", "interp.train.sweep", "interp.train.loop", "interp.train.twin",
                            "interp.causal.align"}
    assert not any(t.startswith(("constructions", "probes")) for t in reachable), reachable


def test_the_checker_sees_lazy_imports():
    """A function-level import counts (the exceptions, by importlib and name: the construction registry's
    builders, and what a task kind names on a higher floor — its verifier, evaluator, compare adapter)."""
    assert "interp.model.hooked" in GRAPH["constructions"]  # build_model imports it inside the function
    assert "interp.tasks.dyck" in GRAPH["interp.tasks.kinds.dyck"]  # DyckKind imports it inside its methods


def test_prefix_scan_verification_imports_no_other_construction(tmp_path):
    """`interp verify prefix_scan --automaton S5` loads neither the Krohn–Rhodes machinery (sympy), nor the
    gridworld or Dyck modules; building the spec imports no sympy at all (TransformerLens's own
    import of torch.fx pulls sympy in later, when the model is made)."""
    import subprocess
    import sys

    probe = """
import sys
from constructions import build
from interp.tasks.catalogue import get_automaton
build("prefix_scan", get_automaton("S5"), 16)
print("SYMPY_AFTER_SPEC", "sympy" in sys.modules)
from interp.cli import main
code = main(["verify", "prefix_scan", "--automaton", "S5", "--length", "16", "--samples", "10"])
mine = sorted(m for m in sys.modules if m.split(".")[0] in ("interp", "constructions", "probes"))
print("PROJECT", " ".join(mine))
sys.exit(code)
"""
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, check=False)
    assert r.returncode == 0, r.stderr
    assert "SYMPY_AFTER_SPEC False" in r.stdout
    loaded = r.stdout.split("PROJECT", 1)[1].split()
    for unwanted in ("constructions.krohn_rhodes", "constructions.solvable", "constructions.gridworld",
                     "constructions.dyck", "constructions.ffl", "interp.tasks.dyck", "interp.tasks.groups",
                     "interp.tasks.cascade", "interp.verify.dyck", "interp.verify.ffl", "probes.dyck"):
        assert unwanted not in loaded, unwanted
    assert "constructions.prefix_scan" in loaded and "interp.verify.automaton" in loaded
