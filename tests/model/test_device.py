"""sandbox_lens.interp.model.device: models are built on the CPU unless --device says otherwise (TransformerLens alone would
take CUDA whenever it is present), a device that is not there is one line, and the choice does not leak."""

from __future__ import annotations

import os

import pytest
import torch

from sandbox_lens.interp.cli import main
from sandbox_lens.interp.errors import SandboxError
from sandbox_lens.interp.model.device import ENV, current, resolve
from sandbox_lens.interp.model.hooked import hooked_config


def _fake_cuda(monkeypatch, n: int = 1) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: n)


CFG = {
    "n_layers": 1,
    "d_model": 8,
    "n_ctx": 8,
    "d_head": 4,
    "n_heads": 2,
    "d_mlp": 16,
    "d_vocab": 3,
    "d_vocab_out": 3,
    "act_fn": "relu",
    "normalization_type": None,
    "dtype": "float32",
}


def test_models_are_built_on_the_cpu_even_where_cuda_is_present(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    _fake_cuda(monkeypatch)
    assert current() == "cpu" and hooked_config(CFG).device == "cpu"
    monkeypatch.setenv(ENV, "cuda")
    assert hooked_config(CFG).device == "cuda"


def test_devices_resolve_or_are_refused(monkeypatch):
    if torch.cuda.is_available():
        pytest.skip("checks the refusals of a machine without CUDA")
    assert resolve("cpu") == "cpu" and resolve(" AUTO ") == "cpu"
    for bad, message in (
        ("cuda", "has no CUDA device"),
        ("cuda:0", "has no CUDA device"),
        ("gpu", "cpu, cuda, cuda:N"),
        ("cuda:x", "cpu, cuda, cuda:N"),
    ):
        with pytest.raises(SandboxError, match=message):
            resolve(bad)
    _fake_cuda(monkeypatch, 2)
    assert resolve("auto") == "cuda" and resolve("cuda:1") == "cuda:1"
    with pytest.raises(SandboxError, match="there are 2 CUDA devices"):
        resolve("cuda:2")


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--device", "cuda", "train", "dyck", "--dyck", "1,2", "--steps", "2"], "no CUDA device"),
        (["--device", "tpu", "evaluate", "--model", "X"], "cpu, cuda, cuda:N or auto"),
    ],
)
def test_bad_devices_are_one_line_and_write_nothing(tmp_path, capsys, monkeypatch, argv, message):
    if torch.cuda.is_available():
        pytest.skip("checks the refusals of a machine without CUDA")
    monkeypatch.delenv(ENV, raising=False)
    code = main([*argv, "--out", str(tmp_path / "out")] if argv[2] == "train" else argv)
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("\n") == 1
    assert not (tmp_path / "out").exists() and ENV not in os.environ


def test_a_command_without_a_model_refuses_cuda_and_takes_auto_as_the_cpu(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    _fake_cuda(monkeypatch)
    code = main(["--device", "cuda", "decompose", "--automaton", "grid3", "--out", str(tmp_path / "c.json")])
    err = capsys.readouterr().err
    assert code == 2 and "interp decompose runs no model" in err and err.count("\n") == 1
    assert ENV not in os.environ and not (tmp_path / "c.json").exists()
    from sandbox_lens.interp.cli import ON_DEVICE, _device

    assert _device("info", "auto") is None and _device("verify", None) is None
    assert all(
        _device(c, "auto") == "cuda" for c in ("train", "compare", "circuit", "align", "experiment", "population")
    )
    assert {"train", "evaluate", "verify", "compare", "circuit", "align", "experiment"} <= ON_DEVICE  # the list


def test_train_runs_on_the_chosen_device_and_puts_the_setting_back(tmp_path, monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    seen = {}
    import sandbox_lens.interp.train.loop as loop

    real = loop.build_twin

    def spy(task, shape, seed=0, hook_free=False):
        model = real(task, shape, seed, hook_free=hook_free)
        seen["device"] = str(next(model.parameters()).device)
        seen["env"] = os.environ.get(ENV)
        return model

    monkeypatch.setattr(loop, "build_twin", spy)
    assert (
        main(
            [
                "--device",
                "cpu",
                "train",
                "dyck",
                "--dyck",
                "1,2",
                "--steps",
                "2",
                "--eval-every",
                "2",
                "--out",
                str(tmp_path / "run"),
            ]
        )
        == 0
    )
    assert seen == {"device": "cpu", "env": "cpu"} and ENV not in os.environ
