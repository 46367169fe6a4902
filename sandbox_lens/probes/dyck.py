"""Dyck-specific attention metrics, usable on any model that reads BOS + brackets (thesis §3.6).

* :func:`stack_top_mass` — per head, the mean attention on the last unmatched open bracket (BOS
  when the stack is empty): ≈ 1 for a stack-like head.
* :func:`attention_variation` — ‖A₁ − A₂‖²_F between two heads' patterns on one probe input
  (the thesis compares seeds this way) and :func:`random_attention_baseline`, its exact
  expectation for random causal row-stochastic patterns (rows uniform on the simplex), in closed
  form (:func:`random_attention_baseline_mc` samples it).
* :func:`balance_violation` — Theorem 1/2's balance condition for a construction's second layer:
  the mean over closing queries ρ and matched pairs (i, d′) of ‖u(close) + u(open)‖ / P(ρ),
  where u(κ, ρ) = exp(score(κ, ρ))·value(κ) is a key's unnormalised contribution and P(ρ) the
  size of the attention output on a short stack (dyck.md §3.5). Zero for the exact variants.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

from sandbox_lens.interp.errors import ConstructionError, VocabularyError
from sandbox_lens.interp.model.device import on, to_numpy
from sandbox_lens.interp.model.run import attention_patterns, hook_name, require_hooked
from sandbox_lens.interp.tasks.dyck import Dyck
from sandbox_lens.interp.tasks.kinds import DYCK

__all__ = [
    "PROBE_INPUT",
    "stack_top_mass",
    "attention_variation",
    "random_attention_baseline",
    "random_attention_baseline_mc",
    "balance_violation",
    "balance_violation_of_model",
    "layer_patterns",
    "layer_input_by_type_and_depth",
    "minimal_first_layer_gap",
    "MINIMAL_TOLERANCE",
]

#: The thesis's probe input for attention variation (dyck.md §5.2: "[[[[]]]](((())))").
PROBE_INPUT = "[[[[]]]](((())))"


def layer_patterns(model, word: Sequence[int], layer: int) -> dict[int, np.ndarray]:
    """Every head's attention pattern ``[query, key]`` in ``layer`` on BOS + ``word``."""
    heads = [(layer, h) for h in range(model.cfg.n_heads)]
    return {h: p[0] for (_, h), p in attention_patterns(model, model.card.io.encode(word), heads).items()}


def stack_top_mass(model, lang: Dyck, words: Sequence[Sequence[int]], layer: int | None = None) -> dict[int, float]:
    """Mean attention weight each head of ``layer`` (default: the last) puts on the stack top.

    The mean runs over every query position (BOS included) of every word; the target at a
    position is the last unmatched open bracket after that token, or BOS when the stack is empty.
    """
    layer = model.cfg.n_layers - 1 if layer is None else layer
    totals: dict[int, float] = {}
    count = 0
    for w in words:
        lang.check(w)
        top = lang.stack_top_positions(w)
        for h, pattern in layer_patterns(model, w, layer).items():
            totals[h] = totals.get(h, 0.0) + float(pattern[np.arange(len(top)), top].sum())
        count += len(top)
    if not count:
        raise VocabularyError("stack_top_mass needs at least one word")
    return {h: v / count for h, v in totals.items()}


def attention_variation(a: np.ndarray, b: np.ndarray) -> float:
    """‖A − B‖²_F for two attention patterns on the same input."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise VocabularyError(f"patterns of different shapes {a.shape} and {b.shape}")
    return float(((a - b) ** 2).sum())


def random_attention_baseline(n: int) -> float:
    """E‖A₁ − A₂‖²_F for independent random causal n×n patterns whose rows are uniform on the simplex,
    in closed form: row m is Dirichlet(1, …, 1) on m keys, E‖a‖² = 2/(m+1) and E[a·b] = 1/m, so
    E‖a − b‖² = 2(2/(m+1) − 1/m), summed over the rows m = 1..n."""
    if n < 1:
        raise VocabularyError(f"a pattern needs at least one position, got {n}")
    return float(2.0 * sum(2.0 / (m + 1) - 1.0 / m for m in range(1, n + 1)))


def random_attention_baseline_mc(n: int, samples: int = 2000, seed: int = 0) -> float:
    """The same quantity by Monte Carlo (to check the closed form)."""
    rng = np.random.default_rng(seed)

    def pattern() -> np.ndarray:
        a = np.zeros((n, n))
        for i in range(n):
            a[i, : i + 1] = rng.dirichlet(np.ones(i + 1))
        return a

    return float(np.mean([attention_variation(pattern(), pattern()) for _ in range(samples)]))


def balance_violation(spec) -> float:
    """β of the second layer of a ``dyck`` construction (0 when Theorem 1's condition holds).

    Works on the weight spec: the first layer's output for a token at depth d is its embedding
    plus the one-hot ``joint`` slot; the layer-2 head's score and value are read off the spec
    (position-dependent score terms are left out, so the stack-like head — which uses positions,
    not balance — gets a large β).
    """
    if spec.name != "dyck":
        raise ConstructionError("balance_violation needs a dyck construction's spec")
    lang = DYCK.source(spec.task)
    layout = spec.layout
    index = {s: i for i, s in enumerate(lang.token_depth_pairs())}
    w_q, w_k, w_v, w_o = spec.blocks[1].heads[0].matrices()

    def e(token: int, depth: int) -> np.ndarray:  # layer-1 output, position features left out
        x = spec.W_E[token].copy()
        x[layout.index("joint", index[(token, depth)])] = 1.0
        return x

    return _beta(lang, e, lambda q, k: float((q @ w_q) @ (k @ w_k)), lambda k: k @ w_v @ w_o)


#: Relative change of layer 2's input, when a bracket of fixed type and depth moves, up to which the
#: first layer counts as minimal (float32 rounding of an exact erase is 0; a position embedding is ≈ 1).
MINIMAL_TOLERANCE = 1e-5


def _type_depth_word(token: int, depth: int) -> list[int]:
    """The shortest bracket word whose last token is model token ``token`` (BOS = 0) at ``depth``."""
    if token == 0:
        return []
    if (token - 1) % 2 == 0:  # open bracket of type i at depth d: d opens of type i
        return [token - 1] * depth
    return [0] * depth + [token - 2, token - 1]  # close of type i landing at depth d: d + 1 opens, then its close


def layer_input_by_type_and_depth(
    model, lang: Dyck, layer: int | None = None, moved: int = 0, subtract_positions: bool = False
) -> dict[tuple[int, int], np.ndarray]:
    """Layer ``layer``'s input (default: the last) at an occurrence of every (token, depth) pair of
    ``lang``, after ``moved`` matched pairs "()" at depth 0 (which move the token by 2·moved
    positions and keep its depth); ``subtract_positions`` takes the position embedding out."""
    import torch

    require_hooked(model, "layer input by type and depth")
    layer = model.cfg.n_layers - 1 if layer is None else layer
    name = hook_name("resid_pre", layer)
    W_pos = to_numpy(model.pos_embed.W_pos.double())
    out: dict[tuple[int, int], np.ndarray] = {}
    for token, depth in lang.token_depth_pairs():
        word = [0, 1] * moved + _type_depth_word(token, depth) if token else []
        if len(word) + 1 > model.cfg.n_ctx:
            raise ConstructionError(f"the model's context ({model.cfg.n_ctx}) is too short for depth {depth}")
        ids = model.card.io.encode(np.asarray(word, dtype=np.int64))
        with torch.inference_mode():
            _, c = model.run_with_cache(on(model, ids), names_filter=[name])
        pos = ids.shape[1] - 1
        x = to_numpy(c[name][0, pos].double())
        out[(token, depth)] = x - W_pos[pos] if subtract_positions else x
    return out


def minimal_first_layer_gap(
    model, lang: Dyck, moved: int = 2, here: dict[tuple[int, int], np.ndarray] | None = None
) -> float:
    """How far the model is from Assumption 10 (a minimal first layer): the largest relative change
    ‖x′ − x‖ / ‖x‖ of its last layer's input at a bracket (BOS excluded) when ``moved`` matched pairs
    put before it move it by 2·``moved`` positions and keep its type and depth. 0 (up to float32
    rounding) for ``dyck -O first_layer=minimal`` and the twins started from it. ``here``: the unmoved
    inputs (:func:`layer_input_by_type_and_depth`) when the caller already has them."""
    here = layer_input_by_type_and_depth(model, lang) if here is None else here
    there = layer_input_by_type_and_depth(model, lang, moved=moved)
    return max(
        float(np.linalg.norm(there[key] - x) / max(np.linalg.norm(x), 1e-30)) for key, x in here.items() if key[0] != 0
    )


def balance_violation_of_model(model, lang: Dyck, head: int = 0, subtract_positions: bool = False) -> float:
    """β read off a trained two-layer model (Theorem 2 for twins, thesis Fig. 3.40): e(token, depth)
    is the model's own input to its last layer at an occurrence of that token at that depth; scores
    and values are the last layer's head ``head`` as trained (biases and the 1/√d_head scale
    included). β is defined for a minimal first layer (Assumption 10), so a model whose last-layer
    input moves with position (:func:`minimal_first_layer_gap` > :data:`MINIMAL_TOLERANCE`) is refused,
    unless ``subtract_positions`` reads β with the position embedding taken out (the constructions'
    full first layer, whose only positional coordinates come from it). LayerNorm is refused."""

    require_hooked(model, "balance violation")
    cfg = model.cfg
    if cfg.normalization_type is not None:
        raise ConstructionError(
            "balance_violation_of_model needs a model without LayerNorm (the score must be "
            "bilinear in the layer-2 input); train with --norm none or --init-from dyck"
        )
    cache = layer_input_by_type_and_depth(model, lang, subtract_positions=subtract_positions)
    if not subtract_positions:
        gap = minimal_first_layer_gap(model, lang, here=cache)
        if gap > MINIMAL_TOLERANCE:
            raise ConstructionError(
                f"the last layer's input moves with position (relative change {gap:.2g} when a "
                "bracket moves by 4 positions): the first layer is not minimal (Assumption 10), so "
                "β is undefined; start from dyck -O first_layer=minimal, or pass "
                "subtract_positions=True"
            )
    last = cfg.n_layers - 1
    attn = model.blocks[last].attn
    W_Q, W_K, W_V, W_O = (to_numpy(x[head].double()) for x in (attn.W_Q, attn.W_K, attn.W_V, attn.W_O))
    b_Q, b_K, b_V = (to_numpy(x[head].double()) for x in (attn.b_Q, attn.b_K, attn.b_V))
    scale = 1.0 / np.sqrt(cfg.d_head) if cfg.use_attn_scale else 1.0
    return _beta(
        lang,
        lambda t, d: cache[(t, d)],
        lambda q, k: float(((q @ W_Q + b_Q) @ (k @ W_K + b_K)) * scale),
        lambda k: (k @ W_V + b_V) @ W_O,
    )


def _beta(lang: Dyck, e, score, value) -> float:
    """β = mean over closing queries ρ and matched pairs of ‖u(close) + u(open)‖ / P(ρ), with
    u(κ, ρ) = exp(score(ρ, κ))·value(κ) (dyck.md §3.5–3.6)."""
    keys = [e(t, d) for t, d in lang.token_depth_pairs()]

    def u(key: np.ndarray, query: np.ndarray) -> np.ndarray:
        # every ratio below has u(·, ρ) for one ρ on both sides, so shift the scores by their max
        return np.exp(score(query, key) - shift) * value(key)

    opn = lambda i, d: e(1 + 2 * i, d)  # noqa: E731 - tiny local helpers read like the paper
    cls = lambda i, d: e(2 + 2 * i, d)  # noqa: E731
    bos = e(0, 0)
    ratios = []
    for j in range(lang.k):
        for dq in range(1, lang.D):
            rho = cls(j, dq)  # a closing query at depth dq
            shift = max(score(rho, key) for key in keys)
            # P(ρ): the attention output on BOS, a stack t̃ of depth dq, then open_j close_j (eq. 3.34–3.35)
            Qs = {}
            for stack in itertools.product(range(lang.k), repeat=dq):
                total = u(bos, rho) + u(opn(j, dq + 1), rho) + u(rho, rho)
                for depth, i in enumerate(stack, start=1):
                    total = total + u(opn(i, depth), rho)
                Qs[stack] = np.linalg.norm(total)
            best = min(Qs, key=Qs.get)
            others = [v for s, v in Qs.items() if s[-1] != best[-1]]
            P = min(others) if others else Qs[best]
            for i in range(lang.k):
                for d in range(1, lang.D + 1):
                    S = u(cls(i, d - 1), rho) + u(opn(i, d), rho)
                    ratios.append(np.linalg.norm(S) / max(P, 1e-300))
    return float(np.mean(ratios))
