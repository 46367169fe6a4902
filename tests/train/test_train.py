"""Training twins: tasks, the training loop, checkpoints, resume, replicates and the CLI."""

import json

import numpy as np
import pytest
import torch

from sandbox_lens.interp.errors import CheckpointError, SandboxError
from sandbox_lens.interp.evaluate import automaton_shifts, score_automaton, skyline
from sandbox_lens.interp.model.run import predict
from sandbox_lens.interp.tasks.batches import AutomatonTask, DyckTask, FFLTask, step_rng
from sandbox_lens.interp.tasks.catalogue import get_automaton
from sandbox_lens.interp.tasks.dyck import Dyck
from sandbox_lens.interp.tasks.highlevel import StateModel
from sandbox_lens.interp.tasks.kinds import task_from_dict
from sandbox_lens.interp.train import ModelShape, TrainConfig, evaluate, load_trained, train
from sandbox_lens.interp.train.sweep import run_sweep

TINY = ModelShape(n_layers=1, d_model=16, n_heads=2, d_mlp=32)


def test_task_batches_are_reproducible_and_correct():
    a = get_automaton("grid5")
    task = AutomatonTask(a, 12)
    b1, b2 = task.batch(step_rng(1, 7), 8), task.batch(step_rng(1, 7), 8)
    assert np.array_equal(b1.tokens, b2.tokens)
    assert np.array_equal(b1.targets[:, 1:], a.run(b1.tokens[:, 1:] - 1))
    assert not b1.loss_mask[:, 0].any() and b1.loss_mask[:, 1:].all()

    d = DyckTask(Dyck(2, 4), 20).batch(step_rng(0, 0), 16)
    assert np.array_equal(d.tokens[:, 1:] - 1, d.targets[:, :-1]) and (d.tokens[:, 0] == 0).all()
    assert np.array_equal(d.score_mask, d.targets % 2 == 1)

    f = FFLTask(0.5, 32)
    seq = f.sequences(step_rng(0, 0), 50)
    for s in seq:
        assert s[0] == 0 and s[-2] == 1  # starts with w, ends with r
        last = None
        for instr, data in zip(s[0::2], s[1::2]):
            if instr == 0:
                last = data
            if instr == 1:
                assert data == last
    fb = f.batch(step_rng(0, 0), 4)
    assert np.array_equal(fb.loss_mask, fb.tokens == 1)


def test_task_round_trip_and_bad_descriptions():
    for task in (AutomatonTask(get_automaton("S3"), 9), DyckTask(Dyck(3, 2, 0.4), 12), FFLTask(0.9, 16)):
        again = task_from_dict(json.loads(json.dumps(task.to_dict())))
        assert again.to_dict() == task.to_dict()
    with pytest.raises(CheckpointError):
        task_from_dict({"kind": "chess"})


def test_interrupted_then_resumed_run_matches_an_uninterrupted_one(tmp_path):
    task = AutomatonTask(get_automaton("parity"), 8)
    config = TrainConfig(steps=30, batch=8, eval_every=10, eval_size=64, seed=5)
    full = train(task, TINY, config, tmp_path / "full", progress=False)
    cut = train(task, TINY, TrainConfig(**{**config.__dict__, "max_minutes": 0.0}), tmp_path / "cut", progress=False)
    assert cut["steps"] == 10 and cut["stopped_by"] == "time"
    resumed = train(task, TINY, config, tmp_path / "cut", resume=True, progress=False)
    assert resumed["steps"] == full["steps"] == 30
    a, b = load_trained(tmp_path / "full"), load_trained(tmp_path / "cut")
    for (name, x), y in zip(a.state_dict().items(), b.state_dict().values()):
        assert torch.equal(x, y), name
    assert resumed["history"][-1] == full["history"][-1] | {"wall_seconds": resumed["history"][-1]["wall_seconds"]}


def test_training_learns_and_metrics_are_written(tmp_path):
    task = AutomatonTask(get_automaton("C3"), 6)
    m = train(
        task,
        ModelShape(n_layers=1, d_model=32, n_heads=2),
        TrainConfig(steps=150, batch=32, eval_every=50, lr=3e-3, seed=0),
        tmp_path,
        progress=False,
    )
    on_disk = json.loads((tmp_path / "metrics.json").read_text())
    for key in ("task", "final_accuracy", "best_accuracy", "steps", "wall_seconds", "seed"):
        assert key in on_disk
    assert m["history"][-1]["loss"] < m["history"][0]["loss"]
    model = load_trained(tmp_path)
    assert evaluate(model, task, 64, 0)["accuracy"] == pytest.approx(m["final_accuracy"], abs=0.15)
    assert model.card.construction == "trained" and model.card.output_names == ["0", "1", "2"]


def test_a_finished_twin_is_saved_apart_from_its_optimizer_state(tmp_path):
    """model.safetensors + model.json: the evaluated weights (here the moving average), no optimizer state,
    loadable by load_model with the twin's card, giving load_trained's logits."""
    from safetensors.torch import load_file

    from sandbox_lens.interp.model.saved import load_model

    task = AutomatonTask(get_automaton("parity"), 8)
    train(
        task,
        TINY,
        TrainConfig(steps=20, batch=8, eval_every=10, eval_size=64, ema=0.9, seed=1),
        tmp_path,
        progress=False,
    )
    weights = load_file(tmp_path / "model.safetensors")
    assert not any(k.startswith(("optim.", "model.", "ema.")) for k in weights)
    assert any(k.startswith("optim.") for k in load_file(tmp_path / "checkpoint.safetensors"))
    saved, trained = load_model(tmp_path), load_trained(tmp_path)
    assert saved.card.to_dict() == trained.card.to_dict() and saved.card.construction == "trained"
    tokens = torch.from_numpy(task.batch(step_rng(9, 0), 4).tokens)
    assert torch.equal(saved(tokens), trained(tokens))
    meta = json.loads((tmp_path / "model.json").read_text())
    assert meta["dtype"] == "float32" and "dtype" not in meta["config"]


def test_checkpoint_errors(tmp_path):
    task = AutomatonTask(get_automaton("parity"), 8)
    config = TrainConfig(steps=10, batch=4, eval_every=5, eval_size=16)
    train(task, TINY, config, tmp_path, progress=False)
    with pytest.raises(CheckpointError, match="already holds"):
        train(task, TINY, config, tmp_path, progress=False)
    with pytest.raises(CheckpointError, match="different task"):
        train(AutomatonTask(get_automaton("C3"), 8), TINY, config, tmp_path, resume=True, progress=False)
    with pytest.raises(CheckpointError, match="not on the requested task"):
        load_trained(tmp_path, expect_task=DyckTask(Dyck(2, 4)).to_dict())
    weights = tmp_path / "checkpoint.safetensors"
    weights.write_bytes(weights.read_bytes()[:-7] + b"garbage")
    with pytest.raises(CheckpointError, match="checksum"):
        load_trained(tmp_path)
    with pytest.raises(CheckpointError, match="no checkpoint"):
        load_trained(tmp_path / "nothing")
    with pytest.raises(SandboxError):
        ModelShape(positional="spiral")


def test_replicates_write_a_summary(tmp_path):
    task = DyckTask(Dyck(1, 2), 8)
    s = run_sweep(
        task,
        TINY,
        TrainConfig(steps=10, batch=4, eval_every=5, eval_size=16),
        tmp_path,
        [0, 1],
        workers=2,
        progress=False,
    )
    assert s["seeds"] == [0, 1] and len(s["runs"]) == 2
    assert s["best_accuracy"] == max(r["best_accuracy"] for r in s["runs"])
    for seed in (0, 1):
        assert json.loads((tmp_path / f"seed_{seed}" / "metrics.json").read_text())["seed"] == seed
    assert json.loads((tmp_path / "summary.json").read_text())["median_best_accuracy"] == s["median_best_accuracy"]


def test_cli_train(tmp_path, interp_cli):
    def run(*argv):
        return interp_cli("train", *argv)

    r = run(
        "ffl",
        "--ffl",
        "0.5",
        "-T",
        "16",
        "--steps",
        "10",
        "--eval-every",
        "5",
        "--layers",
        "1",
        "--d-model",
        "16",
        "--out",
        str(tmp_path / "ff"),
    )
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "ff" / "metrics.json").read_text())["task"]["kind"] == "ffl"
    # the old name is accepted for one release, with a one-line deprecation warning
    r = run(
        "flipflop",
        "--flipflop",
        "0.5",
        "-T",
        "16",
        "--steps",
        "5",
        "--eval-every",
        "5",
        "--layers",
        "1",
        "--d-model",
        "16",
        "--out",
        str(tmp_path / "old"),
    )
    assert r.returncode == 0 and "interp: warning: `interp train flipflop` is now `interp train ffl`" in r.stderr
    assert json.loads((tmp_path / "old" / "metrics.json").read_text())["task"]["kind"] == "ffl"
    for argv, message in (
        (("dyck", "--out", "x"), "--dyck"),
        (("automaton", "--dyck", "2,4", "--out", "x"), "--dyck goes with `train dyck`"),
        (("automaton", "--automaton", "C2", "--seeds", "3-x", "--out", "x"), "--seeds"),
    ):
        r = run(*argv)
        assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr


def test_regularised_runs_resume_exactly(tmp_path):
    """Dropout (on blocks and embeddings), attention sharpening and a moving average: an interrupted
    run resumes onto the same masks and the same average, and ends with the same weights."""
    task = AutomatonTask(get_automaton("parity"), 8)
    config = TrainConfig(
        steps=30, batch=8, eval_every=10, eval_size=64, seed=3, dropout=0.1, embed_dropout=0.1, sharpen=0.05, ema=0.9
    )
    full = train(task, TINY, config, tmp_path / "full", progress=False)
    train(task, TINY, TrainConfig(**{**config.__dict__, "max_minutes": 0.0}), tmp_path / "cut", progress=False)
    resumed = train(task, TINY, config, tmp_path / "cut", resume=True, progress=False)
    a, b = load_trained(tmp_path / "full"), load_trained(tmp_path / "cut")
    for (name, x), y in zip(a.state_dict().items(), b.state_dict().values()):
        assert torch.equal(x, y), name
    assert resumed["final_accuracy"] == full["final_accuracy"]
    # the kept model is the moving average: its held-out accuracy is the one the run reported
    assert evaluate(a, task, 64, 3)["accuracy"] == full["final_accuracy"]


def test_sharpening_lowers_attention_entropy(tmp_path):
    from sandbox_lens.interp.model.run import attention_patterns

    task = DyckTask(Dyck(1, 3), 12)
    words = task.batch(step_rng(9, 0), 32).tokens

    def entropy(directory):
        pats = attention_patterns(load_trained(directory), words)
        return float(np.mean([-(p * np.log(np.clip(p, 1e-12, 1))).sum(-1).mean() for p in pats.values()]))

    base = TrainConfig(steps=80, batch=16, eval_every=80, eval_size=32, lr=3e-3)
    train(task, TINY, base, tmp_path / "plain", progress=False)
    train(task, TINY, TrainConfig(**{**base.__dict__, "sharpen": 1.0}), tmp_path / "sharp", progress=False)
    assert entropy(tmp_path / "sharp") < 0.8 * entropy(tmp_path / "plain")


def test_a_mixture_of_flip_flop_distributions():
    task = FFLTask([0.9, 0.98, 0.1], 64)
    assert task.name == "FFL(0.9|0.98|0.1) (T=64)"
    again = task_from_dict(json.loads(json.dumps(task.to_dict())))
    assert again.to_dict() == task.to_dict() == {"kind": "ffl", "p": [0.9, 0.98, 0.1], "length": 64}
    reads = (task.sequences(step_rng(0, 0), 600)[:, 0::2] == 1).sum(1)
    assert reads.min() <= 3 and reads.max() >= 20  # sparse (0.98) and dense (0.1) strings both occur
    with pytest.raises(SandboxError):
        FFLTask([0.9, 1.5], 64)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--dropout", "1"], "dropout must be in [0, 1)"),
        (["--ema", "1"], "ema (a decay) must be in [0, 1)"),
        (["--sharpen", "-1"], "argument --sharpen: must lie in 0..1,000,000"),
        (["--arch", "lstm", "--sharpen", "1"], "an LSTM has none"),
    ],
)
def test_bad_regulariser_settings_are_refused(tmp_path, capsys, argv, message):
    from sandbox_lens.interp.cli import main

    try:
        code = main(
            ["train", "automaton", "--automaton", "parity", "--steps", "2", "--out", str(tmp_path / "r"), *argv]
        )
    except SystemExit as e:  # a number out of the parser's range
        code = e.code
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("\n") == 1


def test_a_twin_started_from_a_construction_keeps_its_frozen_first_layer(tmp_path, capsys):
    """--init-from dyck: the twin takes the construction's shape and its exact first layer, frozen;
    only layer 2 and the read-out learn. Resuming needs no construction (the checkpoint has it all)."""
    from sandbox_lens.constructions import build
    from sandbox_lens.interp.cli import main
    from sandbox_lens.interp.model.hooked import state_dict_arrays

    argv = [
        "train",
        "dyck",
        "--dyck",
        "2,4",
        "-T",
        "12",
        "--init-from",
        "dyck",
        "--steps",
        "20",
        "--eval-every",
        "10",
        "--out",
        str(tmp_path / "t"),
    ]
    assert main(argv) == 0
    capsys.readouterr()
    model = load_trained(tmp_path / "t")
    exact = state_dict_arrays(build("dyck", Dyck(2, 4), 11))
    trained = dict(model.named_parameters())
    for name in ("embed.W_E", "pos_embed.W_pos", "blocks.0.attn.W_Q", "blocks.0.mlp.W_in"):
        assert np.array_equal(trained[name].detach().double().numpy(), np.float32(exact[name])), name
    assert not np.array_equal(trained["blocks.1.attn.W_Q"].detach().numpy(), np.float32(exact["blocks.1.attn.W_Q"]))
    config = json.loads((tmp_path / "t" / "metrics.json").read_text())["config"]
    assert config["init"] == "dyck T=11" and config["freeze"] == ["embed", "pos_embed", "blocks.0"]
    assert (
        main(
            [
                "train",
                "dyck",
                "--dyck",
                "2,4",
                "-T",
                "12",
                "--init-from",
                "dyck",
                "--layers",
                "3",
                "--out",
                str(tmp_path / "u"),
            ]
        )
        == 2
    )
    assert "construction's shape" in capsys.readouterr().err
    assert (
        main(
            [
                "train",
                "dyck",
                "--dyck",
                "2,4",
                "-T",
                "12",
                "--init-from",
                "dyck",
                "--freeze",
                "blocks.9",
                "--steps",
                "2",
                "--out",
                str(tmp_path / "v"),
            ]
        )
        == 2
    )
    assert "names no parameter" in capsys.readouterr().err


def test_random_position_shifts_train_and_resume_exactly(tmp_path):
    task = AutomatonTask(get_automaton("parity"), 8)
    shape = ModelShape(n_layers=1, d_model=16, n_heads=2, positional="sinusoidal", n_ctx=9 + 20)
    config = TrainConfig(steps=20, batch=8, eval_every=10, eval_size=32, seed=2, pos_shift=20)
    full = train(task, shape, config, tmp_path / "full", progress=False)
    train(task, shape, TrainConfig(**{**config.__dict__, "max_minutes": 0.0}), tmp_path / "cut", progress=False)
    resumed = train(task, shape, config, tmp_path / "cut", resume=True, progress=False)
    assert resumed["final_accuracy"] == full["final_accuracy"]
    with pytest.raises(SandboxError, match="needs a context of at least 29"):
        train(task, ModelShape(n_layers=1, d_model=16, n_heads=2, n_ctx=20), config, tmp_path / "short", progress=False)


def test_uniform_attention_keeps_query_and_key_weights_at_zero(tmp_path, interp_run):
    """`--attention uniform`: every head's W_Q, W_K, b_Q, b_K start at 0 and stay there (frozen); each query then
    attends equally to BOS and the prefix. An LSTM has no such weights: one line, nothing written."""
    from sandbox_lens.interp.experiments.uniform_dyck import departure_from_uniform
    from sandbox_lens.interp.train import load_trained
    from sandbox_lens.interp.train.twin import query_key_parameters

    code, _, err = interp_run(
        "train", "dyck", "--dyck", "2,2", "--length", "12", "--pos", "none", "--attention", "uniform",
        "--steps", "30", "--eval-every", "10", "--out", tmp_path / "u",
    )  # fmt: skip
    assert code == 0, err
    model = load_trained(tmp_path / "u")
    qk = query_key_parameters(model)
    assert len(qk) == 4 * model.cfg.n_layers and all(float(p.detach().abs().max()) == 0.0 for _, p in qk)
    assert departure_from_uniform(model, [[0, 1, 0, 1], [0, 0, 1, 1]]) < 1e-6
    code, _, err = interp_run(
        "train", "dyck", "--dyck", "2,2", "--arch", "lstm", "--attention", "uniform", "--out", tmp_path / "l"
    )
    assert code == 2 and "an LSTM has none" in err and not (tmp_path / "l").exists()


def test_a_training_symbol_distribution_draws_the_words(tmp_path, interp_run):
    """`--symbol-probs`: the training words follow the given law (the flip-flop automaton with p(⊥) = 0.9); the
    task's dict says so and reloads; the uniform default writes no key; a law of the wrong size is refused."""
    a = get_automaton("flipflop")
    sparse = AutomatonTask(a, 64, probs=(0.05, 0.05, 0.9))
    words = sparse.batch(step_rng(0, 1), 256).tokens[:, 1:] - 1
    share = np.bincount(words.ravel(), minlength=3) / words.size
    assert share == pytest.approx([0.05, 0.05, 0.9], abs=0.01)  # 16384 symbols: a binomial s.e. of 0.002
    uniform = AutomatonTask(a, 64)
    assert "probs" not in uniform.to_dict() and sparse.to_dict()["probs"] == [0.05, 0.05, 0.9]
    assert task_from_dict(json.loads(json.dumps(sparse.to_dict()))).probs == (0.05, 0.05, 0.9)
    assert np.array_equal(
        uniform.batch(step_rng(0, 1), 8).tokens, AutomatonTask(a, 64, probs=None).batch(step_rng(0, 1), 8).tokens
    )
    for bad in ((0.5, 0.5), (0.5, 0.6, -0.1), (0.2, 0.2, 0.2)):
        with pytest.raises(SandboxError, match="symbol distribution"):
            AutomatonTask(a, 8, probs=bad)
    code, _, err = interp_run(
        "train", "automaton", "--automaton", "flipflop", "--symbol-probs", "0.25,0.25,0.5", "--length", "4",
        "--steps", "20", "--eval-every", "10", "--out", tmp_path / "f",
    )  # fmt: skip
    assert code == 0, err
    assert load_trained(tmp_path / "f").card.task["probs"] == [0.25, 0.25, 0.5]
    code, _, err = interp_run(
        "train", "automaton", "--automaton", "flipflop", "--symbol-probs", "1,0", "--out", tmp_path / "g"
    )
    assert code == 2 and "--symbol-probs" in err and "3 symbols" in err and not (tmp_path / "g").exists()


def test_an_observation_of_the_state_is_what_the_twin_learns(tmp_path, interp_run):
    """`--observe`: the targets are the labels of the states (C4's "count ≡ 0 mod 4"); the output vocabulary has
    one entry per label; the dict reloads and the default writes no key; evaluation scores the labels; the
    high-level models and the skyline (which output states) refuse such a twin; bad maps are refused."""
    a = get_automaton("C4")
    seen = AutomatonTask(a, 8, observe=(1, 0, 0, 0))
    plain = AutomatonTask(a, 8)
    b_seen, b_plain = seen.batch(step_rng(0, 2), 16), plain.batch(step_rng(0, 2), 16)
    assert np.array_equal(b_seen.tokens, b_plain.tokens)
    assert np.array_equal(b_seen.targets[:, 1:], (b_plain.targets[:, 1:] == 0).astype(int))
    assert seen.d_vocab_out == 2 and plain.d_vocab_out == 4 and seen.token_layout().output_names == ["0", "1"]
    assert "observe" not in plain.to_dict() and task_from_dict(json.loads(json.dumps(seen.to_dict()))).observe == (
        1,
        0,
        0,
        0,
    )
    for bad in ((1, 0, 0), (0, 0, 0, 0), (0, 2, 0, 2), (1, 0, 0, -1)):
        with pytest.raises(SandboxError, match="observation"):
            AutomatonTask(a, 8, observe=bad)
    code, _, err = interp_run(
        "train", "automaton", "--automaton", "C4", "--observe", "1,0,0,0", "--length", "4",
        "--steps", "30", "--eval-every", "10", "--out", tmp_path / "o",
    )  # fmt: skip
    assert code == 0, err
    twin = load_trained(tmp_path / "o")
    assert twin.cfg.d_vocab_out == 2 and skyline(twin, 4) is None
    words = np.random.default_rng(0).integers(2, size=(64, 4))
    row = score_automaton(twin, twin.card.task, automaton_shifts(a, 4)[0], words)
    labels = (a.run(words) == 0).astype(int)
    assert row["accuracy"] == pytest.approx(float((predict(twin, words) == labels).mean()))
    with pytest.raises(SandboxError, match="observation of the state"):
        StateModel.of_card(twin.card)
    code, _, err = interp_run("align", "--run", tmp_path / "o", "--out", tmp_path / "al")
    assert code == 2 and "observation" in err and not (tmp_path / "al").exists()
    code, _, err = interp_run("train", "automaton", "--automaton", "C4", "--observe", "1,0", "--out", tmp_path / "b")
    assert code == 2 and "--observe" in err and "4 states" in err and not (tmp_path / "b").exists()


def test_a_periodic_word_law_mixes_the_repeated_word_into_the_symbol_law(tmp_path, interp_run):
    """`--periodic WORD[:SHARE]` (the thesis's (abab)* laws, Fig. 3.18): a share of the words is WORD repeated, the
    rest the symbol law's own words (the same draws as without the option); the dict reloads and the default writes
    no key; the (abab)* recogniser runs the thesis's example; bad words and shares are refused in one line."""
    a = get_automaton("abab")
    assert "".join(map(str, a.run(["ab".index(c) for c in "abababaaabab"]))) == "012301244444"
    half, always, plain = (
        AutomatonTask(a, 9, periodic=((0, 1), 0.5)),
        AutomatonTask(a, 9, periodic=([0, 1], 1.0)),
        AutomatonTask(a, 9),
    )
    b_half, b_plain = half.batch(step_rng(0, 4), 400), plain.batch(step_rng(0, 4), 400)
    ab = np.array([1, 2] * 4 + [1])  # tokens: a = 1, b = 2
    repeated = (b_half.tokens[:, 1:] == ab).all(axis=1)
    assert 0.4 < repeated.mean() < 0.6
    assert np.array_equal(b_half.tokens[~repeated], b_plain.tokens[~repeated])  # the rest: the symbol law's words
    assert (always.batch(step_rng(1, 0), 50).tokens[:, 1:] == ab).all()
    assert "periodic" not in plain.to_dict()
    back = task_from_dict(json.loads(json.dumps(half.to_dict())))
    assert back.periodic == ((0, 1), 0.5) and "(ab)* with probability 0.5" in back.name
    for bad, message in (
        (((0, 2), 0.5), "symbols"),
        (((), 0.5), "symbols"),
        (((0, 1), 0.0), "share"),
        ((0, 1), "word law"),
    ):
        with pytest.raises(SandboxError, match=message):
            AutomatonTask(a, 9, periodic=bad)
    with pytest.raises(SandboxError, match="illegal"):  # a Dyck stack cannot close what it never opened
        AutomatonTask(get_automaton("dyck1-depth2"), 6, periodic=((1,), 1.0))
    code, _, err = interp_run(
        "train", "automaton", "--automaton", "abab", "--observe", "0,0,0,1,0", "--periodic", "a,b:0.5",
        "--length", "8", "--steps", "20", "--eval-every", "10", "--out", tmp_path / "p",
    )  # fmt: skip
    assert code == 0, err
    assert load_trained(tmp_path / "p").card.task["periodic"] == {"word": [0, 1], "share": 0.5}
    for text, message in (("a,c", "not in abab's alphabet"), ("a,b:2", "in (0, 1]"), ("a,b:x", "a number")):
        code, _, err = interp_run(
            "train", "automaton", "--automaton", "abab", "--periodic", text, "--out", tmp_path / "q"
        )
        assert code == 2 and message in err and err.count("\n") == 1 and not (tmp_path / "q").exists()


def test_final_state_supervision_reads_only_the_last_position(tmp_path, interp_run):
    """`--supervision final`: the loss and the accuracy read the state after the last symbol only; the task's dict
    says so and reloads; the default writes no key (older cards keep their bits); a Dyck run refuses the option."""
    a = get_automaton("S3")
    every, final = AutomatonTask(a, 6), AutomatonTask(a, 6, "final")
    b_every, b_final = every.batch(step_rng(0, 3), 8), final.batch(step_rng(0, 3), 8)
    assert np.array_equal(b_every.tokens, b_final.tokens) and np.array_equal(b_every.targets, b_final.targets)
    assert b_final.loss_mask[:, -1].all() and not b_final.loss_mask[:, :-1].any()
    assert np.array_equal(b_final.score_mask, b_final.loss_mask)
    assert "supervision" not in every.to_dict() and final.to_dict()["supervision"] == "final"
    assert task_from_dict(json.loads(json.dumps(final.to_dict()))).supervision == "final"
    with pytest.raises(SandboxError, match="supervision"):
        AutomatonTask(a, 6, "sometimes")
    code, _, err = interp_run(
        "train", "automaton", "--automaton", "random3-2-1", "--supervision", "final", "--length", "4",
        "--steps", "20", "--eval-every", "10", "--out", tmp_path / "f",
    )  # fmt: skip
    assert code == 0, err
    assert load_trained(tmp_path / "f").card.task["supervision"] == "final"
    code, _, err = interp_run("train", "dyck", "--dyck", "2,2", "--supervision", "final", "--out", tmp_path / "d")
    assert code == 2 and "goes with `train automaton`" in err and not (tmp_path / "d").exists()


@pytest.mark.parametrize("length,positions", [(1, [1]), (6, [1, 2, 4, 6]), (8, [1, 2, 4, 8]), (9, [1, 2, 4, 8, 9])])
def test_powers_supervision_reads_the_states_after_1_2_4_symbols_and_the_last(length, positions):
    """`--supervision powers`: a mixture of 1-, 2-, 4-, …, T-fold compositions, each read on its final state."""
    from sandbox_lens.interp.tasks.batches import supervised_powers

    assert supervised_powers(length) == positions
    batch = AutomatonTask(get_automaton("S3"), length, "powers").batch(step_rng(0, 1), 4)
    assert [int(t) for t in np.flatnonzero(batch.loss_mask[0])] == positions and batch.loss_mask.all(
        axis=0
    ).sum() == len(positions)
    assert np.array_equal(batch.score_mask, batch.loss_mask)
    task = AutomatonTask(get_automaton("S3"), length, "powers")
    assert task_from_dict(json.loads(json.dumps(task.to_dict()))).supervision == "powers" and "1, 2, 4" in task.name
