"""The back end at hand (TransformerBridge under `make test-tl4`) against TransformerLens 3.9's numbers.

Under `make test-tl4` this runs on TransformerLens 4.x with ``SANDBOX_LENS_BACKEND_REFERENCE`` naming
what ``tests/model/backend_reference.py write`` left there on 3.9: logits and probe activations of every
construction at two lengths, a saved model, a small `compare parity` and a forward-pass time. Without
the reference (plain `make test`) the file is skipped: the rest of the suite covers 3.9.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from backend_reference import (  # noqa: E402
    CASES,
    LENGTHS,
    TIMED,
    activations,
    build_case,
    circuit_analyses,
    forward_seconds,
    small_compare,
    words_for,
)

from sandbox_lens.interp.model.hooked import backend, to_hooked  # noqa: E402
from sandbox_lens.interp.model.saved import load_model, save_model  # noqa: E402
from sandbox_lens.interp.verify import verify  # noqa: E402

REFERENCE = os.environ.get("SANDBOX_LENS_BACKEND_REFERENCE")
# `make test` covers all of this on 3.9 already; this file is `make test-tl4`'s
pytestmark = pytest.mark.skipif(not REFERENCE, reason="the back-end suite runs under `make test-tl4`")
needs_reference = pytest.mark.skipif(not REFERENCE, reason="no 3.9 reference (run by `make test-tl4`)")
ROOT = Path(__file__).resolve().parents[2]


def _report(line: str) -> None:
    """Numbers worth reading in the run's log (pytest -q hides prints of passing tests)."""
    if REFERENCE:
        with open(Path(REFERENCE) / "measured.txt", "a") as f:
            f.write(line + "\n")


@needs_reference
@pytest.mark.parametrize("case", [(c, T) for c in CASES for T in LENGTHS], ids=lambda c: f"{c[0][0]}-T{c[1]}")
def test_logits_and_probe_activations_match_hooked_transformer(case):
    (name, construction, source, options), T = case
    ref = np.load(Path(REFERENCE) / f"{name}-T{T}.npz")
    model = to_hooked(build_case(construction, source, options, T))
    tokens = words_for(model)
    assert (tokens == ref["tokens"]).all()
    logits, acts = activations(model, tokens)
    diff = float(np.abs(logits - ref["logits"]).max())
    # float32 kernels may sum in another order: differences are rounding of the largest value in play
    scale = max(
        [float(np.abs(ref["logits"]).max()), 1.0]
        + [float(np.abs(ref[k]).max()) for k in ref.files if k.startswith("act:")]
    )
    _report(
        f"{backend()} vs HookedTransformer {name} T={T}: max |Δ logits| {diff:.2e} (largest activation {scale:.1e})"
    )
    assert diff <= 1e-5 * scale
    assert (logits.argmax(-1) == ref["logits"].argmax(-1)).all()
    for hook, value in acts.items():
        want = ref[f"act:{hook}"]
        assert value.shape == want.shape, hook
        assert float(np.abs(value - want).max()) <= 1e-5 * scale, hook


@pytest.mark.parametrize("case", CASES, ids=lambda c: c[0])
def test_every_construction_is_exact_here(case):
    name, construction, source, options = case
    r = verify(to_hooked(build_case(construction, source, options, 32)), samples=100)
    assert r.exact, (name, r.accuracy)
    assert r.to_dict()["backend"] == backend()


def test_verify_json_reports_the_backend_and_accuracy_one():
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "sandbox_lens.interp",
            "--threads",
            "1",
            "verify",
            "prefix_scan",
            "--automaton",
            "S5",
            "--length",
            "256",
            "--samples",
            "200",
            "--forward",
            "model",  # a construction built on the spot runs without TransformerLens unless asked (backend "bare")
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["accuracy"] == 1.0 and out["exact"] and out["backend"] == backend()
    _report(
        f"{backend()}: interp verify prefix_scan --automaton S5 --length 256 --forward model --json -> accuracy "
        f"{out['accuracy']}, backend {out['backend']}"
    )


@needs_reference
def test_a_model_saved_under_one_backend_loads_under_the_other():
    model = load_model(Path(REFERENCE) / "saved-on-tl39")
    assert verify(model, samples=50).exact
    save_model(to_hooked(build_case("modular_counter", "C3", {}, 16)), Path(REFERENCE) / "saved-on-tl4")
    # `make test-tl4` then loads saved-on-tl4 under 3.9 (tests/model/backend_reference.py load)


@needs_reference
def test_compare_parity_matches_the_hooked_transformer_run(tmp_path):
    mine = small_compare(tmp_path / "compare")
    ref = json.loads((Path(REFERENCE) / "compare-tl39" / "metrics.json").read_text())
    for name in ("modular_counter", "prefix_scan"):
        for latent, p in ref["probes"][name].items():
            got = mine["probes"][name][latent]
            assert got["first_readable"] == p["first_readable"], (name, latent)
            for hook, acc in p["accuracy"].items():
                assert abs(got["accuracy"][hook] - acc) <= 0.02, (name, latent, hook)
        for kind in ("zero", "mean"):
            for head, acc in ref["ablation"][name][kind].items():
                assert abs(mine["ablation"][name][kind][head] - acc) < 1e-9, (name, kind, head)
        assert mine["models"][name]["accuracy"] == ref["models"][name]["accuracy"] == 1.0


@needs_reference
def test_forward_pass_time_beside_hooked_transformer():
    ref = json.loads((Path(REFERENCE) / "timing.json").read_text())
    c, s, T = TIMED
    model = to_hooked(build_case(c, s, {}, T))
    mine = forward_seconds(model, words_for(model, ref["batch"]))
    _report(
        f"forward pass, {ref['model']}, batch {ref['batch']}: {ref['backend']} {ref['seconds'] * 1e3:.1f} ms, "
        f"{backend()} {mine * 1e3:.1f} ms (ratio {mine / ref['seconds']:.2f})"
    )
    assert mine > 0


@pytest.mark.parametrize("construction", ["modular_counter", "krohn_rhodes"])
def test_lengths_past_the_bridge_float32_limit_are_refused(construction):
    from sandbox_lens.constructions.counter import BRIDGE_FLOAT32_MAX_LENGTH
    from sandbox_lens.interp.errors import LengthError

    spec = build_case(construction, "C3", {}, BRIDGE_FLOAT32_MAX_LENGTH + 1)
    assert spec.bridge_float32_max_length == BRIDGE_FLOAT32_MAX_LENGTH
    if backend() == "TransformerBridge":
        with pytest.raises(LengthError, match="float64"):
            to_hooked(spec)
    assert to_hooked(spec, dtype="float64").cfg.n_ctx == spec.n_ctx


def test_float64_is_float64_here():
    import torch

    model = to_hooked(build_case("dyck", "2,3", {"variant": "stack"}, 16), dtype="float64")
    assert {p.dtype for p in model.parameters()} == {torch.float64}
    assert model(torch.zeros((1, 4), dtype=torch.int64)).dtype == torch.float64
    r = verify(model, samples=20, dtype="float64")
    assert r.exact and r.details["max_tv"] < 1e-10  # float32 would leave ~1e-7


def test_a_twin_trains_saves_and_loads_here(tmp_path):
    from sandbox_lens.interp.tasks.batches import AutomatonTask
    from sandbox_lens.interp.tasks.catalogue import get_automaton
    from sandbox_lens.interp.train import ModelShape, TrainConfig, load_trained, train

    m = train(
        AutomatonTask(get_automaton("parity"), 8),
        ModelShape(n_layers=1, d_model=16, n_heads=2),
        TrainConfig(steps=40, batch=32, eval_every=20, warmup=5),
        tmp_path / "t",
        progress=False,
    )
    twin = load_trained(tmp_path / "t")
    assert twin.card.kind == "automaton" and 0.0 <= m["final_accuracy"] <= 1.0
    from sandbox_lens.interp.model.run import predict

    words = np.random.default_rng(0).integers(2, size=(64, 8))
    accuracy = float((predict(twin, words) == np.cumsum(words, 1) % 2).mean())
    assert abs(accuracy - m["final_accuracy"]) < 0.15
    import torch

    from sandbox_lens.interp.model.hooked import tl_state_dict
    from sandbox_lens.interp.train import build_twin

    fresh = tl_state_dict(
        build_twin(AutomatonTask(get_automaton("parity"), 8), ModelShape(n_layers=1, d_model=16, n_heads=2), seed=0)
    )
    loaded = tl_state_dict(twin)
    assert set(fresh) == set(loaded)
    assert not torch.equal(fresh["blocks.0.attn.W_Q"], loaded["blocks.0.attn.W_Q"])  # trained weights, not a fresh init


def test_probes_and_ablation_run_here():
    from sandbox_lens.probes.ablation import head_ablation
    from sandbox_lens.probes.linear import probe_accuracy

    model = to_hooked(build_case("prefix_scan", "parity", {}, 8))
    words = np.random.default_rng(0).integers(2, size=(200, 8))
    tokens = model.card.io.encode(words)
    P = len(model.card.io.prefix)
    labels = np.zeros(tokens.shape, dtype=np.int64)
    labels[:, P:] = np.cumsum(words, 1) % 2
    mask = np.zeros(tokens.shape, dtype=bool)
    mask[:, P:] = True
    acc = probe_accuracy(model, tokens, labels, mask)
    assert max(acc.values()) == 1.0
    ab = head_ablation(model, tokens, labels, mask, kind="zero")
    assert ab["baseline"] == 1.0


@needs_reference
def test_circuit_analyses_match_the_hook_engine_on_3_9():
    """The bare patching engine runs the circuit methods here (the bridge has no per-head hooks) and scores
    what the hook engine scored on 3.9: the same ground truth, circuit and AUROC, edge scores to rounding."""
    ref = json.loads((Path(REFERENCE) / "circuits-tl39.json").read_text())
    mine = circuit_analyses("auto")
    for name, r in ref.items():
        got = mine[name]
        assert got["engine"] == "BarePatcher" and r["engine"] == "Patcher"
        assert got["ground_truth_edges"] == r["ground_truth_edges"], name
        assert got["circuit"] == r["circuit"], name
        assert abs(got["auroc"] - r["auroc"]) < 1e-6, name
        for edge, value in r["edges"].items():
            if value is not None:
                assert abs(got["edges"][edge] - value) < 1e-4, (name, edge)
    _report(f"circuits on {backend()}: {len(ref)} analyses match the 3.9 hook engine")


def test_interp_circuit_runs_here(tmp_path):
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "sandbox_lens.interp",
            "circuit",
            "modular_counter",
            "--automaton",
            "C3",
            "-T",
            "8",
            "--method",
            "acdc",
            "--pairs",
            "16",
            "--json",
            "--out",
            str(tmp_path / "c"),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    assert summary["auroc"] == 1.0 and (tmp_path / "c" / "circuit.eap-ig.json").exists()


def test_causal_alignment_runs_on_this_backend():
    """Interchange interventions and DAS through this backend's hooks: the counter's named sites carry the state
    (IIA 1), its inert copy carries nothing, and DAS — searched only before the counter's one attention layer,
    where there are only the tokens — finds no subspace that carries it."""
    from sandbox_lens.constructions.registry import build
    from sandbox_lens.interp.causal.align import align
    from sandbox_lens.interp.tasks.catalogue import get_automaton

    model = to_hooked(build("modular_counter", get_automaton("C3"), 8))
    r = align(model, pairs=64, ks=(2,), das_steps=40)["variables"]["state"]
    assert [s["iia"] for s in r["model"]["named_sites"]] == [1.0, 1.0, 0.0]
    assert r["model"]["das"]["chosen"]["hook"] == "blocks.0.hook_resid_pre"
    assert r["das_verdict"]["implements"] is False
