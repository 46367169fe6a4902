"""parity-counts: the (position, running count) tallies, the training law's surprisals and both effects, fed words
and per-seed numbers with a known answer."""

from __future__ import annotations

from math import comb, log

import numpy as np
import pytest

from sandbox_lens.interp.experiments import parity_counts as pc
from sandbox_lens.interp.experiments.rules import rule_on
from sandbox_lens.interp.stats import estimate


def test_cells_tally_each_position_at_its_running_count():
    words = np.array([[1, 0, 1], [0, 0, 1]])
    ok = np.array([[True, False, True], [False, True, True]])
    errors, totals = pc.cell_tallies(words, ok)
    assert totals.shape == (3, 4) and totals.sum() == 6
    # word 0 runs 1, 1, 2; word 1 runs 0, 0, 1
    assert totals[0, 1] == totals[0, 0] == 1 and totals[1, 1] == totals[1, 0] == 1
    assert totals[2, 2] == totals[2, 1] == 1
    assert errors[1, 1] == 1 and errors[0, 0] == 1 and errors.sum() == 2


def test_surprisals_are_the_binomial_law_and_its_pool():
    joint, pooled = pc.surprisals(4, 0.5)
    assert joint[3, 2] == pytest.approx(-log(comb(4, 2) / 16))
    assert np.isinf(joint[0, 2])  # two ones after one symbol: impossible
    p_one = np.mean([comb(t + 1, 1) / 2 ** (t + 1) for t in range(4)])
    assert pooled[0, 1] == pooled[3, 1] == pytest.approx(-log(p_one))


def _tallies(rate):
    """Cells of a length-8 law with 100 words each and the error rate ``rate(t, c)``."""
    T = 8
    totals = np.zeros((T, T + 1))
    errors = np.zeros((T, T + 1))
    for t in range(T):
        for c in range(t + 2):
            totals[t, c] = 100
            errors[t, c] = round(100 * rate(t, c))
    return errors, totals


def test_rank_gap_tells_a_position_keyed_twin_from_a_count_keyed_one():
    joint, pooled = pc.surprisals(8, 0.5)
    # errors that rise with how unusual the count is *for its position*
    keyed_to_pair = _tallies(lambda t, c: min(1.0, joint[t, c] / 10))
    # errors that rise only with how rare the count is over all positions
    keyed_to_count = _tallies(lambda t, c: min(1.0, pooled[t, c] / 10))
    assert pc.rank_gap(*keyed_to_pair, 0.5) > 0.2
    assert pc.rank_gap(*keyed_to_count, 0.5) < -0.2
    assert pc.rank_gap(*_tallies(lambda t, c: 0.0), 0.5) is None  # no errors: nothing to rank
    sparse = keyed_to_pair[0], np.minimum(keyed_to_pair[1], 5)
    assert pc.rank_gap(*sparse, 0.5) is None  # no cell with MIN_CELL words


def test_the_remedy_is_paired_by_seed_over_seeds_where_both_learned():
    rows = [{"population": "plain", "seed": s, "held_out": 0.99, "low": 0.70} for s in range(6)]
    rows += [{"population": "shifted", "seed": s, "held_out": 0.99, "low": 0.80 + 0.01 * s} for s in range(6)]
    rows[0]["held_out"] = 0.5  # seed 0's plain twin did not learn: the pair is left out
    gains = pc.low_count_gains(rows)
    assert gains == pytest.approx([0.11, 0.12, 0.13, 0.14, 0.15])
    assert rule_on(pc.RULES["remedy"], estimate(gains))["verdict"] == "reproduced"
    flat = [{**r, "low": 0.7} for r in rows]
    assert rule_on(pc.RULES["remedy"], estimate(pc.low_count_gains(flat)))["verdict"] == "not reproduced"


def test_the_explanation_counts_learned_plain_twins_with_a_defined_gap():
    rows = [{"population": "plain", "seed": s, "held_out": 0.99, "rank_gap": 0.3 + 0.01 * s} for s in range(6)]
    rows += [{"population": "plain", "seed": 6, "held_out": 0.99, "rank_gap": None}]
    rows += [{"population": "shifted", "seed": 0, "held_out": 0.99, "rank_gap": -0.5}]
    gaps = pc.explanation_gaps(rows)
    assert len(gaps) == 6
    assert rule_on(pc.RULES["explanation"], estimate(gaps, unit="twins"))["verdict"] == "reproduced"
    against = [{**r, "rank_gap": -0.3 - 0.01 * r["seed"]} for r in rows if r["rank_gap"] is not None]
    verdict = rule_on(pc.RULES["explanation"], estimate(pc.explanation_gaps(against), unit="twins"))["verdict"]
    assert verdict == "opposite direction"


def test_automata_without_count_words_are_refused_before_anything_is_written(tmp_path, capsys):
    from sandbox_lens.interp.cli import main

    for name, why in (("dyck2-depth4", "illegal inputs"), ("C1", "one symbol")):
        code = main(["experiment", "parity-counts", "--automaton", name, "--quick", "--out", str(tmp_path / name)])
        assert code == 2 and why in capsys.readouterr().err and not (tmp_path / name).exists()
