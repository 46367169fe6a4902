"""The circuit-discovery methods, registered: one :class:`CircuitMethod` record per method, in :data:`METHODS`.

A record says what the method needs and can take (a metric, gradients, integration steps, positions, an ACDC
mode, an optional package) and how it runs: ``run(patcher, pairs, ablation values, config)`` returns a
:class:`Found` — an edge ranking (a score per graph edge, higher first, NaN where it never scored one) and
the circuit it recovers. Everything else (the CLI's choices and refusals, :func:`~sandbox_lens.interp.circuits.analyse.analyse`,
the leaderboards) reads the record; no code outside this module branches on a method's name. To add a
method, write its ``run`` and add one record (``docs/recipes.md``, "A circuit method").

=================== ======= ====================================================================
method              level   recovered circuit
=================== ======= ====================================================================
patching            node    nodes whose activation patching moves the metric by ≥ threshold
path                edge    edges whose path patching moves the metric by ≥ threshold
attribution         edge    edges whose attribution-patching estimate (EAP) is ≥ threshold
peap                edge    position-aware EAP (Haklay et al. 2025): EAP's terms per (edge, position), scored
                            per position against :mod:`~sandbox_lens.interp.circuits.positions`; an edge ranks by
                            its strongest position (PEAP's max-abs aggregation), kept where that is ≥ threshold;
                            keys and values also split by query (:mod:`~sandbox_lens.interp.circuits.crossing`;
                            words of at most 64 positions)
eap-ig              edge    EAP with integrated gradients over m steps (``steps``)
atp-star            edge    AtP* (:mod:`~sandbox_lens.interp.circuits.atp_star`): EAP with the softmax recomputed
                            for query and key edges and GradDrop's score; the edges scoring ≥ threshold
gim                 edge    EAP with GIM's backward rules (:mod:`~sandbox_lens.interp.circuits.gim`); the edges
                            scoring ≥ threshold
acdc                edge    what ACDC keeps (mode ``normalised`` or ``reference``)
masks               edge    learned hard-concrete edge masks under an L0 penalty (edge pruning): the open gates
ugs                 edge    edge masks by uniform gradient sampling, ablating to learned constants (optimal ablation,
                            Li & Janson 2024; :mod:`~sandbox_lens.interp.circuits.masks`): the edges with p > 1/2
random              edge    a baseline: uniform random scores; the edges scoring ≥ 1/2
magnitude           edge    a baseline: each sender's mean activation norm, relative to the largest;
                            the edges scoring ≥ threshold
auto-circuit:NAME   edge    auto-circuit's implementation (:mod:`~sandbox_lens.interp.circuits.autocircuit`)
=================== ======= ====================================================================

Rankings use the size of a score (ACDC's reference mode the signed change, as the reference's τ
sweep does; the masks their log α); a node method ranks an edge by the smaller of its two ends' effects.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sandbox_lens.interp.circuits import autocircuit
from sandbox_lens.interp.circuits.acdc import ACDC_MODES, acdc
from sandbox_lens.interp.circuits.config import CircuitConfig, MethodError
from sandbox_lens.interp.circuits.crossing import crossing_terms, not_split
from sandbox_lens.interp.circuits.effects import attribution, node_patching, path_patching
from sandbox_lens.interp.circuits.graph import Graph
from sandbox_lens.interp.circuits.pairs import METRICS
from sandbox_lens.interp.circuits.patching import Patcher

__all__ = ["CircuitMethod", "METHODS", "Found", "method_of", "register", "names", "MethodError", "DEFAULT_STEPS"]

#: EAP-IG's integration steps when none are given.
DEFAULT_STEPS = 16

Runner = Callable[[Patcher, Any, dict[str, Any], CircuitConfig], "Found"]


@dataclass
class Found:
    """What a method returns: its ranking, its circuit, and the raw scores it is built from.

    ``rank`` orders the edges for AUROC and average precision; ``signed`` (default: ``rank``) are the scores with
    their sign, positive where patching the edge moves the metric away from the clean run (EAP-IG's ``loss=True``
    convention): MIB's CPR ranks by them, its CMD by their size. ``own_circuit`` is False for a method that only
    ranks (auto-circuit's rankers): it gets no faithfulness, precision or recall at a threshold."""

    rank: np.ndarray
    circuit: list[Any]
    edge_fx: np.ndarray | None = None
    node_fx: dict[str, float] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    own_circuit: bool = True
    signed: np.ndarray | None = None
    #: PEAP's terms per key or value edge (graph index) and (query, key) (:mod:`~sandbox_lens.interp.circuits.crossing`)
    crossing: dict[int, np.ndarray] | None = None

    @property
    def signed_scores(self) -> np.ndarray:
        """``signed`` where the method has signs, else ``rank``."""
        return self.rank if self.signed is None else self.signed


@dataclass(frozen=True)
class CircuitMethod:
    """One circuit-discovery method.

    Attributes:
        name: the name ``--method`` takes.
        level: ``node`` or ``edge``: what the method scores.
        summary: one line for help and docs.
        run: ``run(patcher, pairs, ablation values, config) → Found`` (the config's metric already resolved).
        metrics: the metrics it can measure (empty: it measures none, a baseline); the first is its default.
        metric_reason: why it refuses the other metrics (one line).
        gradients: it differentiates the model (it needs a model with gradients).
        estimates: its scores estimate patching effects (``--agreement`` compares them with real patching).
        steps: it takes integration steps (``--steps``).
        positions: it can also score each position (``--per-position``).
        modes: the ACDC modes it takes (beyond the default, only ACDC's record has any).
        ablations: the ablations it can patch with (None: every one).
        package: the optional package it needs (checked before any model is built), else None.
        label: the metric name written into results when the method measures its own (auto-circuit).
        bare: it runs on the bare engine only (it recomputes heads from the weights, changes the backward pass or
            trains through the bare forward): refused with ``--engine hooks`` before any model is built, and by
            :meth:`check_engine` where ``auto`` fell back to hooks.
    """

    name: str
    level: str
    summary: str
    run: Runner
    metrics: tuple[str, ...] = METRICS
    metric_reason: str = ""
    gradients: bool = False
    estimates: bool = False
    steps: bool = False
    positions: bool = False
    modes: tuple[str, ...] = ()
    ablations: tuple[str, ...] | None = None
    package: Callable[[], Any] | None = None
    label: str | None = None
    bare: bool = False

    @property
    def baseline(self) -> bool:
        """A baseline measures no intervention: no metric and no ablation of its own."""
        return not self.metrics and self.label is None

    def _bare_reason(self) -> str:
        return (
            "runs on the bare engine only (--engine auto or bare): it works on the bare forward, which hooks do not run"
        )

    def check_engine(self, patcher: Patcher) -> None:
        """Refuse the engine chosen for a model (one line): a bare-only method where ``auto`` fell back to hooks."""
        from sandbox_lens.interp.circuits.bare import BarePatcher

        if self.bare and not isinstance(patcher, BarePatcher):
            raise MethodError(f"{self.name} {self._bare_reason()}; the bare engine does not cover this model")

    def check(self, config: CircuitConfig) -> str:
        """Refuse what this method cannot take (one line, before any model is built); the metric it will use."""
        config.check()
        if config.steps is not None and not self.steps:
            raise MethodError(f"--steps goes with --method {_taking('steps')} (its integration steps), not {self.name}")
        if config.per_position and not self.positions:
            raise MethodError(
                f"--per-position goes with --method {_taking('positions')}; {self.name} scores no positions"
            )
        if config.acdc_mode != CircuitConfig.acdc_mode and config.acdc_mode not in self.modes:
            if config.acdc_mode not in ACDC_MODES:
                raise MethodError(f"unknown ACDC mode {config.acdc_mode!r} (choose from {', '.join(ACDC_MODES)})")
            raise MethodError(
                f"an ACDC mode ({config.acdc_mode}) goes with --method {_taking('modes')}, not {self.name}"
            )
        if self.ablations is not None and config.source not in self.ablations:
            raise MethodError(f"{self.name} runs with {' or '.join(self.ablations)} ablation here, not {config.source}")
        if self.bare and config.engine == "hooks":
            raise MethodError(f"{self.name} {self._bare_reason()}")
        if config.agreement and not self.estimates:
            raise MethodError(
                f"--agreement compares an estimate with real patching: it goes with --method "
                f"{_taking('estimates')}, not {self.name}"
            )
        if self.label is not None:  # the method measures its own metric
            if config.metric is not None:
                raise MethodError(f"{self.name} {self.metric_reason}; leave out --metric")
            return self.label
        if not self.metrics:
            if config.metric is not None:
                raise MethodError(f"the {self.name} baseline measures no metric; leave out --metric")
            return "logit_diff"  # what its faithfulness is measured with
        metric = config.metric or self.metrics[0]
        if metric not in self.metrics:
            raise MethodError(
                f"{self.name} {self.metric_reason}; leave out --metric"
                if len(self.metrics) == 1
                else f"{self.name} cannot measure {metric}: {self.metric_reason}"
            )
        if config.acdc_mode == "reference" and metric != "kl":
            raise MethodError(
                "ACDC's reference mode measures the KL over the full output distribution; leave out --metric"
            )
        return metric

    def require(self) -> None:
        """Refuse now, in one line, when the optional package this method needs is not installed."""
        if self.package is not None:
            self.package()


METHODS: dict[str, CircuitMethod] = {}


def register(method: CircuitMethod) -> CircuitMethod:
    """Add ``method`` to :data:`METHODS` (a name taken twice is a programming error)."""
    if method.name in METHODS:
        raise ValueError(f"circuit method {method.name!r} is registered twice")
    if method.level not in ("node", "edge"):
        raise ValueError(f"circuit method {method.name!r}: level must be node or edge, not {method.level!r}")
    METHODS[method.name] = method
    return method


def names(*, optional: bool = True) -> tuple[str, ...]:
    """The registered methods' names in registration order (``optional=False``: only those that need no optional
    package)."""
    return tuple(m.name for m in METHODS.values() if optional or m.package is None)


def _taking(attribute: str) -> str:
    """The methods whose record sets ``attribute`` (for a refusal that names them)."""
    return " or ".join(m.name for m in METHODS.values() if getattr(m, attribute))


def method_of(name: str) -> CircuitMethod:
    """The record of ``name``; an unknown name is refused in one line naming the known ones."""
    try:
        return METHODS[name]
    except KeyError:
        raise MethodError(f"unknown method {name!r} (choose from {', '.join(METHODS)})") from None


# --- the runners, one per method -----------------------------------------------------------------------------


def _run_patching(patcher: Patcher, data: Any, src: dict[str, Any], c: CircuitConfig) -> Found:
    g = patcher.graph
    r = node_patching(
        patcher, data, c.source, per_position=c.per_position, metric=c.resolved_metric, progress=c.progress
    )
    node_fx = r["nodes"]
    chosen = {n for n, v in node_fx.items() if abs(v) >= c.threshold} | {"logits"}
    return Found(
        _edge_ranking_of_nodes(g, node_fx),
        [e for e in g.edges if e.sender in chosen and e.receiver in chosen],
        node_fx=node_fx,
        extra={"per_position": r["per_position"]} if c.per_position else {},
    )


def _run_path(patcher: Patcher, data: Any, src: dict[str, Any], c: CircuitConfig) -> Found:
    edge_fx = path_patching(patcher, data, source=src, metric=c.resolved_metric, progress=c.progress)
    return _thresholded(patcher.graph, edge_fx, None, c.threshold)


def _run_attribution(patcher: Patcher, data: Any, src: dict[str, Any], c: CircuitConfig) -> Found:
    edge_fx, node_fx = attribution(patcher, data, src, steps=1)
    return _thresholded(patcher.graph, edge_fx, node_fx, c.threshold)


def _run_peap(patcher: Patcher, data: Any, src: dict[str, Any], c: CircuitConfig) -> Found:
    why = not_split(patcher.model, data.clean.shape[1])
    split = why is None
    grads = patcher.gradients(data.clean, data.logit_diff)  # one differentiated run for both
    by_position, node_fx = attribution(patcher, data, src, per_position=True, clean_gradients=grads)
    strongest = np.abs(by_position).argmax(1)
    signed = by_position[np.arange(len(by_position)), strongest]  # each edge's score at its strongest position
    g = patcher.graph
    crossing = crossing_terms(patcher, data, src, grads) if split else {}
    top = {i: np.unravel_index(np.abs(t).argmax(), t.shape) for i, t in crossing.items()}
    return Found(
        np.abs(signed),
        [e for e, v in zip(g.edges, signed) if abs(v) >= c.threshold],
        signed,
        node_fx,
        extra={
            "edge_positions": {e.name: [float(v) for v in row] for e, row in zip(g.edges, by_position)},
            # a key or value edge's strongest (query, key, term) of its crossing terms
            "edge_crossing_strongest": {
                g.edges[i].name: [int(q), int(k), float(crossing[i][q, k])] for i, (q, k) in top.items()
            }
            if split
            else f"not split by query: {why}",
        },
        signed=signed,
        crossing=crossing if split else None,
    )


def _run_eap_ig(patcher: Patcher, data: Any, src: dict[str, Any], c: CircuitConfig) -> Found:
    steps = DEFAULT_STEPS if c.steps is None else c.steps
    edge_fx, node_fx = attribution(patcher, data, src, steps=steps)
    found = _thresholded(patcher.graph, edge_fx, node_fx, c.threshold)
    found.extra["steps"] = steps
    return found


def _run_atp_star(patcher: Patcher, data: Any, src: dict[str, Any], c: CircuitConfig) -> Found:
    from sandbox_lens.interp.circuits.atp_star import atp_star

    r = atp_star(patcher, data, src)
    return Found(
        r["score"],
        [e for e, v in zip(patcher.graph.edges, r["score"]) if v >= c.threshold],
        r["estimate"],
        r["nodes"],
        extra={
            "atp_star": {
                "graddrop_passes": patcher.L,
                "qk_fixed_edges": int(sum(e.channel in ("q", "k") for e in patcher.graph.edges)),
            }
        },
    )


def _run_gim(patcher: Patcher, data: Any, src: dict[str, Any], c: CircuitConfig) -> Found:
    from sandbox_lens.interp.circuits.gim import gim_attribution

    edge_fx, node_fx = gim_attribution(patcher, data, src)
    return _thresholded(patcher.graph, edge_fx, node_fx, c.threshold)


def _run_acdc(patcher: Patcher, data: Any, src: dict[str, Any], c: CircuitConfig) -> Found:
    g = patcher.graph
    r = acdc(patcher, data, c.threshold, metric=c.resolved_metric, mode=c.acdc_mode, source=src, progress=c.progress)
    rank = r.effects if c.acdc_mode == "reference" else np.abs(r.effects)
    return Found(
        rank,
        r.kept,
        r.effects,
        signed=r.effects,
        extra={
            "acdc": {
                "mode": c.acdc_mode,
                "metric": r.metric,
                "tried": r.tried,
                "removed": len(g.edges) - len(r.kept),
                "untested": int(np.isnan(r.effects).sum()),
                "removal_order": r.order,
            }
        },
    )


def _run_masks(patcher: Patcher, data: Any, src: dict[str, Any], c: CircuitConfig) -> Found:
    from sandbox_lens.interp.circuits.masks import learn_edge_masks  # torch's optimiser: only when masks run

    g = patcher.graph
    r = learn_edge_masks(patcher, data, src, seed=c.seed)
    return Found(
        r["log_alpha"],
        [e for e, gate in zip(g.edges, r["gates"]) if gate > 0.5],
        r["log_alpha"],
        extra={"masks": {"trace": r["trace"], "open": int((r["gates"] > 0.5).sum())}},
    )


def _run_ugs(patcher: Patcher, data: Any, src: dict[str, Any], c: CircuitConfig) -> Found:
    from sandbox_lens.interp.circuits.masks import learn_ugs_masks  # torch's optimiser: only when UGS runs

    g = patcher.graph
    r = learn_ugs_masks(patcher, data, seed=c.seed)  # its own ablation (optimal), not the setting's ``src``
    moved = r["values_moved"]
    return Found(
        r["theta"],
        [e for e, p in zip(g.edges, r["p"]) if p > 0.5],
        r["theta"],
        extra={
            "ugs": {
                "trace": r["trace"],
                "open": int((r["p"] > 0.5).sum()),
                "constants_moved": {"median": float(np.median(list(moved.values()))), "max": max(moved.values())},
            }
        },
    )


def _run_random(patcher: Patcher, data: Any, src: dict[str, Any], c: CircuitConfig) -> Found:
    from sandbox_lens.interp.streams import Stream, rng

    g = patcher.graph
    scores = rng(c.seed, Stream.RANDOM_BASELINE).random(len(g.edges))
    return Found(scores, [e for e, v in zip(g.edges, scores) if v >= 0.5], scores)


def _run_magnitude(patcher: Patcher, data: Any, src: dict[str, Any], c: CircuitConfig) -> Found:
    g = patcher.graph
    norms = {name: float(x.double().norm(dim=-1).mean()) for name, x in patcher.outputs(data.clean).items()}
    top = max(norms.values()) or 1.0
    scores = np.array([norms[e.sender] / top for e in g.edges])
    return Found(scores, [e for e, v in zip(g.edges, scores) if v >= c.threshold], scores)


def _auto_circuit_runner(name: str) -> Runner:
    def run(patcher: Patcher, data: Any, src: dict[str, Any], c: CircuitConfig) -> Found:
        g = patcher.graph
        rank, chosen, info = autocircuit.prune_scores(
            patcher.model, g, name, data, connected=patcher.connected(), seed=c.seed, quiet=not c.progress
        )
        own = info["circuit_of_its_own"]
        return Found(rank, [e for e, k in zip(g.edges, chosen) if k], extra={"auto_circuit": info}, own_circuit=own)

    return run


def _thresholded(g: Graph, edge_fx: np.ndarray, node_fx: dict[str, float] | None, threshold: float) -> Found:
    return Found(
        np.abs(edge_fx), [e for e, v in zip(g.edges, edge_fx) if abs(v) >= threshold], edge_fx, node_fx, signed=edge_fx
    )


def _edge_ranking_of_nodes(g: Graph, node_fx: dict[str, float]) -> np.ndarray:
    """An edge ranking from node scores: the smaller of its two ends' |effects| (the logits count as ∞)."""
    size = {n: abs(v) for n, v in node_fx.items()} | {"logits": np.inf}
    return np.array([min(size.get(e.sender, 0.0), size.get(e.receiver, np.inf)) for e in g.edges])


_GRADIENT = "needs the logit difference: the KL's gradient is zero at the clean run"


def _estimator(name: str, summary: str, run: Runner, **more: Any) -> CircuitMethod:
    """The record of a gradient estimate of each edge's effect (attribution patching and its variants): it measures
    the logit difference, differentiates the model and estimates what patching measures."""
    return CircuitMethod(
        name,
        "edge",
        summary,
        run,
        metrics=("logit_diff",),
        metric_reason=_GRADIENT,
        gradients=True,
        **({"estimates": True} | more),
    )


register(CircuitMethod("patching", "node", "activation patching of each node", _run_patching, positions=True))
register(CircuitMethod("path", "edge", "path patching of each edge", _run_path))
register(
    _estimator(
        "attribution", "attribution patching (EAP): a first-order estimate of each edge's effect", _run_attribution
    )
)
register(
    _estimator(
        "peap",
        "position-aware EAP: attribution patching per (edge, position), an edge ranked by its strongest position",
        _run_peap,
        positions=True,
        estimates=False,  # an edge's score is one position's, not an estimate of patching the edge everywhere
    )
)
register(_estimator("eap-ig", "EAP with integrated gradients over m steps", _run_eap_ig, steps=True))
register(
    _estimator(
        "atp-star",
        "AtP*: attribution patching with the exact softmax for query and key edges and GradDrop",
        _run_atp_star,
        bare=True,
    )
)
register(
    _estimator(
        "gim",
        "GIM: attribution patching with gradient interaction modifications (tempered softmax backward, scaled "
        "query/key/value gradients, frozen norm scales)",
        _run_gim,
        bare=True,
    )
)
register(
    CircuitMethod(
        "acdc",
        "edge",
        "ACDC: prune edges whose removal moves the metric less than the threshold",
        _run_acdc,
        metrics=("kl", "logit_diff"),
        modes=ACDC_MODES,
    )
)
register(
    CircuitMethod(
        "masks",
        "edge",
        "learned hard-concrete edge masks under an L0 penalty (edge pruning)",
        _run_masks,
        metrics=("kl",),
        metric_reason="train on the KL over the full output distribution",
        gradients=True,
        bare=True,
    )
)
register(
    CircuitMethod(
        "ugs",
        "edge",
        "UGS: edge masks by uniform gradient sampling with optimal-ablation constants (Li & Janson 2024)",
        _run_ugs,
        metrics=("kl",),
        metric_reason="trains on the KL over the full output distribution",
        gradients=True,
        bare=True,
    )
)
register(CircuitMethod("random", "edge", "a baseline: uniform random scores", _run_random, metrics=()))
register(
    CircuitMethod("magnitude", "edge", "a baseline: each sender's mean activation norm", _run_magnitude, metrics=())
)
for _name in autocircuit.ALGORITHMS:
    register(
        CircuitMethod(
            autocircuit.PREFIX + _name,
            "edge",
            f"auto-circuit's {_name}",
            _auto_circuit_runner(_name),
            metrics=(),
            metric_reason="measures auto-circuit's own metric at the last position",
            ablations=("resample",),
            package=autocircuit.load,
            label="auto-circuit's own (last position)",
        )
    )
