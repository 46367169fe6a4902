"""The front door's parameters are described: every public function and class of ``sandbox_lens`` has a
Google-style ``Args:`` section naming each of its parameters (the API pages render them through napoleon)."""

import inspect

import pytest

import sandbox_lens as sl

PUBLIC = [n for n in sl.__all__ if not n.startswith("__") and n not in ("REGISTRY", "SandboxError")]


@pytest.mark.parametrize("name", PUBLIC)
def test_every_parameter_is_described(name):
    obj = getattr(sl, name)
    doc = inspect.getdoc(obj) or ""
    assert "Args:" in doc, f"{name}: no Args section"
    args = doc.split("Args:", 1)[1]
    for p in inspect.signature(obj).parameters.values():
        label = f"**{p.name}:" if p.kind is p.VAR_KEYWORD else f"{p.name}:"
        assert label in args, f"{name}: parameter {p.name} is not described"
