"""The automaton's variables beside its state (sandbox_lens.interp.tasks.statevars): each family's own semantics agree with
the automaton, and a swap with the base's own value changes nothing."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sandbox_lens.interp.tasks.catalogue import get_automaton
from sandbox_lens.interp.tasks.highlevel import HighLevelError, StateModel
from sandbox_lens.interp.tasks.statevars import GridVariables, LevelVariables, WindowVariables, window_maps


def _words(a, n=64, T=24, seed=0):
    return np.random.default_rng(seed).integers(a.n_symbols, size=(n, T))


@pytest.mark.parametrize("name", ["grid2", "grid3", "grid5", "grid7"])
def test_algorithm_1_is_the_gridworld(name):
    a = get_automaton(name)
    g = next(f for f in StateModel(a).families if isinstance(f, GridVariables))
    words = _words(a, T=40)
    states, lo = g.walk(g.z(words))
    assert np.array_equal(states, a.run(words))
    assert np.array_equal(g.z(words) - lo, states)  # q = z − the last boundary


@pytest.mark.parametrize("name", ["grid3", "grid4", "grid5"])
def test_the_levels_of_the_grid_cascade_give_the_state(name):
    a = get_automaton(name)
    high = StateModel(a)
    levels = next(f for f in high.families if isinstance(f, LevelVariables))
    words = _words(a)
    assert np.array_equal(levels.output[levels.run(words)], a.run(words))
    count = sum(high.values(words, lv)[0] for lv in levels.names)  # grid state = flip-flops holding R
    assert np.array_equal(count, a.run(words))


@settings(max_examples=25, deadline=None)
@given(
    st.sampled_from(["C3", "S3", "grid3", "flipflop", "parity"]),
    st.integers(1, 5),
    st.integers(1, 20),
    st.integers(0, 10_000),
)
def test_a_window_map_is_the_composition_of_its_symbols(name, l, T, seed):
    a = get_automaton(name)
    w = WindowVariables(a)
    words = _words(a, n=8, T=T, seed=seed)
    top = w.maps(words, l)
    for t in range(T):
        expect = np.tile(np.arange(a.n_states), (len(words), 1))
        for u in range(t - 2**l + 1, t + 1):  # oldest first; before the word: the constant map to q0
            expect = np.full_like(expect, a.initial) if u < 0 else a.delta[words[:, u][:, None], expect]
        assert np.array_equal(top[l][:, t], expect)
    assert np.array_equal(w.counterfactual(words, words, T - 1, f"window{l}", "parallel")[0], a.run(words))


@settings(max_examples=30, deadline=None)
@given(
    st.sampled_from(["grid3", "grid4", "C3"]),
    st.sampled_from(["parallel", "recurrent"]),
    st.integers(0, 10_000),
    st.data(),
)
def test_setting_a_variable_to_its_own_value_changes_nothing(name, mode, seed, data):
    a = get_automaton(name)
    high = StateModel(a, mode)
    words = _words(a, n=16, T=12, seed=seed)
    variable = data.draw(st.sampled_from(high.variables + ("window1", "window2")))
    p = data.draw(st.integers(0, 11))
    labels, scored = high.counterfactual(words, words, p, variable)
    assert scored[:, p].any() or variable == "boundary"
    assert np.array_equal(labels[scored], a.run(words)[scored])


def test_a_swap_moves_the_output_as_the_model_says():
    a = get_automaton("grid3")  # cells 0 1 2; L = 0, R = 1
    high = StateModel(a)
    # states 1 2 1 0 and 1 2 2 2; Algorithm 1's start visits z = −1, −2, −3, so z = −2 −1 −2 −3 and −2 −1 0 1
    base, source = np.array([[1, 1, 0, 0]]), np.array([[1, 1, 1, 1]])
    labels, scored = high.counterfactual(base, source, 2, "displacement")  # z_2 := 0: [−2, 0] is complete
    assert scored[0, 2] and labels[0, 2] == 2
    labels, scored = high.counterfactual(base, source, 1, "boundary")  # z_1 = −1 both, lo −3: no change
    assert scored[0, 1] and labels[0, 1] == 2
    labels, scored = high.counterfactual(base, source, 3, "boundary")  # lo: −3 and −1; z_3 = −3: −3 − (−1) < 0
    assert not scored[0, 3]
    rec = StateModel(a, "recurrent")
    labels, scored = rec.counterfactual(base, source, 1, "displacement")  # z_1 := 2 (same): nothing moves
    assert np.array_equal(labels[0, 1:], a.run(base)[0, 1:]) and scored[0, 1:].all()


def test_unknown_and_unoffered_variables_are_refused_with_what_there_is():
    with pytest.raises(
        HighLevelError,
        match=r"no variable 'depth' \(it has: state, f1, f2, displacement, boundary, symbol, "
        r"window<l>",
    ):
        StateModel(get_automaton("grid3")).variable("depth")
    assert StateModel(get_automaton("grid9")).variables[:2] == ("state", "displacement")  # 8 levels: by name only
    StateModel(get_automaton("grid9")).variable("f8")
    StateModel(get_automaton("grid9")).variable("window1")  # 212 maps (of 9^9): offered
    with pytest.raises(HighLevelError, match="no variable 'window1'"):  # 720 + 6 maps: no window variable
        StateModel(get_automaton("S6")).variable("window1")
    with pytest.raises(HighLevelError, match="no variable 'window0'"):
        StateModel(get_automaton("C3")).variable("window0")


@pytest.mark.parametrize(
    "name, count",
    [("parity", 4), ("S3", 9), ("S5", 125), ("A5", 65), ("grid5", 34), ("flipflop", 3), ("S6", None)],
)
def test_a_window_holds_the_symbols_monoid_or_a_constant_map(name, count):
    """S5's windows hold its 120 permutations and the 5 constant maps (a window begun before the word), not 5^5
    maps; S6's 720 + 6 are over the limit."""
    known = window_maps(get_automaton(name))
    assert (None if known is None else len(known)) == count


@settings(max_examples=20, deadline=None)
@given(st.sampled_from(["S5", "grid5", "S3", "A5"]), st.integers(1, 3), st.integers(1, 20), st.integers(0, 10_000))
def test_a_window_class_names_the_map_the_window_holds(name, l, T, seed):
    a = get_automaton(name)
    w = WindowVariables(a, window_maps(a))
    words = _words(a, n=8, T=T, seed=seed)
    classes, defined, n = w.values(words, f"window{l}")
    assert defined.all() and n == len(w.known) and classes.max() < n
    assert np.array_equal(w.known[classes], w.maps(words, l)[l])
