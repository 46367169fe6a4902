"""sandbox-lens: exact transformer constructions for automata, as TransformerLens models.

One import root: ``sandbox_lens.interp`` (tasks, the model, verification, training and the analyses),
``sandbox_lens.constructions`` (the thesis's theorems as weights) and ``sandbox_lens.probes``. The names here
are the front door, in the manner of ``transformer_lens``::

    import sandbox_lens as sl

    model = sl.load("prefix_scan", "S5", length=64)    # exact weights, as a TransformerLens model
    sl.verify(model, samples=200).accuracy              # 1.0
    sl.align(model)                                      # where it computes the state, causally

``import sandbox_lens`` loads neither torch nor TransformerLens; each name below imports what it needs when
it is first used.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

#: name -> (module, attribute): the public API, imported on first use.
_LAZY = {
    "build": ("sandbox_lens.constructions", "build"),
    "build_model": ("sandbox_lens.constructions", "build_model"),
    "REGISTRY": ("sandbox_lens.constructions", "REGISTRY"),
    "verify": ("sandbox_lens.interp.verify", "verify"),
    "align": ("sandbox_lens.interp.causal.align", "align"),
    "nulls_of": ("sandbox_lens.interp.causal.align", "nulls_of"),
    "compare": ("sandbox_lens.interp.compare.analyse", "compare"),
    "train": ("sandbox_lens.interp.train", "train"),
    "load_trained": ("sandbox_lens.interp.train", "load_trained"),
    "open_model": ("sandbox_lens.interp.train", "open_model"),
    "adopt": ("sandbox_lens.interp.train.adopt", "adopt"),
    "load_adopted": ("sandbox_lens.interp.train.adopt", "load_adopted"),
    "AutomatonTask": ("sandbox_lens.interp.tasks.batches", "AutomatonTask"),
    "DyckTask": ("sandbox_lens.interp.tasks.batches", "DyckTask"),
    "FFLTask": ("sandbox_lens.interp.tasks.batches", "FFLTask"),
    "save_model": ("sandbox_lens.interp.model.saved", "save_model"),
    "load_model": ("sandbox_lens.interp.model.saved", "load_model"),
    "get_automaton": ("sandbox_lens.interp.tasks.catalogue", "get_automaton"),
    "Dyck": ("sandbox_lens.interp.tasks.dyck", "Dyck"),
    "SandboxError": ("sandbox_lens.interp.errors", "SandboxError"),
}

__all__ = ["load", "__version__", *_LAZY]


def load(
    construction: str, source: Any = None, length: int | None = None, *, dtype: str = "float32", **options: Any
) -> Any:
    """A construction with exact weights, as a TransformerLens model (a ``HookedTransformer`` on TransformerLens
    3.9, a ``TransformerBridge`` on 4.x), with its ``card``.

    Args:
        construction: a name from ``REGISTRY`` (``prefix_scan``, ``krohn_rhodes``, ``modular_counter``, ``memory``,
            ``gridworld``, ``dyck``, ``ffl``).
        source: what it is built for — a catalogue automaton's name (``"S5"``, ``"parity"``, ``"grid9"``), a path
            to an automaton JSON file, a Dyck spec ``"K,D"`` (``"2,4"``), or the object itself (a
            ``Semiautomaton``, a ``Dyck``); nothing for ``ffl``.
        length: the longest input it is built for (default: the task kind's training length).
        dtype: ``"float32"`` (verified) or ``"float64"``.
        **options: the construction's options (``REGISTRY[name].describe()``), e.g. ``variant="balanced"``.

    Raises:
        sandbox_lens.interp.errors.SandboxError: an unknown name, a source the construction cannot take, an
            option it does not have, or a length past what float32 keeps exact — in one line.
    """
    from sandbox_lens.constructions import build_model
    from sandbox_lens.constructions.registry import REGISTRY
    from sandbox_lens.interp.errors import ConstructionError
    from sandbox_lens.interp.tasks.kinds import task_kind

    entry = REGISTRY.get(construction)
    if entry is None:
        raise ConstructionError(f"unknown construction {construction!r} (choose from {', '.join(REGISTRY)})")
    kind = task_kind(entry.takes)
    needs = {
        "automaton": "a catalogue automaton's name (e.g. 'S5') or an automaton JSON path",
        "dyck": "a Dyck spec 'K,D' (e.g. '2,4')",
    }.get(kind.name)
    if source is None and needs:
        raise ConstructionError(f"sandbox_lens.load({construction!r}, SOURCE) needs a source: {needs}")
    if isinstance(source, str):
        if not needs:
            raise ConstructionError(f"{construction} takes no source (got {source!r})")
        field = "dyck" if kind.name == "dyck" else "automaton_file" if source.endswith(".json") else "automaton"
        source = kind.construction_source(construction, {field: source}, options)
    return build_model(construction, source, int(length or kind.default_length), dtype=dtype, **options)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        module, attribute = _LAZY[name]
        value = getattr(importlib.import_module(module), attribute)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'sandbox_lens' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*__all__, "interp", "constructions", "probes"})
