"""ACDC (Conmy et al., NeurIPS 2023): from the logits backwards, remove each edge whose removal
changes the metric by less than a threshold τ, keeping the removal; keep the rest.

Two modes, each named in the results:

* ``reference`` — as the reference implementation (``TLACDCExperiment``) runs by default: the
  metric is the KL divergence of the circuit's output from the clean run's over the model's *full*
  output distribution at every position the task scores; the test is **signed**: an edge goes when
  KL(after) − KL(current) < τ (so an edge whose removal lowers the KL always goes);
* ``normalised`` — this project's variant: the metric is the task's normalised metric on the outputs
  the corruption changes (0 = clean, 1 = the corrupted word's answers), and an edge goes when the
  *absolute* change is below τ.

Order (both modes, as the reference): receivers in reverse residual order (the logits, then each
block's MLP, then its heads from the last; a head's q, k and v inputs in that order); within a
receiver, senders from the latest to the earliest. A receiver with no kept outgoing edge is not
visited: its incoming edges go untested (their score is NaN — they rank last). Removed edges are
patched with the chosen ablation (resample from the corrupted word by default).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sandbox_lens.interp.circuits.graph import CHANNELS, Edge, Graph
from sandbox_lens.interp.circuits.patching import Patcher
from sandbox_lens.interp.model.run import exact_precision
from sandbox_lens.interp.progress import bar as progress_bar

__all__ = ["acdc", "acdc_search", "AcdcResult", "ACDC_MODES"]

ACDC_MODES = ("normalised", "reference")


@dataclass
class AcdcResult:
    """What ACDC kept, the effect measured for every edge it tried, and how many it tried."""

    kept: list[Edge]
    effects: np.ndarray  # per graph edge: the signed change measured when its removal was tried (NaN: never tried)
    tried: int
    threshold: float
    metric: str
    mode: str = "normalised"
    seconds: float = 0.0
    order: list[str] = field(default_factory=list)  # the edges removed, in the order they went


def receiver_order(graph: Graph) -> list[tuple[str, list[Edge]]]:
    """(receiver, its incoming edges in test order) in the order ACDC visits them."""

    out = []
    for r in sorted(graph.receivers, key=lambda n: (n.order, n.head), reverse=True):
        incoming = list(graph.incoming(r.name))
        for c in CHANNELS[r.kind]:
            mine = [e for e in incoming if e.channel == c]
            out.append(
                (
                    r.name,
                    sorted(
                        mine,
                        key=lambda e: (
                            graph.by_name[e.sender].order,
                            graph.by_name[e.sender].head,
                            e.sender != "embed",
                        ),
                        reverse=True,
                    ),
                )
            )
    return out


def acdc_search(
    graph: Graph, distance: Callable[[set[Edge]], float], threshold: float, signed: bool, progress: bool = False
) -> tuple[set[Edge], np.ndarray, int, list[str]]:
    """The search itself, on any ``distance`` (removed edges → how far the circuit is from the full model,
    0 for nothing removed): (removed edges, signed change per edge or NaN, removals tried, removal order)."""

    removed: set[Edge] = set()
    effects = np.full(len(graph.edges), np.nan)
    tried, order = 0, []
    current = distance(set())
    bar = progress_bar(total=len(graph.edges), disable=not progress, desc="ACDC", unit="edge", leave=False)
    for receiver, incoming in receiver_order(graph):
        alive = receiver == "logits" or any(e.sender == receiver and e not in removed for e in graph.edges)
        for e in incoming:
            bar.update(1)
            if not alive:
                removed.add(e)
                continue
            trial = removed | {e}
            value = distance(trial)
            tried += 1
            change = value - current
            effects[graph.index[e]] = change
            if (change if signed else abs(change)) < threshold:
                removed, current = trial, value
                order.append(e.name)
    bar.close()
    return removed, effects, tried, order


def acdc(
    patcher: Patcher,
    pairs: Any,
    threshold: float = 0.01,
    metric: str = "kl",
    mode: str = "normalised",
    source: dict[str, Any] | None = None,
    progress: bool = False,
) -> AcdcResult:
    """ACDC on ``patcher``'s model (see the module docstring); ``metric`` applies in the normalised mode
    (the reference mode's metric is always the full KL)."""

    if mode not in ACDC_MODES:
        raise ValueError(f"unknown ACDC mode {mode!r} (choose from {', '.join(ACDC_MODES)})")
    t0 = time.perf_counter()
    source = patcher.source(pairs, "resample") if source is None else source

    state = patcher.clean_state(pairs.clean)  # each trial runs from its receiver's block on

    def distance(removed: set[Edge]) -> float:
        trial = sorted(removed, key=patcher.graph.index.get)
        logits = patcher.run_many(pairs.clean, [(trial, None)], source, state)[0]
        return float(pairs.kl_full(logits)) if mode == "reference" else patcher.effect(pairs, logits, metric)

    with exact_precision():
        removed, effects, tried, order = acdc_search(patcher.graph, distance, threshold, mode == "reference", progress)
    kept = [e for e in patcher.graph.edges if e not in removed]
    return AcdcResult(
        kept=kept,
        effects=effects,
        tried=tried,
        threshold=threshold,
        metric="kl_full" if mode == "reference" else metric,
        mode=mode,
        seconds=time.perf_counter() - t0,
        order=order,
    )
