"""Twins that start from a construction: the construction's exact weights for some layers (copied
and, by default, frozen), the rest trained — e.g. the Dyck construction's minimal first layer with
a trained second layer (thesis §3.6.3, Fig. 3.40).

Floor 3: it builds constructions for the training engine (which does not know them).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from sandbox_lens.constructions import build
from sandbox_lens.interp.errors import OptionError, SandboxError
from sandbox_lens.interp.model.card import TokenIO
from sandbox_lens.interp.tasks.kinds import task_kind
from sandbox_lens.interp.train import ModelShape

__all__ = ["start_from", "DEFAULT_LAYERS"]

DEFAULT_LAYERS = ("embed", "pos_embed", "blocks.0")


def start_from(
    construction: str,
    task,
    config,
    layers: Sequence[str] = DEFAULT_LAYERS,
    extra: int = 0,
    length: int | None = None,
    options: dict[str, Any] | None = None,
) -> tuple[Any, Any, Any]:
    """(twin shape, config, spec) for a twin of ``task`` started from ``construction`` (``NAME[:VARIANT]``).

    The twin takes the construction's shape, built for ``length`` inputs (default: the task's) plus
    ``extra`` positions (room for what the regularisers put before an input: position shifts, the
    contrastive pairs); ``layers`` are copied, and frozen unless ``config.freeze`` says otherwise.
    ``options`` are further build options of the construction (e.g. ``{"first_layer": "minimal"}``).
    """

    name, _, variant = construction.partition(":")
    if variant and name != "dyck":
        raise OptionError(f"--init-from {construction}: only dyck has variants")

    source, covered = task_kind(task).construction_input(task)
    options = {**(options or {}), **({"variant": variant} if variant else {})}
    spec = build(name, source, (length or covered) + extra, **options)
    layout = task.token_layout()
    if spec.io != TokenIO(layout.prefix, layout.symbol_tokens):
        raise SandboxError(
            f"{name} reads its inputs with another token layout than the twin "
            f"({' '.join(layout.input_names[:3])} ...); it cannot be a starting point"
        )
    twin = ModelShape(
        n_layers=spec.n_layers,
        d_model=spec.d_model,
        n_heads=spec.n_heads,
        d_head=spec.d_head,
        d_mlp=spec.d_mlp,
        normalization="none",
        positional="learned",
        n_ctx=spec.n_ctx,
    )
    layers = tuple(layers)
    described = "".join(f" {key}={value}" for key, value in options.items())
    config = replace(
        config, init=f"{spec.name}{described} T={spec.max_length}", init_layers=layers, freeze=config.freeze or layers
    )
    return twin, config, spec
