"""Each gadget of ``sandbox_lens/constructions/gadgets.py`` on its own: its lemma's promise, checked on residual
streams written by hand (numpy, float64), apart from any construction that uses it."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sandbox_lens.constructions import gadgets
from sandbox_lens.interp.model.spec import MLP, Head, Layout


def mlp_out(mlp: MLP, x: np.ndarray) -> np.ndarray:
    w_in, b_in, w_out, b_out = mlp.matrices()
    return np.maximum(x @ w_in + b_in, 0.0) @ w_out + b_out


def head_out(head: Head, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(attention pattern [n, n], output [n, d_model]) of a causal head on one residual stream ``x`` [n, d]."""
    w_q, w_k, w_v, w_o = head.matrices()
    scores = (x @ w_q) @ (x @ w_k).T
    scores = np.where(np.tril(np.ones_like(scores, dtype=bool)), scores, -np.inf)
    a = np.exp(scores - scores.max(axis=1, keepdims=True))
    a /= a.sum(axis=1, keepdims=True)
    return a, a @ (x @ w_v) @ w_o


# -- Lemma 10: the trapezoid ------------------------------------------------------------------------
@settings(max_examples=60)
@given(x0=st.floats(-50, 50), spacing=st.floats(0.1, 10), frac=st.floats(-1, 1), far=st.floats(2, 20))
def test_trapezoid_is_exactly_one_near_its_point_and_zero_away(x0, spacing, frac, far):
    layout = Layout()
    layout.add("x")
    layout.add("out")
    mlp = MLP(layout)
    gadgets.trapezoid(mlp, "x", x0, spacing, "out")
    near, away = np.zeros((1, 2)), np.zeros((2, 2))
    near[0, 0] = x0 + 0.999 * frac * spacing / 4  # within Δ' = spacing/4
    away[:, 0] = [x0 + far * spacing / 4, x0 - far * spacing / 4]  # at least 2Δ' away
    assert mlp_out(mlp, near)[0, 1] == pytest.approx(1.0, abs=1e-9)
    assert np.abs(mlp_out(mlp, away)[:, 1]).max() <= 1e-9
    assert mlp.width == 4


# -- position codes and Lemma 13's look-back head ---------------------------------------------------
@pytest.mark.parametrize("n_ctx", [1, 2, 7, 64, 1000])
def test_the_rotary_code_is_unit_pairs_with_exact_periods(n_ctx):
    code, labels = gadgets.rotary_position_code(n_ctx)
    B = max(1, math.ceil(math.log2(max(n_ctx, 2))))
    assert code.shape == (n_ctx, 2 * B) and len(labels) == 2 * B
    assert np.allclose(code[:, 0::2] ** 2 + code[:, 1::2] ** 2, 1.0)
    for k in range(B):  # pair k repeats every 2^(k+1) positions, exactly
        period = 2 ** (k + 1)
        if n_ctx > period:
            assert np.array_equal(code[period:, 2 * k : 2 * k + 2], code[:-period, 2 * k : 2 * k + 2])


def _positions(n: int, code: str = "rotary", period: int | None = None):
    pos, _ = (
        gadgets.rotary_position_code(n)
        if code == "rotary"
        else gadgets.circle_position_code(n, padding=1, length=period)
    )
    layout = Layout()
    layout.add("pos", pos.shape[1])
    layout.add("src")
    layout.add("dst")
    x = np.zeros((n, layout.d_model))
    x[:, layout["pos"]] = pos
    x[:, layout.index("src")] = np.arange(n) + 1.0  # a value that names its position
    return layout, x


@pytest.mark.parametrize("n,shift", [(16, 1), (16, 4), (64, 13), (300, 64)])
def test_the_lookback_head_copies_from_exactly_shift_positions_back(n, shift):
    layout, x = _positions(n)
    head = gadgets.lookback_head(layout, shift, "src", "dst")
    a, out = head_out(head, x)
    rows = np.arange(shift, n)
    assert (a[rows].argmax(axis=1) == rows - shift).all()
    assert a[rows, rows - shift].min() == 1.0  # the margin 2γ rounds the softmax to exactly one key
    assert np.array_equal(out[rows, layout.index("dst")], x[rows - shift, layout.index("src")])


def test_the_circle_code_looks_back_on_short_words():
    n, T, shift = 20, 16, 3
    layout, x = _positions(n, "circle", T)
    head = gadgets.lookback_head(layout, shift, "src", "dst", code="circle", period=T)
    a, _ = head_out(head, x)
    rows = np.arange(shift, n - 1)
    assert (a[rows].argmax(axis=1) == rows - shift).all()


# -- Lemma 15: the counting head --------------------------------------------------------------------
@given(bits=st.lists(st.integers(0, 1), min_size=1, max_size=31))
def test_the_prefix_average_head_outputs_the_exact_prefix_mean(bits):
    N = 32  # a power of two ≥ the word: weights and partial sums are exact binary fractions
    layout = Layout()
    for name in ("log_sink", "bos", "v", "out"):
        layout.add(name)
    n = len(bits) + 1
    x = np.zeros((n, layout.d_model))
    x[0, layout.index("bos")] = 1.0
    x[:, layout.index("log_sink")] = np.log(N - np.arange(n))
    x[1:, layout.index("v")] = bits
    _, out = head_out(gadgets.prefix_average_head(layout, "v", "out"), x)
    expected = np.concatenate([[0.0], np.cumsum(bits)]) / N
    assert np.allclose(out[:, layout.index("out")], expected, atol=1e-12)


# -- Lemma 16: the latest write ---------------------------------------------------------------------
@settings(max_examples=40)
@given(writes=st.lists(st.booleans(), min_size=2, max_size=40), seed=st.integers(0, 1000))
def test_the_latest_write_head_copies_the_latest_write(writes, seed):
    Q = 3  # values copied: one-hot states of a 3-state memory
    layout = Layout()
    for name, size in (("one", 1), ("notwrite", 1), ("posT", 1), ("src", Q), ("dst", Q)):
        layout.add(name, size)
    n = len(writes) + 1
    T = n
    rng = np.random.default_rng(seed)
    values = rng.integers(Q, size=n)
    is_write = np.array([True, *writes])  # BOS counts as a write (of q0)
    x = np.zeros((n, layout.d_model))
    x[:, layout.index("one")] = 1.0
    x[:, layout.index("notwrite")] = ~is_write
    x[:, layout.index("posT")] = np.arange(n) / T
    x[np.arange(n), layout.index("src") + values] = 1.0
    _, out = head_out(gadgets.latest_write_head(layout, T, Q, "src", "dst"), x)
    latest = np.maximum.accumulate(np.where(is_write, np.arange(n), 0))
    copied = out[:, layout["dst"]]
    target = np.eye(Q)[values[latest]]
    assert np.abs(copied - target).max() < 1 / 8


# -- the read-out, the token layout, the previous-token head, the one-hot lookup -------------------
def test_the_one_hot_readout_puts_alpha_on_the_state():
    layout = Layout()
    layout.add("junk", 2)
    layout.add("state", 4)
    W_U, b_U = gadgets.one_hot_readout(layout, "state")
    x = np.zeros(layout.d_model)
    x[layout.index("state", 2)] = 1.0
    x[layout["junk"]] = [5.0, -3.0]  # other subspaces are not read
    assert np.array_equal(x @ W_U + b_U, [0.0, 0.0, gadgets.READOUT_ALPHA, 0.0])


def test_the_bos_token_layout():
    io = gadgets.bos_token_io(3)
    assert io.prefix == (0,) and io.symbol_tokens == (1, 2, 3)
    assert io.encode([[2, 0]]).tolist() == [[0, 3, 1]]


@pytest.mark.parametrize("T", [4, 33, 512])
def test_the_previous_token_head_copies_from_one_position_back(T):
    layout = Layout()
    for name, size in (("one", 1), ("posT", 1), ("par", 1), ("src", 2), ("dst", 2)):
        layout.add(name, size)
    n = T + 1
    x = np.zeros((n, layout.d_model))
    x[:, layout.index("one")] = 1.0
    x[:, layout.index("posT")] = np.arange(n) / T
    x[:, layout.index("par")] = (-1.0) ** np.arange(n)
    x[:, layout["src"]] = np.random.default_rng(T).uniform(-1, 1, size=(n, 2))
    _, out = head_out(gadgets.previous_token_head(layout, T, [("src", "dst")]), x)
    assert np.abs(out[1:, layout["dst"]] - x[:-1, layout["src"]]).max() < 1 / 256


@settings(max_examples=60)
@given(
    k=st.integers(1, 4),
    on=st.lists(st.booleans(), min_size=4, max_size=4),
    noise=st.lists(st.floats(-1, 1), min_size=4, max_size=4),
)
def test_the_one_hot_lookup_fires_exactly_when_every_input_is_on(k, on, noise):
    layout = Layout()
    layout.add("in", k)
    layout.add("out")
    mlp = MLP(layout)
    gadgets.one_hot_lookup(mlp, [("in", i) for i in range(k)], "out")
    x = np.zeros((1, layout.d_model))
    # soft copies: errors that add up to less than 1/4
    x[0, layout["in"]] = np.array(on[:k], dtype=float) + np.array(noise[:k]) * (0.249 / k)
    assert mlp_out(mlp, x)[0, layout.index("out")] == pytest.approx(1.0 if all(on[:k]) else 0.0, abs=1e-12)
    assert mlp.width == 2
