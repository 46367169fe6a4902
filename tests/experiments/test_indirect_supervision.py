"""indirect-supervision: the observation maps name the thesis's observations, and the share of seeds that reach
the bar, fed numbers with a known answer."""

from __future__ import annotations

import numpy as np
import pytest

from sandbox_lens.interp.experiments import indirect_supervision as ind
from sandbox_lens.interp.experiments.rules import rule_on
from sandbox_lens.interp.tasks.catalogue import get_automaton


def test_the_maps_observe_what_the_thesis_names():
    c4, grid = (next(t for t in ind.TASKS if t[1] == n) for n in ("C4", "grid9"))
    a = get_automaton("C4")
    words = np.random.default_rng(0).integers(a.n_symbols, size=(50, 12))
    total = np.cumsum(words, axis=1)  # C4's symbol a adds a (thesis Def. 4)
    assert np.array_equal(np.asarray(c4[2])[a.run(words)], (total % 4 == 0).astype(int))
    g = get_automaton("grid9")
    walls = {i for i, lab in enumerate(grid[2]) if lab}
    assert walls == {0, g.n_states - 1}
    assert next(t for t in ind.TASKS if t[1] == "D8")[2] is None and get_automaton("D8").n_states == 4
    # (abab)*: accepting is state 3, the state after every whole abab; the two laws are the thesis's
    abab = get_automaton("abab")
    laws = [t[5] for t in ind.TASKS if t[1] == "abab"]
    assert laws == [((0, 1), 1.0), ((0, 1), 0.5)]
    accept = np.asarray(ind.ACCEPT)[abab.run([0, 1] * 5)]
    assert "".join(map(str, accept)) == "0001000100"


def test_a_task_is_learned_when_some_seed_reaches_the_bar():
    e = ind.reach_share([0.995, 0.9, 0.8, 0.85, 0.7, 0.6])
    assert e.value == pytest.approx(1 / 6) and e.interval[0] > 0
    assert rule_on(ind.RULES["learned"], e)["verdict"] == "reproduced"
    # none of six: a share up to 0.39 is still possible, and the best of the thesis's 25 runs could reach the bar
    none = ind.reach_share([0.98, 0.9, 0.8, 0.85, 0.7, 0.6])
    assert rule_on(ind.RULES["learned"], none)["verdict"] == "inconclusive"
    few = ind.reach_share([0.999, 0.999])
    assert rule_on(ind.RULES["learned"], few)["verdict"] == "not tested"


def test_the_s5_observation_is_where_the_first_point_goes():
    """Observed state of S5-thesis after a word = the first point pushed through the word's generators one by one."""
    s5 = get_automaton("S5-thesis")
    label = next(t for t in ind.TASKS if t[1] == "S5-thesis")[2]
    assert ind.image_of("(0 1 2)(3 4)", 2) == 0 and ind.image_of("(0 1 2)(3 4)", 4) == 3 and ind.image_of("e", 1) == 1
    assert len(label) == s5.n_states and sorted(label.count(i) for i in range(5)) == [24] * 5
    words = np.random.default_rng(1).integers(s5.n_symbols, size=(40, 9))
    seen = np.asarray(label)[s5.run(words)]
    point = np.zeros(len(words), dtype=int)
    for t in range(words.shape[1]):  # push the point through each generator (composition σ_t ∘ … ∘ σ_1)
        point = np.array([ind.image_of(s5.alphabet[s], p) for s, p in zip(words[:, t], point)])
        assert np.array_equal(seen[:, t], point)


def test_the_stack_top_task_reads_the_top_of_the_catalogues_stack():
    """On Dyck with 2 types and depth 3 (small enough for the catalogue), the stack-top task's words walk the
    catalogue automaton's legal brackets and its targets are the top of that automaton's stack."""
    from sandbox_lens.interp.tasks.variants import StackTopTask

    task = StackTopTask(2, 3, 12)
    words, tops = task.sample(np.random.default_rng(0), 500)
    a = get_automaton("dyck2-depth3")
    names = np.asarray(a.states)[a.run(words)]
    assert "✗" not in names  # every bracket legal
    assert np.array_equal(tops, np.vectorize(lambda n: 0 if n == "ε" else 1 + "([".index(n[-1]))(names))
    assert isinstance(ind.observed_task(ind.STACK_TOP, 16, None, None), StackTopTask)
    assert ind.observed_task(ind.STACK_TOP, 16, None, None).d_vocab_out == 5
