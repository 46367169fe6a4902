"""Exact hand-built constructions from the thesis, as framework-neutral weight specs.

>>> from interp.tasks.catalogue import get_automaton
>>> from constructions import build
>>> spec = build("prefix_scan", get_automaton("S5"), 64)
>>> spec.attention_layers
6
"""

from constructions.registry import REGISTRY, build

__all__ = ["REGISTRY", "build"]
