"""The rival-algorithm registry: what each task can have, the refusals, and the high-level variables the records
name (group coordinates, the symbol) checked against the automata they describe."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sandbox_lens.interp.causal.algorithms import ALGORITHMS, AlgorithmError, algorithms_for, resolve
from sandbox_lens.interp.tasks.catalogue import get_automaton
from sandbox_lens.interp.tasks.groupvars import group_variables
from sandbox_lens.interp.tasks.statevars import SymbolVariables


def _names(automaton, T=8):
    ok, refused = algorithms_for("automaton", get_automaton(automaton), T)
    return {a.name for a in ok}, refused


def test_each_task_gets_the_algorithms_it_can_have():
    assert _names("C3")[0] == {"sequential", "scan", "counter"}
    assert _names("S3")[0] == {"sequential", "scan", "cascade", "parity_first"}
    assert _names("C4")[0] == {"sequential", "scan", "counter", "parity_first"}  # a 4-cycle is odd
    assert _names("A4")[0] == {"sequential", "scan", "cascade"}
    assert "boundary" in _names("grid4")[0]
    ok, refused = algorithms_for("dyck", None, 8)
    assert {a.name for a in ok} == {"stack", "depth_only"} and not refused
    assert all(a.kind in ("automaton", "dyck") for a in ALGORITHMS.values())


@pytest.mark.parametrize(
    "spec, automaton, T, says",
    [
        ("cascade", "C3", 8, "abelian"),
        ("cascade", "S5", 8, "not solvable"),
        ("counter", "S3", 8, "not abelian"),
        ("parity_first", "C3", 8, "no odd permutation"),
        ("parity_first", "A4", 8, "no odd permutation"),
        ("parity_first", "parity", 8, "sign is its state"),
        ("parity_first", "A5", 8, "no odd permutation"),
        ("parity_first", "S7", 8, "more than 1024 elements"),
        ("scan", "C3", 2, "no intermediate window"),
        ("scan", "S6", 8, "window maps"),
        ("stack", "C3", 8, "dyck tasks"),
        ("bogus", "C3", 8, "unknown algorithm"),
        ("flipflop_reset", "C3", 8, "unknown algorithm"),
    ],
)
def test_a_candidate_the_task_cannot_have_is_refused_in_one_line(spec, automaton, T, says):
    with pytest.raises(AlgorithmError) as e:
        resolve(spec, "automaton", get_automaton(automaton), T)
    message = str(e.value)
    assert says in message and "\n" not in message and "can have" in message


def test_all_skips_what_does_not_apply_and_says_why():
    ok, refused = resolve("all", "automaton", get_automaton("S5"), 8)
    assert [a.name for a in ok] == ["sequential", "scan", "parity_first"]  # windows: 125 maps (120 + 5 constants)
    assert "not solvable" in refused["cascade"] and "scan" not in refused and "parity_first" not in refused
    ok, refused = resolve("all", "automaton", get_automaton("S6"), 8)
    assert [a.name for a in ok] == ["sequential"] and "window maps" in refused["scan"]
    assert [a.name for a in resolve("scan, counter", "automaton", get_automaton("C3"), 8)[0]] == ["scan", "counter"]


@pytest.mark.parametrize("name", ["S3", "S4", "A4", "C4", "C3", "parity"])
@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**31))
def test_group_coordinates_give_the_automaton(name, seed):
    """τ_1(P¹) ∘ … ∘ τ_d(P^d) applied to q0 is the state after every prefix; setting a coordinate to its own value
    changes nothing; the last level reaches only its own position, the others every later one."""
    a = get_automaton(name)
    f = group_variables(a)
    r = np.random.default_rng(seed)
    words, other = r.integers(len(a.alphabet), size=(2, 12, 9))
    assert np.array_equal(f.image[f.elements(f.prefixes(words))], a.run(words))
    for variable in f.names:
        values, defined, classes = f.values(words, variable)
        assert defined.all() and values.min() >= 0 and values.max() < classes
        for p in (0, 4, 8):
            labels, scored = f.counterfactual(words, words, p, variable, "parallel")
            assert np.array_equal(labels, a.run(words))
            _, scored = f.counterfactual(words, other, p, variable, "parallel")
            last = variable == "sign" or variable == f.names[len(f.levels) - 1]
            assert scored[:, p].all() and not scored[:, :p].any()
            assert scored[:, p + 1 :].any() == (not last and p < 8)


def test_the_sign_is_the_parity_of_the_prefix():
    a = get_automaton("S3")
    f = group_variables(a)
    words = np.random.default_rng(0).integers(2, size=(50, 7))
    odd = np.array([a.transition_map(s) != (1, 2, 0) and a.transition_map(s) != (2, 0, 1) for s in range(2)])
    assert np.array_equal(f.values(words, "sign")[0], np.cumsum(odd[words], axis=1) % 2)
    # a sign set to the source's moves output p within its coset: only where the source's parity differs
    other = np.random.default_rng(1).integers(2, size=(50, 7))
    labels, _ = f.counterfactual(words, other, 3, "sign", "parallel")
    same = f.values(words, "sign")[0][:, 3] == f.values(other, "sign")[0][:, 3]
    assert np.array_equal(labels[same, 3], a.run(words)[same, 3])
    assert (labels[~same, 3] != a.run(words)[~same, 3]).any()  # τ(1), a transposition, fixes one point


def test_a_symbol_swapped_reruns_the_automaton_from_there():
    a = get_automaton("C4")
    f = SymbolVariables(a)
    r = np.random.default_rng(3)
    base, source = r.integers(len(a.alphabet), size=(2, 20, 6))
    labels, scored = f.counterfactual(base, source, 2, "symbol", "parallel")
    words = base.copy()
    words[:, 2] = source[:, 2]
    assert np.array_equal(labels, a.run(words))
    assert scored[:, 2:].all() and not scored[:, :2].any()


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**31))
def test_a_group_with_no_cascade_still_has_its_sign(seed):
    """S5 is not solvable: no levels, but its sign (parity first) comes from composing the symbols, and it agrees with
    the cascade's wherever both exist (S3, S4)."""
    from sandbox_lens.interp.tasks.groupvars import SignVariables

    a = get_automaton("S5")
    f = group_variables(a)
    assert isinstance(f, SignVariables) and f.names == ("sign",) and len(f.image) == 120
    r = np.random.default_rng(seed)
    words, other = r.integers(len(a.alphabet), size=(2, 12, 9))
    assert np.array_equal(f.image[f._group(words)], a.run(words))
    odd = np.array([1, 0])  # (0 1) is odd, (0 1 2 3 4) even
    assert np.array_equal(f.values(words, "sign")[0], np.cumsum(odd[words], axis=1) % 2)
    assert np.array_equal(f.counterfactual(words, words, 4, "sign", "parallel")[0], a.run(words))
    for name in ("S3", "S4"):
        b = get_automaton(name)
        cascade = group_variables(b)
        direct = SignVariables(b, sorted(cascade.index))
        w, o = r.integers(len(b.alphabet), size=(2, 12, 9))
        assert np.array_equal(direct.values(w, "sign")[0], cascade.values(w, "sign")[0])
        got, want = (
            direct.counterfactual(w, o, 5, "sign", "parallel"),
            cascade.counterfactual(w, o, 5, "sign", "parallel"),
        )
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
