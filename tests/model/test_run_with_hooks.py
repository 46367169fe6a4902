"""``model.run.run_with_hooks`` keeps TransformerLens 3.9's meaning on either back end: a write at
``blocks.l.hook_resid_mid`` reaches the residual stream (on 4.x's bridge that hook is an alias of
``ln2.hook_in``, whose writes reach only the MLP), and every hook sees the name it was registered under.
Runs in ``make test`` (3.9) and in the suite on 4.x."""

import numpy as np
import torch

import sandbox_lens as sl
from sandbox_lens.interp.model.run import run_with_hooks


@torch.no_grad()
def test_a_write_at_resid_mid_is_a_write_to_the_residual_stream():
    model = sl.load("prefix_scan", "C3", length=8)
    tokens = torch.as_tensor(model.card.io.encode(np.random.default_rng(0).integers(0, 3, (6, 8))))
    v = torch.as_tensor(np.random.default_rng(1).standard_normal(model.cfg.d_model), dtype=torch.float32)
    for layer in range(model.cfg.n_layers):
        names = []

        def add(x, hook, names=names):
            names.append(hook.name)
            return x + v

        at_mid = run_with_hooks(model, tokens, [(f"blocks.{layer}.hook_resid_mid", add)])
        at_attn = run_with_hooks(model, tokens, [(f"blocks.{layer}.hook_attn_out", add)])
        plain = model(tokens)
        # resid_mid = resid_pre + attn_out: adding v to either is the same intervention
        assert torch.allclose(at_mid, at_attn, atol=1e-3 * float(plain.abs().max()))
        assert not torch.allclose(at_mid, plain)
        assert names == [f"blocks.{layer}.hook_resid_mid", f"blocks.{layer}.hook_attn_out"]


def test_a_hook_that_only_reads_leaves_the_forward_bit_for_bit():
    model = sl.load("modular_counter", "C3", length=8)
    tokens = torch.as_tensor(model.card.io.encode(np.random.default_rng(2).integers(0, 3, (4, 8))))
    seen = {}

    def read(x, hook):
        seen[hook.name] = x.detach().clone()

    out = run_with_hooks(model, tokens, [("blocks.0.hook_resid_mid", read)])
    assert torch.equal(out, model(tokens)) and "blocks.0.hook_resid_mid" in seen
    _, cache = model.run_with_cache(tokens, names_filter=["blocks.0.hook_resid_mid"])
    assert torch.equal(seen["blocks.0.hook_resid_mid"], cache["blocks.0.hook_resid_mid"])
