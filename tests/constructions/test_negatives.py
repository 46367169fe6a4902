"""Informative negatives keep every construction exact, add exactly the parts they promise, and are
refused when misnamed."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from circuit_families import FAMILIES

from sandbox_lens.constructions import build
from sandbox_lens.constructions.negatives import NEGATIVES, add_negatives
from sandbox_lens.interp.errors import ConstructionError
from sandbox_lens.interp.model.hooked import to_hooked
from sandbox_lens.interp.model.run import exact_precision
from sandbox_lens.interp.tasks.catalogue import get_automaton
from sandbox_lens.interp.verify import verify

ALL = ",".join(NEGATIVES)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_family_stays_exact_with_every_negative(family):
    spec = add_negatives(FAMILIES[family](), NEGATIVES)
    result = verify(spec, samples=200, seed=2)
    assert result.accuracy == 1.0 and result.checked > 0, result.mismatches
    assert spec.options["negatives"] == ALL


def test_the_gadgets_are_where_the_module_says():
    plain = build("modular_counter", get_automaton("C3"), 8)
    spec = build("modular_counter", get_automaton("C3"), 8, negatives=ALL)
    assert len(spec.blocks) == len(plain.blocks) + 1  # the backup's block comes first; the others join it
    assert [h.label for h in spec.blocks[0].heads] == [
        "backup a",
        "backup b",
        "distractor",
        "cancel +1",
        "cancel -1",
        "constant",
    ]
    assert [len(b.heads) for b in spec.blocks[1:]] == [len(b.heads) for b in plain.blocks]
    assert spec.options["negative_routes"] == [{"routes": [["a0.0"], ["a0.1"]], "reader": "m0", "ablation": "zero"}]
    model = to_hooked(spec)
    tokens = torch.from_numpy(model.card.io.encode(np.random.default_rng(0).integers(3, size=(16, 8))))
    with exact_precision():
        _, cache = model.run_with_cache(tokens)
    resid = cache["blocks.0.hook_resid_mid"]
    layout = spec.layout
    assert torch.all(resid[..., layout.index("neg_signal")] == 0)  # the pair cancels exactly
    bias = resid[..., layout.index("neg_bias")]
    torch.testing.assert_close(bias, torch.ones_like(bias), rtol=0, atol=1e-6)  # the constant head writes 1
    pattern = cache["blocks.0.attn.hook_pattern"][:, 5]
    assert float(pattern.amax(-1).mean()) > 0.4  # ... through a sharp, word-dependent pattern


def test_bad_negatives_are_refused():
    with pytest.raises(ConstructionError, match="unknown: everything"):
        build("ffl", None, 8, negatives="cancel,everything")
    with pytest.raises(ConstructionError, match="unknown negatives"):
        add_negatives(build("ffl", None, 8), ["spare"])
    assert add_negatives(plain := build("ffl", None, 8), []) is plain
