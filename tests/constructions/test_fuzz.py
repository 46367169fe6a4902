"""Fuzzing the prefix scan (1,000+ random automata per run) and Krohn–Rhodes (random cascades).

Theorem 10's scan layers depend only on the number of states n and the length T: an automaton
enters through its token embeddings (each symbol's transition map, PAD's constant map to q0,
:func:`embed_transition_maps`) and its read-out (:func:`quadratic_readout` at q0). So one model per
n is built, and the automata are swapped in through those two functions — first checked to be
exactly what ``build`` gives — which lets a thousand automata run in a few batched forwards.
Each run draws new automata (hypothesis picks the seed; a failing seed is printed and replayed).

Krohn–Rhodes gets random cascades (Lemma 21): one to three levels, each a random permutation-reset
automaton on ≤ 4 states (every permutation group of degree ≤ 4 is solvable, so every level is
admissible), wired by a random table (earlier levels' states, σ) → level symbol. Each cascade is
built and checked against its product automaton, tabulated by :mod:`sandbox_lens.interp.tasks.cascade` alone.
"""

import itertools

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from sandbox_lens.constructions import build
from sandbox_lens.constructions.prefix_scan import embed_transition_maps, quadratic_readout
from sandbox_lens.interp.model.hooked import to_hooked
from sandbox_lens.interp.model.run import exact_precision
from sandbox_lens.interp.tasks.automata import Semiautomaton

MAX_STATES, MAX_SYMBOLS = 8, 6
T = 8  # three scan layers; every word up to the exhaustive length, then random words at T
PER_STATES = 125  # automata per n ∈ 1..8: 1,000 in all
EXHAUSTIVE_WORDS = 216  # every word of length K where |Σ|^K ≤ this (K = 3 for six symbols, 7 for two)
SAMPLED_WORDS = 24


def random_automaton(rng: np.random.Generator, n: int) -> Semiautomaton:
    """Maps of every kind: random, permutations, constants, the identity; any q0; n = 1 included."""
    m = int(rng.integers(1, MAX_SYMBOLS + 1))
    maps = []
    for _ in range(m):
        kind = rng.choice(["random", "permutation", "constant", "identity"], p=[0.4, 0.3, 0.2, 0.1])
        if kind == "random":
            maps.append(rng.integers(0, n, size=n))
        elif kind == "permutation":
            maps.append(rng.permutation(n))
        elif kind == "constant":
            maps.append(np.full(n, rng.integers(0, n)))
        else:
            maps.append(np.arange(n))
    return Semiautomaton(
        "fuzz",
        tuple(f"q{i}" for i in range(n)),
        tuple(f"a{i}" for i in range(m)),
        np.array(maps),
        int(rng.integers(0, n)),
    )


def _models():
    """One float32 scan model per n (built for an n-state automaton with the full alphabet)."""
    models = {}
    for n in range(1, MAX_STATES + 1):
        base = random_automaton(np.random.default_rng(n), n)
        base = Semiautomaton(
            "base", base.states, tuple(f"a{i}" for i in range(MAX_SYMBOLS)), np.tile(np.arange(n), (MAX_SYMBOLS, 1)), 0
        )
        spec = build("prefix_scan", base, T)
        models[n] = (spec, to_hooked(spec, "float32"))
    return models


MODELS: dict = {}


def models():
    if not MODELS:
        MODELS.update(_models())
    return MODELS


def swapped_weights(spec, a: Semiautomaton) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The embedding (symbols at 0..m−1, PAD last at MAX_SYMBOLS) and read-out of ``a`` on ``spec``'s layout."""
    W, _ = embed_transition_maps(spec.layout, a)
    W_E = np.zeros((MAX_SYMBOLS + 1, spec.layout.d_model))
    W_E[: a.n_symbols] = W[: a.n_symbols]
    W_E[MAX_SYMBOLS] = W[a.n_symbols]
    W_U, b_U = quadratic_readout(spec.layout, a.n_states, a.initial)
    return W_E, W_U, b_U


def words_for(a: Semiautomaton, rng: np.random.Generator) -> np.ndarray:
    """Every word of the longest exhaustive length within the budget (causality covers the shorter
    ones) padded with random symbols to T, and random words of length T."""
    K = max(k for k in range(1, T + 1) if a.n_symbols**k <= EXHAUSTIVE_WORDS or k == 1)
    every = a.all_words(K)
    tail = rng.integers(0, a.n_symbols, size=(len(every), T - K))
    return np.concatenate([np.concatenate([every, tail], 1), a.sample(SAMPLED_WORDS, T, seed=int(rng.integers(2**31)))])


def run_swapped(model, spec, automata: list[Semiautomaton], words: list[np.ndarray]) -> list[np.ndarray]:
    """Each automaton's words through the shared scan layers, with its own embedding and read-out."""
    P = spec.options["P"]
    weights = [swapped_weights(spec, a) for a in automata]
    W_E = torch.tensor(np.stack([w[0] for w in weights]), dtype=torch.float32)  # [A, vocab, d]
    W_U = torch.tensor(np.stack([w[1] for w in weights]), dtype=torch.float32)  # [A, d, n]
    b_U = torch.tensor(np.stack([w[2] for w in weights]), dtype=torch.float32)  # [A, n]
    owner = torch.tensor(np.concatenate([np.full(len(w), i) for i, w in enumerate(words)]))
    tokens = torch.tensor(np.concatenate([np.concatenate([np.full((len(w), P), MAX_SYMBOLS), w], 1) for w in words]))

    def embed(_, hook):
        return W_E[owner[:, None], tokens]

    captured = {}

    def keep(x, hook):
        captured["resid"] = x

    with exact_precision():
        model.run_with_hooks(
            tokens,
            return_type=None,
            fwd_hooks=[("hook_embed", embed), (f"blocks.{model.cfg.n_layers - 1}.hook_resid_post", keep)],
        )
        logits = torch.einsum("bpd,bdn->bpn", captured["resid"][:, P:], W_U[owner]) + b_U[owner][:, None]
    pred = logits.argmax(-1).numpy()
    bounds = np.cumsum([0, *map(len, words)])
    return [pred[s:e] for s, e in zip(bounds[:-1], bounds[1:])]


def test_swapping_an_automaton_in_is_what_build_gives():
    """The only weights that depend on the automaton are the embedding and the read-out."""
    rng = np.random.default_rng(0)
    for n in (1, 3, 8):
        spec, _ = models()[n]
        a = random_automaton(rng, n)
        fresh = build("prefix_scan", a, T)
        W_E, W_U, b_U = swapped_weights(spec, a)
        assert np.array_equal(fresh.W_E[: a.n_symbols], W_E[: a.n_symbols]) and np.array_equal(fresh.W_E[-1], W_E[-1])
        assert np.array_equal(fresh.W_U, W_U) and np.array_equal(fresh.b_U, b_U)
        assert np.array_equal(fresh.W_pos, spec.W_pos) and fresh.options["P"] == spec.options["P"]
        ours = to_hooked(fresh).state_dict()
        theirs = models()[n][1].state_dict()
        for name, tensor in ours.items():
            if not name.startswith(("embed.", "unembed.")):
                assert torch.equal(tensor, theirs[name]), name
        # and the swapped run predicts what the freshly built model predicts
        words = words_for(a, rng)
        from sandbox_lens.interp.model.run import predict

        assert np.array_equal(run_swapped(models()[n][1], spec, [a], [words])[0], predict(to_hooked(fresh), words))


@settings(max_examples=1, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_a_thousand_random_automata_are_simulated_exactly(seed):
    rng = np.random.default_rng(seed)
    checked = 0
    for n in range(1, MAX_STATES + 1):
        spec, model = models()[n]
        automata = [random_automaton(rng, n) for _ in range(PER_STATES)]
        words = [words_for(a, rng) for a in automata]
        for a, w, pred in zip(automata, words, run_swapped(model, spec, automata, words)):
            truth = a.run(w)
            bad = np.argwhere(pred != truth)
            assert not len(bad), (
                f"seed {seed}: {a.to_json()} wrong on {w[bad[0][0]].tolist()} at position {bad[0][1] + 1}"
            )
            checked += 1
    assert checked == MAX_STATES * PER_STATES >= 1000


# -- Krohn–Rhodes: random cascades -------------------------------------------------------------
CASCADES = 60
CASCADE_T = 12


def random_level(rng: np.random.Generator, name: str) -> Semiautomaton:
    """A permutation-reset automaton on 1–4 states: random permutations, resets (constants), identities."""
    n = int(rng.integers(1, 5))
    maps = []
    for _ in range(int(rng.integers(1, 4))):
        kind = rng.choice(["permutation", "reset", "identity"], p=[0.55, 0.3, 0.15])
        maps.append(
            rng.permutation(n)
            if kind == "permutation"
            else np.full(n, rng.integers(0, n))
            if kind == "reset"
            else np.arange(n)
        )
    return Semiautomaton(
        name,
        tuple(str(q) for q in range(n)),
        tuple(f"s{i}" for i in range(len(maps))),
        np.array(maps),
        int(rng.integers(0, n)),
    )


def random_cascade(rng: np.random.Generator):
    from sandbox_lens.interp.tasks.cascade import Cascade, CascadeLevel

    m = int(rng.integers(1, 5))
    levels: list = []
    for i in range(int(rng.integers(1, 4))):
        a = random_level(rng, f"L{i}")
        earlier = [range(lv.automaton.n_states) for lv in levels]
        wiring = {
            (prev, s): int(rng.integers(0, a.n_symbols)) for prev in itertools.product(*earlier) for s in range(m)
        }
        levels.append(CascadeLevel(f"L{i}", a, wiring))
    return Cascade("fuzz", tuple(f"x{j}" for j in range(m)), tuple(levels))


@settings(max_examples=1, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_random_cascades_are_simulated_exactly_by_krohn_rhodes(seed):
    from sandbox_lens.interp.verify import verify

    rng = np.random.default_rng(seed)
    for i in range(CASCADES):
        cascade = random_cascade(rng)
        product = cascade.automaton()
        r = verify(build("krohn_rhodes", product, CASCADE_T, cascade=cascade), product, samples=20, seed=i)
        assert r.exact, f"seed {seed}, cascade {i}: {cascade.to_dict()} — {r.mismatches[:1]}"
        assert r.exhaustive_upto >= min(CASCADE_T, 6)


def test_the_cascade_fuzz_catches_the_printed_wiring():
    """Sensitivity: Lemma 21's printed wiring (current states, erratum E19) fails on random cascades whose
    wiring depends on an earlier level in a way the time shift exposes (7 of these 30 multi-level ones)."""
    from sandbox_lens.interp.verify import verify

    rng = np.random.default_rng(3)
    caught = tried = 0
    while tried < 30:
        cascade = random_cascade(rng)
        if len(cascade.levels) < 2:
            continue
        tried += 1
        product = cascade.automaton()
        r = verify(
            build("krohn_rhodes", product, CASCADE_T, cascade=cascade, as_printed="wiring"),
            product,
            samples=20,
            seed=tried,
        )
        caught += not r.exact
    assert caught >= 5, caught
