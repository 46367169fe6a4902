"""The causal verdict's rule on synthetic numbers: each branch, and its thresholds."""

from interp.causal.verdict import COVERAGE, IMPLEMENTS, verdict

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
