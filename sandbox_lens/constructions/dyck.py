"""Bounded Dyck: three exact two-layer constructions whose attention patterns differ completely.

Thesis §3.6 (Theorem 1, Corollary 1; dyck.md §4). All three share layer 1 and differ only in
layer 2's attention, yet all emit the exact next-token distribution:

* **layer 1**: a counting head with a BOS sink writes depth/N exactly (Lemma 15's head, N a power
  of two); its MLP rounds it and, gated by the token, writes an exact one-hot ``joint`` over the
  valid (token, depth) pairs — the thesis's "minimal first layer" (Assumption 10, embedding 3.37).
* **layer 2** attention, one head, by ``variant``:

  - ``stack``: attends to the last unmatched open bracket (an open bracket at the query's depth,
    latest first; BOS at depth 0) and copies its type;
  - ``uniform`` (Corollary 1): all scores equal; an open bracket at depth d writes +e_(i,d), its
    matching close −e_(i,d), so matched pairs cancel and the stack survives;
  - ``balanced`` (Theorem 1): random key-only scores f(token, depth) (seeded), and the close value
    rescaled by exp(f(open) − f(close)) so that each matched pair still cancels exactly. The
    pattern looks random; the output is exact.

* ``first_layer="minimal"``: MLP 1 also erases the positional coordinates (``log_sink``, ``pos``) and
  the counted depth once they have been read, so layer 2's input depends only on each bracket's type
  and depth — Assumption 10 exactly, not only up to the position embedding. The stack variant's layer 2
  reads ``pos`` and cannot take it.
* **MLP 2** reads the type at the current depth (``top``) and the unembedding writes the exact
  log-probabilities (−30 for impossible brackets).

``as_printed`` builds the negative controls of the notes: ``"unscaled"`` (balanced scores without
the value rescaling — violates the balance condition) and ``"zeroed"`` (uniform attention with the
close values zeroed). Both are expected to fail.
"""

from __future__ import annotations

import math

import numpy as np

from sandbox_lens.constructions.gadgets import bos_token_io, prefix_average_head, trapezoid
from sandbox_lens.constructions.registry import REGISTRY
from sandbox_lens.interp.errors import ConstructionError, LengthError
from sandbox_lens.interp.model.spec import MLP, Block, ConstructionSpec, Head, Layout, variable_site
from sandbox_lens.interp.tasks.dyck import Dyck

__all__ = ["build_dyck", "VARIANTS", "CONTROLS", "MAX_LENGTH", "FLOAT32_MAX_GAIN"]

#: the second layer's attention: the registry's ``variant`` option is their one list
VARIANTS: tuple[str, ...] = REGISTRY["dyck"].options["variant"].choices
FIRST_LAYERS = ("full", "minimal")
CONTROLS = ("unscaled", "zeroed")
MAX_LENGTH = 4096  # verified: every band up to 4096 (make test-slow); float32 margins in the README
#: log-probability given to impossible brackets
LOG_ZERO = 30.0
#: Layer-2 read-out gain G2 up to which float32 stays exact (measured: the balanced variant's
#: cancellation error is ≈ 1e-7·G2 of a unit threshold; see README / tests).
FLOAT32_MAX_GAIN = 2.0**20
# stack head: recency per position γ, and margin Δ of the stack top over non-candidates
_GAMMA, _DELTA = 10.0, 20.0


class _Slots:
    """The (token, depth) one-hot of layer 1 ("joint" slots) and the names the proof uses for them."""

    def __init__(self, lang: Dyck) -> None:
        self.lang, self.D = lang, lang.D
        self.slots = lang.token_depth_pairs()
        self.index = {s: i for i, s in enumerate(self.slots)}

    def at_depth(self, d: int) -> dict:
        """g_d: 1 exactly when the current depth is d (a sum of joint slots)."""
        return {("joint", self.index[s]): 1.0 for s in self.slots if s[1] == d}

    def opened(self, i: int, d: int) -> tuple[str, int]:
        return ("joint", self.index[(1 + 2 * i, d)])

    def closed(self, i: int, d: int) -> tuple[str, int]:  # the close matching open_i at depth d sits at depth d − 1
        return ("joint", self.index[(2 + 2 * i, d - 1)])

    def level(self, i: int, d: int) -> int:
        return i * self.D + (d - 1)


def _layout(lang: Dyck, slots: _Slots, per_level: bool) -> Layout:
    """The named residual subspaces, in the order the proof introduces them."""
    k, D, names = lang.k, lang.D, lang.bracket_names
    tokens = ["BOS", *names]
    layout = Layout()
    layout.add("bos")
    layout.add("one")
    layout.add("tok", len(tokens), labels=tokens)
    layout.add("log_sink")  # positional log(N − i)
    layout.add("pos")  # positional i / M (the stack head's recency)
    layout.add("val")  # +1 open, −1 close
    layout.add("depth")  # layer-1 output: depth / N
    layout.add("joint", len(slots.slots), labels=[f"{tokens[t]}@{d}" for t, d in slots.slots])
    layout.add(
        "a2",
        k * D if per_level else k,
        labels=[f"{names[2 * i]}@{d}" for i in range(k) for d in range(1, D + 1)] if per_level else names[0::2],
    )
    layout.add("top", k * D, labels=[f"{names[2 * j]}@{d}" for j in range(k) for d in range(1, D + 1)])
    return layout


def _layer1(layout: Layout, slots: _Slots, N: int, minimal: bool = False) -> tuple[Head, MLP]:
    """Layer 1: the depth (a Lemma 15 counting head with a BOS sink), then the exact (token, depth) one-hot;
    ``minimal``: and :func:`_forget_positions`."""
    count = prefix_average_head(layout, "val", "depth", label="depth counter (BOS sink)")
    mlp1 = MLP(layout, "trapezoids: (token, depth) one-hot" + ("; positions erased" if minimal else ""))
    for (t, d), i in slots.index.items():  # token t shifts the input by 2, far from every other token's grid
        trapezoid(mlp1, {"depth": 1.0, ("tok", t): 2.0}, x0=d / N + 2.0, spacing=1.0 / N, write=("joint", i))
    if minimal:
        _forget_positions(mlp1)
    return count, mlp1


def _forget_positions(mlp1: MLP) -> None:
    """Assumption 10 (minimal first layer): column j+1 of layer 1's output depends only on the type and
    depth of t_j. ``tok``, ``val`` and ``joint`` already do; the two positional coordinates, read by the
    counting head, do not, and the head's ``depth`` = d/N carries float rounding that differs from
    position to position (≈ 1e-10). Erase all three once read: each is ≥ 0 (``log_sink`` = log(N − i) ≥
    log 2, ``pos`` = i/M, ``depth`` = d/N), so one unit −ReLU(x) each cancels it to exactly 0."""
    mlp1.erase("log_sink").erase("pos").erase("depth")


def _layer2_attention(
    layout: Layout, slots: _Slots, M: int, variant: str, control: str, seed: int, sigma: float
) -> tuple[Head, np.ndarray, float, float]:
    """Layer 2's head: stack-like (attend to the last unmatched open bracket), or balanced scores
    (Theorem 1; uniform = all scores equal, Corollary 1) with the close values that cancel each
    matched pair. Returns the head, its scores, and the read-out gain and offset of MLP 2."""
    k, D = slots.lang.k, slots.D
    head = Head(layout, f"layer 2: {variant}" + (f" ({control} control)" if control else ""))
    scores = np.zeros(len(slots.slots))
    if variant == "stack":
        alpha, beta = _GAMMA * M + _DELTA, _GAMMA * M
        head.qk(slots.at_depth(0), "bos", alpha)
        for d in range(1, D + 1):
            head.qk(slots.at_depth(d), {slots.opened(i, d): 1.0 for i in range(k)}, alpha)
        head.qk("one", "pos", beta)
        for i in range(k):
            head.ov({slots.opened(i, d): 1.0 for d in range(1, D + 1)}, ("a2", i))
        return head, scores, 4.0, 2.0
    if variant == "balanced":
        scores = np.random.default_rng(seed).normal(0.0, sigma, size=len(slots.slots))
        head.qk("one", {("joint", i): float(f) for i, f in enumerate(scores)})
    for i in range(k):
        for d in range(1, D + 1):
            a = scores[slots.index[(1 + 2 * i, d)]] - scores[slots.index[(2 + 2 * i, d - 1)]]
            close_value = {"unscaled": -1.0, "zeroed": 0.0}.get(control, -math.exp(a))
            head.ov({slots.opened(i, d): 1.0, slots.closed(i, d): close_value}, ("a2", slots.level(i, d)))
    return head, scores, 4.0 * (M + 1) * math.exp(float(scores.max() - scores.min())), 0.0


def _stack_top_mlp(layout: Layout, slots: _Slots, gain: float, offset: float, per_level: bool) -> MLP:
    """MLP 2: the type of the open bracket on top of the stack, at the current depth."""
    mlp2 = MLP(layout, "top of the stack at the current depth")
    big = 2.0 * gain + 2.0
    for j in range(slots.lang.k):
        for d in range(1, slots.D + 1):
            a2 = ("a2", slots.level(j, d) if per_level else j)
            read = {a2: gain, **{key: big * w for key, w in slots.at_depth(d).items()}}
            mlp2.unit(read, -offset - big, ("top", slots.level(j, d)))
            mlp2.unit(read, -offset - big - 1.0, {("top", slots.level(j, d)): -1.0})
    return mlp2


def _embeddings(layout: Layout, lang: Dyck, M: int, N: int) -> tuple[np.ndarray, np.ndarray]:
    n_tokens = 1 + lang.n_brackets
    W_E = np.zeros((n_tokens, layout.d_model))
    W_E[:, layout.index("one")] = 1.0
    W_E[0, layout.index("bos")] = 1.0
    for t in range(n_tokens):
        W_E[t, layout.index("tok", t)] = 1.0
        if t:
            W_E[t, layout.index("val")] = 1.0 if (t - 1) % 2 == 0 else -1.0
    i = np.arange(M + 1, dtype=np.float64)
    W_pos = np.zeros((M + 1, layout.d_model))
    W_pos[:, layout.index("log_sink")] = np.log(N - i)
    W_pos[:, layout.index("pos")] = i / M
    return W_E, W_pos


def _readout(layout: Layout, slots: _Slots) -> tuple[np.ndarray, np.ndarray]:
    """The exact next-token log-probabilities: opens from the depth, the one valid close from the stack top."""
    lang, k, D = slots.lang, slots.lang.k, slots.D
    W_U = np.zeros((layout.d_model, lang.n_brackets))
    b_U = np.zeros(lang.n_brackets)
    open_logit = {0: math.log(1.0 / k), D: -LOG_ZERO}
    for d in range(D + 1):
        for key, w in slots.at_depth(d).items():
            W_U[layout.index(*key), 0::2] = open_logit.get(d, math.log(lang.q / k)) * w
    for j in range(k):
        b_U[2 * j + 1] = -LOG_ZERO
        for d in range(1, D + 1):
            log_p = 0.0 if d == D else math.log(1.0 - lang.q)
            W_U[layout.index("top", slots.level(j, d)), 2 * j + 1] = log_p + LOG_ZERO
    return W_U, b_U


def build_dyck(
    lang: Dyck,
    length: int,
    variant: str = "stack",
    seed: int = 0,
    sigma: float = 1.0,
    as_printed: str = "",
    first_layer: str = "full",
) -> ConstructionSpec:
    """A two-layer exact next-token predictor for ``lang`` on inputs of up to ``length`` brackets
    (Theorem 1 / Corollary 1; the module docstring gives the proof's steps). ``first_layer="minimal"``
    erases the positional coordinates in layer 1 (Assumption 10 exactly; not with the stack variant)."""
    if variant not in VARIANTS:
        raise ConstructionError(f"dyck: variant must be one of {', '.join(VARIANTS)}, got {variant!r}")
    if first_layer not in FIRST_LAYERS:
        raise ConstructionError(f"dyck: first_layer must be one of {', '.join(FIRST_LAYERS)}, got {first_layer!r}")
    if first_layer == "minimal" and variant == "stack":
        raise ConstructionError(
            "dyck: first_layer=minimal erases the positions the stack variant's second layer reads; "
            "use variant=uniform or variant=balanced"
        )
    control = as_printed  # a negative control of the notes
    if control and control not in CONTROLS:
        raise ConstructionError(f"dyck: as_printed must be one of {', '.join(CONTROLS)}, got {control!r}")
    if control == "unscaled" and variant != "balanced" or control == "zeroed" and variant != "uniform":
        raise ConstructionError(
            "dyck: as_printed=unscaled goes with variant=balanced, as_printed=zeroed with variant=uniform"
        )
    if not 1 <= length <= MAX_LENGTH:
        raise LengthError(f"dyck is verified for lengths 1..{MAX_LENGTH}, got {length}")
    if not 0 < sigma <= 10:
        raise ConstructionError(f"dyck: sigma must be in (0, 10], got {sigma}")
    M = length
    N = 2 ** math.ceil(math.log2(2 * (M + 1)))  # counting normaliser: a power of two > positions
    per_level = variant != "stack"
    slots = _Slots(lang)
    layout = _layout(lang, slots, per_level)
    count, mlp1 = _layer1(layout, slots, N, minimal=first_layer == "minimal")
    head, scores, gain, offset = _layer2_attention(layout, slots, M, variant, control, seed, sigma)
    mlp2 = _stack_top_mlp(layout, slots, gain, offset, per_level)
    W_E, W_pos = _embeddings(layout, lang, M, N)
    W_U, b_U = _readout(layout, slots)

    dtypes = ("float32", "float64") if gain <= FLOAT32_MAX_GAIN else ("float64",)
    return ConstructionSpec(
        name="dyck",
        theorem={
            "stack": "stack-like second layer (Yao et al. 2021)",
            "uniform": "Corollary 1 (uniform attention)",
            "balanced": "Theorem 1 (balanced attention)",
        }[variant]
        + (f", control: {control}" if control else ""),
        layout=layout,
        W_E=W_E,
        W_pos=W_pos,
        blocks=[
            Block([count], mlp1, "depth counter; (token, depth) one-hot"),
            Block([head], mlp2, f"layer 2 ({variant}); top of stack at the current depth"),
        ],
        W_U=W_U,
        b_U=b_U,
        input_tokens=["BOS", *lang.bracket_names],
        output_names=lang.bracket_names,
        io=bos_token_io(lang.n_brackets),
        max_length=length,
        verified_dtypes=dtypes,
        options={
            "variant": variant,
            "seed": seed,
            "sigma": sigma,
            "as_printed": control,
            "first_layer": first_layer,
            "scores": [float(x) for x in scores],
            "gain": gain,
        },
        notes=f"layer-2 read-out gain {gain:.3g}"
        + ("" if "float32" in dtypes else " > 2^20: float64 only (use --dtype float64, or a smaller sigma or length)"),
        task=lang.to_dict(),
        variables=_variable_sites(variant, first_layer),
    )


def _variable_sites(variant: str, first_layer: str) -> list[dict]:
    """Theorem 1's variables: the depth after the counting head; the type at the current depth after MLP 2
    (and, for the stack head, already in its output)."""
    sites = [
        variable_site("depth", 0, "mid", "depth", note="the counting head's depth / N"),
        variable_site("top", 1, "post", "top", note="MLP 2's type at the current depth"),
        variable_site(
            "depth",
            0,
            "post",
            "depth",
            "inert",
            "erased by MLP 1 (minimal first layer)"
            if first_layer == "minimal"
            else "the counted depth once MLP 1 has written the (token, depth) one-hot: nothing reads it",
        ),
    ]
    if variant == "stack":
        sites += [
            variable_site("top", 1, "mid", "a2", note="the stack head's copy of the top's type"),
            variable_site("top", 1, "post", "a2", "inert", "the head's copy once MLP 2 has written the top"),
        ]
    return sites
