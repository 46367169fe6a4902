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

__all__ = ["REGISTRY", "build", "build_model"]


def build_model(
    name: str, source: Any, length: int, *, dtype: str = "float32", use_attn_scale: bool = True, **options: Any
):
    """:func:`build` then :func:`sandbox_lens.interp.model.hooked.to_hooked`: the construction as a ``HookedTransformer``."""
    from sandbox_lens.interp.model.hooked import to_hooked

    return to_hooked(build(name, source, length, **options), dtype=dtype, use_attn_scale=use_attn_scale)
