"""Stacked ensembles: seeds of one setting trained as one stack are their separate runs up to float rounding, stop,
checkpoint and resume as those runs do, and are chosen only where the rule says they pay."""

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from sandbox_lens.interp.cli import main
from sandbox_lens.interp.errors import CheckpointError, SandboxError
from sandbox_lens.interp.model.fast import fast_forward, stacked_forward
from sandbox_lens.interp.tasks.batches import AutomatonTask, DyckTask, step_rng
from sandbox_lens.interp.tasks.catalogue import get_automaton
from sandbox_lens.interp.tasks.dyck import Dyck
from sandbox_lens.interp.train import ModelShape, TrainConfig, build_twin, default_shape, train
from sandbox_lens.interp.train.checkpoint import read_checkpoint
from sandbox_lens.interp.train.loop import _loss
from sandbox_lens.interp.train.stacked import STACK_MACS, _Member, _Stack, stack_refusal, stack_size, train_stacked
from sandbox_lens.interp.train.sweep import run_sweep

TASK = DyckTask(Dyck(1, 2), 8)
SMALL = ModelShape(n_layers=2, d_model=16, n_heads=2)
RUN = TrainConfig(steps=30, batch=8, eval_every=10, eval_size=64, warmup=3, target_accuracy=None)
SEEDS = (0, 1, 2)


def _configs(config: TrainConfig = RUN, seeds=SEEDS) -> list[TrainConfig]:
    return [replace(config, seed=s) for s in seeds]


def _float32_bound(*tensors) -> float:
    """A float32 rounding bound for sums of the tensors' size: 64 ulps of their largest magnitude."""
    return 64 * float(np.finfo(np.float32).eps) * max(float(t.abs().max()) for t in tensors)


def test_the_stacked_forward_is_each_members_forward():
    models = [build_twin(TASK, SMALL, s, hook_free=True) for s in SEEDS]
    params = {n: torch.stack([m.get_parameter(n).detach() for m in models]) for n, _ in models[0].named_parameters()}
    tokens = torch.stack([torch.from_numpy(TASK.batch(step_rng(s, 0), 8).tokens) for s in SEEDS])
    with torch.no_grad():
        got = stacked_forward(params, tokens, models[0].cfg)
        want = torch.stack([fast_forward(m, t) for m, t in zip(models, tokens)])
    assert got.shape == want.shape
    assert float((got - want).abs().max()) <= _float32_bound(want)


def test_each_members_gradient_is_its_single_runs_clipped_member_by_member():
    config = replace(RUN, clip=0.05)  # small enough to bind
    members = []
    for c in _configs(config):
        model = build_twin(TASK, SMALL, c.seed, hook_free=True)
        members.append(_Member(c, Path("."), model, torch.optim.AdamW(model.parameters()), {}))
    stack = _Stack(members, config)
    stack.opt.step = lambda: None  # keep the gradients, skip the update
    stack.step(TASK, 0)
    for e, m in enumerate(members):
        loss, _ = _loss(m.model, TASK.batch(step_rng(m.config.seed, 0), config.batch))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(m.model.parameters()), config.clip)
        own = torch.cat([p.grad.flatten() for p in m.model.parameters()])
        got = torch.cat([stack.params[n].grad[e].flatten() for n, _ in m.model.named_parameters()])
        assert float(own.norm()) == pytest.approx(config.clip, rel=1e-4)  # clipping was active
        assert float((got - own).norm()) <= 1e-5 * float(own.norm())


def _history(metrics):
    return [(h["step"], h.get("train_loss"), h["loss"], h["accuracy"]) for h in metrics["history"]]


def test_a_stack_trains_its_separate_runs_up_to_rounding(tmp_path):
    alone = [train(TASK, SMALL, c, tmp_path / f"alone{c.seed}", progress=False) for c in _configs()]
    stacked = train_stacked(TASK, SMALL, _configs(), [tmp_path / f"stack{s}" for s in SEEDS])
    for a, b in zip(alone, stacked):
        assert b["stacked_with"] == list(SEEDS) and b["steps"] == a["steps"] == RUN.steps
        for (sa, ta, la, aa), (sb, tb, lb, ab) in zip(_history(a), _history(b)):
            # 30 AdamW steps carry the rounding of the batched matmuls: losses within 1e-4 (relative),
            # accuracy on the 64 held-out words within one word
            assert sa == sb and lb == pytest.approx(la, rel=1e-4) and abs(ab - aa) <= 1 / 64 + 1e-9
            assert (ta is None) == (tb is None) and (ta is None or tb == pytest.approx(ta, rel=1e-4))
        # each member's checkpoint is a single run's: the same tensors under the same names
        (_, ta), (meta, tb) = (
            read_checkpoint(tmp_path / f"alone{a['seed']}"),
            read_checkpoint(tmp_path / f"stack{b['seed']}"),
        )
        assert ta.keys() == tb.keys() and meta["stack"] == list(SEEDS)
        assert all(ta[k].shape == tb[k].shape for k in ta)
        assert (tmp_path / f"stack{b['seed']}" / "model.safetensors").is_file()


def test_a_member_that_reaches_its_target_leaves_the_stack(tmp_path):
    # each member stops at its own first evaluation at the target, as its single run does; the rest go on
    task = AutomatonTask(get_automaton("parity"), 4)
    config = replace(RUN, steps=60, eval_every=5, target_accuracy=0.75, lr=3e-3)
    seeds = (0, 1, 2, 3)
    alone = [train(task, SMALL, c, tmp_path / f"a{c.seed}", progress=False) for c in _configs(config, seeds)]
    stacked = train_stacked(task, SMALL, _configs(config, seeds), [tmp_path / f"s{s}" for s in seeds])
    assert len({m["steps"] for m in alone}) > 1  # the seeds stop at different steps: the test bites
    for a, b in zip(alone, stacked):
        assert (b["steps"], b["stopped_by"]) == (a["steps"], a["stopped_by"])
    later = read_checkpoint(tmp_path / f"s{max(seeds, key=lambda s: stacked[s]['steps'])}")[0]
    assert set(later["stack"]) < set(seeds)  # the last evaluation's stack had lost the members that stopped


def test_a_stopped_stack_resumes_bit_for_bit(tmp_path):
    straight = tmp_path / "straight"
    train_stacked(TASK, SMALL, _configs(), [straight / f"seed_{s}" for s in SEEDS])
    parts = tmp_path / "parts"
    first = train_stacked(TASK, SMALL, _configs(replace(RUN, max_minutes=0)), [parts / f"seed_{s}" for s in SEEDS])
    assert {m["stopped_by"] for m in first} == {"time"} and {m["steps"] for m in first} == {RUN.eval_every}
    train_stacked(TASK, SMALL, _configs(), [parts / f"seed_{s}" for s in SEEDS], resume=True)
    for s in SEEDS:
        (_, want), (_, got) = read_checkpoint(straight / f"seed_{s}"), read_checkpoint(parts / f"seed_{s}")
        assert all(torch.equal(want[k], got[k]) for k in want)
    with pytest.raises(CheckpointError, match="already holds"):
        train_stacked(TASK, SMALL, _configs(), [parts / f"seed_{s}" for s in SEEDS])


def test_a_sweep_stacks_small_twins_and_resumes_the_stack(tmp_path):
    s = run_sweep(TASK, SMALL, replace(RUN, max_minutes=0), tmp_path, list(SEEDS), workers=1, progress=False)
    assert s["trained_now"] == 3 and s["stacked_now"] == [list(SEEDS)]
    metrics = [json.loads((tmp_path / f"seed_{k}" / "metrics.json").read_text()) for k in SEEDS]
    assert all(m["stacked_with"] == list(SEEDS) for m in metrics)
    for k in SEEDS:  # the finished runs are taken up again as the stack they were (max_minutes may change)
        (tmp_path / f"seed_{k}" / "metrics.json").unlink()
    again = run_sweep(TASK, SMALL, RUN, tmp_path, list(SEEDS), workers=1, progress=False)
    straight = run_sweep(TASK, SMALL, RUN, tmp_path / "straight", list(SEEDS), workers=1, progress=False)
    assert [r["final_accuracy"] for r in again["runs"]] == [r["final_accuracy"] for r in straight["runs"]]
    apart = run_sweep(TASK, SMALL, RUN, tmp_path / "apart", list(SEEDS), workers=1, progress=False, stack="off")
    alone = json.loads((tmp_path / "apart" / "seed_1" / "metrics.json").read_text())
    assert "stacked_with" not in alone and len(apart["runs"]) == 3


def test_the_rule_stacks_small_steps_only():
    dyck, parity = DyckTask(Dyck(2, 4), 28), AutomatonTask(get_automaton("parity"), 32)
    config = TrainConfig()
    assert stack_size(dyck, default_shape(dyck), config, 16, 2, "auto") == 8
    assert stack_size(dyck, default_shape(dyck), config, 6, 2, "auto") == 3  # spread over the workers
    assert stack_size(dyck, default_shape(dyck), config, 1, 2, "auto") == 1
    assert stack_size(parity, default_shape(parity), config, 16, 2, "auto") == 1  # its matmuls dominate a step
    assert stack_size(parity, default_shape(parity), config, 16, 2, "4") == 4  # asked for
    assert stack_size(dyck, default_shape(dyck), config, 16, 2, "off") == 1
    assert stack_size(dyck, default_shape(dyck), replace(config, batch=10**6), 16, 2, "8") == 1  # memory bound
    assert STACK_MACS > 0
    for shape, cfg in (
        (default_shape(dyck, "lstm"), config),
        (default_shape(dyck), replace(config, ema=0.99)),
        (default_shape(dyck), replace(config, dropout=0.1)),
    ):
        assert stack_refusal(shape, cfg) and stack_size(dyck, shape, cfg, 16, 2, "8") == 1


def test_a_stack_refuses_what_it_cannot_train(tmp_path):
    with pytest.raises(SandboxError, match="only by seed"):
        train_stacked(TASK, SMALL, [RUN, replace(RUN, seed=1, lr=3e-3)], [tmp_path / "a", tmp_path / "b"])
    with pytest.raises(SandboxError, match="distinct seeds"):
        train_stacked(TASK, SMALL, [RUN, RUN], [tmp_path / "a", tmp_path / "b"])
    with pytest.raises(SandboxError, match="moving average"):
        train_stacked(TASK, SMALL, _configs(replace(RUN, ema=0.9)), [tmp_path / f"{s}" for s in SEEDS])


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--seeds", "0-1", "--stack", "9"], "--stack takes auto, off or a number"),
        (["--seeds", "0-1", "--stack", "many"], "--stack takes auto, off or a number"),
        (["--stack", "2"], "--stack stacks several seeds"),
    ],
)
def test_bad_stack_requests_get_one_line(tmp_path, capsys, argv, message):
    code = main(["train", "dyck", "--dyck", "1,2", "-T", "8", "--steps", "2", "--out", str(tmp_path / "o"), *argv])
    err = capsys.readouterr().err
    assert code == 2 and message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists()


def test_a_killed_stacked_sweep_resumes_as_its_stack_bit_for_bit(tmp_path):
    """SIGKILL while a stack trains, then the same command: every run ends with the bits of an unbroken stack."""
    import os
    import signal
    import subprocess
    import sys
    import time

    def argv(out: Path) -> list[str]:
        return [
            *(sys.executable, "-m", "sandbox_lens.interp", "train", "dyck", "--dyck", "1,2", "-T", "8"),
            *("--layers", "1", "--d-model", "8", "--heads", "1", "--steps", "400", "--batch", "4"),
            *("--eval-every", "20", "--eval-size", "16", "--seeds", "0-2", "--workers", "1", "--out", str(out)),
        ]

    root = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen(
        argv(tmp_path / "killed"),
        cwd=root,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.time() + 120
    while time.time() < deadline and not (tmp_path / "killed" / "seed_2" / "checkpoint.json").exists():
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (tmp_path / "killed" / "seed_0" / "metrics.json").exists()  # killed part-way
    for out in (tmp_path / "killed", tmp_path / "straight"):
        r = subprocess.run(argv(out), cwd=root, capture_output=True, text=True, check=False)
        assert r.returncode == 0, r.stderr
    for s in (0, 1, 2):
        (_, want), (meta, got) = (read_checkpoint(tmp_path / d / f"seed_{s}") for d in ("straight", "killed"))
        assert meta["stack"] == [0, 1, 2] and all(torch.equal(want[k], got[k]) for k in want)


def test_a_twin_the_hook_free_engine_cannot_build_is_not_stacked(monkeypatch):
    """On TransformerLens 4.x (or with ALiBi) a seed's twin is not the hook-free one: --seeds trains runs apart."""
    from sandbox_lens.interp.train import stacked

    dyck = DyckTask(Dyck(2, 4), 28)
    monkeypatch.setattr(stacked, "hook_free_possible", lambda shape: False)
    assert "hook-free" in stack_refusal(default_shape(dyck), TrainConfig())
    assert stack_size(dyck, default_shape(dyck), TrainConfig(), 16, 2, "auto") == 1
    assert stack_size(dyck, default_shape(dyck), TrainConfig(), 16, 2, "8") == 1
