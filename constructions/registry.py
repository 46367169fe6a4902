"""Construction names -> builders (used by the CLI and by :func:`build`)."""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable

from constructions.counter import build_modular_counter
from constructions.dyck import build_dyck
from constructions.flipflop import build_ffl
from constructions.gridworld import build_gridworld
from constructions.krohn_rhodes import build_krohn_rhodes
from constructions.memory import build_memory
from constructions.prefix_scan import build_prefix_scan
from interp.errors import ConstructionError
from interp.model.spec import ConstructionSpec

__all__ = ["REGISTRY", "build", "Entry"]


@dataclass(frozen=True)
class Entry:
    builder: Callable[..., ConstructionSpec]
    theorem: str
    summary: str

    @property
    def options(self) -> dict[str, Any]:
        """Keyword options beyond (automaton, length), with their defaults."""
        params = list(inspect.signature(self.builder).parameters.values())[2:]
        return {p.name: p.default for p in params}


REGISTRY: dict[str, Entry] = {
    "prefix_scan": Entry(build_prefix_scan, "Theorem 10",
                         "any semiautomaton; ceil(log2 T) attention layers (options: code=rotary|circle, padding=minimal|thesis, as_printed=rotation_sign,value_matrix,readout)"),
    "modular_counter": Entry(build_modular_counter, "Lemma 15", "C<n> / parity; 1 attention layer"),
    "memory": Entry(build_memory, "Lemma 16", "memory<n> / flipflop; 1 attention layer"),
    "gridworld": Entry(build_gridworld, "Theorem 12",
                       "grid<n>, grid<a>x<b> (+noop); 2 attention layers at every n and T (options: as_printed=no_padding)"),
    "dyck": Entry(build_dyck, "Theorem 1",
                  "Dyck_{k,D} next-token prediction (--dyck K,D); 2 attention layers; --variant stack|uniform|balanced (options: sigma, control=unscaled|zeroed, q)"),
    "ffl": Entry(build_ffl, "Proposition 3",
                 "the flip-flop language FFL over w r i 0 1 (no automaton); 2 attention layers, 1 head each"),
    "krohn_rhodes": Entry(build_krohn_rhodes, "Theorem 11",
                          "solvable groups, permutation-reset automata, cascades (--cascade-file), grid<n>; depth independent of T (options: wiring=previous|current)"),
}


def build(name: str, automaton: Any, length: int, **options: Any) -> ConstructionSpec:
    """Build construction ``name`` for ``automaton`` (a Semiautomaton; a Dyck language for ``dyck``)."""
    try:
        entry = REGISTRY[name]
    except KeyError:
        raise ConstructionError(f"unknown construction {name!r} (choose from {', '.join(REGISTRY)})") from None
    unknown = set(options) - set(entry.options)
    if unknown:
        allowed = ", ".join(entry.options) or "none"
        raise ConstructionError(f"{name}: unknown option(s) {', '.join(sorted(unknown))} (allowed: {allowed})")
    return entry.builder(automaton, length, **options)
