"""ffl-one-head: the attention masses at the ⊥ queries, the paired cleanliness and the stuck shares, fed patterns
and per-twin numbers with a known answer."""

from __future__ import annotations

import numpy as np
import pytest

from sandbox_lens.interp.experiments import ffl_one_head as fo
from sandbox_lens.interp.experiments.rules import rule_on
from sandbox_lens.interp.stats import estimate

W0, W1, N = fo.WRITE0, fo.WRITE1, fo.NOOP


def _pattern(words, weights):
    """A [batch, query, key] pattern over BOS + word where ``weights(word, t)`` gives the row over word positions."""
    b, T = words.shape
    pat = np.zeros((b, T + 1, T + 1))
    for i, w in enumerate(words):
        for t in range(T):
            row = np.asarray(weights(w, t), dtype=float)
            pat[i, 1 + t, 1 : 2 + t] = row[: t + 1]
            pat[i, 1 + t, 0] = 1 - row[: t + 1].sum()
    return pat


def test_a_latest_write_head_puts_all_its_mass_on_the_latest_write():
    words = np.array([[W0, N, W1, N, W1, N, N]])

    def latest(w, t):
        row = np.zeros(len(w))
        row[max(j for j in range(t + 1) if w[j] != N)] = 1
        return row

    m = fo.attention_masses(words, _pattern(words, latest))
    assert m["latest"] == pytest.approx(1) and m["older_same"] == 0 and m["other_type"] == 0 and m["rest"] == 0
    assert m["first"] == 0  # queries at t = 5, 6 have a first write (t = 0) that is not the latest


def test_a_dense_head_spreads_over_every_write_of_the_latest_type():
    words = np.array([[W1, W0, W1, N, N]])  # at the ⊥ queries the latest is the W1 at 2; the W1 at 0 is older

    def dense(w, t):
        row = np.zeros(len(w))
        same = [j for j in range(t + 1) if w[j] == W1]
        row[same] = 1 / len(same)
        return row

    m = fo.attention_masses(words, _pattern(words, dense))
    assert m["latest"] == pytest.approx(0.5) and m["older_same"] == pytest.approx(0.5)
    assert m["first"] == pytest.approx(0.5) and m["other_type"] == 0
    assert np.isnan(fo.attention_masses(np.array([[N, N]]), np.zeros((1, 3, 3)))["latest"])  # no write: no query


def _rows(latest_sharp, latest_plain, held=0.999):
    rows = []
    for s, (a, b) in enumerate(zip(latest_sharp, latest_plain)):
        rows.append({"seed": s, "p_noop": 0.9, "sharpen": True, "held_out": held, "masses": {"latest": a}})
        rows.append({"seed": s, "p_noop": 0.9, "sharpen": False, "held_out": held, "masses": {"latest": b}})
    return rows


def test_cleanliness_is_paired_over_seeds_where_both_learned():
    rows = _rows([0.98, 0.99, 0.97, 0.99, 0.98, 0.95], [0.4, 0.5, 0.45, 0.55, 0.5, 0.9])
    rows[-1]["held_out"] = 0.5  # seed 5's plain twin did not learn: its pair is left out
    pairs = fo.cleaner_pairs(rows)
    assert pairs == pytest.approx([0.58, 0.49, 0.52, 0.44, 0.48])
    assert rule_on(fo.RULES["cleaner"], estimate(pairs, unit="pairs"))["verdict"] == "reproduced"
    same = fo.cleaner_pairs(_rows([0.9] * 6, [0.9] * 6))
    assert rule_on(fo.RULES["cleaner"], estimate(same, unit="pairs"))["verdict"] == "not reproduced"


def test_the_stuck_shares_are_compared_across_laws():
    rows = [
        {"p_noop": p, "sharpen": True, "seed": s, "held_out": 0.5 if (p == 0.5 and s < 7) else 0.999}
        for p in fo.NOOP_PROBS
        for s in range(10)
    ]
    rows += [{"p_noop": 0.5, "sharpen": False, "seed": 0, "held_out": 0.1}]  # plain twins do not count
    e = fo.stuck_difference(rows)
    assert e.value == pytest.approx(0.7) and e.n == 10
    assert rule_on(fo.RULES["stuck"], e)["verdict"] == "reproduced"
    even = [{**r, "held_out": 0.999} for r in rows]
    assert rule_on(fo.RULES["stuck"], fo.stuck_difference(even))["verdict"] != "reproduced"
