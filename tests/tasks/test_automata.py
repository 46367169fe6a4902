import json

import numpy as np
import pytest
from sympy.combinatorics import Permutation

from sandbox_lens.interp.errors import AutomatonError
from sandbox_lens.interp.tasks.automata import Semiautomaton, load_automaton_file, parse_automaton_json
from sandbox_lens.interp.tasks.catalogue import catalogue_examples, get_automaton


@pytest.mark.parametrize("name", catalogue_examples() + ["A5", "S5", "memory5", "grid9", "D8-regular"])
def test_every_catalogue_example_builds_and_round_trips(name):
    a = get_automaton(name)
    b = parse_automaton_json(a.to_json())
    assert (b.states, b.alphabet, b.initial) == (a.states, a.alphabet, a.initial)
    assert np.array_equal(a.delta, b.delta)
    assert (a.feasible is None) == (b.feasible is None)
    assert a.feasible is None or np.array_equal(a.feasible, b.feasible)


def test_cyclic_counters_match_running_sums():
    rng = np.random.default_rng(1)
    for n in (2, 3, 7):
        a = get_automaton(f"C{n}")
        w = rng.integers(0, n, (20, 30))
        assert np.array_equal(a.run(w), np.cumsum(w, axis=1) % n)
    assert np.array_equal(get_automaton("parity").delta, get_automaton("C2").delta)


def test_gridworld_matches_clamped_walk():
    a = get_automaton("grid4+noop")
    w = a.sample(50, 40, seed=3)
    step = np.array([-1, 1, 0])[w]
    pos = np.zeros(50, dtype=int)
    expected = []
    for t in range(40):
        pos = np.clip(pos + step[:, t], 0, 3)
        expected.append(pos.copy())
    assert np.array_equal(a.run(w), np.stack(expected, 1))


def test_grid2d_moves_each_axis_independently():
    a = get_automaton("grid3x4")
    states = a.run(a.encode(["R", "R", "R", "U", "U", "U", "U", "L", "D"]))
    assert [a.states[q] for q in states] == ["1,0", "2,0", "2,0", "2,1", "2,2", "2,3", "2,3", "1,3", "1,2"]


def test_flipflop_remembers_last_write():
    a = get_automaton("flipflop")
    got = a.run(a.encode(["noop", "w1", "noop", "noop", "w0", "w0", "noop", "w1"]))
    assert [a.states[q] for q in got] == list("01110001")


def test_permutation_groups_act_on_points_like_sympy():
    a = get_automaton("S5")
    gens = [Permutation(list(a.delta[s])) for s in range(a.n_symbols)]
    w = a.sample(10, 25, seed=0)
    states = a.run(w)
    for word, st in zip(w, states):
        p = Permutation(4)
        for t, s in enumerate(word):
            p = p * gens[s]  # sympy: apply p, then the new generator
            assert st[t] == p(0)


def test_quaternion_relations():
    q = get_automaton("Q8")

    def run(word):
        return q.states[q.run(q.encode(word))[-1]]

    assert run(["i", "i"]) == "-1"
    assert run(["i", "j"]) == "k"
    assert run(["j", "i"]) == "-k"
    assert run(["i"] * 4) == "1"


def test_direct_product_acts_componentwise():
    a = get_automaton("C2^3")
    assert (a.n_states, a.n_symbols) == (8, 8)
    c2 = get_automaton("C2")
    w = a.sample(5, 12, seed=2)
    comps = np.array([[int(x) for x in s.split(",")] for s in a.alphabet])  # symbol -> 3 bits
    got = np.array([[[int(x) for x in a.states[q].split(",")] for q in row] for row in a.run(w)])
    for k in range(3):
        assert np.array_equal(got[:, :, k], c2.run(comps[w, k]))
    assert get_automaton("C2xC3").n_states == 6


def test_sampler_is_seeded_and_honours_probabilities():
    a = get_automaton("C3")
    assert np.array_equal(a.sample(4, 9, seed=5), a.sample(4, 9, seed=5))
    assert not np.array_equal(a.sample(4, 9, seed=5), a.sample(4, 9, seed=6))
    biased = a.sample(2000, 5, seed=0, probs=[0.0, 0.9, 0.1])
    assert not (biased == 0).any()
    assert 0.85 < (biased == 1).mean() < 0.95
    with pytest.raises(AutomatonError):
        a.sample(1, 3, probs=[0.5, 0.5])
    with pytest.raises(AutomatonError):
        a.sample(1, 3, probs=[0.5, 0.6, -0.1])


def test_all_words_enumerates_each_word_once():
    a = get_automaton("C3")
    words = a.all_words(4)
    assert words.shape == (81, 4)
    assert len({tuple(w) for w in words}) == 81


def test_with_initial_changes_the_start():
    a = get_automaton("C3").with_initial("2")
    assert list(a.run([0, 1, 1])) == [2, 0, 1]


GOOD = {
    "name": "toy",
    "states": ["a", "b"],
    "alphabet": ["x", "y"],
    "delta": {"x": ["b", "a"], "y": ["a", "a"]},
    "initial": "a",
}


def test_json_file_format(tmp_path):
    p = tmp_path / "toy.json"
    p.write_text(json.dumps(GOOD))
    a = load_automaton_file(p)
    assert a.states == ("a", "b") and a.alphabet == ("x", "y")
    assert [a.states[q] for q in a.run(a.encode(["x", "x", "y", "x"]))] == ["b", "a", "a", "b"]


@pytest.mark.parametrize(
    "text, message",
    [
        ("{not json", "malformed JSON"),
        ("[1, 2]", "top level must be a JSON object"),
        (json.dumps({**GOOD, "delta": {"x": ["b", "a"]}}), "no transitions for symbol"),
        (json.dumps({**GOOD, "delta": {**GOOD["delta"], "z": ["a", "a"]}}), "not in the alphabet"),
        (json.dumps({**GOOD, "delta": {"x": ["b", "c"], "y": ["a", "a"]}}), "is not a state name"),
        (json.dumps({**GOOD, "delta": {"x": [["a", "b"], "a"], "y": ["a", "a"]}}), "deterministic"),
        (json.dumps({**GOOD, "delta": {"x": ["b"], "y": ["a", "a"]}}), "exactly one next state"),
        (json.dumps({**GOOD, "initial": "q"}), "initial state"),
        (json.dumps({**GOOD, "states": ["a", "a"]}), "duplicate"),
        (json.dumps({**GOOD, "states": []}), "at least one state"),
        (json.dumps({k: v for k, v in GOOD.items() if k != "alphabet"}), "missing key"),
        (json.dumps({**GOOD, "extra": 1}), "unknown key"),
        ('{"states": ["a"], "alphabet": ["x"], "delta": {"x": ["a"], "x": ["a"]}}', "duplicate key"),
    ],
)
def test_json_errors_are_clear(text, message):
    with pytest.raises(AutomatonError, match=message):
        parse_automaton_json(text)


def test_missing_file_and_unknown_name():
    with pytest.raises(AutomatonError, match="not found"):
        load_automaton_file("/nonexistent/automaton.json")
    with pytest.raises(AutomatonError, match="unknown automaton"):
        get_automaton("Z9")
    with pytest.raises(AutomatonError, match="between"):
        get_automaton("C100000")
    with pytest.raises(AutomatonError, match="even order"):
        get_automaton("D7")
    with pytest.raises(AutomatonError, match="200,000 characters"):
        get_automaton("C3x" * 66_666 + "C3")  # refused by its length, before any product is built


def test_products_are_tabulated_exactly_and_large_closures_stop_at_the_budget():
    """The vectorised product table agrees with the definition (state and symbol tuples, componentwise); a
    semigroup closure whose work passes the budget stops in one line (C2^12: 4,096 generators of 4,096 states)."""
    from sandbox_lens.interp.tasks.catalogue import direct_product
    from sandbox_lens.interp.tasks.groups import transformation_semigroup

    parts = [get_automaton("S3"), get_automaton("C3"), get_automaton("parity")]
    a = direct_product(parts)
    states, symbols = list(np.ndindex(*[p.n_states for p in parts])), list(np.ndindex(*[p.n_symbols for p in parts]))
    index = {s: i for i, s in enumerate(states)}
    for x, sym in enumerate(symbols):
        for q, st in enumerate(states):
            assert a.delta[x, q] == index[tuple(int(p.delta[sym[k], st[k]]) for k, p in enumerate(parts))]
    with pytest.raises(AutomatonError, match="passes the work budget"):
        transformation_semigroup(get_automaton("C2^12"))


def test_semiautomaton_validation():
    with pytest.raises(AutomatonError, match="out of range"):
        Semiautomaton("bad", ("a",), ("x",), np.array([[1]]))
    with pytest.raises(AutomatonError, match="shape"):
        Semiautomaton("bad", ("a", "b"), ("x",), np.array([[0]]))
    with pytest.raises(AutomatonError, match="not in the alphabet"):
        get_automaton("parity").encode(["2"])
    with pytest.raises(AutomatonError, match="out of range"):
        get_automaton("parity").run([0, 2])


def test_the_thesis_groups_act_on_themselves():
    """S5-thesis (120 states, 8 generators), D8-regular (8), A5-regular (60): the thesis's tasks;
    plain D8 / S5 act on points (4 / 5 states)."""
    from sandbox_lens.interp.tasks.groups import transformation_semigroup

    s5 = get_automaton("S5-thesis")
    assert (s5.n_states, s5.n_symbols) == (120, 8) and s5.alphabet[:3] == ("e", "(0 1 2 3 4)", "(0 1)")
    assert (s5.delta[0] == np.arange(120)).all()  # the identity generator
    assert transformation_semigroup(s5).group_order == 120
    assert get_automaton("D8-regular").n_states == 8 and get_automaton("D8").n_states == 4
    assert get_automaton("A5-regular").n_states == 60 and get_automaton("A5-regular").n_symbols == 3
    assert get_automaton("S4-thesis").n_symbols == 8


# -- the Dyck stack (the thesis's Dyck_{n,k} simulation task): legal words only -------------------
def _stack_of(word, a):
    """The stack after each bracket, by hand (None once a bracket is illegal)."""
    k = a.n_symbols // 2
    stack, out = "", []
    for x in word:
        b = a.alphabet[x]
        if x < k and stack is not None and len(stack) < 4:
            stack += b
        elif x >= k and stack and stack[-1] == a.alphabet[x - k]:
            stack = stack[:-1]
        else:
            stack = None
        out.append("✗" if stack is None else (stack or "ε"))
    return out


def test_the_dyck_stack_automaton_is_the_thesis_task():
    from sandbox_lens.interp.tasks.dyck import Dyck

    a = get_automaton("dyck2-depth4")
    assert a.n_states == 1 + 2 + 4 + 8 + 16 + 1 and a.alphabet == ("(", "[", ")", "]")  # Σ_{i≤4} 2^i stacks + ✗
    words = a.sample(500, 60, seed=3)
    assert a.is_feasible(words).all() and "✗" not in {a.states[q] for q in np.unique(a.run(words))}
    for w in words[:50]:  # δ is the stack, by hand
        assert [a.states[q] for q in a.run(w)] == _stack_of(w, a)
    lang = Dyck(2, 4)  # every sampled word is a legal Dyck prefix (the language's own checker)
    for w in words[:50]:
        lang.check(lang.encode("".join(a.alphabet[x] for x in w)))
    # uniform among the legal brackets (thesis footnote 26): empty stack -> the 2 opens, full -> the matching close
    first = a.sample(4000, 1, seed=4)[:, 0]
    assert set(first) == {0, 1} and abs((first == 0).mean() - 0.5) < 0.04
    full = a.states.index("([[(")
    walk = a.with_initial(full).sample(200, 1, seed=5)[:, 0]
    assert set(walk) == {2}  # only ")" is legal on a full stack topped by "("
    mid = a.with_initial(a.states.index("(["))
    counts = np.bincount(mid.sample(6000, 1, seed=6)[:, 0], minlength=4) / 6000
    assert np.allclose(counts, [1 / 3, 1 / 3, 0, 1 / 3], atol=0.03)
    assert a.run([2])[0] == a.states.index("✗") and a.run([0, 3, 0])[-1] == a.states.index("✗")  # illegal -> sink
    assert not a.is_feasible([[2], [0]])[0] and a.is_feasible([[2], [0]])[1]


def test_feasible_tables_are_checked_and_kept_by_products_and_resets():
    a = get_automaton("dyck1-depth2")
    with pytest.raises(AutomatonError, match="feasible"):
        Semiautomaton("x", a.states, a.alphabet, a.delta, 0, "", np.ones((1, 1), dtype=bool))
    stuck = a.feasible.copy()
    stuck[:, 0] = False
    with pytest.raises(AutomatonError, match="no feasible symbol"):
        Semiautomaton("x", a.states, a.alphabet, a.delta, 0, "", stuck)
    pair = get_automaton("dyck1-depth2xparity")
    assert pair.feasible is not None and pair.is_feasible(pair.sample(100, 30, seed=1)).all()
    resets = get_automaton("dyck1-depth2+resets")
    assert resets.feasible[-resets.n_states :].all()
    with pytest.raises(AutomatonError, match="no feasible symbol"):  # probabilities that leave a state no legal move
        a.sample(5, 5, seed=0, probs=[0.0, 1.0])


def test_dyck_stack_shifts_are_legal_and_count_shifts_refused():
    from sandbox_lens.interp.tasks.shifts import ShiftError, automaton_shifts, automaton_words

    a = get_automaton("dyck2-depth4")
    uniform, skewed = automaton_shifts(a, 40, probs=[[0.4, 0.4, 0.1, 0.1]])
    for shift in (uniform, skewed):
        assert a.is_feasible(automaton_words(a, shift, 50, np.random.default_rng(0))).all()
    with pytest.raises(ShiftError, match="illegal inputs"):
        automaton_shifts(a, 40, counts=[3])


@pytest.mark.parametrize("T, samples, exhaustive", [(16, 60, 4), pytest.param(1024, 1000, 6, marks=pytest.mark.slow)])
def test_prefix_scan_is_exact_on_the_dyck_stack(T, samples, exhaustive):
    """Every word (illegal ones too) up to ``exhaustive`` brackets, and legal random words at T."""
    from sandbox_lens.constructions import build
    from sandbox_lens.interp.verify import verify

    r = verify(
        build("prefix_scan", get_automaton("dyck2-depth4"), T), samples=samples, exhaustive_upto=exhaustive, seed=0
    )
    assert r.exact, r.summary()
