import json
import math

import numpy as np
import pytest
import torch

from sandbox_lens.constructions import build
from sandbox_lens.interp.errors import CheckpointError, ConstructionError
from sandbox_lens.interp.model.card import TokenIO
from sandbox_lens.interp.model.hooked import state_dict_arrays, to_hooked
from sandbox_lens.interp.model.saved import load_model, save_model
from sandbox_lens.interp.model.spec import MLP, Block, ConstructionSpec, Head, Layout
from sandbox_lens.interp.tasks.catalogue import get_automaton
from sandbox_lens.interp.verify import verify


def test_layout_names_and_labels():
    L = Layout()
    L.add("R", 3, ["q0", "q1", "q2"])
    L.add("pos", 2, ["cos", "sin"])
    L.add("one")
    assert L["R"] == slice(0, 3) and L.index("pos", 1) == 4 and L.d_model == 6
    assert L.labels() == ["R:q0", "R:q1", "R:q2", "pos:cos", "pos:sin", "one"]
    assert list(L.vector({("R", 1): 2.0, "one": -1.0})) == [0, 2, 0, 0, 0, -1]
    with pytest.raises(ConstructionError, match="defined twice"):
        L.add("R", 1)
    with pytest.raises(ConstructionError, match="unknown residual subspace"):
        L.index("X")
    with pytest.raises(ConstructionError, match="out of range"):
        L.index("R", 3)
    assert [L.locate(i) for i in range(L.d_model)] == [("R", 0), ("R", 1), ("R", 2), ("pos", 0), ("pos", 1), ("one", 0)]
    with pytest.raises(ConstructionError, match="in no subspace"):
        L.locate(6)


def _toy_spec() -> ConstructionSpec:
    """A two-head toy whose scores and outputs we can compute by hand."""
    L = Layout()
    L.add("a")
    L.add("b")
    L.add("c", 2)
    h0 = Head(L, "h0").qk("a", "b", 3.0).qk("b", {"a": 1.0, "b": 1.0}).copy("c", "c", 0.5)
    h1 = Head(L, "h1").ov("a", ("c", 1))
    mlp = MLP(L).unit({"a": 2.0}, -1.0, {("c", 0): 1.0}).out_bias({"b": 0.25})
    rng = np.random.default_rng(0)
    return ConstructionSpec(
        name="toy",
        theorem="none",
        layout=L,
        W_E=rng.normal(size=(3, 4)),
        W_pos=rng.normal(size=(5, 4)),
        blocks=[Block([h0, h1], mlp, "toy block"), Block([], None, "empty")],
        W_U=rng.normal(size=(4, 2)),
        b_U=np.zeros(2),
        input_tokens=["x", "y", "z"],
        output_names=["p", "q"],
        io=TokenIO(prefix=(), symbol_tokens=(0, 1, 2)),
        max_length=5,
        task={"kind": "automaton", "automaton": {}},
    )


def _reference_forward(spec: ConstructionSpec, tokens: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Plain numpy forward pass of the spec (true scores), independent of TransformerLens."""
    x = spec.W_E[tokens] + spec.W_pos[: len(tokens)]
    scores0 = None
    for block in spec.blocks:
        out = np.zeros_like(x)
        for h, head in enumerate(block.heads):
            wq, wk, wv, wo = head.matrices()
            s = (x @ wq) @ (x @ wk).T
            s = np.where(np.tril(np.ones_like(s)) > 0, s, -np.inf)
            if scores0 is None and h == 0:
                scores0 = s
            a = np.exp(s - s.max(1, keepdims=True))
            a /= a.sum(1, keepdims=True)
            out += a @ (x @ wv) @ wo
        x = x + out
        if block.mlp is not None:
            w_in, b_in, w_out, b_out = block.mlp.matrices()
            x = x + np.maximum(x @ w_in + b_in, 0) @ w_out + b_out
    return x @ spec.W_U + spec.b_U, scores0


@pytest.mark.parametrize("use_attn_scale", [True, False])
def test_export_matches_reference_forward_with_or_without_attn_scale(use_attn_scale):
    spec = _toy_spec()
    assert spec.d_head == 2 and spec.n_heads == 2 and spec.d_mlp == 1
    assert (spec.n_layers, spec.attention_layers) == (2, 1)
    model = to_hooked(spec, dtype="float64", use_attn_scale=use_attn_scale)
    tokens = [0, 2, 1, 1, 0]
    ref_logits, ref_scores = _reference_forward(spec, tokens)
    with torch.inference_mode():
        logits, cache = model.run_with_cache(torch.tensor([tokens]))
    assert np.allclose(logits[0].numpy(), ref_logits, atol=1e-10)
    got = cache["blocks.0.attn.hook_attn_scores"][0, 0].numpy()
    mask = np.isfinite(ref_scores)
    assert np.allclose(got[mask], ref_scores[mask], atol=1e-10)


def test_strict_load_keeps_weights_unprocessed():
    spec = build("prefix_scan", get_automaton("S3"), 8)
    model = to_hooked(spec, dtype="float64")
    arrays = state_dict_arrays(spec)
    sd = model.state_dict()
    for name, arr in arrays.items():
        assert np.array_equal(sd[name].numpy(), arr), name
    # W_Q carries the √d_head temperature, W_K does not
    wq, wk, _, _ = spec.blocks[0].heads[0].matrices()
    assert np.allclose(arrays["blocks.0.attn.W_Q"][0, :, : wq.shape[1]], wq * math.sqrt(spec.d_head))
    assert np.array_equal(arrays["blocks.0.attn.W_K"][0, :, : wk.shape[1]], wk)


def test_spec_shape_checks():
    spec = _toy_spec()
    with pytest.raises(ConstructionError, match="W_E has shape"):
        ConstructionSpec(**{**spec.__dict__, "W_E": np.zeros((2, 4))})
    with pytest.raises(ConstructionError, match="n_ctx"):
        ConstructionSpec(**{**spec.__dict__, "max_length": 9})
    other = Layout()
    other.add("z", 4)
    with pytest.raises(ConstructionError, match="another layout"):
        ConstructionSpec(**{**spec.__dict__, "blocks": [Block([Head(other)], None)]})
    with pytest.raises(ConstructionError, match="cannot copy"):
        Head(spec.layout).copy("a", "c")


def test_save_load_round_trip(tmp_path):
    model = to_hooked(build("prefix_scan", get_automaton("parity"), 8))
    save_model(model, tmp_path / "m")
    loaded = load_model(tmp_path / "m", expect_construction="prefix_scan")
    tokens = torch.tensor([[2, 2, 2, 2, 0, 1, 1, 0, 1, 0, 0, 1]])
    assert torch.equal(model(tokens), loaded(tokens))
    assert loaded.card.to_dict() == model.card.to_dict()
    assert not list(tmp_path.glob("m/.*tmp"))  # no temporary files left behind


def test_load_rejects_corrupt_and_mismatched_files(tmp_path):
    model = to_hooked(build("memory", get_automaton("flipflop"), 8))
    d = save_model(model, tmp_path / "m")
    with pytest.raises(CheckpointError, match="not 'prefix_scan'"):
        load_model(d, expect_construction="prefix_scan")
    with pytest.raises(CheckpointError, match="missing"):
        load_model(tmp_path / "nothing")
    weights = (d / "model.safetensors").read_bytes()
    (d / "model.safetensors").write_bytes(weights[:-7] + b"garbage")
    with pytest.raises(CheckpointError, match="corrupt"):
        load_model(d)
    (d / "model.safetensors").write_bytes(weights)
    meta = json.loads((d / "model.json").read_text())
    edited = dict(meta, card=dict(meta["card"], construction="dyck"))
    (d / "model.json").write_text(json.dumps(edited))
    with pytest.raises(CheckpointError, match="edited after it was saved"):
        load_model(d)
    meta["config"]["d_model"] += 1
    meta["card_sha256"] = "0" * 64
    (d / "model.json").write_text(json.dumps(meta))
    with pytest.raises(CheckpointError, match="edited after it was saved"):
        load_model(d)
    meta["format_version"] = 3  # a format-3 file has no card checksum: the weights' shapes still catch it
    del meta["card_sha256"]
    (d / "model.json").write_text(json.dumps(meta))
    with pytest.raises(CheckpointError, match="shape"):
        load_model(d)
    (d / "model.json").write_text("{truncated")
    with pytest.raises(CheckpointError, match="malformed JSON"):
        load_model(d)
    for hostile, message in (
        ('{"format": "sandbox-lens-model", "format_version": ' + "9" * 5000 + "}", "a number of 5000 characters"),
        ("[" * 5000 + "]" * 5000, "too deep"),
        (json.dumps(dict(meta, format_version=3, config=[])), "config: .* is not of type 'object'"),
        (json.dumps(dict(meta, format_version=3, card=dict(meta["card"], max_length="8"))), "card/max_length"),
    ):
        (d / "model.json").write_text(hostile)
        with pytest.raises(CheckpointError, match=message):
            load_model(d)


def test_a_save_that_fails_midway_leaves_the_old_model_whole(tmp_path, monkeypatch):
    """A full disk while the new files are written replaces neither: the old model loads and verifies."""
    import errno

    import sandbox_lens.interp.files as files

    d = save_model(to_hooked(build("prefix_scan", get_automaton("parity"), 8)), tmp_path / "m")
    before = {p.name: p.read_bytes() for p in d.iterdir()}
    calls = []

    def full_disk(fd):
        calls.append(fd)
        if len(calls) == 2:  # the weights' temporary is written; model.json's is not
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(files.os, "fsync", full_disk)
    with pytest.raises(OSError, match="No space"):
        save_model(to_hooked(build("prefix_scan", get_automaton("C3"), 8)), d)
    monkeypatch.undo()
    assert {p.name: p.read_bytes() for p in d.iterdir()} == before  # no temporary left, nothing replaced
    assert verify(load_model(d), samples=20).exact


def test_attention_patterns_skip_blocks_and_heads_that_write_nothing():
    from sandbox_lens.interp.model.run import attention_patterns

    spec = _toy_spec()
    spec.blocks.append(Block([Head(spec.layout, "silent").qk("a", "b")], None, "QK only, writes nothing"))
    model = to_hooked(spec)
    patterns = {head: p[0] for head, p in attention_patterns(model, [0, 1, 2]).items()}
    assert set(patterns) == {(0, 0), (0, 1)}
    assert all(p.shape == (3, 3) for p in patterns.values())


def test_models_saved_in_the_first_format_still_load(tmp_path):
    """Format 1 kept the automaton beside an empty task (and called the flip-flop language "flipflop")."""
    import json

    from sandbox_lens.constructions import build_model

    for name, source, kind in (("memory", get_automaton("flipflop"), "automaton"), ("ffl", None, "ffl")):
        save_model(build_model(name, source, 8), tmp_path / name)
        meta_path = tmp_path / name / "model.json"
        meta = json.loads(meta_path.read_text())
        card = meta["card"]
        if kind == "automaton":
            card["automaton"], card["task"] = card["task"]["automaton"], {}
        else:
            card["automaton"], card["task"] = {}, {"kind": "flipflop"}
        meta["format_version"] = 1
        meta["config"]["dtype"] = meta.pop("dtype")  # formats 1 and 2 kept it inside the config
        meta_path.write_text(json.dumps(meta))
        model = load_model(tmp_path / name)
        assert model.card.kind == kind
        assert verify(model, samples=20).exact


PLAIN_TL = """
import json, sys, torch
from safetensors.torch import load_file
from transformer_lens import HookedTransformer, HookedTransformerConfig
meta = json.load(open(sys.argv[1] + "/model.json"))
model = HookedTransformer(HookedTransformerConfig(**meta["config"], dtype=getattr(torch, meta["dtype"])))
keys = model.load_state_dict(load_file(sys.argv[1] + "/model.safetensors"), strict=False)  # buffers: TL's own
tokens = torch.tensor(json.loads(sys.argv[2]))
print(json.dumps({"logits": model(tokens).tolist(), "missing": keys.missing_keys, "unexpected": keys.unexpected_keys,
                  "interp": any(m.startswith("sandbox_lens") for m in sys.modules)}))
"""


def test_a_saved_model_loads_in_plain_transformer_lens(tmp_path):
    """The README's lines: no sandbox-lens import, the same predictions (not load_and_process_state_dict,
    which folds and centres the weights)."""
    import json
    import subprocess
    import sys

    from sandbox_lens.interp.cli import main
    from sandbox_lens.interp.model.run import logits
    from sandbox_lens.interp.model.saved import load_model

    assert main(["build", "modular_counter", "--automaton", "parity", "-T", "8", "--out", str(tmp_path / "m")]) == 0
    model = load_model(tmp_path / "m")
    tokens = model.card.io.encode(np.random.default_rng(0).integers(2, size=(3, 8)))
    out = subprocess.run(
        [sys.executable, "-c", PLAIN_TL, str(tmp_path / "m"), json.dumps(tokens.tolist())],
        capture_output=True,
        text=True,
        check=True,
    )
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["interp"] is False
    assert got["unexpected"] == [] and all(k.endswith((".mask", ".IGNORE")) for k in got["missing"])
    expected = next(iter(logits(model, tokens)))[1]
    assert np.array_equal(np.asarray(got["logits"], dtype=np.float32), expected.float().numpy())


def test_the_back_end_follows_the_installed_transformer_lens(monkeypatch):
    import importlib.metadata

    from sandbox_lens.interp.errors import ConstructionError
    from sandbox_lens.interp.model.hooked import backend

    assert backend() == "HookedTransformer"  # this venv pins TransformerLens 3.9
    for version, expected in (("4.3.0", "TransformerBridge"), ("3.9.1", "HookedTransformer")):
        monkeypatch.setattr(importlib.metadata, "version", lambda name, v=version: v)
        assert backend() == expected
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "2.16.0")
    with pytest.raises(ConstructionError, match="not supported"):
        backend()
