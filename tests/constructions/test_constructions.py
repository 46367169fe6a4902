"""Every construction is exact: exhaustive for short words, sampled at long lengths, float32."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import semiautomata

from sandbox_lens.constructions import build
from sandbox_lens.constructions.prefix_scan import CIRCLE_FLOAT32_MAX_LENGTH, MAX_LENGTH
from sandbox_lens.interp.errors import ConstructionError, LengthError
from sandbox_lens.interp.model.hooked import to_hooked
from sandbox_lens.interp.model.run import attention_patterns
from sandbox_lens.interp.tasks.automata import Semiautomaton
from sandbox_lens.interp.tasks.catalogue import get_automaton
from sandbox_lens.interp.verify import verify


def assert_exact(result):
    assert result.accuracy == 1.0, result.mismatches
    assert result.checked > 0


# -- prefix scan (Theorem 10) ------------------------------------------------------------
@pytest.mark.parametrize(
    "name", ["parity", "C3", "S3", "D8", "Q8", "A4", "S4", "A5", "S5", "flipflop", "grid5", "grid3x4", "C2^3"]
)
def test_prefix_scan_exact_on_catalogue(name):
    a = get_automaton(name)
    assert_exact(verify(build("prefix_scan", a, 64), samples=200, seed=1))


@pytest.mark.parametrize("T", [1, 2, 3, 5, 6, 8])
def test_prefix_scan_exhaustive_every_short_length(T):
    # odd lengths and powers of two: the read-out of coordinate q0 (erratum E3) matters at T = 2^L
    for name in ("S5", "grid5", "flipflop"):
        r = verify(build("prefix_scan", get_automaton(name), T), exhaustive_upto=T, samples=0)
        assert_exact(r)
        assert r.sequences == get_automaton(name).n_symbols ** T


@pytest.mark.parametrize("T", [1, 2, 7, 16, 100, 1024])
def test_prefix_scan_depth_and_width_follow_theorem_10(T):
    n = 5
    spec = build("prefix_scan", get_automaton("S5"), T)
    L = max(1, math.ceil(math.log2(T)))
    P = 2 ** (L - 1)
    assert spec.attention_layers == L
    assert spec.n_layers == 2 * L
    assert spec.d_model == n * n + 2 * n + 2 * max(1, math.ceil(math.log2(P + T)))
    assert spec.d_mlp == 4 * n * n + 2 * n
    assert spec.n_heads == 1


def test_prefix_scan_s5_at_1024_float32():
    assert_exact(verify(build("prefix_scan", get_automaton("S5"), 1024), samples=12, seed=3))


def test_lookback_heads_select_exactly_one_key():
    """Attention layer l puts weight 1.0 (float32) on position i − 2^(l−1) for every real query."""
    T = 40
    a = get_automaton("S4")
    model = to_hooked(build("prefix_scan", a, T))
    P = len(model.card.io.prefix)
    word = a.sample(1, T, seed=0)[0]
    patterns = {head: p[0] for head, p in attention_patterns(model, model.card.io.encode(word)).items()}
    assert len(patterns) == math.ceil(math.log2(T))
    for layer, ((block, head), pat) in enumerate(sorted(patterns.items()), start=1):
        assert (block, head) == (2 * (layer - 1), 0)
        shift = 2 ** (layer - 1)
        for i in range(P, P + T):
            assert pat[i, i - shift] == 1.0


def test_scratch_subspaces_are_zero_between_scan_layers():
    a = get_automaton("S3")
    spec = build("prefix_scan", a, 16)
    model = to_hooked(spec)
    word = a.sample(1, 16, seed=4)[0]
    ids = torch.tensor([list(model.card.io.prefix) + list(word)])
    with torch.inference_mode():
        _, cache = model.run_with_cache(ids)
    lay = spec.layout
    P = len(model.card.io.prefix)
    for b in range(1, spec.n_layers, 2):  # after each thesis layer's second half
        resid = cache[f"blocks.{b}.hook_resid_post"][0].numpy()
        assert np.all(resid[:, lay["L"]] == 0) and np.all(resid[:, lay["H"]] == 0)
        # real positions hold 1-based maps as exact integers
        assert set(np.unique(resid[P:, lay["R"]])) <= {1.0, 2.0, 3.0}
        # PAD positions hold const_q0 up to float32 rounding of the softmax over identical PAD keys
        assert np.allclose(resid[:P, lay["R"]], a.initial + 1, atol=1e-5)
    final = cache[f"blocks.{spec.n_layers - 1}.hook_resid_post"][0].numpy()
    assert np.array_equal(final[P:, lay.index("R", a.initial)], a.run(word) + 1)


def test_prefix_scan_respects_initial_state():
    a = get_automaton("grid5").with_initial(3)
    assert_exact(verify(build("prefix_scan", a, 32), samples=100))


def test_prefix_scan_thesis_padding_and_circle_code():
    a = get_automaton("S3")
    assert_exact(verify(build("prefix_scan", a, 20, padding="thesis"), samples=100))
    assert_exact(verify(build("prefix_scan", a, 256, code="circle"), samples=20))


def test_circle_code_refuses_float32_beyond_its_limit():
    spec = build("prefix_scan", get_automaton("parity"), CIRCLE_FLOAT32_MAX_LENGTH + 1, code="circle")
    assert spec.verified_dtypes == ("float64",)
    with pytest.raises(ConstructionError, match="not exact in float32"):
        verify(spec, samples=1)


@pytest.mark.parametrize("defect", ["rotation_sign", "value_matrix"])
def test_each_printed_defect_alone_breaks_the_scan(defect):
    for name in ("S5", "grid5"):
        a = get_automaton(name)
        r = verify(build("prefix_scan", a, 16, as_printed=defect), samples=200, exhaustive_upto=6)
        assert r.accuracy < 0.8, (name, r.accuracy)
        assert r.mismatches


def test_printed_readout_fails_exactly_at_t_equal_T_power_of_two():
    from sandbox_lens.interp.model.run import predict

    a = get_automaton("S5")
    words = a.sample(200, 16, seed=0)
    truth = a.run(words)
    wrong = predict(to_hooked(build("prefix_scan", a, 16, as_printed="readout")), words) != truth
    assert wrong[:, -1].all()  # t = T = 2^L: coordinate q0+1 of a permutation never gives q_t
    assert not wrong[:, :-1].any()  # every earlier window still contains the padding's constant map
    with pytest.raises(ConstructionError, match="as_printed"):
        build("prefix_scan", a, 16, as_printed="typo")


def test_prefix_scan_refuses_bad_lengths_and_options():
    a = get_automaton("parity")
    with pytest.raises(LengthError):
        build("prefix_scan", a, MAX_LENGTH + 1)
    with pytest.raises(LengthError):
        build("prefix_scan", a, 0)
    with pytest.raises(ConstructionError, match="code"):
        build("prefix_scan", a, 8, code="spiral")
    with pytest.raises(ConstructionError, match="unknown option"):
        build("prefix_scan", a, 8, colour="red")
    spec = build("prefix_scan", a, 16)
    with pytest.raises(LengthError, match="built for lengths 1..16"):
        verify(spec, length=17)


@settings(max_examples=25)
@given(semiautomata(any_initial=True), st.integers(1, 9))
def test_prefix_scan_exact_on_random_automata_short(a, T):
    K = min(T, 6 if a.n_symbols <= 3 else 5)
    assert_exact(verify(build("prefix_scan", a, T), exhaustive_upto=K, samples=20, seed=T))


@settings(max_examples=8)
@given(semiautomata(any_initial=True), st.sampled_from([64, 100, 200]))
def test_prefix_scan_exact_on_random_automata_long(a, T):
    assert_exact(verify(build("prefix_scan", a, T), samples=32, seed=T))


# -- modular counter (Lemma 15) ----------------------------------------------------------
@pytest.mark.parametrize("name", ["parity", "C3", "C5", "C7"])
def test_counter_exact(name):
    r = verify(build("modular_counter", get_automaton(name), 128), samples=100)
    assert_exact(r)
    assert (r.shape["n_layers"], r.shape["attention_layers"]) == (1, 1)


def test_counter_accepts_relabelled_increments_and_initial_state():
    # a "counter" whose symbols add 2 and 0 mod 3, starting in state 1
    a = Semiautomaton("add2", ("0", "1", "2"), ("two", "zero"), np.array([[2, 0, 1], [0, 1, 2]]), 1)
    assert_exact(verify(build("modular_counter", a, 50), samples=100))


@pytest.mark.parametrize("name", ["parity", "C3"])
def test_counter_at_4096_float32(name):
    assert_exact(verify(build("modular_counter", get_automaton(name), 4096), samples=3, exhaustive_upto=6))


def test_counter_refuses_non_counters_and_long_lengths():
    with pytest.raises(ConstructionError, match="adds a constant"):
        build("modular_counter", get_automaton("S3"), 8)
    with pytest.raises(LengthError):
        build("modular_counter", get_automaton("C3"), 4097)


# -- memory unit (Lemma 16) --------------------------------------------------------------
@pytest.mark.parametrize("name", ["flipflop", "memory1", "memory3", "memory6"])
def test_memory_exact(name):
    r = verify(build("memory", get_automaton(name), 100), samples=100)
    assert_exact(r)
    assert (r.shape["n_layers"], r.shape["attention_layers"]) == (1, 1)


def test_memory_with_sparse_writes_and_initial_state():
    a = get_automaton("memory3").with_initial(2)
    spec = build("memory", a, 300)
    # mostly no-ops, so the latest write is often far back (or only BOS)
    words = a.sample(64, 300, seed=0, probs=[0.01, 0.01, 0.01, 0.97])
    from sandbox_lens.interp.model.run import predict

    assert np.array_equal(predict(to_hooked(spec), words), a.run(words))


@pytest.mark.parametrize("name", ["flipflop", "memory3"])
def test_memory_at_4096_float32(name):
    assert_exact(verify(build("memory", get_automaton(name), 4096), samples=4, exhaustive_upto=5))


def test_memory_refuses_non_memory_automata():
    with pytest.raises(ConstructionError, match="writes"):
        build("memory", get_automaton("grid3"), 8)


# -- slow: long lengths with many samples (make test-slow) -------------------------------
@pytest.mark.slow
def test_slow_prefix_scan_s5_1024_thousands():
    assert_exact(verify(build("prefix_scan", get_automaton("S5"), 1024), samples=1000, seed=11))


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_slow_prefix_scan_random_automaton_4096(seed):
    rng = np.random.default_rng(seed)
    a = Semiautomaton("rand", tuple(map(str, range(5))), tuple("abcd"), rng.integers(0, 5, (4, 5)), 0)
    assert_exact(verify(build("prefix_scan", a, 4096), samples=8, seed=seed))


@pytest.mark.slow
@pytest.mark.parametrize(
    "cname, name, samples",
    [
        ("modular_counter", "parity", 1000),
        ("modular_counter", "C3", 250),
        ("memory", "flipflop", 1000),
        ("memory", "memory3", 250),
    ],
)
def test_slow_counters_and_memory_4096_many_words(cname, name, samples):
    # ~1-4M positions each at the longest supported length (tens of minutes on 2 cores in total)
    assert_exact(verify(build(cname, get_automaton(name), 4096), samples=samples, seed=5))
