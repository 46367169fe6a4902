"""Reusable gadgets of the thesis's constructions, one function per lemma.

* :func:`trapezoid` — Lemma 10: four ReLUs that are exactly 1 near a grid point and 0 away
  from it, used to round a noisy scalar onto a grid.
* :func:`rotary_position_code` / :func:`lookback_head` — Lemma 13's hard look-back head,
  with the multi-scale rotary code that keeps a margin of 2γ at every length (notes:
  prefix-scan.md §3.2), or the thesis's circle code (Proposition 2).
* :func:`prefix_average_head` — Lemma 15's counting head: a BOS sink whose score makes the
  head output exactly Σ_{j≤t} v_j / N.
* :func:`latest_write_head` — Lemma 16's head that attends to the most recent "write".
* :func:`previous_token_head` — a head that copies from position t − 1 with linear position
  features only (krohn-rhodes.md §1.5 H3; the fix for Lemma 21's wiring).
* :func:`one_hot_lookup` — an exact one-hidden-layer lookup of k one-hot inputs (krohn-rhodes.md
  §1.4), which replaces Lemma 11's three-layer MLP once every input is one-hot.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from sandbox_lens.interp.model.card import TokenIO
from sandbox_lens.interp.model.spec import MLP, Direction, Head, Layout

__all__ = [
    "trapezoid",
    "rotary_position_code",
    "circle_position_code",
    "lookback_head",
    "prefix_average_head",
    "latest_write_head",
    "LOOKBACK_GAMMA",
    "READOUT_ALPHA",
    "one_hot_readout",
    "bos_token_io",
    "previous_token_head",
    "one_hot_lookup",
]

#: Score margin γ of the rotary look-back: the target beats every other key by 2γ = 40,
#: so its softmax weight rounds to exactly 1.0 in float32 and float64.
LOOKBACK_GAMMA = 20.0

#: Logit margin of every read-out: the exact state beats the others by α.
READOUT_ALPHA = 10.0

_TRAPEZOID = ((2.0, 1.0), (1.0, -1.0), (-1.0, -1.0), (-2.0, 1.0))  # (bias offset, output sign)


def _scaled(direction: Direction, c: float) -> dict:
    if isinstance(direction, Mapping):
        return {k: c * w for k, w in direction.items()}
    return {direction: c}


def trapezoid(mlp: MLP, read: Direction, x0: float, spacing: float, write: Direction) -> None:
    """Lemma 10 (thesis l.1913): add ψ_{x0}(x) · write, with x = (residual · read).

    ψ = ReLU((x−x0)/Δ′+2) − ReLU((x−x0)/Δ′+1) − ReLU((x−x0)/Δ′−1) + ReLU((x−x0)/Δ′−2) with
    Δ′ = spacing/4: exactly 1 for |x−x0| ≤ Δ′ and exactly 0 for |x−x0| ≥ 2Δ′, so a bank of
    trapezoids on a grid reproduces f(x0) exactly under any error below spacing/4.
    """
    inv = 4.0 / spacing
    for offset, sign in _TRAPEZOID:
        mlp.unit(_scaled(read, inv), -x0 * inv + offset, _scaled(write, sign))


def rotary_position_code(n_ctx: int) -> tuple[np.ndarray, list[str]]:
    """Multi-scale rotary features (cos, sin)(π i / 2^k), k = 0..B−1, B = ⌈log₂ n_ctx⌉ (≥ 1).

    The angle is reduced modulo 2π in exact integer arithmetic before the float64 cosine,
    so the features are as exact as float64 allows at any position.
    """
    B = max(1, math.ceil(math.log2(max(n_ctx, 2))))
    i = np.arange(n_ctx)
    cols, labels = [], []
    for k in range(B):
        angle = math.pi * (i % (2 ** (k + 1))) / 2**k
        cols += [np.cos(angle), np.sin(angle)]
        labels += [f"cos{k}", f"sin{k}"]
    return np.stack(cols, axis=1), labels


def circle_position_code(n_ctx: int, padding: int, length: int) -> tuple[np.ndarray, list[str]]:
    """The thesis's code p_t = (cos(πt/T), sin(πt/T)), t = i − P + 1 (Proposition 2)."""
    t = np.arange(n_ctx) - padding + 1
    angle = math.pi * t / length
    return np.stack([np.cos(angle), np.sin(angle)], axis=1), ["cos", "sin"]


def lookback_head(
    layout: Layout,
    shift: int,
    src: str,
    dst: str,
    pos: str = "pos",
    code: str = "rotary",
    gamma: float = LOOKBACK_GAMMA,
    period: int | None = None,
    label: str = "",
) -> Head:
    """Lemma 13: a head at position i that copies subspace ``src`` from position i − shift into ``dst``.

    The query reads the positional features unchanged; the key reads them rotated by the
    shift, so score(i, j) = γ Σ_k cos(angle_k(i) − angle_k(j) − angle_k(shift)), whose unique
    maximum over j ≤ i is j = i − shift (prefix-scan.md, erratum E1: rotate by *plus* θ).

    * ``code="rotary"``: angle_k(x) = πx/2^k for every feature pair k; every wrong key loses
      at least 2γ (the pair k = v₂(j − (i − shift)) contributes −1 instead of +1).
    * ``code="circle"``: one pair with angle(x) = πx/``period``; the margin is
      γ(1 − cos(π/period)), which float32 cannot resolve for period ≳ 4096.
    """
    head = Head(layout, label or f"look-back {shift}: copy {src} -> {dst}")
    n_pairs = layout.size(pos) // 2
    for k in range(n_pairs):
        denom = 2**k if code == "rotary" else period
        theta = math.pi * ((shift % (2 * denom)) / denom)
        c, s = math.cos(theta), math.sin(theta)
        cos_k, sin_k = (pos, 2 * k), (pos, 2 * k + 1)
        # key feature rotated by +θ: (cos(a+θ), sin(a+θ)) = (c·cos a − s·sin a, s·cos a + c·sin a)
        head.qk(cos_k, {cos_k: c, sin_k: -s}, gamma)
        head.qk(sin_k, {cos_k: s, sin_k: c}, gamma)
    head.copy(src, dst)
    return head


def prefix_average_head(
    layout: Layout, src: Direction, dst: str, log_sink: str = "log_sink", bos: str = "bos", label: str = ""
) -> Head:
    """Lemma 15: the head output at position t is exactly Σ_{j=1..t} src_j / N.

    The query reads ``log_sink`` = log(N − t) (positional), the key reads the BOS flag, so
    BOS scores log(N − t) and every other key 0: the BOS weight is (N − t)/N and every real
    key gets 1/N. With N a power of two the weights and partial sums are exact binary
    fractions (krohn-rhodes.md §2.1).
    """
    head = Head(layout, label or f"prefix average: {src} -> {dst}")
    head.qk(log_sink, bos)
    head.ov(src, dst)
    return head


def latest_write_head(
    layout: Layout,
    length: int,
    n_values: int,
    src: str,
    dst: str,
    one: str = "one",
    not_write: str = "notwrite",
    pos_frac: str = "posT",
) -> Head:
    """Lemma 16: attend to the most recent write (BOS counts as a write of q0) and copy ``src``.

    score(j) = c·(j/T − 2·notwrite_j) with c = T·ln(16|Q|T): writes score ≥ 0, no-ops ≤ −c,
    and the latest write beats earlier writes by c/T = ln(16|Q|T), so the copied value is
    within 1/8 of the written one (thesis erratum E6: c ≥ T ln(8|Q|T) suffices for 1/4).
    """
    c = length * math.log(16 * n_values * length)
    head = Head(layout, f"latest write: {src} -> {dst}")
    head.qk(one, not_write, -2.0 * c)
    head.qk(one, pos_frac, c)
    head.copy(src, dst)
    return head


def one_hot_readout(layout: Layout, subspace: str, alpha: float = READOUT_ALPHA) -> tuple[np.ndarray, np.ndarray]:
    """Unembedding for a one-hot state subspace: logit_q = α·x[subspace_q]."""
    n = layout.size(subspace)
    W_U = np.zeros((layout.d_model, n))
    W_U[layout[subspace], :] = alpha * np.eye(n)
    return W_U, np.zeros(n)


def bos_token_io(n_symbols: int) -> TokenIO:
    """Token 0 is BOS (the attention sink / the write of q0); symbol σ is token 1 + σ."""
    return TokenIO.after_bos(n_symbols)


def previous_token_head(
    layout: Layout,
    length: int,
    copies: Sequence[tuple[str, str]],
    one: str = "one",
    pos_frac: str = "posT",
    parity: str = "par",
) -> Head:
    """Copy each ``(src, dst)`` subspace from position t − 1 (position 0 copies itself).

    score(t, j) = c·j/T − c·(−1)^{t+j} with c = (T/2)·ln(256T) (krohn-rhodes.md §1.5, H3):
    keys of t's own parity lose c, and among the others t − 1 beats t − 3 by 2c/T = ln(256T),
    so every copied coordinate is within 1/256 of its value at t − 1. Only linear position
    features are needed, unlike a quadratic or circular code whose scores would grow like T².
    """
    c = 0.5 * length * math.log(256 * length)
    head = Head(layout, "previous token: " + ", ".join(f"{s}->{d}" for s, d in copies))
    head.qk(one, pos_frac, c)
    head.qk(parity, parity, -c)
    for src, dst in copies:
        head.copy(src, dst)
    return head


def one_hot_lookup(mlp: MLP, inputs: Sequence[Direction], write: Direction) -> None:
    """Add ``write`` exactly when all k one-hot ``inputs`` are on (krohn-rhodes.md §1.4).

    With S the sum of the k input coordinates, ind = ReLU(2S − (2k − 1.5)) − ReLU(2S − (2k − 0.5))
    is exactly 1 for S ≥ k − 1/4 and exactly 0 for S ≤ k − 3/4, so soft copies whose errors add
    up to less than 1/4 are read exactly. Two units per input combination. (Lemma 11 as printed
    uses bias −d_in where −(d_in − 1) is needed, erratum in the notes; this replaces it.)
    """
    k = len(inputs)
    read: dict = {}
    for direction in inputs:
        for key, w in (_scaled(direction, 2.0)).items():
            read[key] = read.get(key, 0.0) + w
    mlp.unit(read, -(2 * k - 1.5), write)
    mlp.unit(read, -(2 * k - 0.5), _scaled(write, -1.0))
