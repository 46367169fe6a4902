"""The negatives' dials (sandbox_lens.constructions.negatives.Dials): each does what it says, on the weights and on
what patching and attribution see, keeps the model exact over its range, and is refused without its gadget."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sandbox_lens.constructions import build
from sandbox_lens.constructions.negatives import DIALS, SWITCHES, dial_options
from sandbox_lens.interp.circuits.bare import patcher_for
from sandbox_lens.interp.circuits.effects import attribution, path_patching
from sandbox_lens.interp.circuits.pairs import make_pairs
from sandbox_lens.interp.circuits.truth import ground_truth
from sandbox_lens.interp.errors import ConstructionError
from sandbox_lens.interp.model.hooked import to_hooked
from sandbox_lens.interp.model.run import exact_precision
from sandbox_lens.interp.tasks.catalogue import get_automaton
from sandbox_lens.interp.verify import verify

C3 = get_automaton("C3")


def _counter(**options):
    return build("modular_counter", C3, 8, negatives="cancel", **options)


def _pair_heads(spec) -> list[str]:
    """The cancelling pair's node names (a0.h), found by their labels."""
    return [f"a0.{i}" for i, h in enumerate(spec.blocks[0].heads) if h.label.startswith("cancel")]


def _effects(spec, edges, source="resample", pairs=32):
    truth, model = ground_truth(spec), to_hooked(spec)
    patcher = patcher_for(model, truth.graph)
    data = make_pairs(model, pairs, seed=1)
    chosen = [e for e in truth.graph.edges if e.name in edges]
    src = patcher.source(data, source)
    exact = dict(zip((e.name for e in chosen), path_patching(patcher, data, chosen, source=src)))
    estimate, _ = attribution(patcher, data, src)
    return exact, {e.name: float(v) for e, v in zip(truth.graph.edges, estimate)}, truth


@pytest.mark.parametrize(
    "options, message",
    [
        ({"negative_gain": 5.0}, "add negatives=cancel"),
        ({"negative_gain": 5.0, "negatives": "distractor"}, "add negatives=cancel"),
        ({"negative_sharpness": 50.0}, "add negatives=distractor"),
        ({"negatives": "cancel", "negative_gain": float("inf")}, "takes 0.001 to 1000"),
        ({"negatives": "cancel", "negative_gain": 0.0}, "takes 0.001 to 1000"),
        ({"negatives": "cancel", "negative_sharpness": float("nan")}, "takes 0.001 to 10000"),
        ({"negatives": "cancel", "negative_sharpness": "sharp"}, "must be a float"),
        ({"negatives": "cancel", "cancel_margin": 0.01}, "unknown option"),
    ],
)
def test_a_dial_without_its_gadget_or_out_of_range_is_refused(options, message):
    with pytest.raises(ConstructionError, match=message):
        build("modular_counter", C3, 8, **options)


def test_dial_options_build_every_dial_and_switch_value_and_key_the_default_once():
    assert dial_options("cancel", "negative_gain", 20.0) == (None, {"negatives": "cancel", "negative_gain": 20.0})
    assert dial_options("cancel", "negative_gain", 2.0)[0] == ("negative_gain", 2.0)
    assert dial_options("cancel", "backup", 0.0) == (None, {"negatives": "cancel"})
    key, options = dial_options("cancel", "backup", 1.0)
    assert key == ("backup", 1.0) and build("modular_counter", C3, 8, **options).options["negative_routes"]
    assert set(SWITCHES) <= {"distractor", "cancel", "constant", "backup"}
    with pytest.raises(ConstructionError, match="one of negative_gain, negative_sharpness, backup"):
        dial_options("cancel", "margin", 1.0)
    with pytest.raises(ConstructionError, match="takes 0 .without. or 1"):
        dial_options("cancel", "backup", 0.5)


def test_every_dial_is_an_option_of_every_construction_and_recorded_on_the_card():
    from sandbox_lens.constructions.registry import REGISTRY

    assert all(set(DIALS) <= set(entry.options) for entry in REGISTRY.values())
    spec = _counter(negative_gain=5.0, negative_sharpness=50.0)
    assert spec.options["negative_dials"] == {"gain": 5.0, "sharpness": 50.0}
    assert "negative_dials" not in _counter().options  # defaults leave the card as it was


@pytest.mark.parametrize("family", ["prefix_scan:S3", "modular_counter:C3", "gridworld:grid4", "dyck:2,3", "ffl"])
def test_the_extreme_settings_keep_every_family_exact(family):
    from sandbox_lens.interp.tasks.dyck import Dyck

    name, _, source = family.partition(":")
    src = None if name == "ffl" else Dyck(2, 3) if name == "dyck" else get_automaton(source)
    spec = build(
        name,
        src,
        8,
        negatives="distractor,cancel,constant,backup",
        negative_sharpness=1e4,
        negative_gain=1e3,
    )
    result = verify(spec, samples=200, seed=3)
    assert result.accuracy == 1.0, result.mismatches


def test_the_gain_scales_a_cancelling_heads_effect_alone():
    a, b = _pair_heads(_counter())
    small, _, _ = _effects(_counter(negative_gain=5.0), [f"{a}->logits"])
    large, _, _ = _effects(_counter(negative_gain=20.0), [f"{a}->logits"])
    assert small[f"{a}->logits"] > 1e-3
    assert large[f"{a}->logits"] == pytest.approx(4 * small[f"{a}->logits"], rel=1e-3)


def test_saturation_breaks_the_first_order_estimate_both_ways_and_not_patching():
    """Through a pinned softmax, a cancelling head's key input gets a vanishing gradient where one key wins and its
    query input an exploding one (∝ the scale) where keys tie; patching measures the same effects at every scale.
    (The pair cancels, so these edges stay outside the ground truth: the dial moves the estimate, not the truth.)"""
    a, _ = _pair_heads(_counter())
    q, k = f"embed->{a}.q", f"embed->{a}.k"
    soft, soft_estimate, _ = _effects(_counter(negative_sharpness=2.0), [q, k])
    assert 0.5 < soft_estimate[q] / soft[q] < 2
    for sharpness in (1e3, 1e4):
        spec = _counter(negative_sharpness=sharpness)
        model = to_hooked(spec)
        tokens = torch.from_numpy(model.card.io.encode(np.random.default_rng(0).integers(3, size=(16, 8))))
        with exact_precision():
            _, cache = model.run_with_cache(tokens)
        p = cache["blocks.0.attn.hook_pattern"][:, int(a.split(".")[1])]
        assert ((p < 1e-6) | ((p - p.amax(-1, keepdim=True)).abs() < 1e-6)).all()  # all weight on tied best keys
        exact, estimate, truth = _effects(spec, [q, k])
        assert truth.flow.cancelled and not {e.name for e in truth.relevant} & {q, k}
        assert abs(exact[k]) > 0.01 and abs(estimate[k]) < 1e-3 * abs(exact[k])  # vanishing
        assert abs(exact[q]) > 0.1 and abs(estimate[q]) > 100 * abs(exact[q])  # exploding
