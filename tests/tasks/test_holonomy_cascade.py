"""The holonomy cascade (sandbox_lens.interp.tasks.holonomy_cascade): every random semiautomaton is either decomposed into
permutation-reset levels whose covering map is checked on every reachable product state, or refused because
a holonomy group is not solvable — and then a maximal subgroup is not solvable either."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, reject, settings
from strategies import semiautomata

from sandbox_lens.interp.budget import BudgetError
from sandbox_lens.interp.errors import AutomatonError
from sandbox_lens.interp.tasks.automata import Semiautomaton
from sandbox_lens.interp.tasks.catalogue import get_automaton
from sandbox_lens.interp.tasks.holonomy import holonomy_skeleton
from sandbox_lens.interp.tasks.holonomy_cascade import Coordinates, holonomy_cascade


def _is_permutation_reset(a: Semiautomaton) -> bool:
    return all(len(set(row)) in (1, a.n_states) for row in a.delta.tolist())


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(semiautomata())
def test_random_semiautomata_are_decomposed_or_refused_for_a_reason(a):
    try:
        h = holonomy_skeleton(a)
        solvable = h.semigroup.is_solvable
    except BudgetError:
        reject()
    try:
        cascade = holonomy_cascade(a, h)  # with_target checks the covering on every reachable product state
    except AutomatonError as e:
        if "reaches more than" in str(e) or "would tabulate" in str(e):
            reject()
        assert not solvable and "not solvable" in str(e)
        return
    assert solvable
    assert len(cascade.levels) == h.levels and all(_is_permutation_reset(lv.automaton) for lv in cascade.levels)
    words = np.random.default_rng(0).integers(a.n_symbols, size=(20, 12))
    target = a.run(words)
    for w, t in zip(words, target):  # the cascade run through its output map is the automaton
        p = cascade.initial
        for sigma, q in zip(w, t):
            p = cascade.step(p, int(sigma))
            assert cascade.output[p] == q


@pytest.mark.parametrize(
    "name, levels",
    [("flipflop", 1), ("C3+resets", 1), ("grid4", 3), ("dyck1-depth2", 3), ("grid3x3", 4), ("memory3", 1)],
)
def test_known_automata(name, levels):
    a = get_automaton(name)
    c = holonomy_cascade(a)
    assert len(c.levels) == levels and c.target is a
    co = Coordinates(holonomy_skeleton(a))
    assert all(co.decode(co.encode(q)) == q for q in range(a.n_states))


def test_a_non_solvable_automaton_is_refused_naming_the_group():
    with pytest.raises(
        AutomatonError, match=r"holonomy group of the image \{0, 1, 2, 3, 4\} is A5 \(order 60\), not solvable"
    ):
        holonomy_cascade(get_automaton("A5+resets"))


def _built_exact(a: Semiautomaton, T: int = 256) -> None:
    from sandbox_lens.constructions.registry import build
    from sandbox_lens.interp.verify import verify

    for result in (
        verify(
            build("krohn_rhodes", a, 16),
            exhaustive_upto=min(5, int(np.log(2000) / np.log(max(2, a.n_symbols)))),
            samples=0,
        ),
        verify(build("krohn_rhodes", a, T), exhaustive_upto=1, samples=100, seed=3),
    ):
        assert result.accuracy == 1.0, (a.delta.tolist(), result.accuracy)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(semiautomata(max_states=4))
def test_random_solvable_semiautomata_compile_to_exact_transformers(a):
    try:
        holonomy_skeleton(a).semigroup.is_solvable or reject()
    except BudgetError:
        reject()
    _built_exact(a)


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(semiautomata(max_states=6))
def test_random_solvable_semiautomata_up_to_six_states_compile_exactly(a):
    try:
        h = holonomy_skeleton(a)
        h.semigroup.is_solvable or reject()
        holonomy_cascade(a, h)
    except (BudgetError, AutomatonError):  # past the limits: refused in one line
        reject()
    _built_exact(a)
