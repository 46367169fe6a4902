"""Gradient methods say where rounding decides their derivative: ReLU units at the kink on the clean run."""

from __future__ import annotations

from circuit_families import FAMILIES

from sandbox_lens.interp.circuits.analyse import analyse
from sandbox_lens.interp.circuits.kinks import KINK_TOLERANCE, kinked_units
from sandbox_lens.interp.circuits.pairs import make_pairs
from sandbox_lens.interp.circuits.truth import ground_truth
from sandbox_lens.interp.model.hooked import load_strict, tl_state_dict, to_hooked


def test_the_balanced_stack_has_read_units_at_the_kink_and_the_counter_none():
    model = to_hooked(FAMILIES["dyck/balanced"]())
    k = kinked_units(model, make_pairs(model, 16, seed=0).clean)
    assert k["at_kink"] > 0 and k["by_block"][0] == 0 and k["by_block"][1] == k["at_kink"]
    counter = to_hooked(FAMILIES["modular_counter/C3"]())
    assert kinked_units(counter, make_pairs(counter, 16, seed=0).clean)["at_kink"] == 0


def test_a_unit_counts_by_its_distance_from_zero_and_only_if_read():
    """A block whose pre-activations are set by hand: units at 0, just inside and just outside the tolerance, one
    at 0 whose output nothing reads."""
    model = to_hooked(FAMILIES["modular_counter/C3"]())
    tokens = make_pairs(model, 4, seed=0).clean
    sd = {k: v.clone() for k, v in tl_state_dict(model).items()}  # TransformerLens 3.9's names, either back end
    W_in, b_in, W_out = (sd[f"blocks.0.mlp.{n}"] for n in ("W_in", "b_in", "W_out"))
    W_in.zero_(), b_in.zero_(), W_out.zero_()
    offsets = [0.0, 0.5 * KINK_TOLERANCE, 2 * KINK_TOLERANCE, 1.0, 0.0]
    for u, b in enumerate(offsets):
        b_in[u] = b
        W_out[u, 0] = 0.0 if u == len(offsets) - 1 else 1.0  # the last unit at 0 is read by nothing
    load_strict(model, sd)
    k = kinked_units(model, tokens)
    assert k["at_kink"] == 2 * tokens.size  # units 0 and 1, every position; not 2 (outside), 3 (far), 4 (unread)
    assert k["units"] == 4 * tokens.size


def test_gradient_methods_report_kinks_and_patching_does_not():
    spec = FAMILIES["dyck/balanced"]()
    model, truth = to_hooked(spec), ground_truth(spec)
    grad = analyse(model, "attribution", truth, pairs=8, curve=False)
    assert grad["kinks"]["at_kink"] > 0 and grad["kinks"]["units"] > grad["kinks"]["at_kink"]
    assert "kinks" not in analyse(model, "patching", truth, pairs=8, curve=False)
