"""Exact hand-built constructions from the thesis, as framework-neutral weight specs.

>>> from interp.tasks.catalogue import get_automaton
>>> from constructions import build, build_model
>>> spec = build("prefix_scan", get_automaton("S5"), 64)   # a ConstructionSpec
>>> spec.attention_layers
6
>>> model = build_model("prefix_scan", get_automaton("S5"), 64)   # the HookedTransformer

Floor 2: imports ``interp.tasks``, ``interp.model`` and ``interp.errors`` only. The registry
(:mod:`constructions.registry`) imports a builder only when it is asked for.
"""

from __future__ import annotations

from typing import Any

from constructions.registry import REGISTRY, build

__all__ = ["REGISTRY", "build", "build_model"]


def build_model(name: str, source: Any, length: int, *, dtype: str = "float32", use_attn_scale: bool = True,
                **options: Any):
    """:func:`build` then :func:`interp.model.hooked.to_hooked`: the construction as a ``HookedTransformer``."""
    from interp.model.hooked import to_hooked

    return to_hooked(build(name, source, length, **options), dtype=dtype, use_attn_scale=use_attn_scale)
