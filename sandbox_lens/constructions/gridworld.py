"""Theorem 12: the gridworld boundary detector in two attention layers, for any length.

The idea (thesis §3.4.4.4, Algorithm 1, Lemma 22): with z_t the prefix sum of the moves
(L = −1, R = +1, no-op = 0), the state is q_t = z_t − lo, where [lo, lo + S] is the most recent
window of S + 1 consecutive prefix-sum values that have all been visited (S = n − 1). The start
of that window is the most recent boundary visit. So:

* **layer 1** (Lemma 15): a BOS-sink head writes x1_t = z_t/N exactly (N a power of two); the MLP
  rounds x1_t to the grid k/N (Lemma 10 trapezoids) and writes **±1 binary codes**: the bits of
  z_t as the key code, and for each offset k the bits of z_t + k as that head's query code.
* **layer 2**: one head per offset k ∈ {−S..S} attends to the latest position i with
  z_i = z_t + k (score γ·Σ_j bit_j(z_t + k)·bit_j(z_i) = γ(B − 2·Hamming distance): a wrong
  value loses ≥ 2γ) with a recency term c·i/N, and to BOS when the value was never
  visited (a sink score between "match" and "mismatch"). It copies the key's position i/N and
  its BOS flag ("unmatched").
* **MLP 2**: window s (offsets s − S .. s) gets the logit N·min(p_{s−S}, p_s) − Λ·(unmatched
  endpoints): the most recent complete window wins, and the unembedding maps window s to state
  S − s. One hidden layer suffices because the argmax does the thesis's min-pooling.

The printed construction does not work literally (automata-and-gridworld.md §1.5). This
module's differences: the circle code cos(πx) of the prefix sum, whose match margin is
~π²/(16N²), is replaced by ±1 bit codes (margin 2γ at every length). Every layer-1 MLP weight is
±1 on integer-valued hidden units, so the codes are exact in float32 — a cos/sin code written by
the same trapezoids picks up cancellation errors ~10⁻³ that γ ~ 10⁵ turns into wrong matches
beyond T ≈ 500 (measured). The BOS sink holds no value (D1); unmatched heads are detected by
the sink, not by "attends to t" (D2); the state is S − s for the winning window s in every case (D3, D4); and the
input is padded with S + 1 L moves (then q0 R moves) so a complete window always exists (D5).
``as_printed="no_padding"`` drops that padding, as a negative control.

The 2-D gridworld ``grid<a>x<b>`` runs one detector per axis side by side (Lemma 17); its
logit for cell (x, y) is the sum of the two axes' window logits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from sandbox_lens.constructions.gadgets import READOUT_ALPHA, prefix_average_head, trapezoid
from sandbox_lens.interp.errors import ConstructionError, LengthError
from sandbox_lens.interp.model.card import TokenIO
from sandbox_lens.interp.model.spec import MLP, Block, ConstructionSpec, Head, Layout, variable_site
from sandbox_lens.interp.tasks.automata import Semiautomaton
from sandbox_lens.interp.tasks.gridworld import GridAxis, grid_axes

__all__ = ["build_gridworld", "grid_axes", "GridAxis", "MAX_LENGTH", "MAX_CELLS", "PRINTED_DEFECTS"]

#: Longest supported length (tests check float32 exactness at 256; slow tests at 4096, where the largest
#: MLP pre-activation error is 0.005 of a tolerance of 1/2: README, "Measured float32 limits").
MAX_LENGTH = 4096
#: Cells per axis: layer 2 has 2S + 1 heads per axis.
MAX_CELLS = 64
PRINTED_DEFECTS = ("no_padding",)


def _padding(automaton: Semiautomaton, axes: list[GridAxis]) -> list[int]:
    """S + 1 moves towards 0 per axis, then q0's coordinates as moves up: any start ends at q0."""
    pads: list[int] = []
    for axis in axes:
        down = axis.step.index(-1) if -1 in axis.step else None
        up = axis.step.index(1) if 1 in axis.step else None
        if axis.S and (down is None or up is None):
            raise ConstructionError(f"gridworld: {automaton.name!r} has no move in both directions along an axis")
        pads += [down] * (axis.S + 1) if axis.S else []
    for axis in axes:
        pads += [axis.step.index(1)] * axis.initial
    return pads


@dataclass(frozen=True)
class _Scales:
    """The constants of the proof, fixed by the number of positions n_pos (BOS, padding, moves)."""

    n_pos: int
    N: int  # counting normaliser, a power of two > positions
    B: int  # bits of the ±1 codes: 2^B > every z + k + bias
    c: float  # recency: the latest match leads the next by c / n_pos
    gamma: float  # a wrong bit loses 2γ
    sink: float  # BOS score: between a match (≥ γB) and a mismatch (≤ γ(B − 2) + c)
    Lambda: float  # an unmatched endpoint costs more than any position spread
    bias: int  # z + k + bias ≥ 0

    @staticmethod
    def of(n_pos: int) -> _Scales:
        N = 2 ** math.ceil(math.log2(2 * n_pos))
        B = math.ceil(math.log2(2 * n_pos + 2 * MAX_CELLS + 1))
        c = n_pos * math.log(16.0 * n_pos**2)
        gamma = 2.0 * c
        return _Scales(n_pos, N, B, c, gamma, gamma * (B - 1) + c, 2.0 * n_pos, n_pos + MAX_CELLS)

    def code(self, space: str, value: int) -> dict:
        """The ±1 bit code of ``value`` (shifted by ``bias``) in subspace ``space``."""
        return {(space, j): 1.0 if (value + self.bias) >> j & 1 else -1.0 for j in range(self.B)}


def _layer1(layout: Layout, mlp1: MLP, axis: GridAxis, sc: _Scales) -> Head:
    """Layer 1 for one axis: the exact prefix sum z_t (Lemma 15), then Lemma 10 trapezoids writing the
    ±1 bit codes of z (what a key offers) and of z + k for every offset k (what head k asks for).
    BOS is pushed off the grid (x1 + 2 > 1/2), so it holds no value and cannot win a match (defect D1)."""
    a = f"{axis.name}." if axis.name else ""
    S = axis.S
    layout.add(f"{a}move")  # σ̃: −1, 0, +1
    layout.add(f"{a}x1")  # layer-1 output z_t / N
    bits = [f"b{j}" for j in range(sc.B)]
    layout.add(f"{a}zkey", sc.B, labels=bits)
    for k in range(-S, S + 1):
        layout.add(f"{a}zq{k:+d}", sc.B, labels=bits)
    head = prefix_average_head(layout, f"{a}move", f"{a}x1", label=f"{a}prefix sum z/N")
    for z in range(-sc.n_pos, sc.n_pos + 1):
        write = sc.code(f"{a}zkey", z)
        for k in range(-S, S + 1):
            write.update(sc.code(f"{a}zq{k:+d}", z + k))
        trapezoid(mlp1, {f"{a}x1": 1.0, "bos": 2.0}, x0=z / sc.N, spacing=1.0 / sc.N, write=write)
    return head


def _layer2(layout: Layout, mlp2: MLP, axis: GridAxis, sc: _Scales) -> tuple[list[Head], str]:
    """Layer 2 for one axis: one boundary-detector head per offset k = −S..S (the latest i with
    z_i = z_t + k, or BOS when there is none), and MLP 2's windows: the most recent complete window
    [p_lo, p_hi] ends the walk at a wall, scored by its oldest endpoint. Returns the heads and the
    window subspace the read-out uses."""
    a = f"{axis.name}." if axis.name else ""
    S = axis.S
    heads = []
    for k in range(-S, S + 1):
        layout.add(f"{a}head{k:+d}", 2, labels=["unmatched", "pos"])
        head = Head(layout, f"{a}latest z_i = z_t{k:+d}")
        for j in range(sc.B):  # γ·(B − 2·Hamming(bits(z_t + k), bits(z_i)))
            head.qk((f"{a}zq{k:+d}", j), (f"{a}zkey", j), sc.gamma)
        head.copy("mark", f"{a}head{k:+d}")
        head.qk("one", ("mark", 1), sc.c)
        head.qk("one", ("mark", 0), sc.sink)
        heads.append(head)
    window = f"{a}window"
    layout.add(window, S + 1, labels=[f"s{s}->q{S - s}" for s in range(S + 1)])
    for k in range(-S, S + 1):  # each unmatched endpoint costs Λ in every window it ends
        windows = {(window, s): -sc.Lambda for s in range(S + 1) if k in (s - S, s)}
        mlp2.unit((f"{a}head{k:+d}", 0), 0.0, windows)
    for s in range(S + 1):  # min(p_lo, p_hi) = p_hi − ReLU(p_hi − p_lo), in units of positions
        lo, hi = f"{a}head{s - S:+d}", f"{a}head{s:+d}"
        mlp2.unit({(hi, 1): sc.n_pos}, 0.0, {(window, s): 1.0})
        mlp2.unit({(hi, 1): sc.n_pos, (lo, 1): -sc.n_pos}, 0.0, {(window, s): -1.0})
    return heads, window


def _embeddings(
    layout: Layout, automaton: Semiautomaton, axes: list[GridAxis], sc: _Scales
) -> tuple[np.ndarray, np.ndarray]:
    d = layout.d_model
    W_E = np.zeros((1 + automaton.n_symbols, d))
    W_E[0, layout.index("bos")] = 1.0
    W_E[0, layout.index("mark", 0)] = 1.0
    W_E[:, layout.index("one")] = 1.0
    for axis in axes:
        a = f"{axis.name}." if axis.name else ""
        for s, step in enumerate(axis.step):
            W_E[1 + s, layout.index(f"{a}move")] = step
    W_pos = np.zeros((sc.n_pos, d))
    i = np.arange(sc.n_pos, dtype=np.float64)
    W_pos[:, layout.index("log_sink")] = np.log(sc.N - i)
    W_pos[:, layout.index("mark", 1)] = i / sc.n_pos
    return W_E, W_pos


def _readout(layout: Layout, automaton: Semiautomaton, windows: list[tuple[str, GridAxis]]) -> np.ndarray:
    """logit(cell) = α·Σ_axes the window logit of the window that yields that coordinate."""
    W_U = np.zeros((layout.d_model, automaton.n_states))
    for q in range(automaton.n_states):
        coords = [q] if len(windows) == 1 else [int(v) for v in automaton.states[q].split(",")]
        for (space, axis), x in zip(windows, coords):
            W_U[layout.index(space, axis.S - x), q] = READOUT_ALPHA
    return W_U


def build_gridworld(automaton: Semiautomaton, length: int, as_printed: str = "") -> ConstructionSpec:
    """Theorem 12's two-attention-layer simulator for ``grid<n>`` and ``grid<a>x<b>``."""
    axes = grid_axes(automaton)
    if axes is None:
        raise ConstructionError(
            f"gridworld needs a 1-D or 2-D gridworld (grid<n>, grid<a>x<b>, optional noop); {automaton.name!r} is not one "
            f"(prefix_scan handles any automaton)"
        )
    if not 1 <= length <= MAX_LENGTH:
        raise LengthError(f"gridworld is verified for lengths 1..{MAX_LENGTH}, got {length}")
    if any(ax.cells > MAX_CELLS for ax in axes):
        raise ConstructionError(f"gridworld supports up to {MAX_CELLS} cells per axis")
    defects = {d for d in as_printed.split(",") if d}
    if defects - set(PRINTED_DEFECTS):
        raise ConstructionError(
            f"gridworld: unknown as_printed defect(s) {sorted(defects - set(PRINTED_DEFECTS))} "
            f"(choose from {', '.join(PRINTED_DEFECTS)})"
        )
    pads = [] if "no_padding" in defects else _padding(automaton, axes)
    sc = _Scales.of(1 + len(pads) + length)  # BOS, padding, real moves

    layout = Layout()
    layout.add("bos")
    layout.add("one")
    layout.add("log_sink")  # positional log(N − i): the counting head's sink score
    layout.add("mark", 2, labels=["bos", "pos"])  # what layer-2 heads copy: BOS flag, position i/n_pos
    mlp1 = MLP(layout, "Lemma 10 trapezoids: z/N -> ±1 bit codes of z and of z + k")
    mlp2 = MLP(layout, "windows: N·min(endpoint positions) − Λ·unmatched")
    heads_l1: list[Head] = []
    heads_l2: list[Head] = []
    windows: list[tuple[str, GridAxis]] = []
    for axis in axes:  # axis by axis, so that each axis's subspaces stay together
        heads_l1.append(_layer1(layout, mlp1, axis, sc))
        heads, window = _layer2(layout, mlp2, axis, sc)
        heads_l2 += heads
        windows.append((window, axis))
    W_E, W_pos = _embeddings(layout, automaton, axes, sc)
    W_U = _readout(layout, automaton, windows)

    heads_note = " + ".join(f"{2 * ax.S + 1} ({ax.name or 'axis'})" for ax in axes)
    return ConstructionSpec(
        name="gridworld",
        theorem="Theorem 12 (gridworld boundary detector)" + (" as printed: no padding" if defects else ""),
        layout=layout,
        W_E=W_E,
        W_pos=W_pos,
        blocks=[
            Block(heads_l1, mlp1, "prefix sums z (Lemma 15) -> bit codes of z, z + k"),
            Block(heads_l2, mlp2, "boundary detectors: latest z_i = z_t + k; most recent complete window"),
        ],
        W_U=W_U,
        b_U=np.zeros(automaton.n_states),
        input_tokens=["BOS", *automaton.alphabet],
        output_names=list(automaton.states),
        io=TokenIO(prefix=(0, *[1 + s for s in pads]), symbol_tokens=tuple(range(1, automaton.n_symbols + 1))),
        max_length=length,
        task={"kind": "automaton", "automaton": automaton.to_dict()},
        options={
            "as_printed": as_printed,
            "padding": len(pads),
            "axes": [ax.name or "x" for ax in axes],
            "code_bits": sc.B,
            "normaliser": sc.N,
        },
        notes=f"layer-2 heads: {heads_note}; padding {len(pads)} moves; c = {sc.c:.1f}, γ = {sc.gamma:.1f}",
        variables=[
            variable_site("state", 1, "post", [w for w, _ in windows], note="the windows: the state, by axis"),
            variable_site(
                "state",
                1,
                "post",
                [f"{ax.name}.x1" if ax.name else "x1" for _, ax in windows],
                "inert",
                "layer 1's unclamped displacement z_t / N: read by MLP 1, then by nothing",
            ),
            *(
                [
                    variable_site("displacement", 0, "mid", "x1", note="z_t / N, Lemma 15's prefix sum"),
                    variable_site("displacement", 1, "post", "x1", "inert", "read by MLP 1, then by nothing"),
                ]
                if len(axes) == 1
                else []
            ),
        ],
    )
