"""The causal verdict's rule on synthetic numbers: each branch, and its thresholds."""

from sandbox_lens.interp.causal.verdict import COVERAGE, IMPLEMENTS, verdict

MID0, MID1, POST1 = "blocks.0.hook_resid_mid", "blocks.1.hook_resid_mid", "blocks.1.hook_resid_post"


def _at(value, n=10):
    return {p: value for p in range(n)}


def test_every_branch():
    same = verdict(_at(1.0), _at(MID0), _at(MID0), _at(0.3))
    assert same["implements"] is True and "construction's sites" in same["verdict"]
    later = verdict(_at(1.0), _at(MID1), _at(MID0), _at(0.3))
    assert "later than" in later["verdict"] and later["median_block_shift"] == 1.0
    earlier = verdict(_at(1.0), _at(MID0), _at(POST1), _at(0.3))
    assert "earlier than" in earlier["verdict"]
    assert verdict(_at(0.9), _at(None), _at(MID0), _at(0.3))["implements"] is False
    null = verdict(_at(1.0), _at(MID0), _at(MID0), {**_at(0.3), 4: 0.97})
    assert null["implements"] is None and "null" in null["verdict"]
    token = {**_at(MID0), 0: "blocks.0.hook_resid_pre"}  # position 0: the token's image; the null's luck there
    assert verdict(_at(1.0), token, token, {**_at(0.3), 0: 1.0})["implements"] is True


def test_the_thresholds_are_where_the_rule_says():
    just = {p: (IMPLEMENTS if p < 9 else 0.5) for p in range(10)}  # 90 % of the positions
    assert verdict(just, _at(MID0), _at(MID0), _at(0.0))["implements"] is True
    short = {p: (IMPLEMENTS if p < 8 else 0.5) for p in range(10)}
    assert verdict(short, _at(MID0), _at(MID0), _at(0.0))["implements"] is False
    assert COVERAGE == 0.9
    below = {p: IMPLEMENTS - 1e-9 for p in range(10)}
    assert verdict(below, _at(MID0), _at(MID0), _at(0.0))["implements"] is False
    unscored = {**_at(1.0), 3: None}  # a position with no changed output does not count
    assert verdict(unscored, _at(MID0), _at(MID0), _at(0.0))["positions"] == 9


def test_trivial_sites_are_named_as_such():
    """First sites at or after the last attention layer's output (block order ≥ trivial_from) carry a read-out
    variable whatever the model computes: the verdict says so; an earlier first site does not get the caveat."""
    from sandbox_lens.interp.causal.verdict import block_order

    assert block_order(MID1) == 1 + 1 / 3 and block_order("blocks.0.hook_resid_pre") == 0.0
    late = verdict(_at(1.0), _at(MID1), _at(MID0), _at(0.3), trivial_from=block_order(MID1))
    assert late["trivial"] is True and "only after its last attention layer" in late["verdict"]
    early = verdict(_at(1.0), _at(MID0), _at(MID0), _at(0.3), trivial_from=block_order(MID1))
    assert early["trivial"] is False and "last attention" not in early["verdict"]
    depth = verdict(_at(1.0), _at(MID0), _at(MID0), _at(0.3), variable="depth")
    assert "'depth'" in depth["verdict"] and depth["trivial"] is False


def test_full_swaps_cannot_tell_what_they_cannot_isolate_in_the_construction():
    blind = verdict(_at(0.7), _at(None), _at(None), _at(0.3), variable="depth")
    assert blind["implements"] is None and "no full swap isolates 'depth'" in blind["verdict"]
    token = {0: "blocks.0.hook_resid_pre", **{p: MID1 for p in range(1, 10)}}  # position 0: the token itself
    assert verdict(_at(1.0), token, token, _at(0.3), trivial_from=1 + 1 / 3)["trivial"] is True


def _das(iia, interval=None, k=2, hook=MID0, live=0.9):
    lo, hi = interval if interval else (iia - 0.02, min(1.0, iia + 0.02))
    return {"iia": iia, "interval": (lo, hi), "hook": hook, "k": k, "live_fraction": live}


def _test(iia, width=0.02):
    return {"iia": iia, "interval": (iia - width, min(1.0, iia + width))}


NULLS = [_test(0.35), _test(0.40), _test(0.38), _test(0.36), _test(0.41)]


def test_the_das_verdict_on_synthetic_numbers():
    from sandbox_lens.interp.causal.verdict import das_verdict

    found = das_verdict(_das(0.99), NULLS, _test(0.05), chance=1 / 3)
    assert found["implements"] is True and "2 dimension(s)" in found["verdict"] and MID0 in found["verdict"]
    null = das_verdict(_das(0.99, (0.96, 1.0)), [*NULLS, _test(0.97)], _test(0.05), chance=1 / 3)
    assert null["implements"] is None and "random-init" in null["verdict"]  # a null's upper bound above 0.96
    named = [{"site": "depth @ mid", "role": "carries", "iia": 1.0}]
    blind = das_verdict(_das(0.3), NULLS, None, chance=0.5, named=named, variable="depth", construction=_test(0.4))
    assert blind["implements"] is None and blind["das_blind"] and "no evidence of absence" in blind["verdict"]
    assert das_verdict(_das(0.3), NULLS, None, chance=0.5, named=named, construction=_test(0.99))["implements"] is False
    assert das_verdict({"iia": None}, NULLS, None, chance=0.5)["implements"] is None
    readout_only = das_verdict({}, [], None, chance=0.5, readout_only=True)
    assert readout_only["readout"] and readout_only["implements"] is None and "readout" in readout_only["verdict"]


def test_the_floor_refuses_a_model_right_only_as_often_as_a_guess():
    """The audit's synthetic twin: accuracy and IIA both 0.40, nulls at 0.35, chance 1/3 — a bar relative to the
    accuracy alone (0.38) would pass it; the floor (chance + FLOOR) does not."""
    from sandbox_lens.interp.causal.verdict import FLOOR, das_verdict

    twin = das_verdict(_das(0.40, (0.37, 0.43)), [_test(0.35, 0.01)] * 5, _test(0.05), chance=1 / 3, ceiling=0.40)
    assert twin["implements"] is False and "above chance" in twin["verdict"]
    assert twin["floor"] == 1 / 3 + FLOOR
    swaps = verdict(_at(0.40), _at(MID0), _at(MID0), _at(0.35), ceiling=0.40, chance=1 / 3)
    assert swaps["implements"] is False


def test_a_lower_bound_must_clear_the_nulls_and_the_readout_basis():
    from sandbox_lens.interp.causal.verdict import das_verdict

    edge = das_verdict(_das(0.97, (0.90, 0.99)), [_test(0.88, 0.03)], _test(0.05), chance=0.5)
    assert edge["implements"] is None and "0.91" in edge["verdict"]  # 0.90 ≤ the null's upper bound 0.91
    clear = das_verdict(_das(0.97, (0.92, 0.99)), [_test(0.88, 0.03)], _test(0.05), chance=0.5)
    assert clear["implements"] is True
    readout = das_verdict(_das(0.99), NULLS, _test(0.98), chance=1 / 3)
    assert readout["readout"] and readout["implements"] is None and "unembedding" in readout["verdict"]


def test_an_unstable_verdict_is_inconclusive():
    from sandbox_lens.interp.causal.evidence import STABLE
    from sandbox_lens.interp.causal.verdict import das_verdict, outcome, with_stability

    found = das_verdict(_das(0.99), NULLS, _test(0.05), chance=1 / 3)
    assert with_stability(found, STABLE)["implements"] is True
    shaky = with_stability(found, STABLE - 0.01)
    assert shaky["implements"] is None and shaky["inconclusive"] and shaky["verdict"].startswith("inconclusive")
    again = das_verdict(_das(0.985, (0.95, 0.995)), NULLS, _test(0.05), chance=1 / 3)
    assert outcome(again) == outcome(found)  # the numbers differ, the decision does not


def test_the_bar_is_relative_to_the_models_own_accuracy():
    """No intervention makes a model more right than it is: at accuracy 0.98 a site carries the variable from
    IIA 0.95 × 0.98 = 0.931; the null's bar stays absolute."""
    from sandbox_lens.interp.causal.verdict import das_verdict

    almost = _at(0.94)
    assert verdict(almost, _at(MID0), _at(MID0), _at(0.3))["implements"] is False
    relative = verdict(almost, _at(MID0), _at(MID0), _at(0.3), ceiling=0.98)
    assert relative["implements"] is True and "0.931" in relative["rule"]
    assert das_verdict(_das(0.94, (0.92, 0.96)), NULLS, None, chance=0.5, ceiling=0.98)["implements"] is True
    assert das_verdict(_das(0.94, (0.92, 0.96)), NULLS, None, chance=0.5)["implements"] is False


def test_a_dormant_das_subspace_is_not_believed():
    from sandbox_lens.interp.causal.verdict import das_verdict

    dormant = das_verdict(_das(0.99, live=0.3), NULLS, None, chance=0.5)
    assert (
        dormant["implements"] is None
        and dormant["dormant"]
        and "70%" in dormant["verdict"]
        and "k = 2" in dormant["verdict"]
    )
    assert das_verdict(_das(0.99, live=0.9), NULLS, None, chance=0.5)["implements"] is True


def test_a_subspace_must_carry_the_variable_at_most_positions_not_only_pooled():
    """The audit's half-trained aligned twin: pooled IIA at its accuracy, but the bar missed at later positions
    (as its full swaps say) — DAS no longer passes it."""
    from sandbox_lens.interp.causal.verdict import das_verdict

    half = {**_das(0.89, (0.86, 0.92)), "per_position": [1.0, 0.99, 0.97, 0.95, 0.80, 0.78, 0.75, 0.70]}
    refused = das_verdict(half, NULLS, _test(0.3), chance=1 / 3, ceiling=0.9)
    assert refused["implements"] is False and "at 4 of 8 positions" in refused["verdict"]
    whole = {**half, "per_position": [0.95] * 8}
    assert das_verdict(whole, NULLS, _test(0.3), chance=1 / 3, ceiling=0.9)["implements"] is True
