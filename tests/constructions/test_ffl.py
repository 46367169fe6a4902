"""The flip-flop language: Proposition 3's construction, its verifier, the CLI, and `interp compare ffl`."""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sandbox_lens.constructions.ffl import MAX_LENGTH, build_ffl
from sandbox_lens.interp.cli import main
from sandbox_lens.interp.compare import compare
from sandbox_lens.interp.compare.analyse import comparison_for
from sandbox_lens.interp.compare.ffl import FFLComparison
from sandbox_lens.interp.errors import ConstructionError, LengthError
from sandbox_lens.interp.model.hooked import to_hooked
from sandbox_lens.interp.tasks.catalogue import get_automaton
from sandbox_lens.interp.tasks.dyck import Dyck
from sandbox_lens.interp.tasks.ffl import all_ffl_prefixes, read_targets
from sandbox_lens.interp.train import ModelShape, TrainConfig, train
from sandbox_lens.interp.verify import verify

W, R, I, ZERO, ONE = range(5)


def test_all_prefixes_are_every_valid_flip_flop_prefix():
    assert [len(all_ffl_prefixes(k)) for k in (1, 2, 3, 4)] == [1, 2, 6, 10]  # w; w0 w1; w0w w0i w0r …
    words = all_ffl_prefixes(7)  # 4 pairs, the last one cut after its instruction
    assert words.shape == (2 * 5**2 * 3, 7) and len({w.tobytes() for w in words}) == len(words)
    assert (
        (words[:, 0] == W).all()
        and np.isin(words[:, 0::2], [W, R, I]).all()
        and np.isin(words[:, 1::2], [ZERO, ONE]).all()
    )
    written, reads = read_targets(words)
    data_after_read = np.zeros_like(reads)
    data_after_read[:, 1:] = reads[:, :-1]
    assert (
        words[data_after_read] == np.roll(written, 1, axis=1)[data_after_read]
    ).all()  # reads repeat the latest write


@pytest.mark.parametrize("length", [5, 64, 512])
def test_proposition_3_is_exact_in_float32(length):
    r = verify(build_ffl(None, length), samples=100 if length > 64 else 300)
    assert r.exact and r.dtype == "float32" and not r.mismatches
    assert r.exhaustive_upto == min(length, 14)
    assert set(r.details["bands"]) == {
        f"all prefixes of length {min(length, 14)}",
        "FFL(0.8)",
        "FFL(0.98) sparse",
        "FFL(0.1) dense",
        "one early write; overridden late",
    }
    assert all(b["reads"] > 0 and b["accuracy"] == 1.0 for b in r.details["bands"].values())
    assert r.shape["n_layers"] == 2 and r.shape["n_heads"] == 1 and r.shape["attention_layers"] == 2


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([W, R, I]), st.sampled_from([ZERO, ONE])), min_size=1, max_size=40))
def test_any_flip_flop_string_is_read_correctly(pairs):
    seq = np.array([W, ZERO] + [x for pair in pairs for x in pair])
    written, reads = read_targets(seq)
    seq[1:][reads[0, :-1]] = written[0, :-1][reads[0, :-1]]  # make every read consistent
    model = to_hooked(build_ffl(None, 96))
    import torch

    pred = model(torch.from_numpy(seq[None]))[0].argmax(-1).numpy()
    written, reads = read_targets(seq)
    assert (pred[reads[0]] == written[0][reads[0]]).all()


def test_the_verifier_catches_a_broken_model():
    spec = build_ffl(None, 64)
    spec.W_pos = spec.W_pos[::-1].copy()  # recency becomes primacy: layer 2 reads the FIRST write
    r = verify(spec, samples=50)
    assert not r.exact and r.accuracy < 0.9 and r.mismatches


def test_refusals():
    with pytest.raises(LengthError, match="4096"):
        build_ffl(None, MAX_LENGTH + 1)
    with pytest.raises(LengthError):
        build_ffl(None, 1)
    with pytest.raises(ConstructionError, match="memory"):
        build_ffl(Dyck(2, 4), 64)
    with pytest.raises(ConstructionError, match="models the ffl task, not an automaton"):
        verify(build_ffl(None, 8), get_automaton("parity"))
    with pytest.raises(LengthError, match="built for length 8"):
        verify(build_ffl(None, 8), length=6)
    with pytest.raises(ConstructionError, match="bands apply to Dyck"):
        verify(build_ffl(None, 8), bands=[(2, 4)])


def test_cli_builds_and_verifies(tmp_path, capsys):
    assert main(["build", "ffl", "-T", "32", "--out", str(tmp_path / "m")]) == 0
    assert "the flip-flop language" in capsys.readouterr().out
    assert main(["verify", "--model", str(tmp_path / "m"), "--samples", "50", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["exact"] and out["accuracy"] == 1.0 and out["construction"] == "ffl" and out["length"] == 32


def test_cli_refusals(tmp_path, capsys):
    assert main(["build", "ffl", "--automaton", "flipflop", "-T", "32", "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert "takes no automaton" in err and err.count("\n") == 1
    assert main(["build", "memory", "-T", "8", "--out", str(tmp_path / "y")]) == 2
    assert "--automaton NAME" in capsys.readouterr().err
    assert main(["verify", "ffl", "-T", "5000"]) == 2
    assert "2..4096" in capsys.readouterr().err
    assert main(["compare", "ffl", "--construction", "memory", "--out", str(tmp_path / "c")]) == 2
    assert "one construction, ffl" in capsys.readouterr().err
    assert main(["compare", "ffl", "-T", "33", "--out", str(tmp_path / "c")]) == 2
    assert "even length" in capsys.readouterr().err
    assert not any((tmp_path / d).exists() for d in ("x", "y", "c"))


def test_comparison_inputs_and_references():
    comp = comparison_for("ffl", length=16)
    assert isinstance(comp, FFLComparison) and comp.task.n_ctx == 15
    word = np.array([W, ONE, I, ZERO, R, ONE, W, ZERO, I, ONE, R])
    data = comp.inputs(None, word[None])
    assert data.score_mask[0].tolist() == [t == R for t in word]
    assert data.targets[0][word == R].tolist() == [ONE, ZERO]
    bit, mask = data.latents["last written bit"]
    assert bit[0][mask[0]].tolist() == [1, 1, 1, 1, 1, 0, 0, 0, 0]  # not probed before the first bit, nor on a w
    assert data.latents["after w"][0][0].tolist() == [0, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0]
    refs = comp.references(word)
    assert all(r.shape == (11, 12) and np.allclose(r.sum(1), 1.0) for r in refs.values())
    assert refs["latest write"][4].argmax() == 2 and refs["latest write"][10].argmax() == 8  # key = 1 + position
    assert refs["latest w"][10].argmax() == 7 and refs["itself"][4].argmax() == 5
    assert np.allclose(refs["all writes"][10, [2, 8]], 0.5)  # the dense solution: both written bits
    assert comp.scored_queries(word).tolist() == [4, 10]
    with pytest.raises(ConstructionError, match="ffl"):
        comp.constructions(["memory"], 0)


# slow: a twin trained and compared with every section (~1 min on 2 cores)
@pytest.mark.slow
def test_compare_ffl_finds_proposition_3(tmp_path):
    comp = comparison_for("ffl", length=16)
    train(
        comp.task,
        ModelShape(n_layers=2, d_model=16, n_heads=2, d_mlp=32),
        TrainConfig(steps=40, batch=16, eval_every=20, eval_size=64, warmup=5, lr=3e-3),
        tmp_path / "twin",
    )
    compare(
        comp, tmp_path, samples=60, examples=4, mask_steps=10, mask_sparsities=(1.0,), causal_pairs=32, progress=False
    )
    m = json.loads((tmp_path / "metrics.json").read_text())
    assert m["kind"] == "ffl" and m["models"]["ffl"]["accuracy"] == 1.0
    bit = m["causal"]["variables"]["bit"]["constructions"]["ffl"]  # the causal section, for the flip-flop's bit
    assert [s["iia"] for s in bit["named_sites"]] == [1.0, 1.0, 0.0] and bit["das_verdict"]["verdict"]
    probes = m["probes"]["ffl"]
    assert probes["after w"]["first_readable"] == "blocks.0.hook_resid_mid"  # layer 1's flag
    assert probes["last written bit"]["first_readable"] == "blocks.1.hook_resid_mid"  # layer 2's copy
    heads = m["attention"]["ffl"]
    assert heads["L0H0"]["best_reference"] == "itself"  # at a read, the previous token is data, not w
    assert heads["L1H0"]["best_reference"] == "latest write"
    assert heads["L1H0"]["references"]["latest write"]["tv_distance"] < 0.01
    ab = m["ablation"]["ffl"]
    assert max(ab["zero"].values()) <= ab["chance"] + 0.05  # both heads are essential
    assert m["pruning"]["ffl"]["greedy"]["surviving"] == ["L0H0", "L1H0"]
    assert "(no BOS)" in (tmp_path / "report.html").read_text()


@pytest.mark.slow
def test_proposition_3_is_exact_at_the_maximum_length():
    r = verify(build_ffl(None, MAX_LENGTH), samples=100)  # ≈ 3 minutes on 2 cores
    assert r.exact and r.checked > 100_000 and r.checked_unit == "reads"
