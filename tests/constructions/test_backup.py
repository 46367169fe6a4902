"""The backup gadget (sandbox_lens.constructions.backup): the construction's token input through two redundant
self-attending routes — exact where both are there, unchanged without one, without its input without both."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sandbox_lens.constructions import build
from sandbox_lens.interp.errors import ConstructionError
from sandbox_lens.interp.model.hooked import to_hooked
from sandbox_lens.interp.model.run import exact_precision
from sandbox_lens.interp.tasks.catalogue import get_automaton

C3 = get_automaton("C3")


def _tokens(model, rng_seed=0, n=64, length=8):
    words = np.random.default_rng(rng_seed).integers(3, size=(n, length))
    return torch.from_numpy(model.card.io.encode(words))


def test_the_routes_attend_exactly_to_their_own_position_and_rebuild_the_embedding():
    plain, spec = build("modular_counter", C3, 8), build("modular_counter", C3, 8, negatives="backup")
    assert len(spec.blocks) == len(plain.blocks) + 1
    assert [h.label for h in spec.blocks[0].heads] == ["backup a", "backup b"]
    model, reference = to_hooked(spec), to_hooked(plain)
    tokens = _tokens(model)
    with exact_precision():
        _, cache = model.run_with_cache(tokens)
        _, ref = reference.run_with_cache(tokens)
    pattern = cache["blocks.0.attn.hook_pattern"][:, :2]
    assert torch.all(pattern.diagonal(dim1=-2, dim2=-1) == 1.0)  # its own position's weight rounds to exactly 1
    assert float(pattern.tril(-1).max()) < 1e-17  # every earlier key's is below e^-40
    embedding = ref["hook_embed"] + ref["hook_pos_embed"]
    rebuilt = cache["blocks.0.hook_resid_post"][..., : plain.d_model]
    torch.testing.assert_close(rebuilt, embedding, rtol=0, atol=1e-15 * float(embedding.abs().max()))


def _logits_without(model, tokens, heads):
    def zero(z, hook):
        z[:, :, heads] = 0.0
        return z

    with exact_precision():
        return model.run_with_hooks(tokens, fwd_hooks=[("blocks.0.attn.hook_z", zero)])


def test_either_route_suffices_under_zero_ablation_and_both_take_the_input():
    spec = build("modular_counter", C3, 8, negatives="backup")
    model = to_hooked(spec)
    tokens = _tokens(model, 1)
    with exact_precision():
        clean = model(tokens)
    for route in ([0], [1]):
        torch.testing.assert_close(_logits_without(model, tokens, route), clean, rtol=0, atol=0)
    both = _logits_without(model, tokens, [0, 1])
    answers = clean.argmax(-1)
    assert float((both.argmax(-1) == answers).float().mean()) < 0.7  # the construction lost its input


def test_the_variable_sites_move_up_one_block():
    plain = build("prefix_scan", get_automaton("S3"), 8)
    spec = build("prefix_scan", get_automaton("S3"), 8, negatives="backup")
    moved = [v["block"] + 1 if v["block"] >= 0 else v["block"] for v in plain.variables]
    assert [v["block"] for v in spec.variables] == moved and plain.variables


def test_the_sharpness_dial_is_refused_on_the_backup_alone():
    with pytest.raises(ConstructionError, match="add negatives=distractor"):
        build("modular_counter", C3, 8, negatives="backup", negative_sharpness=50.0)
