import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from sympy.combinatorics import Permutation, PermutationGroup

from sandbox_lens.interp.tasks.automata import Semiautomaton, parse_automaton_json
from sandbox_lens.interp.tasks.catalogue import get_automaton
from sandbox_lens.interp.tasks.groups import group_name, perfect_core_name, transformation_semigroup


@pytest.mark.parametrize(
    "name, size, is_group, solvable",
    [
        ("parity", 2, True, True),
        ("C5", 5, True, True),
        ("C2^3", 8, True, True),
        ("S3", 6, True, True),
        ("D8", 8, True, True),
        ("Q8", 8, True, True),
        ("A4", 12, True, True),
        ("S4", 24, True, True),
        ("A5", 60, True, False),
        ("S5", 120, True, False),
        ("flipflop", 3, False, True),
        ("memory3", 4, False, True),
    ],
)
def test_catalogue_semigroups(name, size, is_group, solvable):
    sg = transformation_semigroup(get_automaton(name))
    assert (sg.size, sg.is_group, sg.is_solvable) == (size, is_group, solvable)
    if is_group:
        assert sg.group_order == size


@pytest.mark.parametrize("name", ["grid4", "grid3+noop", "flipflop", "S3"])
def test_closure_equals_maps_of_all_short_words(name):
    # Independent check: collect the map of every word up to length 8 by simulation.
    a = get_automaton(name)
    maps = set()
    for k in range(1, 9):
        words = a.all_words(k)
        finals = [a.with_initial(q).run(words)[:, -1] for q in range(a.n_states)]
        maps |= {tuple(int(f[i]) for f in finals) for i in range(len(words))}
    assert transformation_semigroup(a).elements == frozenset(maps)


def test_non_group_semigroup_containing_a5_is_not_solvable():
    # A5 on points 0..4 plus a reset to 0: not a group, but it contains A5.
    a5 = get_automaton("A5")
    spec = {
        "states": list(a5.states),
        "alphabet": [*a5.alphabet, "reset"],
        "delta": {**{s: [a5.states[q] for q in a5.delta[i]] for i, s in enumerate(a5.alphabet)}, "reset": ["0"] * 5},
    }
    sg = transformation_semigroup(parse_automaton_json(json.dumps(spec)))
    assert not sg.is_group
    assert not sg.is_solvable


@given(st.lists(st.permutations(range(5)), min_size=1, max_size=3))
def test_closure_of_permutations_has_the_group_order(perms):
    a = Semiautomaton("random", tuple("01234"), tuple(f"g{i}" for i in range(len(perms))), np.array(perms))
    sg = transformation_semigroup(a)
    group = PermutationGroup([Permutation(p) for p in perms])
    assert sg.is_group and sg.size == group.order()
    assert sg.is_solvable == group.is_solvable


def _group(*perms: list[int]) -> PermutationGroup:
    return PermutationGroup([Permutation(p) for p in perms])


@pytest.mark.parametrize(
    "make, name",
    [
        (lambda: _group([0, 1, 2]), "trivial"),
        (lambda: _group([1, 2, 3, 4, 0]), "C5"),
        (lambda: _group([0, 2, 1, 3]), "C2"),  # on the two points it moves
        (lambda: _group([1, 2, 0], [1, 0, 2]), "S3"),
        (lambda: _group([1, 2, 0, 3], [1, 0, 3, 2]), "A4"),
        (lambda: _group([1, 2, 3, 0], [3, 2, 1, 0]), "order 8"),  # D4
        (lambda: _group([1, 2, 3, 4, 0], [1, 0, 2, 3, 4]), "S5"),
        (lambda: _group([1, 2, 3, 4, 0], [1, 2, 0, 3, 4]), "A5"),
        (lambda: _group([1, 2, 3, 4, 5, 0], [1, 0, 2, 3, 4, 5]), "S6"),
        # A5 × C2 (an A5 on 0..4 beside a swap of 5 and 6): not S_k or A_k, named by what it contains
        (
            lambda: _group([1, 2, 3, 4, 0, 5, 6], [1, 2, 0, 3, 4, 5, 6], [0, 1, 2, 3, 4, 6, 5]),
            "order 120, not solvable: contains A5",
        ),
        # PSL(2,7) on the 7 points of the Fano plane: perfect, named by its order
        (lambda: _group([1, 2, 3, 4, 5, 6, 0], [0, 2, 1, 6, 4, 5, 3]), "PSL(2,7)"),
        (lambda: _group([1, 2, 3, 4, 5, 6, 0], [0, 2, 1, 3, 5, 4, 6]), "A7"),
    ],
)
def test_group_names(make, name):
    assert group_name(make()) == name


def test_the_perfect_core_is_trivial_exactly_for_solvable_groups():
    s4 = _group([1, 2, 3, 0], [1, 0, 2, 3])
    assert perfect_core_name(s4) == "trivial" and s4.is_solvable
    a5 = _group([1, 2, 3, 4, 0], [1, 2, 0, 3, 4])
    assert perfect_core_name(a5) == "A5" and perfect_core_name(_group([1, 2, 3, 4, 0], [1, 0, 2, 3, 4])) == "A5"
