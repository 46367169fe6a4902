"""sandbox_lens.interp.model.arithmetic: the one forward every hook-free engine runs computes TransformerLens's
function — the verifier's bare forward, the training forward, the batched circuit engine's clean run and an
ensemble of twins stacked on a member dimension, each against the model itself on the same tokens.

Tolerance: each engine sums in another order than TransformerLens, so a logit may differ by the rounding of a few
dot products of d_model float32 terms per layer: 8·ε₃₂·d_model·(n_layers + 1) times the largest logit."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from sandbox_lens.constructions import build_model  # noqa: E402
from sandbox_lens.interp.circuits.bare import BarePatcher  # noqa: E402
from sandbox_lens.interp.model.arithmetic import attention_scale, dense_stack, run  # noqa: E402
from sandbox_lens.interp.model.bare import bare_forward  # noqa: E402
from sandbox_lens.interp.model.fast import covers, fast_forward  # noqa: E402
from sandbox_lens.interp.model.hooked import tl_state_dict  # noqa: E402
from sandbox_lens.interp.tasks.batches import DyckTask, step_rng  # noqa: E402
from sandbox_lens.interp.tasks.catalogue import get_automaton  # noqa: E402
from sandbox_lens.interp.tasks.dyck import Dyck  # noqa: E402
from sandbox_lens.interp.train import ModelShape, build_twin, default_shape  # noqa: E402

EPS32 = float(np.finfo(np.float32).eps)
TASK = DyckTask(Dyck(2, 4), 16)


def _tolerance(model, logits) -> float:
    cfg = model.cfg
    return 8 * EPS32 * cfg.d_model * (cfg.n_layers + 1) * max(1.0, float(logits.abs().max()))


def _twin(**shape):
    return build_twin(TASK, ModelShape(**{**default_shape(TASK).__dict__, **shape}), 0)


MODELS = {
    "twin, LayerNorm": lambda: _twin(),
    "twin, no LayerNorm, 2 heads": lambda: _twin(normalization="none", n_heads=2),
    "prefix scan (S3, T = 16)": lambda: build_model("prefix_scan", get_automaton("S3"), 16),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_every_engine_computes_transformer_lens_s_logits(name):
    model = MODELS[name]()
    T = min(16, model.cfg.n_ctx)
    tokens = torch.randint(0, model.cfg.d_vocab, (8, T), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        want = model(tokens, return_type="logits")
        tol = _tolerance(model, want)
        got = {
            "bare": bare_forward(model)(tokens),
            "circuit engine": BarePatcher(model).run_many(tokens.numpy(), [((), None)], {})[0],
        }
        if covers(model):  # the training forward runs on 3.9's HookedTransformer
            got["training"] = fast_forward(model, tokens)
        sd = {k: v[None] for k, v in tl_state_dict(model).items()}  # an ensemble of one
        x = (sd["embed.W_E"][0][tokens] + sd["pos_embed.W_pos"][0][:T]).reshape(1, -1, model.cfg.d_model)
        got["stacked"] = run(dense_stack(sd.__getitem__, model.cfg, members=True), x, T).view(want.shape)
    for engine, logits in got.items():
        diff = float((logits - want).abs().max())
        assert diff <= tol, f"{engine}: {diff} > {tol}"


def test_the_attention_scale_is_the_model_s():
    twin = _twin()
    assert attention_scale(twin.cfg) == pytest.approx(twin.cfg.d_head**-0.5)
    assert attention_scale(SimpleNamespace(use_attn_scale=False, attn_scale=4.0, d_head=16)) == 1.0
    # 4.x's bridge holds the sentinel −1 for √d_head; a set scale is used as it is
    assert attention_scale(SimpleNamespace(use_attn_scale=True, attn_scale=-1.0, d_head=16)) == 0.25
    assert attention_scale(SimpleNamespace(use_attn_scale=True, attn_scale=2.0, d_head=16)) == 0.5


def test_the_training_forward_is_differentiable_through_the_shared_run():
    model = _twin()
    if not covers(model):
        pytest.skip("the training forward runs on TransformerLens 3.9's HookedTransformer")
    tokens = torch.from_numpy(TASK.batch(step_rng(0, 0), 4).tokens)
    fast_forward(model, tokens).square().mean().backward()
    grads = {n: p.grad for n, p in model.named_parameters()}
    assert all(g is not None and bool(g.abs().sum() > 0) for n, g in grads.items() if "W_" in n), [
        n for n, g in grads.items() if g is None
    ]
