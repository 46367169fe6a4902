"""Theorem 10: the log-depth parallel prefix scan, for any semiautomaton.

Every position holds a transition map; thesis layer l fetches the map held 2^(l−1)
positions back and composes it with its own (Lemma 14). Padding positions hold the
constant map "go to q0", so after L = ⌈log₂T⌉ layers position t holds
δ_t ∘ … ∘ δ_1 ∘ const_{q0} = const_{q_t}, and coordinate q0 of it is q_t.

The thesis's printed construction has three errors (prefix-scan.md §2): the look-back
rotation sign (E1), the value matrix reading L instead of R (E2) and reading an arbitrary
coordinate instead of q0 at the end (E3). This module implements the corrected version:

* maps are stored 1-based, ``R_q = F(q) + 1 ∈ {1..n}`` (Lemma 14's bias −n needs F ≥ 1);
* thesis layer l = TL block 2(l−1) (look-back head + first half of Lemma 14) followed by
  TL block 2l−1 (no attention; second half of Lemma 14). TransformerLens blocks have one
  hidden layer, so the second hidden layer's pre-activation is parked in the n² scratch
  dims ``H`` and every scratch value is erased once it has been read;
* the look-back uses the multi-scale rotary position code (margin 2γ at every length) by
  default; ``code="circle"`` gives the thesis's circle code, exact in float32 only up to
  T = 2048 (§3.1 of the notes);
* P = 2^(L−1) padding positions suffice (erratum E9); ``padding="thesis"`` uses P = T.

``as_printed`` rebuilds any of the three defects exactly as printed, as negative controls for
teaching: ``"rotation_sign"`` (the key rotation by −θ selects the masked future position
t + 2^(l−1)), ``"value_matrix"`` (W_V reads L, which is empty when the head runs) and
``"readout"`` (reads coordinate q0 + 1 instead of q0; wrong at t = T = 2^L). Such models are
*expected* to fail verification.
"""

from __future__ import annotations

import math

import numpy as np

from sandbox_lens.constructions.gadgets import (
    LOOKBACK_GAMMA,
    READOUT_ALPHA,
    circle_position_code,
    lookback_head,
    rotary_position_code,
    trapezoid,
)
from sandbox_lens.interp.errors import ConstructionError, LengthError
from sandbox_lens.interp.model.card import TokenIO
from sandbox_lens.interp.model.spec import MLP, Block, ConstructionSpec, Layout, variable_site
from sandbox_lens.interp.tasks.automata import Semiautomaton

__all__ = ["build_prefix_scan", "MAX_LENGTH", "CIRCLE_FLOAT32_MAX_LENGTH"]

#: Longest verified length (tests/benchmarks check float32 exactness here).
MAX_LENGTH = 4096
#: The circle code's score gap γ(1 − cos(π/T)) drops below float32 resolution near T = 4096.
CIRCLE_FLOAT32_MAX_LENGTH = 2048
#: Lemma 14 stores n² hidden values; keep the model a sensible size.
MAX_STATES = 64
#: The printed defects that ``as_printed`` can reproduce.
PRINTED_DEFECTS = ("rotation_sign", "value_matrix", "readout")


def n_scan_layers(length: int) -> int:
    """L = max(1, ⌈log₂T⌉) (erratum E10: T = 1 still needs one layer)."""
    return max(1, math.ceil(math.log2(length)))


def build_prefix_scan(
    automaton: Semiautomaton, length: int, code: str = "rotary", padding: str = "minimal", as_printed: str = ""
) -> ConstructionSpec:
    """Theorem 10 as exact weights: ⌈log₂T⌉ attention layers, 2⌈log₂T⌉ TL blocks."""
    defects = tuple(d for d in as_printed.split(",") if d)
    unknown = set(defects) - set(PRINTED_DEFECTS)
    if unknown:
        raise ConstructionError(
            f"prefix_scan: as_printed takes a comma-separated subset of {', '.join(PRINTED_DEFECTS)}; "
            f"got {', '.join(sorted(unknown))}"
        )
    if not 1 <= length <= MAX_LENGTH:
        raise LengthError(f"prefix_scan is verified for lengths 1..{MAX_LENGTH}, got {length}")
    if code not in ("rotary", "circle"):
        raise ConstructionError(f"prefix_scan: code must be 'rotary' or 'circle', got {code!r}")
    if padding not in ("minimal", "thesis"):
        raise ConstructionError(f"prefix_scan: padding must be 'minimal' or 'thesis', got {padding!r}")
    n, m = automaton.n_states, automaton.n_symbols
    if n > MAX_STATES:
        raise ConstructionError(
            f"prefix_scan: {n} states is more than the supported {MAX_STATES} (the MLP needs n² scratch dims)"
        )
    L = n_scan_layers(length)
    P = 2 ** (L - 1) if padding == "minimal" else length
    n_ctx = P + length
    pos_code, pos_labels = rotary_position_code(n_ctx) if code == "rotary" else circle_position_code(n_ctx, P, length)

    layout = Layout()
    q_labels = [f"q{q}" for q in range(n)]
    layout.add("R", n, q_labels)  # the current map F, 1-based: R_q = F(q) + 1
    layout.add("L", n, q_labels)  # the map fetched by the look-back head
    layout.add("H", n * n, [f"q{q},q{p}" for q in range(n) for p in range(n)])  # Lemma 14 hidden layer 2
    layout.add("pos", pos_code.shape[1], pos_labels)

    W_E, tokens = embed_transition_maps(layout, automaton)
    W_pos = np.zeros((n_ctx, layout.d_model))
    W_pos[:, layout["pos"]] = pos_code

    gamma = LOOKBACK_GAMMA if code == "rotary" else 100.0 * length**2 * max(1.0, math.log(n) + math.log(length))
    blocks: list[Block] = []
    for l in range(1, L + 1):
        shift = 2 ** (l - 1)
        head = lookback_head(
            layout,
            -shift if "rotation_sign" in defects else shift,  # erratum E1: the printed θ has the wrong sign
            src="L" if "value_matrix" in defects else "R",  # erratum E2: the printed W_V reads L
            dst="L",
            code=code,
            gamma=gamma,
            period=length,
            label=f"look-back {shift}: copy R -> L",
        )
        blocks.append(
            Block([head], compose_first_half(layout, n), f"layer {l}a: fetch F(t-{shift}); Lemma 14 indicators")
        )
        blocks.append(
            Block([], compose_second_half(layout, n), f"layer {l}b: Lemma 14 products; R = F(t)∘F(t-{shift})")
        )

    # erratum E3: the printed read-out takes "an arbitrary q"; only q0 is right at t = T = 2^L
    readout_q = (automaton.initial + 1) % n if "readout" in defects else automaton.initial
    W_U, b_U = quadratic_readout(layout, n, readout_q)
    verified = ("float32", "float64") if (code == "rotary" or length <= CIRCLE_FLOAT32_MAX_LENGTH) else ("float64",)
    return ConstructionSpec(
        name="prefix_scan",
        theorem="Theorem 10 (log-depth parallel prefix scan; Lemmas 13-14)",
        layout=layout,
        W_E=W_E,
        W_pos=W_pos,
        blocks=blocks,
        W_U=W_U,
        b_U=b_U,
        input_tokens=tokens,
        output_names=list(automaton.states),
        io=TokenIO(prefix=(m,) * P, symbol_tokens=tuple(range(m))),
        max_length=length,
        task={"kind": "automaton", "automaton": automaton.to_dict()},
        verified_dtypes=verified,
        options={
            "code": code,
            "padding": padding,
            "P": P,
            "scan_layers": L,
            "gamma": gamma,
            "as_printed": list(defects),
        },
        notes=(
            f"{P} PAD positions hold const_q0; after {L} look-back layers R_q0 = q_t + 1."
            + (f" Built WITH the printed defect(s) {', '.join(defects)}: expected to fail." if defects else "")
        ),
        variables=[
            variable_site("state", -1, "mid", "H", note="Lemma 14's hidden layer of the last composition"),
            variable_site("state", -1, "post", "R", note="the map of the whole prefix; R_q0 = q_t + 1"),
            variable_site("state", -1, "post", "H", "inert", "the hidden layer once the composed map is written"),
            *[
                variable_site(f"window{l}", 2 * l - 1, "post", "R", note=f"the map of the {2**l} symbols up to t")
                for l in range(1, L)
            ],
        ],
    )


def embed_transition_maps(layout: Layout, automaton: Semiautomaton) -> tuple[np.ndarray, list[str]]:
    """Token σ embeds its map δ(·, σ) in R (1-based); PAD embeds const_{q0}."""
    m = automaton.n_symbols
    W_E = np.zeros((m + 1, layout.d_model))
    for s in range(m):
        W_E[s, layout["R"]] = automaton.delta[s] + 1
    W_E[m, layout["R"]] = automaton.initial + 1
    return W_E, [*automaton.alphabet, "PAD"]


def compose_first_half(layout: Layout, n: int) -> MLP:
    """Lemma 14, first hidden layer, with its output parked in H (prefix-scan.md §1.5).

    With g = the fetched map (in L) and f = the own map (in R), both 1-based, this leaves
    H_{q,p} = n·1[g(q) = p] + f(p) − n, and erases R and L.
    """
    mlp = MLP(layout, "Lemma 14 (a)")
    for q in range(n):
        for p in range(n):
            # 1[g(q) = p]: a Lemma 10 trapezoid on L_q at grid point p+1, scaled by n
            trapezoid(mlp, ("L", q), x0=p + 1, spacing=1.0, write={("H", q * n + p): n})
    for p in range(n):
        # the thesis's pass-through units: f(p) into every H_{·,p}; erases R_p (R_p ≥ 1)
        mlp.unit({("R", p): 1.0}, 0.0, {**{("H", q * n + p): 1.0 for q in range(n)}, ("R", p): -1.0})
    mlp.erase("L")  # L_q ≥ 1 > 0, so one unit per coordinate erases it exactly
    mlp.out_bias({("H", k): -float(n) for k in range(n * n)})  # Lemma 14's b₂ = −n
    return mlp


def compose_second_half(layout: Layout, n: int) -> MLP:
    """Lemma 14, second hidden layer and output: R_q = Σ_p ReLU(H_{q,p}) = f(g(q)); H erased."""
    mlp = MLP(layout, "Lemma 14 (b)")
    for q in range(n):
        for p in range(n):
            h = ("H", q * n + p)
            mlp.unit({h: 1.0}, 0.0, {("R", q): 1.0, h: -1.0})  # ReLU(H) -> R_q, and removes H's positive part
            mlp.unit({h: -1.0}, 0.0, {h: 1.0})  # removes H's negative part
    return mlp


def quadratic_readout(layout: Layout, n: int, q0: int) -> tuple[np.ndarray, np.ndarray]:
    """Read coordinate q0 (erratum E3): logit_j = α(2(j+1)x − (j+1)²) = αx² − α(x − j − 1)².

    With x = R_{q0} = q_t + 1 the argmax is q_t, with margin α over every other state.
    """
    W_U = np.zeros((layout.d_model, n))
    W_U[layout.index("R", q0), :] = 2 * READOUT_ALPHA * (np.arange(n) + 1)
    b_U = -READOUT_ALPHA * (np.arange(n) + 1.0) ** 2
    return W_U, b_U
