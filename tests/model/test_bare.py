"""The verifier's fast path: a bare forward on the same weights computes what TransformerLens computes."""

import numpy as np
import pytest
import torch
from float32_bounds import logit_bound

from sandbox_lens.constructions import build_model
from sandbox_lens.interp.model.bare import bare_forward, bare_tail, bare_unsupported
from sandbox_lens.interp.model.checked import CheckedForward
from sandbox_lens.interp.model.run import exact_precision
from sandbox_lens.interp.tasks.batches import AutomatonTask, step_rng
from sandbox_lens.interp.tasks.catalogue import get_automaton
from sandbox_lens.interp.tasks.dyck import Dyck
from sandbox_lens.interp.train import ModelShape, build_twin
from sandbox_lens.interp.verify import verify

MODELS = {
    "prefix_scan/S3": lambda: build_model("prefix_scan", get_automaton("S3"), 64),
    "prefix_scan/S3 circle": lambda: build_model("prefix_scan", get_automaton("S3"), 64, code="circle"),
    "modular_counter/C5": lambda: build_model("modular_counter", get_automaton("C5"), 64),
    "krohn_rhodes/S4": lambda: build_model("krohn_rhodes", get_automaton("S4"), 32),
    "gridworld/grid4": lambda: build_model("gridworld", get_automaton("grid4"), 32),
    "dyck/balanced": lambda: build_model("dyck", Dyck(2, 4), 40, variant="balanced"),
    "ffl": lambda: build_model("ffl", None, 64),
}


def _tokens(model, rng, batch=16):
    """Random words over the model's symbols at its full length, encoded as its card says."""
    io = model.card.io
    words = rng.integers(0, len(io.symbol_tokens), size=(batch, model.card.max_length))
    return torch.as_tensor(io.encode(words))


@pytest.mark.parametrize("name", sorted(MODELS))
def test_bare_forward_matches_transformer_lens_on_every_construction(name):
    model = MODELS[name]()
    forward = bare_forward(model, residuals=True)
    assert forward is not None, bare_unsupported(model)
    tokens = _tokens(model, np.random.default_rng(0))
    with exact_precision():
        (ours, stream), theirs = forward(tokens), model(tokens)
    assert ours.shape == theirs.shape
    # two float32 summation orders: within the float32 bound of the sums involved (tests/float32_bounds.py)
    assert float((ours - theirs).abs().max()) <= logit_bound(model, stream)
    assert torch.equal(ours.argmax(-1), theirs.argmax(-1))


@pytest.mark.parametrize(
    "shape",
    [
        ModelShape(n_layers=2, d_model=16, n_heads=2, d_mlp=32),
        ModelShape(n_layers=1, d_model=16, n_heads=4, normalization="none", positional="sinusoidal"),
    ],
)
def test_bare_forward_matches_a_twin_with_and_without_layernorm(shape):
    task = AutomatonTask(get_automaton("S3"), 12)
    model = build_twin(task, shape, 3)
    tokens = torch.from_numpy(task.batch(step_rng(0, 0), 8).tokens)
    with exact_precision():
        assert torch.allclose(bare_forward(model)(tokens), model(tokens), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(
    "shape",
    [
        ModelShape(n_layers=2, d_model=16, n_heads=2, d_mlp=32),
        ModelShape(n_layers=2, d_model=16, n_heads=4, normalization="none"),
    ],
)
def test_the_forward_from_a_residual_hook_on_is_the_rest_of_the_model(shape):
    """From every residual hook, the tail on the stream recorded there gives the model's logits, and it is
    differentiable in that stream; a hook that is not a residual one is refused."""
    task = AutomatonTask(get_automaton("S3"), 12)
    model = build_twin(task, shape, 3)
    tokens = torch.from_numpy(task.batch(step_rng(0, 0), 8).tokens)
    hooks = ["blocks.0.hook_resid_pre"] + [f"blocks.{l}.hook_resid_{x}" for l in range(2) for x in ("mid", "post")]
    with exact_precision():
        logits, cache = model.run_with_cache(tokens, names_filter=hooks)
    for hook in hooks:
        resid = cache[hook].clone().requires_grad_(True)
        with exact_precision(grad=True):
            out = bare_tail(model, hook)(resid)
        assert torch.allclose(out, logits, atol=1e-5, rtol=1e-5), hook
        (grad,) = torch.autograd.grad(out[:, 0].sum(), resid)  # causal: the first output reads the first position
        assert float(grad[:, 0].abs().max()) > 0 and float(grad[:, 1:].abs().max()) == 0.0, hook
    with pytest.raises(ValueError, match="not a residual hook"):
        bare_tail(model, "blocks.0.hook_attn_out")
    with pytest.raises(ValueError, match="2 blocks"):
        bare_tail(model, "blocks.2.hook_resid_pre")


def test_verification_says_which_forward_ran_and_agrees_with_the_model():
    model = build_model("prefix_scan", get_automaton("S3"), 32)
    fast, slow = (verify(model, samples=50, forward=f) for f in ("bare", "model"))
    assert fast.accuracy == slow.accuracy == 1.0 and fast.checked == slow.checked
    assert fast.details["forward"]["path"] == "bare" and fast.details["forward"]["cross_checked_positions"] > 0
    assert slow.details["forward"] == {"path": "model", "cross_checked_positions": 0, "max_logit_difference": 0.0}


def test_a_bare_forward_that_disagrees_hands_the_check_back_to_the_model(monkeypatch):
    """A wrong fast path must never decide a verdict: one differing argmax and the model runs the rest."""
    import sandbox_lens.interp.model.bare as fwd

    real = fwd.bare_forward

    def broken(model, residuals=False):
        good = real(model, residuals)
        return lambda tokens: good(tokens).flip(-1)  # every prediction reversed

    monkeypatch.setattr(fwd, "bare_forward", broken)
    model = build_model("prefix_scan", get_automaton("S3"), 16)
    r = verify(model, samples=20)
    assert r.exact and r.details["forward"]["path"].startswith("model (the bare forward disagreed")


def test_models_the_bare_forward_does_not_cover_run_on_themselves():
    from sandbox_lens.interp.model.lstm import LSTMConfig, LSTMModel

    lstm = LSTMModel(LSTMConfig(d_vocab=5, d_vocab_out=5, d_model=8, hidden=8, n_layers=1, n_ctx=16))
    lstm.card = build_model("ffl", None, 16).card
    assert bare_unsupported(lstm) is not None and bare_forward(lstm) is None
    assert CheckedForward(lstm).details()["path"].startswith("model (no bare forward: ")
    with pytest.raises(ValueError, match="forward must be one of"):
        CheckedForward(lstm, "fast")


def test_a_verification_leaves_autograd_and_precision_as_it_found_them():
    before = (torch.is_grad_enabled(), torch.is_inference_mode_enabled(), torch.get_float32_matmul_precision())
    verify(build_model("prefix_scan", get_automaton("S3"), 16), samples=10)
    assert (torch.is_grad_enabled(), torch.is_inference_mode_enabled(), torch.get_float32_matmul_precision()) == before


# -- the residual stream (what the probes read) --------------------------------------------------
@pytest.mark.parametrize("name", ["krohn_rhodes/S4", "gridworld/grid4", "dyck/balanced"])
def test_the_bare_residual_stream_is_what_run_with_cache_records(name):
    from sandbox_lens.interp.model.checked import residual_stream
    from sandbox_lens.probes.linear import residual_hooks

    model = MODELS[name]()
    tokens = _tokens(model, np.random.default_rng(1), batch=6).numpy()
    hooks = residual_hooks(model.cfg.n_layers)
    ours, path = residual_stream(model, tokens, hooks)
    theirs, slow_path = residual_stream(model, tokens, hooks, forward="model")
    assert (path, slow_path) == ("bare", "model") and list(ours) == hooks
    for hook in hooks:
        assert ours[hook].shape == theirs[hook].shape == (6, tokens.shape[1], model.cfg.d_model)
        assert float((ours[hook] - theirs[hook]).abs().max()) <= 1e-5 * max(1.0, float(theirs[hook].abs().max())), hook


def test_a_residual_stream_that_disagrees_or_other_hooks_come_from_the_model(monkeypatch):
    import sandbox_lens.interp.model.bare as bare
    from sandbox_lens.interp.model.checked import residual_stream

    model = build_twin(
        AutomatonTask(get_automaton("S3"), 12), ModelShape(n_layers=2, d_model=16, n_heads=2, d_mlp=32), 0
    )
    tokens = AutomatonTask(get_automaton("S3"), 12).batch(step_rng(0, 0), 8).tokens
    assert residual_stream(model, tokens, ["blocks.1.hook_resid_mid"])[1] == "bare"  # LayerNorm twins too
    assert residual_stream(model, tokens, ["blocks.1.hook_resid_mid", "blocks.0.attn.hook_pattern"])[1] == "model"
    real = bare.bare_forward

    def broken(model, residuals=False):
        good = real(model, residuals)
        return lambda tokens: (lambda out: (out[0], {k: v + 1.0 for k, v in out[1].items()}))(good(tokens))

    monkeypatch.setattr(bare, "bare_forward", broken)
    stream, path = residual_stream(model, tokens, ["blocks.1.hook_resid_mid"])
    assert path == "model"
    _, cache = model.run_with_cache(torch.from_numpy(tokens), names_filter=["blocks.1.hook_resid_mid"])
    assert torch.equal(stream["blocks.1.hook_resid_mid"], cache["blocks.1.hook_resid_mid"])


def test_wide_mlps_in_row_chunks_compute_what_one_pass_computes(monkeypatch):
    import sandbox_lens.interp.model.bare as bare

    model = MODELS["modular_counter/C5"]()
    tokens = _tokens(model, np.random.default_rng(2))  # 16 × 65 rows, chunks of 64
    with exact_precision():
        monkeypatch.setattr(bare, "HIDDEN_CHUNK", 1 << 40)
        whole = bare.bare_forward(model)(tokens)
        monkeypatch.setattr(bare, "HIDDEN_CHUNK", 1)
        chunked = bare.bare_forward(model)(tokens)
    assert torch.allclose(whole, chunked, rtol=0, atol=1e-4) and torch.equal(whole.argmax(-1), chunked.argmax(-1))


def test_a_spec_is_verified_on_its_weights_without_transformer_lens():
    """verify(spec) checks the weights on the one forward, cross-checked against the same weights in float64; the
    TransformerLens model is never built, and the verdict is the TransformerLens model's."""
    from sandbox_lens.constructions import build
    from sandbox_lens.interp.model.bare import BareModel

    spec = build("prefix_scan", get_automaton("S3"), 32)
    weights = BareModel(spec)
    r = verify(weights, samples=50)
    assert weights._hooked is None and r.backend == "bare"  # TransformerLens never ran
    assert r.details["forward"]["path"] == "bare (cross-checked against the weights in float64)"
    assert r.details["forward"]["cross_checked_positions"] > 0
    on_model = verify(build_model("prefix_scan", get_automaton("S3"), 32), samples=50)
    assert (r.accuracy, r.checked, r.sequences) == (on_model.accuracy, on_model.checked, on_model.sequences)
    tokens = _tokens(build_model("prefix_scan", get_automaton("S3"), 32), np.random.default_rng(3))
    with exact_precision():
        theirs = weights.hooked()(tokens)
        assert float((weights.float64_forward(tokens) - theirs.double()).abs().max()) <= 1e-5 * max(
            1.0, float(theirs.abs().max())
        )


def test_weights_whose_bare_forward_disagrees_are_checked_on_transformer_lens(monkeypatch):
    import sandbox_lens.interp.model.bare as fwd
    from sandbox_lens.constructions import build

    real = fwd.bare_forward
    monkeypatch.setattr(
        fwd, "bare_forward", lambda model, residuals=False: lambda t: real(model, residuals)(t).flip(-1)
    )
    weights = fwd.BareModel(build("prefix_scan", get_automaton("S3"), 16))
    r = verify(weights, samples=20)
    assert r.exact and r.details["forward"]["path"].startswith("model (the bare forward disagreed")
    assert weights._hooked is not None  # built when it had to run


def test_interp_verify_does_not_import_transformer_lens():
    import subprocess
    import sys

    probe = (
        "import sys; from sandbox_lens.interp.cli import main; "
        "code = main(['verify', 'prefix_scan', '--automaton', 'parity', '--length', '8', '--samples', '10']); "
        "print('TL', 'transformer_lens' in sys.modules); sys.exit(code)"
    )
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
    assert "EXACT" in r.stdout and "TL False" in r.stdout


@pytest.mark.parametrize("name", ["prefix_scan/S3", "modular_counter/C5", "dyck/balanced"])
def test_the_sparse_weights_are_the_dense_ones(name):
    """sparse_state holds each MLP's units as CSR matrices of its own width: densified and padded to d_mlp they are
    state_dict_arrays' matrices entry for entry, and every other weight is the same array."""
    from sandbox_lens.interp.model.bare import sparse_state
    from sandbox_lens.interp.model.hooked import state_dict_arrays

    spec = _spec_of(name)
    dense, sparse = state_dict_arrays(spec), sparse_state(spec, "float64")
    assert set(dense) == set(sparse)
    for key, want in dense.items():
        got = sparse[key]
        got = (got.to_dense() if got.layout == torch.sparse_csr else got).numpy()
        if key.split(".")[-2] == "mlp":  # the MLP's own width: padded with zero units to d_mlp
            got = np.pad(got, [(0, a - b) for a, b in zip(want.shape, got.shape)])
        np.testing.assert_array_equal(got, want, err_msg=key)


def _spec_of(name):
    from sandbox_lens.constructions import build

    kind, _, what = name.partition("/")
    if kind == "dyck":
        return build("dyck", Dyck(2, 4), 40, variant="balanced")
    return build(kind, get_automaton(what), 64)


def test_a_sparse_projection_gives_the_dense_product_and_its_gradient():
    """A large matrix that is mostly zeros is multiplied as CSR (restricted to its rows and written columns first):
    the product and the gradient in the input agree with the dense ones to float32 rounding of the same few
    non-zero terms."""
    from sandbox_lens.interp.model.bare import SPARSE_MIN_ENTRIES, _Projection

    rng = np.random.default_rng(0)
    d_in, d_out = 300, 2 * SPARSE_MIN_ENTRIES // 300
    W = np.zeros((d_in, d_out), dtype=np.float32)
    W[rng.integers(0, d_in, d_out), np.arange(d_out)] = rng.normal(size=d_out)
    W[:, : d_out // 4] = 0  # unwritten columns: restricted away
    b = rng.normal(size=d_out).astype(np.float32) * (np.arange(d_out) % 3 == 0)
    Wt, bt = torch.from_numpy(W), torch.from_numpy(b)
    projection = _Projection(Wt, bt, restrict_out=True)
    assert projection.W.layout == torch.sparse_csr and projection.cols is not None
    x = torch.from_numpy(rng.normal(size=(64, d_in)).astype(np.float32)).requires_grad_()
    resid = torch.zeros(64, d_out)
    ours = projection.add_into(resid, x)
    want = x @ Wt + bt
    scale = float(want.detach().abs().max())
    assert float((ours - want).detach().abs().max()) <= 1e-6 * scale
    (grad,) = torch.autograd.grad((ours**2).sum(), x)
    (want_grad,) = torch.autograd.grad((want**2).sum(), x)
    assert float((grad - want_grad).abs().max()) <= 1e-5 * float(want_grad.abs().max())


def test_a_prefix_scan_too_large_for_a_dense_model_still_verifies():
    """Over 64 states the prefix scan's dense weights (|Q|⁴) pass the size limit and building the TransformerLens
    model is refused; its sparse weights (|Q|² non-zeros) verify exactly on the bare forward."""
    from sandbox_lens.constructions import build
    from sandbox_lens.interp.errors import ConstructionError
    from sandbox_lens.interp.model.bare import BareModel

    spec = build("prefix_scan", get_automaton("memory64"), 16)
    with pytest.raises(ConstructionError, match="parameters"):
        spec.check_size()
    weights = BareModel(spec)
    r = verify(weights, samples=20)
    assert r.exact and r.accuracy == 1.0 and weights._hooked is None
    assert r.details["forward"]["cross_checked_positions"] > 0


def test_interp_circuit_on_a_construction_does_not_import_transformer_lens(tmp_path):
    """The circuit command runs a construction's weights on the bare engines; its scores are the ones the analysis
    gives on the TransformerLens model of the same weights."""
    import json
    import subprocess
    import sys

    from sandbox_lens.constructions import build
    from sandbox_lens.interp.circuits.analyse import analyse
    from sandbox_lens.interp.circuits.config import CircuitConfig
    from sandbox_lens.interp.circuits.truth import ground_truth

    probe = (
        "import sys; from sandbox_lens.interp.cli import main; "
        f"code = main(['circuit', 'modular_counter', '--automaton', 'C3', '-T', '8', '--method', 'attribution', "
        f"'--out', {str(tmp_path / 'c')!r}]); print('TL', 'transformer_lens' in sys.modules); sys.exit(code)"
    )
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
    assert "TL False" in r.stdout
    ours = json.loads((tmp_path / "c" / "circuit.json").read_text())
    spec = build("modular_counter", get_automaton("C3"), 8)
    theirs = analyse(
        build_model("modular_counter", get_automaton("C3"), 8), "attribution", ground_truth(spec), CircuitConfig()
    )
    for key in ("auroc", "edge_precision", "edge_recall"):
        assert ours[key] == pytest.approx(theirs[key], abs=1e-6), key
    assert ours["circuit"] == theirs["circuit"]


def test_weights_called_bare_answer_from_transformer_lens_once_it_is_built():
    """bare_calls: a plain call runs the bare forward until the TransformerLens model exists (hooks can only sit on
    it); from then on every call is the TransformerLens model's, hooks included."""
    from sandbox_lens.constructions import build
    from sandbox_lens.interp.model.bare import BareModel

    weights = BareModel(build("modular_counter", get_automaton("C3"), 8), sparse=False, bare_calls=True)
    tokens = _tokens(weights, np.random.default_rng(0), batch=4)
    with exact_precision():
        first = weights(tokens)
        assert weights._hooked is None
        seen = []
        weights.hooked().add_hook("blocks.0.hook_resid_post", lambda x, hook: seen.append(1))
        second = weights(tokens, return_type="logits")
        weights.hooked().reset_hooks()
    assert seen == [1]
    assert float((first - second).abs().max()) <= 1e-5 * max(1.0, float(second.abs().max()))


def test_code_that_rewires_a_model_gets_the_transformer_lens_model_of_a_constructions_weights():
    """hooked_model: a construction's weights come back as their TransformerLens model (auto-circuit deep-copies and
    rewires it, reading cfg fields the bare config lacks); any other model comes back as it is."""
    from sandbox_lens.constructions import build
    from sandbox_lens.interp.model.bare import BareModel
    from sandbox_lens.interp.model.run import hooked_model

    weights = BareModel(build("modular_counter", get_automaton("C3"), 8), sparse=False, bare_calls=True)
    hooked = hooked_model(weights)
    assert hooked is weights.hooked()
    assert hasattr(hooked, "run_with_hooks")
    assert hooked.cfg.attn_only is False
    assert hooked_model(hooked) is hooked


def test_interp_build_saves_the_transformer_lens_models_files_without_importing_it(tmp_path):
    """interp build (not rotated) saves a construction's weights from the spec: no TransformerLens import, and the
    files byte for byte those of its TransformerLens model (float32 and float64)."""
    import subprocess
    import sys

    from sandbox_lens.constructions import build
    from sandbox_lens.interp.model.hooked import to_hooked
    from sandbox_lens.interp.model.saved import save_model
    from sandbox_lens.interp.tasks.dyck import Dyck

    builds = [
        (["prefix_scan", "--automaton", "S3", "-T", "8"], "float32", build("prefix_scan", get_automaton("S3"), 8)),
        (["dyck", "--dyck", "2,3", "-T", "8"], "float64", build("dyck", Dyck(2, 3), 8)),
    ]
    calls = "; ".join(
        f"codes.append(main(['build', *{args!r}, '--dtype', {dtype!r}, '--out', {str(tmp_path / str(i))!r}]))"
        for i, (args, dtype, _) in enumerate(builds)
    )
    probe = f"import sys; from sandbox_lens.interp.cli import main; codes = []; {calls}; print(codes, 'transformer_lens' in sys.modules)"
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=False)
    assert r.returncode == 0 and r.stdout.strip().endswith("[0, 0] False"), r.stdout + r.stderr
    for i, (_, dtype, spec) in enumerate(builds):
        theirs = save_model(to_hooked(spec, dtype=dtype), tmp_path / f"tl{i}")
        for name in ("model.safetensors", "model.json"):
            assert (tmp_path / str(i) / name).read_bytes() == (theirs / name).read_bytes(), name
