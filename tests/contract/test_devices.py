"""Every command that runs a model follows ``--device`` (issue 31): the analysis code never makes a CPU tensor
that meets a model's, nor reads a tensor into NumPy without bringing it to the CPU. Without a GPU here that
cannot be run, so it is read from the source: in the packages that run models, tensors come from
``sandbox_lens.interp.model.device.on`` (on the model's device) and go to NumPy through ``to_numpy`` or ``.cpu()``; a torch
factory names its ``device=`` or is moved at once (``.to(...)``, ``on(...)``). What runs on the CPU by design is
listed below with its reason. ``make test-gpu`` runs the commands themselves on CUDA where there is one."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: the code that runs models for the commands in sandbox_lens.interp.cli.ON_DEVICE (training is tested on its own devices)
PACKAGES = [
    "sandbox_lens/interp/circuits",
    "sandbox_lens/interp/causal",
    "sandbox_lens/interp/compare",
    "sandbox_lens/interp/experiments",
    "sandbox_lens/interp/verify",
    "sandbox_lens/probes",
    "sandbox_lens/interp/evaluate.py",
    "sandbox_lens/interp/model/run.py",
    "sandbox_lens/interp/model/checked.py",
]
#: (file, function): why its tensors stay on the CPU
CPU_BY_DESIGN = {
    (
        "sandbox_lens/probes/linear.py",
        "_fit_logistic",
    ): "L-BFGS on NumPy features already on the CPU (float64, deterministic)",
}
FACTORIES = {
    "tensor",
    "as_tensor",
    "from_numpy",
    "zeros",
    "ones",
    "full",
    "arange",
    "rand",
    "randn",
    "randint",
    "empty",
    "eye",
    "linspace",
}


def _files() -> list[Path]:
    out = []
    for p in PACKAGES:
        path = ROOT / p
        out += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    return out


def _violations(path: Path, root: Path = ROOT) -> list[str]:
    tree = ast.parse(path.read_text())
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    rel = path.relative_to(root).as_posix()

    def function_of(node) -> str:
        while node in parents:
            node = parents[node]
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return node.name
        return "<module>"

    def moved(call: ast.Call) -> bool:  # torch.x(...).to(...) or on(..., torch.x(...))
        up = parents.get(call)
        if isinstance(up, ast.Attribute) and up.attr == "to":
            return True
        return isinstance(up, ast.Call) and isinstance(up.func, ast.Name) and up.func.id == "on"

    def through_cpu(node) -> bool:  # x.cpu()....numpy()
        while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr == "cpu":
                return True
            node = node.func.value
        return False

    bad = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        f = node.func
        where = f"{rel}:{node.lineno} ({function_of(node)})"
        if (rel, function_of(node)) in CPU_BY_DESIGN:
            continue
        if isinstance(f.value, ast.Name) and f.value.id == "torch" and f.attr in FACTORIES:
            if f.attr in ("from_numpy", "as_tensor"):
                bad.append(
                    f"{where}: torch.{f.attr} makes a CPU tensor; use sandbox_lens.interp.model.device.on(model, ...)"
                )
            elif not any(k.arg == "device" for k in node.keywords) and not moved(node):
                bad.append(f"{where}: torch.{f.attr}(...) without device=")
        elif f.attr == "numpy" and not node.args and not through_cpu(f.value):
            bad.append(
                f"{where}: .numpy() of a tensor that may be on CUDA; use sandbox_lens.interp.model.device.to_numpy"
            )
    return bad


def test_the_analysis_code_puts_its_tensors_on_the_models_device():
    bad = [v for p in _files() for v in _violations(p)]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize(
    "source, expected",
    [
        ("import torch\ndef f(x):\n    return torch.from_numpy(x)\n", "torch.from_numpy makes a CPU tensor"),
        ("import torch\ndef f(n):\n    return torch.arange(n)\n", "without device="),
        ("def f(t):\n    return t.argmax(-1).numpy()\n", ".numpy() of a tensor"),
    ],
)
def test_the_check_finds_each_kind_of_cpu_tensor(tmp_path, source, expected):
    path = tmp_path / "m.py"
    path.write_text(source)
    found = _violations(path, tmp_path)
    assert len(found) == 1 and expected in found[0]


@pytest.mark.parametrize(
    "source",
    [
        "import torch\ndef f(n, d):\n    return torch.arange(n, device=d)\n",
        "import torch\ndef f(n, d):\n    return torch.rand(n).to(d)\n",
        "import torch\ndef f(m, n):\n    return on(m, torch.zeros(n))\n",
        "def f(t):\n    return t.detach().cpu().double().numpy()\n",
    ],
)
def test_the_check_accepts_tensors_put_on_a_device(tmp_path, source):
    path = tmp_path / "m.py"
    path.write_text(source)
    assert _violations(path, tmp_path) == []
