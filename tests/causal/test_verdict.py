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


def test_the_das_verdict_on_synthetic_sweeps():
    from sandbox_lens.interp.causal.verdict import das_verdict

    def sweep(best, k1=None):
        other = None if best is None else 0.2
        by_hook = [{"hook": "blocks.0.hook_resid_mid", "k": 8, "iia": other}, {"hook": MID1, "k": 8, "iia": best}]
        return {"by_hook": by_hook, "k": [{"k": 1, "iia": k1}, {"k": 8, "iia": best}]}

    found = das_verdict(sweep(0.99, k1=0.97), {"iia": 0.5}, None, [])
    assert found["implements"] is True and found["k"] == 1 and MID1 in found["verdict"]
    assert das_verdict(sweep(0.99), {"iia": 0.96}, None, [])["implements"] is None  # the null reaches it too
    named = [{"site": "depth @ mid", "role": "carries", "iia": 1.0}]
    blind = das_verdict(sweep(0.3), {"iia": 0.5}, sweep(0.4), named, "depth")
    assert blind["implements"] is None and blind["das_blind"] and "no evidence of absence" in blind["verdict"]
    assert das_verdict(sweep(0.3), {"iia": 0.5}, sweep(0.99), named)["implements"] is False
    assert das_verdict(sweep(IMPLEMENTS - 1e-9), None, None, [])["implements"] is False
    assert das_verdict(sweep(None), None, None, [])["implements"] is None


def test_the_bar_is_relative_to_the_models_own_accuracy():
    """No intervention makes a model more right than it is: at accuracy 0.98 a site carries the variable from
    IIA 0.95 × 0.98 = 0.931; the null's bar stays absolute."""
    from sandbox_lens.interp.causal.verdict import das_verdict

    almost = _at(0.94)
    assert verdict(almost, _at(MID0), _at(MID0), _at(0.3))["implements"] is False
    relative = verdict(almost, _at(MID0), _at(MID0), _at(0.3), ceiling=0.98)
    assert relative["implements"] is True and "0.931" in relative["rule"]
    sweep = {"by_hook": [{"hook": MID1, "k": 8, "iia": 0.94}], "k": [{"k": 8, "iia": 0.94}]}
    assert das_verdict(sweep, {"iia": 0.5}, None, [], ceiling=0.98)["implements"] is True
    assert das_verdict(sweep, {"iia": 0.5}, None, [])["implements"] is False


def test_a_dormant_das_subspace_is_not_believed():
    from sandbox_lens.interp.causal.verdict import das_verdict

    row = {"hook": MID1, "k": 2, "iia": 0.99, "live_fraction": 0.3}
    sweep = {"by_hook": [{**row, "k": 8, "live_fraction": 0.2}], "k": [row, {**row, "k": 8, "live_fraction": 0.2}]}
    dormant = das_verdict(sweep, {"iia": 0.4}, None, [])  # judged at the smallest k that reaches the bar
    assert dormant["implements"] is None and dormant["dormant"] and "70%" in dormant["verdict"] and "k = 2" in dormant["verdict"]
    row["live_fraction"] = 0.9
    sweep["k"][0] = row
    assert das_verdict(sweep, {"iia": 0.4}, None, [])["implements"] is True
