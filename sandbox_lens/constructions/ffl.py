"""Proposition 3: two attention layers, one head each, model the flip-flop language FFL exactly.

Thesis §3.5.7.1 (flipflop.md §3.2–3.3). A flip-flop string alternates an instruction w/r/i
with a data bit; the bit after every ``r`` repeats the bit after the most recent ``w``. The
model reads the string without BOS (tokens w=0, r=1, i=2, "0"=3, "1"=4, as in
``sandbox_lens.interp.tasks.batches.FFLTask``) and, at every ``r``, predicts that bit.

* **layer 1** (:func:`write_flag_head`, :func:`threshold`): a head scores key j by
  (c₁/T)(1.5·[x_j = w] + j), so query i attends to i − 1 when x_{i−1} = w and to itself
  otherwise; it copies ``is_w``, and a Lemma 12 threshold rounds the copy to an exact flag:
  flag_i = 1[x_{i−1} = w ∨ x_i = w] — the ``w`` token *and* the data token written by it.
* **layer 2** (:func:`latest_flag_head`, Lemma 16 with "non-⊥" replaced by the flag): scores
  c₂(flag_j + j/T), so the most recent flagged key wins — the data token after the latest ``w``
  beats the ``w`` itself by c₂/T — and the head copies ``data1``, the written bit. A second
  threshold rounds it and the unembedding turns bit b into logits ±K on "1"/"0".

Constants (the notes' verified choice): c₁ = 2T·ln(8T) makes the layer-1 copy's error ≤ 1/8,
inside the threshold's ±1/4; c₂ = T·ln(16T) the same for layer 2. The flag must be *exact*: an
error ε ≳ 1/T would let layer 2 prefer the ``w`` token (whose data1 is 0) — the construction's
own "attention glitch" — so the threshold MLP is not optional.
"""

from __future__ import annotations

import math

import numpy as np

from sandbox_lens.interp.errors import LengthError
from sandbox_lens.interp.model.card import TokenIO
from sandbox_lens.interp.model.spec import MLP, Block, ConstructionSpec, Head, Layout, variable_site
from sandbox_lens.interp.tasks import ffl
from sandbox_lens.interp.tasks.kinds import FFL

__all__ = ["build_ffl", "MAX_LENGTH", "FFL_TOKENS", "FLAG_THRESHOLD_DELTA", "LOGIT_K"]

MAX_LENGTH = 4096  # verified in float32 (tests at 512, slow suite at 4096)
FFL_TOKENS = ffl.VOCAB  # w r i 0 1: the language's one vocabulary
FLAG_THRESHOLD_DELTA = 0.25  # Lemma 12's Δ: values within 1/4 of 0 or 1 round exactly
LOGIT_K = 10.0  # logit("1") − logit("0") = 2K(2b − 1)


def write_flag_head(layout: Layout, length: int) -> Head:
    """Prop. 3, layer 1: attend to i − 1 if it is a ``w`` (else to i) and copy ``is_w`` into ``flag_raw``.

    score(i, j) = (c₁/T)(1.5·is_w_j + j): a ``w`` at i − 1 scores (c₁/T)(i + 0.5), beating i
    by c₁/(2T); a ``w`` at i scores highest outright; every other key is ≥ c₁/(2T) below the
    winner. With c₁ = 2T·ln(8T) the soft copy is within 1/8 of 1[x_{i−1} = w ∨ x_i = w].
    """
    c1 = 2.0 * length * math.log(8 * length)
    head = Head(layout, "Prop. 3 layer 1: previous w or self, copy is_w -> flag_raw")
    head.qk("one", "is_w", 1.5 * c1 / length)
    head.qk("one", "posT", c1)  # posT = (j + 1)/T: c₁·posT = (c₁/T)(j + 1)
    head.ov("is_w", "flag_raw")
    return head


def threshold(mlp: MLP, read: str, write: str, delta: float = FLAG_THRESHOLD_DELTA) -> None:
    """Lemma 12 shifted to ½: ψ(x) = ReLU((x − ½ + Δ)/2Δ) − ReLU((x − ½ − Δ)/2Δ) = 1[x > ½] for |x − ½| ≥ Δ."""
    scale = 1.0 / (2 * delta)
    mlp.unit({read: scale}, (delta - 0.5) * scale, {write: 1.0})
    mlp.unit({read: scale}, (-delta - 0.5) * scale, {write: -1.0})


def latest_flag_head(layout: Layout, length: int) -> Head:
    """Prop. 3, layer 2 (Lemma 16's memory head): the most recent flagged key; copy ``data1`` into ``bit_raw``.

    score(j) = c₂(flag_j + posT_j): flagged keys beat unflagged ones, and among flagged keys
    the later wins by c₂/T — so the data token after the latest ``w`` beats that ``w``. The
    query reads only the constant (W_Qp = 0, the condition of Prop. 5). With c₂ = T·ln(16T)
    the soft copy is within 1/8 of the written bit.
    """
    c2 = length * math.log(16 * length)
    head = Head(layout, "Prop. 3 layer 2: latest flagged key, copy data1 -> bit_raw")
    head.qk("one", "flag", c2)
    head.qk("one", "posT", c2)
    head.ov("data1", "bit_raw")
    return head


def build_ffl(task: object = None, length: int = 512) -> ConstructionSpec:
    """The Prop. 3 transformer for FFL inputs of up to ``length`` tokens.

    ``task`` may be ``None`` or an ``sandbox_lens.interp.tasks.batches.FFLTask``: the output at a read is exact
    for every p, so the weights do not depend on it.
    """
    FFL.check_source("ffl", task)
    if not isinstance(length, int) or not 2 <= length <= MAX_LENGTH:
        raise LengthError(f"ffl is verified for inputs of 2..{MAX_LENGTH} tokens, got {length}")

    layout = Layout()
    layout.add("one")
    layout.add("posT")  # (t + 1)/T at position t
    layout.add("is_w")
    layout.add("data1")  # the token is the data bit "1"
    layout.add("flag_raw")  # layer-1 head output ≈ 1[x_{t−1} = w ∨ x_t = w]
    layout.add("flag")  # its Lemma 12 rounding: exactly 0 or 1
    layout.add("bit_raw")  # layer-2 head output ≈ the latest written bit
    layout.add("bit")  # its rounding

    W_E = np.zeros((len(FFL_TOKENS), layout.d_model))
    W_E[:, layout.index("one")] = 1.0
    W_E[FFL_TOKENS.index("w"), layout.index("is_w")] = 1.0
    W_E[FFL_TOKENS.index("1"), layout.index("data1")] = 1.0
    W_pos = np.zeros((length, layout.d_model))
    W_pos[:, layout.index("posT")] = np.arange(1, length + 1) / length

    mlp1 = MLP(layout, "Lemma 12: flag_raw -> flag")
    threshold(mlp1, "flag_raw", "flag")
    mlp2 = MLP(layout, "Lemma 12: bit_raw -> bit")
    threshold(mlp2, "bit_raw", "bit")

    # logits: "1" → K(2·bit − 1), "0" → K(1 − 2·bit); instructions −2K (never predicted after r).
    W_U = np.zeros((layout.d_model, len(FFL_TOKENS)))
    b_U = np.full(len(FFL_TOKENS), -2.0 * LOGIT_K)
    for token, sign in (("1", 1.0), ("0", -1.0)):
        W_U[layout.index("bit"), FFL_TOKENS.index(token)] = 2.0 * sign * LOGIT_K
        W_U[layout.index("one"), FFL_TOKENS.index(token)] = -sign * LOGIT_K
        b_U[FFL_TOKENS.index(token)] = 0.0

    return ConstructionSpec(
        name="ffl",
        theorem="Proposition 3 (flip-flop language)",
        layout=layout,
        W_E=W_E,
        W_pos=W_pos,
        blocks=[
            Block([write_flag_head(layout, length)], mlp1, "flag the w and the data it writes"),
            Block([latest_flag_head(layout, length)], mlp2, "copy the latest written bit"),
        ],
        W_U=W_U,
        b_U=b_U,
        input_tokens=list(FFL_TOKENS),
        output_names=list(FFL_TOKENS),
        io=TokenIO(prefix=(), symbol_tokens=tuple(range(len(FFL_TOKENS)))),
        max_length=length,
        options={"c1": 2.0 * length * math.log(8 * length), "c2": length * math.log(16 * length)},
        notes="reads the string without BOS; the prediction at each r is the bit written by the latest w",
        task={"kind": "ffl"},
        variables=[
            variable_site("bit", 1, "mid", "bit_raw", note="layer 2's copy of the latest written bit"),
            variable_site("bit", 1, "post", "bit", note="its Lemma 12 rounding, which the unembedding reads"),
            variable_site("bit", 1, "post", "bit_raw", "inert", "the raw copy once it is rounded"),
        ],
    )
