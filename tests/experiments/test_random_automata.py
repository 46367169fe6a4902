"""random-automata: the catalogue's random permutation automata, the exact pair chain, and the effect computations
fed synthetic numbers with a known answer."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from sandbox_lens.interp.errors import AutomatonError
from sandbox_lens.interp.experiments import random_automata as ra
from sandbox_lens.interp.experiments.rules import rule_on
from sandbox_lens.interp.tasks.catalogue import get_automaton, permutation_automaton


def test_random_automata_are_seeded_permutations():
    a, again, other = get_automaton("random5-3-7"), get_automaton("Random5-3-7"), get_automaton("random5-3-8")
    assert a.alphabet == ("g0", "g1", "g2") and a.n_states == 5 and a.initial == 0
    assert np.array_equal(a.delta, again.delta) and not np.array_equal(a.delta, other.delta)
    assert all(sorted(row) == list(range(5)) for row in a.delta.tolist())  # every symbol a permutation
    for bad in ("random1-2-0", "random13-2-0", "random4-0-0", "random4-2-" + "9" * 12):
        with pytest.raises(AutomatonError, match="between"):
            get_automaton(bad)


def _enumerated(a, b, T):
    """The joint distribution after T symbols by running every word (the definition)."""
    joint = np.zeros((a.n_states, b.n_states))
    words = np.array(list(itertools.product(range(a.n_symbols), repeat=T)), dtype=np.int64)
    np.add.at(joint, (a.run(words)[:, -1], b.run(words)[:, -1]), 1 / len(words))
    return joint


@pytest.mark.parametrize("names", [("random3-2-0", "random3-2-5"), ("random4-3-1", "random4-3-2"), ("S3", "parity")])
def test_the_pair_chain_is_the_distribution_over_every_word(names):
    a, b = (get_automaton(n) for n in names)
    joints = ra.pair_distributions(a, b, 6)
    assert joints[0][a.initial, b.initial] == 1.0
    for T in range(1, 7):
        assert np.allclose(joints[T], _enumerated(a, b, T), atol=1e-12)
        assert np.allclose(joints[T].sum(1), ra.final_state_distribution(a, T), atol=1e-12)


def test_dependence_is_zero_for_independent_and_high_for_copies():
    a = get_automaton("random4-4-3")
    same = ra.dependence(ra.pair_distributions(a, a, 30))
    assert same[-1] > 0.7 and ra.decorrelation_length(same) is None  # a copy never decorrelates
    assert ra.dependence(np.outer([0.2, 0.8], [0.5, 0.25, 0.25])) == pytest.approx(0.0, abs=1e-15)
    # symbols that act alike: the state is fixed by T alone, and such a pair is left out
    alike = permutation_automaton("alike", 3, {"a": [1, 2, 0], "b": [1, 2, 0]})
    s3 = get_automaton("S3")
    assert ra.length_determined(ra.pair_distributions(alike, s3, 5))
    assert not ra.length_determined(ra.pair_distributions(s3, s3, 5))
    curve = np.array([0.0, 0.5, 0.02, 0.009, 0.011, 0.005, 0.001])
    assert ra.decorrelation_length(curve) == 5 and ra.decorrelation_length(np.zeros(4)) == 0


def test_group_orders():
    for name, order in (("S3", 6), ("S4", 24), ("C5", 5), ("A5", 60), ("D8", 8)):
        assert ra.group_order(get_automaton(name)) == order


def test_the_effects_on_synthetic_numbers():
    # (a): 18 of 20 pairs decorrelate -> 0.9 with a Wilson interval that contains 0.9: inconclusive
    e = ra.share_decorrelated([3] * 18 + [None] * 2)
    assert e.value == pytest.approx(0.9) and e.interval[0] < 0.9 < e.interval[1] and e.n == 20
    assert rule_on(ra.RULES["decorrelate"], e)["verdict"] == "inconclusive"
    assert rule_on(ra.RULES["decorrelate"], ra.share_decorrelated([5] * 200))["verdict"] == "reproduced"
    # (b): every-prefix twins at 1.0, final-only at 0.3 on five automata at the longest length -> gap 0.7
    rows = [{"length": 16, "every": 1.0, "final": 0.3 + 0.01 * i} for i in range(5)]
    rows += [{"length": 8, "every": 1.0, "final": 1.0} for _ in range(5)]  # shorter lengths do not enter
    gap = ra.accuracy_gaps(rows)
    assert gap.n == 5 and gap.value == pytest.approx(0.68)
    assert rule_on(ra.RULES["harder"], gap)["verdict"] == "reproduced"
    same = ra.accuracy_gaps([{"length": 8, "every": 0.9, "final": 0.9 + d} for d in (-0.01, 0.0, 0.01, 0.0, 0.0)])
    assert rule_on(ra.RULES["harder"], same)["verdict"] == "not reproduced"


def test_the_trained_automata_skip_those_the_length_alone_decides():
    chosen = ra.instances(3, 5)
    assert len(chosen) == 5 and "random3-2-3" not in [a.name for a in chosen]  # its state is fixed by T
    assert ra.final_state_distribution(get_automaton("random3-2-3"), 6).max() == 1.0
    assert all(ra.final_state_distribution(a, 16).max() < 1 for a in chosen)


def test_pe_at_2t_gaps_on_synthetic_numbers():
    """pe-at-2t's effect: per learned twin, accuracy at T − at 2T; sinusoidal's mean minus linear's."""
    from sandbox_lens.interp.experiments import pe_at_2t

    rows = [{"code": "sinusoidal", "held_out": 0.99, "at_T": 0.99, "at_2T": 0.6 + 0.01 * i} for i in range(5)]
    rows += [{"code": "linear", "held_out": 0.99, "at_T": 0.98, "at_2T": 0.9 + 0.01 * i} for i in range(5)]
    rows += [{"code": "linear", "held_out": 0.5, "at_T": 0.5, "at_2T": 0.1}]  # not learned: left out
    assert pe_at_2t.gaps(rows, "linear") == pytest.approx([0.08, 0.07, 0.06, 0.05, 0.04])
    e = pe_at_2t.gap_difference(rows)
    assert e.value == pytest.approx(0.37 - 0.06) and e.n == 5
    assert rule_on(pe_at_2t.RULES["worse at 2T"], e)["verdict"] == "reproduced"
    same = [{**r, "at_2T": 0.9} for r in rows]
    assert rule_on(pe_at_2t.RULES["worse at 2T"], pe_at_2t.gap_difference(same))["verdict"] == "not reproduced"
    # the (abab)* half counts every twin, learned or not: the advantage at T, and its shrinking at 2T
    abab = [{"code": "sinusoidal", "held_out": 0.99, "at_T": 0.97 + 0.005 * i, "at_2T": 0.8} for i in range(5)]
    abab += [{"code": "linear", "held_out": 0.6, "at_T": 0.6 + 0.01 * i, "at_2T": 0.7} for i in range(5)]
    ahead = pe_at_2t.advantage_at_t(abab)
    assert ahead.value == pytest.approx(0.98 - 0.62) and ahead.groups["linear"] == [r["at_T"] for r in abab[5:]]
    assert rule_on(pe_at_2t.RULES["abab advantage at T"], ahead)["verdict"] == "reproduced"
    shrink = pe_at_2t.gap_difference(abab, learned_only=False)
    assert shrink.value == pytest.approx((0.98 - 0.8) - (0.62 - 0.7))
    assert rule_on(pe_at_2t.RULES["abab shrinks at 2T"], shrink)["verdict"] == "reproduced"
    level = [{**r, "at_T": 0.9, "at_2T": 0.9} for r in abab]  # no advantage, nothing to shrink
    assert rule_on(pe_at_2t.RULES["abab advantage at T"], pe_at_2t.advantage_at_t(level))["verdict"] == "not reproduced"
