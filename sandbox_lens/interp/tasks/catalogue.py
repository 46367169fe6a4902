"""The built-in catalogue of semiautomata, addressable by name.

Names (case-insensitive letters, see :data:`CATALOGUE` for the one-line docs):

* ``parity`` = ``C2``; ``C<n>``: Q = Σ = Z_n, symbol a adds a (mod n) (thesis Def. 4).
* ``S<n>``, ``A<n>``, ``D<2n>``: permutation groups **acting on points** 0..n-1, with a
  small generating set as the alphabet. Append ``-regular`` (e.g. ``S3-regular``) for the
  group acting on itself: the state is the group element σ_t∘…∘σ_1, starting at e.
* ``Q8``: the quaternion group acting on itself by right multiplication (it has no
  faithful action on fewer than 8 points), alphabet {i, j}.
* ``abab``: the recogniser of (abab)* (Fig. 3.18), 5 states, Σ = {a, b}, q0 = 3 (accepting), 4 absorbing.
* ``flipflop`` (Example 2) and ``memory<n>`` (Definition 5): write symbols ``w<q>`` and
  ``noop``.
* ``grid<n>``: the 1-D gridworld (Example 3), alphabet {L, R}; ``grid<a>x<b>``: 2-D,
  alphabet {L, R, D, U}. Append ``+noop`` for the no-op symbol.
* ``dyck<k>-depth<n>``: the thesis's Dyck_{n,k} as a simulation task — the state is the stack of
  open brackets; only legal brackets are sampled (the automaton's ``feasible`` table).
* Direct products: ``A^k`` (e.g. ``C2^3``) and ``AxB`` (e.g. ``C2xC3``); states and
  symbols are comma-joined tuples.
* ``random<n>-<k>-<seed>``: a random permutation semiautomaton: n points, k symbols ``g0..g(k−1)``, each an
  independent uniform random permutation of the points (the stream ``RANDOM_AUTOMATON`` of ``seed``), q0 = 0.
* ``<A>+resets``: automaton A plus one reset symbol ``r<q>`` per state (δ(·, r<q>) = q), e.g.
  ``C3+resets`` — a permutation-reset automaton (Definition 7) when A is a group.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from sandbox_lens.interp.budget import require
from sandbox_lens.interp.errors import AutomatonError
from sandbox_lens.interp.streams import Stream, rng
from sandbox_lens.interp.tasks.automata import Semiautomaton

__all__ = [
    "CATALOGUE",
    "get_automaton",
    "catalogue_examples",
    "direct_product",
    "permutation_automaton",
    "dyck_stack",
    "random_permutations",
]

# Generous but finite: the catalogue is for teaching and tests, and a typo like C100000
# should fail fast instead of building a huge table.
_MAX_POINTS = 12
_MAX_STATES = 4096


@dataclass(frozen=True)
class CatalogueEntry:
    pattern: str
    doc: str
    examples: tuple[str, ...]


CATALOGUE: tuple[CatalogueEntry, ...] = (
    CatalogueEntry("parity", "C2: Q = Σ = {0, 1}, state = running XOR", ("parity",)),
    CatalogueEntry("C<n>", "cyclic group Z_n: symbol a adds a mod n (thesis Def. 4)", ("C2", "C3", "C5")),
    CatalogueEntry("S<n>", "symmetric group on points 0..n-1, generators (0 1) and (0 1 … n-1)", ("S3", "S4", "S5")),
    CatalogueEntry("A<n>", "alternating group on points 0..n-1, generators (0 1 i) for i = 2..n-1", ("A4", "A5")),
    CatalogueEntry(
        "D<2n>",
        "dihedral group of order 2n on the n-gon's vertices, generators r = rotation, s = reflection",
        ("D8", "D6"),
    ),
    CatalogueEntry("Q8", "quaternion group acting on itself by right multiplication, generators i, j", ("Q8",)),
    CatalogueEntry(
        "<group>-regular",
        "a permutation group acting on itself (state = σ_t∘…∘σ_1, q0 = e)",
        ("S3-regular", "D8-regular"),
    ),
    CatalogueEntry(
        "S<n>-thesis",
        "the thesis's S_n: acting on itself with 8 generators (identity, the n-cycle, (0 1), "
        "then permutations in lexicographic order)",
        ("S5-thesis", "S4-thesis"),
    ),
    CatalogueEntry(
        "random<n>-<k>-<seed>",
        "a random permutation semiautomaton: n points, k symbols, each a uniform random permutation (seeded)",
        ("random4-2-0", "random5-5-3"),
    ),
    CatalogueEntry("flipflop", "Example 2: Q = {0, 1}, Σ = {w0, w1, noop}", ("flipflop",)),
    CatalogueEntry("abab", "the recogniser of (abab)* (Fig. 3.18): 5 states, Σ = {a, b}, q0 = 3 accepting", ("abab",)),
    CatalogueEntry("memory<n>", "Definition 5: Q = {0..n-1}, Σ = {w0..w(n-1), noop}", ("memory3",)),
    CatalogueEntry(
        "grid<n>[+noop]",
        "1-D gridworld with n cells, Σ = {L, R} (clamped at the walls), q0 = 0",
        ("grid5", "grid9+noop"),
    ),
    CatalogueEntry("grid<a>x<b>[+noop]", "2-D gridworld, Σ = {L, R, D, U}, q0 = (0, 0)", ("grid3x4",)),
    CatalogueEntry(
        "dyck<k>-depth<n>",
        "the stack of Dyck with k types and depth ≤ n (the thesis's Dyck_{n,k} "
        "simulation task): Σ_{i≤n} k^i stacks and a reject sink, legal brackets only sampled",
        ("dyck2-depth4", "dyck1-depth3"),
    ),
    CatalogueEntry(
        "<A>+resets",
        "A plus a reset symbol r<q> to every state q (Definition 7 when A is a group)",
        ("C3+resets", "S3+resets"),
    ),
    CatalogueEntry(
        "<A>^<k>, <A>x<B>", "direct products of catalogue automata (symbols act componentwise)", ("C2^3", "C2xC3")
    ),
)


def catalogue_examples() -> list[str]:
    """Every example name in the catalogue (all of them build)."""
    return [e for entry in CATALOGUE for e in entry.examples]


# -- builders ----------------------------------------------------------------------------
def cyclic(n: int) -> Semiautomaton:
    _bound("C<n>", n, 1, _MAX_STATES)
    delta = (np.arange(n)[:, None] + np.arange(n)[None, :]) % n  # delta[a][q] = q + a
    names = tuple(str(i) for i in range(n))
    return Semiautomaton(f"C{n}", names, names, delta, 0, f"cyclic group Z_{n}: symbol a adds a mod {n}")


def permutation_automaton(
    name: str, degree: int, generators: dict[str, list[int]], regular: bool = False, description: str = ""
) -> Semiautomaton:
    """A permutation group given by generators (array forms on 0..degree-1).

    On points (default): state q, symbol g -> g(q), q0 = 0. Regular: the state is the
    group element π = σ_t∘…∘σ_1 (named by its cycle form, ``e`` for the identity).
    """
    if not regular:  # symbol g sends q to g(q) = arr[q]: no group theory needed (and no sympy import)
        delta = np.array([list(arr) for arr in generators.values()], dtype=np.int64).reshape(len(generators), degree)
        return Semiautomaton(name, tuple(str(q) for q in range(degree)), tuple(generators), delta, 0, description)
    from sympy.combinatorics import Permutation, PermutationGroup

    gens = {sym: Permutation(arr, size=degree) for sym, arr in generators.items()}
    group = PermutationGroup(list(gens.values()))
    if group.order() > _MAX_STATES:
        raise AutomatonError(f"{name}: group order {group.order()} is too large for a regular automaton")
    elements = sorted(group.elements, key=lambda p: (p.order(), p.array_form))
    index = {p: i for i, p in enumerate(elements)}
    # sympy's p*q applies p first, so the new element g∘π is π*g.
    delta = np.array([[index[p * g] for p in elements] for g in gens.values()], dtype=np.int64)
    states = tuple(_cycle_name(p) for p in elements)
    return Semiautomaton(name, states, tuple(gens), delta, index[Permutation(degree - 1)], description)


def _cycle_name(p) -> str:
    cycles = [c for c in p.cyclic_form if len(c) > 1]
    return "".join("(" + " ".join(map(str, c)) + ")" for c in cycles) or "e"


def _cycle(*points: int, degree: int) -> list[int]:
    arr = list(range(degree))
    for a, b in zip(points, points[1:] + points[:1]):
        arr[a] = b
    return arr


def symmetric(n: int, regular: bool = False) -> Semiautomaton:
    _bound("S<n>", n, 2, _MAX_POINTS)
    gens = {"(0 1)": _cycle(0, 1, degree=n)}
    if n > 2:
        gens["(" + " ".join(map(str, range(n))) + ")"] = _cycle(*range(n), degree=n)
    kind = "on itself" if regular else f"on points 0..{n - 1}"
    return permutation_automaton(
        f"S{n}" + ("-regular" if regular else ""), n, gens, regular, f"symmetric group S_{n} {kind}"
    )


def random_permutations(n: int, k: int, seed: int) -> Semiautomaton:
    """n points, k symbols, each an independent uniform random permutation of the points (the named stream
    ``RANDOM_AUTOMATON`` of ``seed``); q0 = 0. The group they generate is usually S_n or A_n, not always
    transitive for small n and k (``interp experiment random-automata`` reports which)."""
    _bound("random<n>: points", n, 2, _MAX_POINTS)
    _bound("random<n>-<k>: symbols", k, 1, _MAX_POINTS)
    _bound("random<n>-<k>-<seed>: seed", seed, 0, 2**31 - 1)
    gen = rng(seed, Stream.RANDOM_AUTOMATON)
    gens = {f"g{i}": [int(x) for x in gen.permutation(n)] for i in range(k)}
    return permutation_automaton(
        f"random{n}-{k}-{seed}", n, gens, False, f"{k} random permutations of {n} points (seed {seed})"
    )


def symmetric_thesis(n: int) -> Semiautomaton:
    """S_n as the thesis's experiments use it (automata-and-gridworld.md, rows 17 and 19): the group acting
    on itself, with 8 generators — the identity, the n-cycle i ↦ i + 1, the swap (0 1), then further
    permutations in ``itertools.permutations`` order until there are 8."""
    import itertools

    from sandbox_lens.interp.tasks.groups import cycle_notation  # group theory only where the catalogue needs it

    _bound("S<n>-thesis", n, 3, 6)
    arrays = [list(range(n)), [(i + 1) % n for i in range(n)], _cycle(0, 1, degree=n)]
    for perm in itertools.permutations(range(n)):
        if len(arrays) == 8:
            break
        if list(perm) not in arrays:
            arrays.append(list(perm))
    gens = {cycle_notation(a): a for a in arrays}
    return permutation_automaton(
        f"S{n}-thesis", n, gens, True, f"symmetric group S_{n} acting on itself, the thesis's 8 generators"
    )


def alternating(n: int, regular: bool = False) -> Semiautomaton:
    _bound("A<n>", n, 3, _MAX_POINTS)
    gens = {f"(0 1 {i})": _cycle(0, 1, i, degree=n) for i in range(2, n)}
    kind = "on itself" if regular else f"on points 0..{n - 1}"
    return permutation_automaton(
        f"A{n}" + ("-regular" if regular else ""), n, gens, regular, f"alternating group A_{n} {kind}"
    )


def dihedral(order: int, regular: bool = False) -> Semiautomaton:
    if order % 2:
        raise AutomatonError(f"D<2n> needs an even order, got D{order}")
    n = order // 2
    _bound("D<2n> (n-gon)", n, 3, _MAX_POINTS)
    gens = {"r": _cycle(*range(n), degree=n), "s": [(-i) % n for i in range(n)]}
    kind = "on itself" if regular else f"on the {n}-gon's vertices 0..{n - 1}"
    return permutation_automaton(
        f"D{order}" + ("-regular" if regular else ""), n, gens, regular, f"dihedral group of order {order} {kind}"
    )


def quaternion() -> Semiautomaton:
    # Elements ±1, ±i, ±j, ±k as (sign, unit); units multiply by the usual table.
    units = ["1", "i", "j", "k"]
    table = {  # unit product a*b -> (sign, unit)
        ("1", "1"): (1, "1"),
        ("1", "i"): (1, "i"),
        ("1", "j"): (1, "j"),
        ("1", "k"): (1, "k"),
        ("i", "1"): (1, "i"),
        ("i", "i"): (-1, "1"),
        ("i", "j"): (1, "k"),
        ("i", "k"): (-1, "j"),
        ("j", "1"): (1, "j"),
        ("j", "i"): (-1, "k"),
        ("j", "j"): (-1, "1"),
        ("j", "k"): (1, "i"),
        ("k", "1"): (1, "k"),
        ("k", "i"): (1, "j"),
        ("k", "j"): (-1, "i"),
        ("k", "k"): (-1, "1"),
    }
    elements = [(s, u) for s in (1, -1) for u in units]
    names = tuple(("" if s == 1 else "-") + u for s, u in elements)
    index = {e: i for i, e in enumerate(elements)}

    def mul(a: tuple[int, str], b: tuple[int, str]) -> tuple[int, str]:
        s, u = table[(a[1], b[1])]
        return (a[0] * b[0] * s, u)

    gens = {"i": (1, "i"), "j": (1, "j")}
    delta = np.array([[index[mul(q, g)] for q in elements] for g in gens.values()], dtype=np.int64)
    return Semiautomaton(
        "Q8", names, tuple(gens), delta, 0, "quaternion group acting on itself by right multiplication"
    )


def memory(n: int, name: str | None = None) -> Semiautomaton:
    _bound("memory<n>", n, 1, _MAX_STATES)
    states = tuple(str(q) for q in range(n))
    delta = np.array([[w] * n for w in range(n)] + [list(range(n))], dtype=np.int64)
    alphabet = tuple(f"w{q}" for q in range(n)) + ("noop",)
    return Semiautomaton(
        name or f"memory{n}", states, alphabet, delta, 0, "memory unit: w<q> writes q, noop keeps the state"
    )


def abab() -> Semiautomaton:
    """The recogniser of (abab)* (thesis Fig. 3.18): states 0 → 1 → 2 → 3 → 0 on a, b, a, b, starting at 3 (the
    accepting state: the word so far is in (abab)*), and 4 absorbing on any other symbol — *abababaaabab* visits
    012301244444."""
    delta = np.array([[4, 2, 4, 0, 4], [1, 4, 3, 4, 4]], dtype=np.int64)  # delta[symbol][state]; a = 0, b = 1
    return Semiautomaton(
        "abab",
        tuple(map(str, range(5))),
        ("a", "b"),
        delta,
        3,
        "the recogniser of (abab)*: 0 → 1 → 2 → 3 → 0 on a, b, a, b from 3 (accepting), 4 absorbing on any other "
        "symbol",
    )


def grid(n: int, noop: bool = False) -> Semiautomaton:
    _bound("grid<n>", n, 2, _MAX_STATES)
    q = np.arange(n)
    rows = [np.maximum(q - 1, 0), np.minimum(q + 1, n - 1)] + ([q] if noop else [])
    alphabet = ("L", "R") + (("noop",) if noop else ())
    return Semiautomaton(
        f"grid{n}" + ("+noop" if noop else ""),
        tuple(map(str, range(n))),
        alphabet,
        np.array(rows),
        0,
        f"1-D gridworld with {n} cells; L/R move, clamped at the walls",
    )


def grid2d(a: int, b: int, noop: bool = False) -> Semiautomaton:
    _bound("grid<a>x<b>", a, 1, _MAX_STATES)
    _bound("grid<a>x<b>", b, 1, _MAX_STATES)
    if a * b > _MAX_STATES:
        raise AutomatonError(f"grid{a}x{b} has more than {_MAX_STATES} states")
    x, y = np.divmod(np.arange(a * b), b)  # state index = x*b + y
    moves = [
        np.maximum(x - 1, 0) * b + y,
        np.minimum(x + 1, a - 1) * b + y,
        x * b + np.maximum(y - 1, 0),
        x * b + np.minimum(y + 1, b - 1),
    ]
    alphabet = ("L", "R", "D", "U") + (("noop",) if noop else ())
    if noop:
        moves.append(np.arange(a * b))
    states = tuple(f"{i},{j}" for i, j in zip(x, y))
    return Semiautomaton(
        f"grid{a}x{b}" + ("+noop" if noop else ""),
        states,
        alphabet,
        np.array(moves),
        0,
        f"2-D gridworld {a}×{b}; L/R move along the first axis, D/U along the second",
    )


def direct_product(parts: list[Semiautomaton], name: str | None = None) -> Semiautomaton:
    """Componentwise product (thesis Def. 10 with full alphabets): states and symbols are tuples."""
    n_states = int(np.prod([p.n_states for p in parts]))
    n_symbols = int(np.prod([p.n_symbols for p in parts]))
    if n_states > _MAX_STATES or n_symbols > _MAX_STATES:
        raise AutomatonError("direct product too large for the catalogue")

    require(
        f"the transition table of a product with {n_states:,} states and {n_symbols:,} symbols",
        memory=3.0 * 8 * n_states * n_symbols,
        lower="fewer or smaller factors",
    )
    state_tuples = list(np.ndindex(*[p.n_states for p in parts]))
    symbol_tuples = list(np.ndindex(*[p.n_symbols for p in parts]))
    index = {s: i for i, s in enumerate(state_tuples)}
    # mixed radix, vectorised: the product state's index is Σ_k (part k's next state) · stride_k
    states_k = np.array(state_tuples, dtype=np.int64).reshape(n_states, len(parts))
    symbols_k = np.array(symbol_tuples, dtype=np.int64).reshape(n_symbols, len(parts))
    strides = np.cumprod([1] + [p.n_states for p in parts[:0:-1]])[::-1]
    delta = np.zeros((n_symbols, n_states), dtype=np.int64)
    for k, p in enumerate(parts):
        delta += np.asarray(p.delta, dtype=np.int64)[symbols_k[:, k][:, None], states_k[:, k][None, :]] * strides[k]
    states = tuple(",".join(p.states[i] for p, i in zip(parts, s)) for s in state_tuples)
    alphabet = tuple(",".join(p.alphabet[i] for p, i in zip(parts, a)) for a in symbol_tuples)
    initial = index[tuple(p.initial for p in parts)]
    label = name or "x".join(p.name for p in parts)
    feasible = None
    if any(p.feasible is not None for p in parts):  # a tuple symbol is feasible where every component's is
        tables = [p.feasible if p.feasible is not None else np.ones_like(p.delta, dtype=bool) for p in parts]
        feasible = np.array(
            [[all(t[a[k], s[k]] for k, t in enumerate(tables)) for s in state_tuples] for a in symbol_tuples],
            dtype=bool,
        )
    return Semiautomaton(
        label, states, alphabet, delta, initial, "direct product of " + ", ".join(p.name for p in parts), feasible
    )


def with_resets(base: Semiautomaton) -> Semiautomaton:
    """``base`` plus a reset symbol ``r<state>`` for every state."""
    n = base.n_states
    resets = np.repeat(np.arange(n)[:, None], n, axis=1)  # row q: every state -> q
    alphabet = base.alphabet + tuple(f"r{q}" for q in base.states)
    feasible = None if base.feasible is None else np.concatenate([base.feasible, np.ones((n, n), dtype=bool)])
    return Semiautomaton(
        f"{base.name}+resets",
        base.states,
        alphabet,
        np.concatenate([base.delta, resets]),
        base.initial,
        f"{base.description}; plus resets r<q> to every state",
        feasible,
    )


def dyck_stack(k: int, depth: int) -> Semiautomaton:
    """The thesis's Dyck_{n,k} as a semiautomaton simulation task (§3.4.2's list, n = ``depth``, with
    footnotes 26 and 29): the state is the stack of open brackets (at most ``depth`` of them, of ``k``
    types: Σ_{i ≤ n} k^i states, named by the stack's contents, ``ε`` when empty), Σ is the k opening
    and k closing brackets. Only legal brackets are feasible — any open while the stack is not full,
    the close matching the top while it is not empty — and words are sampled uniformly among them.
    δ stays total for the constructions: an illegal bracket leads to one more state, ``✗`` (the
    recogniser's reject sink, never reached by a legal word), which keeps the transformation semigroup
    the small syntactic monoid of bounded Dyck (with "ignore an illegal bracket" instead it has more
    than 200,000 elements)."""
    _bound("dyck<k>-depth<n>: k", k, 1, 4)
    _bound("dyck<k>-depth<n>: depth", depth, 1, 8)
    opens, closes = "([{<"[:k], ")]}>"[:k]
    stacks = [""]
    for d in range(1, depth + 1):
        stacks += ["".join(t) for t in itertools.product(opens, repeat=d)]
    if len(stacks) >= _MAX_STATES:
        raise AutomatonError(f"dyck{k}-depth{depth}: {len(stacks):,} stacks; at most {_MAX_STATES - 1:,} are supported")
    index = {st: i for i, st in enumerate(stacks)}
    sink = len(stacks)
    alphabet = tuple(opens) + tuple(closes)
    delta = np.full((2 * k, sink + 1), sink, dtype=np.int64)
    feasible = np.zeros((2 * k, sink + 1), dtype=bool)
    for q, st in enumerate(stacks):
        for i in range(k):
            if len(st) < depth:
                delta[i, q], feasible[i, q] = index[st + opens[i]], True
            if st and st[-1] == opens[i]:
                delta[k + i, q], feasible[k + i, q] = index[st[:-1]], True
    names = tuple(st or "ε" for st in stacks) + ("✗",)
    return Semiautomaton(
        f"dyck{k}-depth{depth}",
        names,
        alphabet,
        delta,
        0,
        f"the stack of Dyck with {k} bracket type(s) and depth ≤ {depth} (the thesis's Dyck_{{{depth},{k}}} "
        "simulation task): legal brackets only are sampled; an illegal one leads to the sink ✗",
        feasible,
    )


def _bound(what: str, n: int, lo: int, hi: int) -> None:
    if not lo <= n <= hi:
        raise AutomatonError(f"{what}: size must be between {lo} and {hi}, got {n}")


# -- name resolution ---------------------------------------------------------------------
_PATTERNS: list[tuple[re.Pattern[str], Callable[..., Semiautomaton]]] = [
    (re.compile(r"parity"), lambda: cyclic(2)),
    (re.compile(r"c(\d+)"), lambda n: cyclic(int(n))),
    (re.compile(r"s(\d+)(-regular)?"), lambda n, r: symmetric(int(n), bool(r))),
    (re.compile(r"s(\d+)-thesis"), lambda n: symmetric_thesis(int(n))),
    (re.compile(r"a(\d+)(-regular)?"), lambda n, r: alternating(int(n), bool(r))),
    (re.compile(r"d(\d+)(-regular)?"), lambda n, r: dihedral(int(n), bool(r))),
    (re.compile(r"q8(?:-regular)?"), lambda: quaternion()),
    (re.compile(r"random(\d+)-(\d+)-(\d+)"), lambda n, k, s: random_permutations(int(n), int(k), int(s))),
    (re.compile(r"abab"), abab),
    (re.compile(r"flipflop"), lambda: memory(2, "flipflop")),
    (re.compile(r"memory(\d+)"), lambda n: memory(int(n))),
    (re.compile(r"grid(\d+)(\+noop)?"), lambda n, o: grid(int(n), bool(o))),
    (re.compile(r"grid(\d+)x(\d+)(\+noop)?"), lambda a, b, o: grid2d(int(a), int(b), bool(o))),
    (re.compile(r"dyck(\d+)-depth(\d+)"), lambda k, d: dyck_stack(int(k), int(d))),
]


#: the longest catalogue name read (the longest real one, a product of several groups, is under 40)
MAX_NAME = 200


def get_automaton(name: str) -> Semiautomaton:
    """Resolve a catalogue name (see module docstring) to a :class:`Semiautomaton`.

    Args:
        name: e.g. ``"parity"``, ``"C3"``, ``"S5"``, ``"A4"``, ``"grid9"``."""
    if len(name) > MAX_NAME:
        raise AutomatonError(f"an automaton name of {len(name):,} characters; catalogue names are at most {MAX_NAME}")
    key = name.strip()
    low = key.lower()
    for pattern, build in _PATTERNS:
        m = pattern.fullmatch(low)
        if m:
            automaton = build(*m.groups())
            if low == "parity":
                return Semiautomaton(
                    "parity",
                    automaton.states,
                    automaton.alphabet,
                    automaton.delta,
                    0,
                    "parity (= C2): state = XOR of the inputs",
                )
            return automaton
    if low.endswith("+resets"):
        return with_resets(get_automaton(key[: -len("+resets")]))
    power = re.fullmatch(r"(.+)\^(\d+)", key)
    if power:
        k = int(power.group(2))
        _bound("power A^k", k, 1, 12)
        base = get_automaton(power.group(1))
        return direct_product([base] * k, name=key)
    if "x" in low and not low.startswith("grid"):
        parts = [p for p in re.split(r"[xX]", key)]
        if len(parts) >= 2 and all(parts):
            return direct_product([get_automaton(p) for p in parts], name=key)
    raise AutomatonError(
        f"unknown automaton {name!r}; try `interp list` (e.g. {', '.join(catalogue_examples()[:6])}, ...)"
    )
