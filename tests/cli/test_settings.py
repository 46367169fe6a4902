"""Configuration stated once: the options of `interp train` and `interp compare` are the fields of the
config dataclasses (flag, type, default, help), and a sweep's grid takes every option's name."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, fields

import pytest

from sandbox_lens.interp.compare.config import CompareConfig
from sandbox_lens.interp.errors import SandboxError
from sandbox_lens.interp.settings import setting, settings_of
from sandbox_lens.interp.train.config import ModelShape, TrainConfig


def _options(command: str) -> dict[str, argparse.Action]:
    from sandbox_lens.interp.cli import _parser

    parser, _ = _parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {flag: a for a in sub.choices[command]._actions for flag in a.option_strings}


@pytest.mark.parametrize("command,classes", [("train", (ModelShape, TrainConfig)), ("compare", (CompareConfig,))])
def test_every_setting_is_an_option_of_its_command(command, classes):
    options = _options(command)
    for cls in classes:
        for s in settings_of(cls):
            action = options[s.flag]
            assert action.dest == s.name and action.help.startswith(s.help), s.name
            assert (action.nargs == "+") == s.many and getattr(action.type, "kind", action.type) is s.type, s.name
            assert (tuple(action.choices) if action.choices else None) == s.choices, s.name


def test_unset_settings_take_the_task_kinds_defaults_and_others_the_fields():
    options = _options("train")
    assert options["--steps"].default is None and "automaton 3000, dyck 1500" in options["--steps"].help
    assert options["--layers"].default is None and "dyck 2" in options["--layers"].help
    assert options["--batch"].default == TrainConfig().batch and options["--arch"].default == "transformer"
    assert _options("compare")["--mask-sparsity"].default == list(CompareConfig().mask_sparsities)


def test_a_grid_takes_every_option_name_and_every_field_name():
    from sandbox_lens.interp.train.sweep import parse_grid

    for cls in (ModelShape, TrainConfig):
        for f in fields(cls):
            if f.name == "seed":
                continue
            flag = (f.metadata["setting"]["flag"] or "--" + f.name.replace("_", "-")).lstrip("-")
            value = "1,2" if f.type in ("int", "int | None", "float", "float | None") else "x"
            assert list(parse_grid([f"{flag}={value}"])) == [f.name]
            assert list(parse_grid([f"{f.name}={value}"])) == [f.name]


def test_compare_settings_are_checked_when_made():
    assert CompareConfig(mask_steps=0).masks is False
    for bad in ({"samples": 4}, {"circuit_pairs": -1}, {"mask_sparsities": ()}, {"train_steps": 0}):
        with pytest.raises(SandboxError):
            CompareConfig(**bad)


def test_a_setting_default_is_immutable():
    with pytest.raises(TypeError, match="immutable"):

        @dataclass
        class Bad:
            xs: list = setting([1], "a list")
