"""auto-circuit's circuit-discovery algorithms run on this project's models and scored as ours are.

`auto-circuit <https://github.com/UFO-101/auto-circuit>`_ (PyPI ``auto-circuit``, Miller et al.) is an
optional extra: ``pip install 'sandbox-lens[auto-circuit]'`` (22 more packages, among them jax,
tracr and kaleido; ``make test-auto-circuit`` builds it in its own venv, ``.venv-ac``). With it,
``interp circuit CONSTRUCTION --method auto-circuit:acdc`` runs auto-circuit's own implementation
on the construction and :func:`sandbox_lens.interp.circuits.analyse.analyse` scores its ranking against the
ground truth at every level, exactly as it scores this project's methods.

=============== ================================================= ===========================
method          auto-circuit's algorithm                           circuit of its own
=============== ================================================= ===========================
``acdc``        ``ACDC`` (KL, τ = 10⁻⁶ … 10⁻³)                     the edges never pruned
``eap``         ``Edge Attribution Patching`` (logit-difference    — (a ranking)
                gradient of the edge masks at the clean run)
``ieg``         ``Integrated Edge Gradients`` (logit difference,  — (a ranking)
                1000 samples)
``sep``         ``Subnetwork Edge Probing`` (hard-concrete masks)  — (a ranking)
``act-mag``     ``Activation Magnitude``                           — (a ranking)
``random``      ``Random``                                         — (a ranking)
=============== ================================================= ===========================

How the adapter meets auto-circuit:

* **the graph** — ``patchable_model(factorized=True, separate_qkv=True)`` on a copy of the model with
  per-head results, split q/k/v inputs and the MLP-input hook switched on. Its edge names
  (``Resid Start->A1.0.Q``, ``A0.1->MLP 2``, ``MLP 1->Resid End``) map onto this project's graph as
  :mod:`sandbox_lens.interp.circuits.exchange` does: ``Resid Start`` is both ``embed`` and ``pos`` (one score for
  both); edges of padded heads and empty MLPs, which are not nodes here (all-zero weights), are
  dropped and counted.
* **the data** — auto-circuit's metrics read one answer per prompt at the *last* position
  (``slice_output="last_seq"``). The adapter draws the same pairs as this project's methods
  (:func:`~sandbox_lens.interp.circuits.pairs.make_pairs`, same seed) and keeps those whose last output is read and
  affected: answer = the clean run's label there, wrong answer = the corrupted run's. Every pair is
  one batch (ACDC reads only the first).
* **the ablation** — resample (auto-circuit's default: a patched edge delivers the corrupted run's
  value), scored against the ``resample`` level by default. Faithfulness and the CPR/CMD curve are
  measured here, with this project's metric over every read position.
* **TransformerLens 3.x** — auto-circuit 1.0.1 imports ``HookedTransformerKeyValueCache`` from
  ``transformer_lens.past_key_value_caching``, which TransformerLens 3 renamed
  (``transformer_lens.cache.key_value_cache.TransformerLensKeyValueCache``); :func:`load` registers
  the old name before importing. auto-circuit uses it in type hints and in a key-value cache these
  runs never build. Its subnetwork probing calls ``torch.optim.adam.Adam``, a submodule that torch
  deletes from ``torch.optim``'s namespace after importing it; :func:`load` puts it back.
"""

from __future__ import annotations

import copy
import time
from typing import Any

import numpy as np

from sandbox_lens.interp.circuits.exchange import auto_circuit_names
from sandbox_lens.interp.errors import SandboxError
from sandbox_lens.interp.model.device import on
from sandbox_lens.interp.model.run import hooked_model
from sandbox_lens.interp.streams import Stream, torch_seed

__all__ = ["ALGORITHMS", "PREFIX", "METHODS", "AutoCircuitError", "load", "prune_scores"]

#: Method names take this prefix on the command line: ``--method auto-circuit:acdc``.
PREFIX = "auto-circuit:"
#: Our name → (the ``PruneAlgo`` object's name in ``auto_circuit.prune_algos.prune_algos``, whether its
#: scores define a circuit of their own).
ALGORITHMS: dict[str, tuple[str, bool]] = {
    "acdc": ("ACDC_PRUNE_ALGO", True),
    "eap": ("LOGIT_DIFF_GRAD_PRUNE_ALGO", False),
    "ieg": ("INTEGRATED_EDGE_GRADS_LOGIT_DIFF_PRUNE_ALGO", False),
    "sep": ("SUBNETWORK_EDGE_PROBING_PRUNE_ALGO", False),
    "act-mag": ("ACT_MAG_PRUNE_ALGO", False),
    "random": ("RANDOM_PRUNE_ALGO", False),
}
METHODS = tuple(PREFIX + name for name in ALGORITHMS)
INSTALL = "pip install 'sandbox-lens[auto-circuit]' (or make test-auto-circuit, which builds .venv-ac)"


class AutoCircuitError(SandboxError, ValueError):
    """auto-circuit is not installed, or cannot run this method on this model and these pairs."""


def load() -> Any:
    """Import auto-circuit (aliasing the key-value-cache name TransformerLens 3 renamed); its module, or a
    one-line :class:`AutoCircuitError` saying how to install it."""
    import sys
    import types

    try:
        import transformer_lens as tl
    except ImportError as e:  # pragma: no cover - TransformerLens is a dependency
        raise AutoCircuitError(f"auto-circuit needs TransformerLens: {e}") from None
    if "transformer_lens.past_key_value_caching" not in sys.modules:
        try:
            import transformer_lens.past_key_value_caching  # noqa: F401  (TransformerLens 1.x/2.x)
        except ImportError:
            try:
                from transformer_lens.cache.key_value_cache import TransformerLensKeyValueCache as cache
            except ImportError:
                cache = None
            if cache is not None:
                alias = types.ModuleType("transformer_lens.past_key_value_caching")
                alias.HookedTransformerKeyValueCache = cache
                sys.modules[alias.__name__] = alias
                if not hasattr(tl, "HookedTransformerKeyValueCache"):
                    tl.HookedTransformerKeyValueCache = cache
    import torch.optim
    import torch.optim.adam

    if not hasattr(torch.optim, "adam"):  # torch deletes its optimiser submodules from torch.optim's namespace
        torch.optim.adam = sys.modules["torch.optim.adam"]
    try:
        import auto_circuit
        import auto_circuit.prune_algos.prune_algos  # noqa: F401
    except ImportError as e:
        raise AutoCircuitError(f"auto-circuit is not installed or does not import ({e}): {INSTALL}") from None
    return auto_circuit


def _algorithm(method: str) -> tuple[str, str, bool]:
    name = method[len(PREFIX) :] if method.startswith(PREFIX) else method
    if name not in ALGORITHMS:
        raise AutoCircuitError(f"unknown auto-circuit method {method!r} (choose from {', '.join(METHODS)})")
    return (name, *ALGORITHMS[name])


def _dataloader(pairs: Any, model: Any) -> tuple[Any, int]:
    """auto-circuit's data: the pairs whose last output is read and affected, one batch (on ``model``'s device)."""
    from auto_circuit.data import PromptDataLoader, PromptDataset

    read = pairs.read[:, -1] if pairs.read is not None else np.ones(len(pairs.clean), dtype=bool)
    keep = np.asarray(read & pairs.affected[:, -1], dtype=bool)
    n = int(keep.sum())
    if not read.any():
        raise AutoCircuitError(
            f"the task scores no output at the last position of these {pairs.clean.shape[1]}-token "
            f"words, the only position auto-circuit reads"
        )
    if n == 0:
        raise AutoCircuitError(
            f"no pair of the {len(pairs.clean)} changes the model's last output, the only one "
            f"auto-circuit reads: try more --pairs or another --corrupt"
        )
    right = pairs.outputs[pairs.clean_label[keep, -1]]
    wrong = pairs.outputs[pairs.corrupt_label[keep, -1]]
    data = PromptDataset(
        on(model, pairs.clean[keep]),
        on(model, pairs.corrupt[keep]),
        [on(model, [int(a)]) for a in right],
        [on(model, [int(w)]) for w in wrong],
    )
    return PromptDataLoader(data, seq_len=None, diverge_idx=0, batch_size=n, shuffle=False), n


def _patchable(model: Any) -> Any:
    """auto-circuit's edge-patchable wrapper around a copy of ``model`` (the original is left as it was)."""
    import torch
    from auto_circuit.utils.graph_utils import patchable_model

    m = copy.deepcopy(hooked_model(model))
    m.set_use_attn_result(True)
    m.set_use_split_qkv_input(True)
    if not m.cfg.attn_only:
        m.set_use_hook_mlp_in(True)
    device = next(m.parameters()).device
    return patchable_model(m, factorized=True, slice_output="last_seq", separate_qkv=True, device=torch.device(device))


def prune_scores(
    model: Any,
    graph: Any,
    method: str,
    pairs: Any,
    *,
    connected: np.ndarray | None = None,
    seed: int = 0,
    quiet: bool = True,
) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """Run auto-circuit's ``method`` on ``model`` with ``pairs`` (:class:`~sandbox_lens.interp.circuits.pairs.Pairs`);
    (score per edge of ``graph``, the circuit as a bool per edge — empty for a ranking — and what the run
    used: the auto-circuit edges it dropped, the pairs it kept, seconds).

    ``Resid Start->X`` stands for ``embed->X`` and ``pos->X``. Its score goes to both, except where
    ``connected`` (per edge, :meth:`~sandbox_lens.interp.circuits.patching.Patcher.connected`: read from the weights
    alone) says only one of them can reach ``X``: the other is left unscored and out of the circuit."""
    import contextlib
    import io

    import torch

    load()
    name, attribute, has_circuit = _algorithm(method)
    from auto_circuit.prune_algos import prune_algos

    algo = getattr(prune_algos, attribute)
    loader, kept = _dataloader(pairs, model)
    pm = _patchable(model)
    torch.manual_seed(torch_seed(seed, Stream.AUTO_CIRCUIT))
    t0 = time.perf_counter()
    sink = io.StringIO()
    with torch.enable_grad(), contextlib.redirect_stderr(sink) if quiet else contextlib.nullcontext():
        ps = algo.func(pm, loader, None)
    seconds = time.perf_counter() - t0
    ours = auto_circuit_names(graph)
    scores = np.full(len(graph.edges), np.nan)
    dropped: dict[str, float] = {}
    for edge in pm.edges:
        value = float(ps[edge.dest.module_name][edge.patch_idx])
        if edge.name not in ours:
            dropped[edge.name] = value
            continue
        targets = ours.pop(edge.name)
        if connected is not None and any(connected[i] for i in targets):
            targets = [i for i in targets if connected[i]]
        scores[targets] = value
    if ours:
        raise AutoCircuitError(
            f"auto-circuit's graph lacks {len(ours)} edge(s) of this model's, e.g. {next(iter(ours))}"
        )
    chosen = (np.isinf(scores) & (scores > 0)) if has_circuit else np.zeros(len(scores), dtype=bool)
    # Rank by size, as auto-circuit does. ACDC scores an edge by the τ that pruned it and a kept one +inf:
    # kept edges rank first, at twice the largest finite score (JSON has no infinity).
    rank = np.abs(scores)
    finite = rank[np.isfinite(rank)]
    rank[np.isinf(rank)] = 2 * float(finite.max()) if finite.size and finite.max() > 0 else 1.0
    info = {
        "algorithm": algo.name,
        "key": algo.key,
        "version": _version(),
        "pairs_kept": kept,
        "pairs_drawn": int(len(pairs.clean)),
        "reads": "the last position only",
        "dropped_edges": len(dropped),
        "dropped_max_abs_score": float(max((abs(v) for v in dropped.values()), default=0.0)),
        "circuit_of_its_own": has_circuit,
        "seconds": seconds,
    }
    return rank, chosen, info


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("auto-circuit")
    except PackageNotFoundError:  # pragma: no cover - imported from a checkout
        return "unknown"
