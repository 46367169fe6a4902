"""Exact hand-built constructions from the thesis, as framework-neutral weight specs.

>>> from sandbox_lens.interp.tasks.catalogue import get_automaton
>>> from sandbox_lens.constructions import build, build_model
>>> spec = build("prefix_scan", get_automaton("S5"), 64)   # a ConstructionSpec
>>> spec.attention_layers
6
>>> model = build_model("prefix_scan", get_automaton("S5"), 64)   # the HookedTransformer

Floor 2: imports ``sandbox_lens.interp.tasks``, ``sandbox_lens.interp.model`` and ``sandbox_lens.interp.errors`` only. The registry
(:mod:`sandbox_lens.constructions.registry`) imports a builder only when it is asked for.
"""

from __future__ import annotations

from typing import Any

from sandbox_lens.constructions.registry import REGISTRY, build
from sandbox_lens.interp.model.hooked import to_hooked

__all__ = ["REGISTRY", "build", "build_model"]


def build_model(
    name: str, source: Any, length: int, *, dtype: str = "float32", use_attn_scale: bool = True, **options: Any
):
    """:func:`build` then :func:`sandbox_lens.interp.model.hooked.to_hooked`: the construction as a model.

    Args:
        name: a name from ``REGISTRY``.
        source: a ``Semiautomaton``, a ``Dyck`` language, or ``None`` for ``ffl`` (``sandbox_lens.load`` takes
            names and strings).
        length: the longest input, in symbols.
        dtype: ``"float32"`` (verified exact) or ``"float64"``.
        use_attn_scale: let TransformerLens divide the scores by √d_head, its default (W_Q is scaled up to undo
            it, so the scores are the spec's either way; always on under 4.x).
        **options: the construction's options, as for :func:`build`.

    Returns:
        A ``HookedTransformer`` on TransformerLens 3.9, a ``TransformerBridge`` on 4.x, with its ``card``."""

    return to_hooked(build(name, source, length, **options), dtype=dtype, use_attn_scale=use_attn_scale)
