"""The hook-free twin: TransformerLens 3.9's parameters and initialisation bit for bit, its runs the same bits as
runs on TransformerLens's model, and `interp train` without importing TransformerLens."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from sandbox_lens.interp.model.hooked import backend, new_model
from sandbox_lens.interp.tasks.batches import AutomatonTask, DyckTask
from sandbox_lens.interp.tasks.catalogue import get_automaton
from sandbox_lens.interp.tasks.dyck import Dyck
from sandbox_lens.interp.train import train
from sandbox_lens.interp.train.config import ModelShape, TrainConfig
from sandbox_lens.interp.train.twin import build_twin

pytestmark = pytest.mark.skipif(
    backend() != "HookedTransformer", reason="the hook-free twin stands in for TransformerLens 3.9's model"
)
ROOT = Path(__file__).resolve().parents[2]


def _config(normalization, d_model: int, n_heads: int, d_head: int, seed: int) -> dict:
    return {
        "n_layers": 2,
        "d_model": d_model,
        "n_heads": n_heads,
        "d_head": d_head,
        "d_mlp": 3 * d_model,
        "n_ctx": 11,
        "d_vocab": 5,
        "d_vocab_out": 3,
        "act_fn": "relu",
        "normalization_type": normalization,
        "default_prepend_bos": False,
        "seed": seed,
        "dtype": "float32",
    }


@pytest.mark.parametrize("normalization", ["LN", None])
@pytest.mark.parametrize(("d_model", "n_heads", "d_head", "seed"), [(16, 2, 8, 0), (12, 3, 5, 7), (10, 1, 10, 3)])
def test_it_holds_transformer_lens_parameters_initialised_bit_for_bit(normalization, d_model, n_heads, d_head, seed):
    from sandbox_lens.interp.model.hook_free import HookFreeTransformer

    cfg = _config(normalization, d_model, n_heads, d_head, seed)
    torch.manual_seed(123)
    hooked = new_model(cfg)
    after_hooked = torch.rand(3)
    torch.manual_seed(123)
    free = HookFreeTransformer(cfg)
    after_free = torch.rand(3)
    a, b = dict(hooked.named_parameters()), dict(free.named_parameters())
    assert list(a) == list(b)  # names and registration order (the order the initialisation draws in)
    for name in a:
        assert torch.equal(a[name], b[name]), name
    assert torch.equal(after_hooked, after_free)  # the global stream is left where TransformerLens leaves it
    tokens = torch.randint(0, 5, (4, 11), generator=torch.Generator().manual_seed(seed))
    # float32 rounding of a two-block forward at these widths (fused kernels against TransformerLens's einsums)
    torch.testing.assert_close(free(tokens), hooked(tokens), rtol=0, atol=1e-5)
    again = free.hooked()  # and back: the TransformerLens model of the same weights
    assert all(torch.equal(x, dict(again.named_parameters())[n]) for n, x in a.items())


def test_it_refuses_what_it_cannot_stand_in_for():
    from sandbox_lens.interp.model.hook_free import HookFreeTransformer, covered

    cfg = _config("LN", 8, 2, 4, 0)
    assert covered(cfg) is None
    for key, value in (("positional_embedding_type", "alibi"), ("act_fn", "gelu"), ("normalization_type", "RMS")):
        assert key in covered({**cfg, key: value})
        with pytest.raises(ValueError, match=key):
            HookFreeTransformer({**cfg, key: value})
    with pytest.raises(ValueError, match="logits only"):
        HookFreeTransformer(cfg)(torch.zeros(1, 3, dtype=torch.long), return_type="loss")


@pytest.mark.parametrize(
    ("task", "shape", "extra"),
    [
        (AutomatonTask(get_automaton("parity"), 8), ModelShape(n_layers=1, d_model=16, n_heads=2, d_mlp=32), {}),
        (
            DyckTask(Dyck(2, 3), 10),
            ModelShape(n_layers=2, d_model=12, n_heads=1, positional="sinusoidal"),
            {"ema": 0.9},
        ),
    ],
    ids=["parity", "dyck-ema"],
)
def test_a_run_on_it_is_the_run_on_transformer_lens_model_bit_for_bit(task, shape, extra, tmp_path, monkeypatch):
    """The same checkpoints, saved model and history (but for wall time) as the run on the HookedTransformer,
    a moving average included; and a run started on one resumes on the other to the same bits."""
    import sandbox_lens.interp.train.twin as twin

    config = TrainConfig(steps=20, batch=8, eval_every=10, eval_size=64, seed=2, keep_checkpoints=1, **extra)
    free = train(task, shape, config, tmp_path / "free", progress=False)
    with monkeypatch.context() as m:
        m.setattr(twin, "hook_free_possible", lambda shape: False)
        assert type(build_twin(task, shape, 0, hook_free=True)).__name__ == "HookedTransformer"
        hooked = train(task, shape, config, tmp_path / "hooked", progress=False)
        cut = TrainConfig(**{**config.__dict__, "max_minutes": 0.0})
        train(task, shape, cut, tmp_path / "across", progress=False)  # stopped after its first evaluation
    train(task, shape, config, tmp_path / "across", resume=True, progress=False)  # resumed hook-free

    def clean(history: list[dict]) -> list[dict]:
        return [{k: v for k, v in h.items() if k != "wall_seconds"} for h in history]

    assert clean(free["history"]) == clean(hooked["history"])
    for run in ("hooked", "across"):
        assert (tmp_path / run / "model.safetensors").read_bytes() == (
            tmp_path / "free" / "model.safetensors"
        ).read_bytes()
        meta = json.loads((tmp_path / run / "model.json").read_text())
        assert meta == json.loads((tmp_path / "free" / "model.json").read_text())
    kept = sorted(p.name for p in (tmp_path / "free" / "checkpoints").iterdir())
    assert kept == sorted(p.name for p in (tmp_path / "hooked" / "checkpoints").iterdir()) and kept


SHORT_RUN = ["automaton", "--automaton", "parity", "--length", "6", "--steps", "3", "--layers", "1"]


@pytest.mark.parametrize(
    ("argv", "imports_it"), [(SHORT_RUN, False), ([*SHORT_RUN, "--sharpen", "0.1"], True)], ids=["plain", "regularised"]
)
def test_interp_train_imports_transformer_lens_only_when_a_step_reads_activations(argv, imports_it, tmp_path):
    """Its import is most of a short command's time; the entropy regulariser reads attention patterns."""
    script = (
        "import sys\nfrom sandbox_lens.interp.cli import main\n"
        f"code = main(['--quiet', 'train', *{argv!r}, '--out', {str(tmp_path / 'run')!r}])\n"
        "print(code, 'transformer_lens' in sys.modules)"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-2:] == ["0", str(imports_it)]
    assert (tmp_path / "run" / "model.json").is_file()
