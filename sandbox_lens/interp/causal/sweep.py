"""Full swaps at many sites in batched forwards: the sites an algorithm is searched at (the residual stream,
each attention layer's, head's and MLP's output) and :func:`sweep`, which swaps one site at every position of
every word in one forward (the words repeated once per position, each copy swapped at its own). A null's sweep
is remembered per pairs (:func:`swept`), so a population's twins, which share their nulls and pairs, sweep each
null once. :mod:`sandbox_lens.interp.causal.identify` scores the answers against each candidate algorithm.

A swap runs only the blocks from its own on, from the words' stream computed once, on the bare forward
(:func:`~sandbox_lens.interp.model.bare.bare_rest`): a residual swap from its hook, a head's or a component's
from its block's input (an MLP's from the block's ``resid_mid``), the swap an edit on the way. Any swap in a model
the bare forward does not cover is a hooked run of the whole model."""

from __future__ import annotations

import hashlib
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from sandbox_lens.interp.causal.highlevel import HighLevel
from sandbox_lens.interp.causal.interchange import answer, own_predictions, source_activations
from sandbox_lens.interp.model.arithmetic import residual_start
from sandbox_lens.interp.model.bare import bare_rest
from sandbox_lens.interp.model.device import on
from sandbox_lens.interp.model.run import exact_precision, run_with_hooks

__all__ = [
    "residual_sites",
    "component_sites",
    "model_sites",
    "hook_head",
    "is_residual",
    "start_of",
    "sweep",
    "swept",
    "changed_counts",
    "MAX_ROWS",
]

#: Rows of one batched forward (positions × words); a sweep over longer words runs in chunks of positions.
MAX_ROWS = 8192


def residual_sites(n_layers: int) -> list[str]:
    """The residual hooks a full swap is tried at, each once: block 0's input, then every block's
    ``resid_mid`` and ``resid_post`` (``blocks.l.hook_resid_pre`` is ``blocks.(l−1).hook_resid_post``)."""
    return ["blocks.0.hook_resid_pre"] + [
        f"blocks.{l}.hook_resid_{x}" for l in range(n_layers) for x in ("mid", "post")
    ]


def component_sites(model: Any) -> list[str]:
    """Every component output a swap is tried at, block by block: the attention layer's output
    (``blocks.l.hook_attn_out``), each head's (``blocks.l.attn.hook_z#h``: its value-weighted sum, before W_O) and
    the MLP's (``blocks.l.hook_mlp_out``, where the block has one)."""
    hooks = getattr(model, "hook_dict", {})
    out = []
    for l in range(model.cfg.n_layers):
        out.append(f"blocks.{l}.hook_attn_out")
        out += [f"blocks.{l}.attn.hook_z#{h}" for h in range(model.cfg.n_heads)]
        if f"blocks.{l}.hook_mlp_out" in hooks:
            out.append(f"blocks.{l}.hook_mlp_out")
    return out


def model_sites(model: Any, components: bool = True) -> list[str]:
    """The sites every variable is searched at: the residual sites, then (``components``) the component outputs."""
    return residual_sites(model.cfg.n_layers) + (component_sites(model) if components else [])


def hook_head(site: str) -> tuple[str, int | None]:
    """(hook, head) of a site name (``hook#h``: one head of a per-head hook)."""
    hook, _, head = site.partition("#")
    return hook, int(head) if head else None


def sweep(
    model: Any,
    sites: Sequence[tuple[str, Any]],
    base: np.ndarray,
    source: np.ndarray,
    readout: Sequence[int] | None,
    activations: dict[str, Any] | None = None,
) -> np.ndarray:
    """The model's answers ``[site, position, word, output]`` with each site — (hook, orthonormal basis ``[d, k]``
    or None for the whole activation; ``hook#h`` for head h of a per-head hook such as ``attn.hook_z``) — set to
    its value on the ``source`` words, at each position in turn: one forward per site for all positions (the
    words repeated once per position, each copy swapped at its own). ``activations``: the source words' at the
    sites' hooks (:func:`~sandbox_lens.interp.causal.interchange.source_activations`), when a caller shares them."""

    n, T = base.shape
    P = len(model.card.io.prefix)
    tokens = on(model, model.card.io.encode(base))
    hooks = sorted({hook_head(h)[0] for h, _ in sites})
    if activations is None or not set(hooks) <= set(activations):
        activations = source_activations(model, source, hooks)
    acts = activations
    rest, at_base = _rest_of(model, base, [hook_head(h)[0] for h, _ in sites])
    out = np.empty((len(sites), T, n, T), dtype=np.int64)
    chunk = max(1, min(T, MAX_ROWS // max(n, 1)))
    for s, (site, basis) in enumerate(sites):
        hook, head = hook_head(site)
        B = None if basis is None else on(acts[hook], np.asarray(basis), dtype=acts[hook].dtype)
        for first in range(0, T, chunk):
            positions = np.arange(first, min(T, first + chunk))
            rows = on(model, np.arange(len(positions) * n))
            where = on(model, P + np.repeat(positions, n))
            src = acts[hook][on(model, np.tile(np.arange(n), len(positions))), where]
            if head is not None:
                src = src[:, head]

            def swap(x: Any, hook: Any, rows: Any = rows, where: Any = where, src: Any = src) -> Any:
                x = x.clone()
                if head is not None:
                    x[rows, where, head] = src
                    return x
                delta = src - x[rows, where]
                x[rows, where] = x[rows, where] + (delta if B is None else (delta @ B) @ B.T)
                return x

            with exact_precision():
                start = start_of(hook, model.cfg.n_layers)
                if start in at_base:  # the rest of the model from the words' stream there, on the bare forward
                    x = at_base[start].repeat(len(positions), 1, 1)
                    if start == hook:
                        logits = rest(swap(x, None), hook)
                    else:
                        logits = rest(x, start, {hook: lambda a, swap=swap: swap(a, None)})
                else:
                    logits = run_with_hooks(
                        model, tokens.repeat(len(positions), 1), fwd_hooks=[(hook, swap)], return_type="logits"
                    )
            got = answer(logits[:, P : P + T], readout)
            out[s, positions] = got.reshape(len(positions), n, T)
            del logits
    return out


def changed_counts(
    model: Any,
    high: HighLevel,
    sites: Sequence[tuple[str, Any]],
    base: np.ndarray,
    source: np.ndarray,
    variable: str | None = None,
    activations: dict[str, Any] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(hits, outputs) ``[site, position, word]`` of each site (as in :func:`sweep`, ``activations`` too) swapped
    at every position in turn as ``high``'s ``variable``: the outputs the swap changes the label of, among those the
    task scores, and those of them whose answer follows the high-level model — what
    :func:`~sandbox_lens.interp.causal.interchange.changed_hits` counts at one site and position."""
    answers = sweep(model, sites, base, source, high.readout, activations)
    variable = high.variable(variable)
    plain, answered = high.answers(base)
    n, T = base.shape
    hits = np.zeros((len(sites), T, n), dtype=np.int64)
    outputs = np.zeros_like(hits)
    for p in range(T):
        labels, scored = high.counterfactual(base, source, p, variable)
        changed = scored & answered & (labels != plain)
        outputs[:, p] = changed.sum(axis=1)
        hits[:, p] = ((answers[:, p] == labels) & changed).sum(axis=-1)
    return hits, outputs


def is_residual(hook: str, n_layers: int) -> bool:
    """Whether ``hook`` is a residual-stream hook of a model with ``n_layers`` blocks."""
    try:
        residual_start(hook, n_layers)
    except ValueError:
        return False
    return True


def start_of(hook: str, n_layers: int) -> str | None:
    """The residual hook a bare run with a swap at ``hook`` starts from: a residual hook itself, a head's or an
    attention layer's output its block's ``resid_pre``, an MLP's output its block's ``resid_mid`` (None: another
    hook, left to a hooked run)."""
    if is_residual(hook, n_layers):
        return hook
    block, _, name = hook.partition(".")
    layer, _, name = name.partition(".")
    if block != "blocks" or not layer.isdigit() or int(layer) >= n_layers:
        return None
    if name in ("hook_attn_out", "attn.hook_z"):
        return f"blocks.{layer}.hook_resid_pre"
    return f"blocks.{layer}.hook_resid_mid" if name == "hook_mlp_out" else None


def _rest_of(model: Any, base: np.ndarray, hooks: Sequence[str]) -> tuple[Any, dict[str, Any]]:
    """(:func:`~sandbox_lens.interp.model.bare.bare_rest`, the ``base`` words' stream at the hook each of ``hooks``
    starts from, :func:`start_of`): a swap there runs only the blocks from its own on, without hook points.
    (None, {}) where the bare forward does not cover the model."""
    starts = sorted({s for h in hooks if (s := start_of(h, model.cfg.n_layers)) is not None})
    rest = bare_rest(model) if starts else None
    if rest is None:
        return None, {}
    return rest, source_activations(model, base, starts)


#: A null's sweep per (sites, pairs): a population's twins share their nulls and their pairs (one task, one
#: shape, one seed), so each null is swept once however many twins are identified beside it.
_NULL_SWEEPS: weakref.WeakKeyDictionary[Any, dict] = weakref.WeakKeyDictionary()


def swept(
    model: Any,
    sites: Sequence[tuple[str, Any]],
    base: np.ndarray,
    source: np.ndarray,
    readout: Sequence[int] | None,
    remember: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """(:func:`sweep`, the model's own answers on ``base``), remembered for a null."""

    if not remember:
        return sweep(model, sites, base, source, readout), own_predictions(model, base, readout)
    bases = b"".join(
        b"-" if b is None else np.ascontiguousarray(b).tobytes() + str(np.shape(b)).encode() for _, b in sites
    )
    key = (
        tuple(h for h, _ in sites),
        hashlib.sha256(bases).hexdigest(),
        None if readout is None else tuple(readout),
        hashlib.sha256(base.tobytes() + source.tobytes() + str(base.shape).encode()).hexdigest(),
    )
    memo = _NULL_SWEEPS.setdefault(model, {})
    if key not in memo:
        memo[key] = (sweep(model, sites, base, source, readout), own_predictions(model, base, readout))
    return memo[key]
