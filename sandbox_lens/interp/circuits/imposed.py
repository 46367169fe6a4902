"""Scoring a circuit method on a twin trained with ``interp train --align`` against the circuit imposed on it
(trained weights whose circuit is known, the InterpBench recipe; :mod:`sandbox_lens.interp.train.align`).

The imposed circuit is a set of nodes (the construction's own heads and MLPs, the embeddings, the
logits); strict IIT trained every other head and MLP to be irrelevant when resampled. The positives
are the edges between two imposed nodes — an upper bound on the edges the twin uses (an edge between
two imposed nodes may still carry nothing), so recall is the number to trust and precision a lower
bound. Scored: the ranking's AUROC and average precision over every edge, and the precision and recall
of the method's circuit, by edge and by node.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from sandbox_lens.interp.circuits.analyse import analyse
from sandbox_lens.interp.circuits.bare import patcher_for
from sandbox_lens.interp.circuits.graph import Graph
from sandbox_lens.interp.circuits.leaderboard import markdown
from sandbox_lens.interp.circuits.pairs import make_pairs
from sandbox_lens.interp.circuits.score import auroc, average_precision, precision_recall
from sandbox_lens.interp.circuits.truth import GroundTruth
from sandbox_lens.interp.errors import SandboxError
from sandbox_lens.interp.progress import bar as progress_bar
from sandbox_lens.interp.stats import t_interval

__all__ = [
    "imposed_nodes",
    "imposed_truth",
    "off_circuit_effect",
    "off_circuit_effects_alone",
    "largest_alone",
    "carries_circuit",
    "twins_markdown",
    "OFF_CIRCUIT",
    "score_imposed",
    "imposed_board",
    "BOARD_METRICS",
]


def imposed_nodes(alignment: Mapping[str, Any]) -> set[str]:
    """The graph nodes of the imposed circuit (``a<l>.<h>``, ``m<l>``, the embeddings and the logits)."""
    circuit = alignment["circuit"]
    return {"embed", "pos", "logits"} | {f"a{l}.{h}" for l, h in circuit["heads"]} | {f"m{l}" for l in circuit["mlps"]}


def imposed_truth(model: Any) -> GroundTruth:
    """The ground truth of a twin trained with ``interp train --align``, in levels: every edge between two imposed
    nodes (:func:`imposed_nodes`) is structural, live and relevant; the ablation levels keep those whose sender the
    ablation can change, measured on the twin (:func:`sandbox_lens.interp.circuits.levels.levels_of`). So a method
    on the twin is scored like one on a construction — at its ablation's level, with a reason for every edge outside
    it — on the board's rows for trained weights."""
    alignment = _alignment(model)
    on = imposed_nodes(alignment)
    graph = Graph.of_model(model)
    inside = {e: ["imposed"] for e in graph.edges if e.sender in on and e.receiver in on}
    return GroundTruth(
        f"{alignment['construction']} imposed", graph, inside, dict(inside), live=dict(inside), imposed=True
    )


def _off_circuit_setting(model: Any, pairs: int, seed: int) -> tuple[Any, Any, set[str]]:
    """What the off-circuit measures share: the twin's patcher, its pairs, and the imposed nodes."""
    on = imposed_nodes(_alignment(model))  # refused first on a model that is no aligned twin
    return patcher_for(model), make_pairs(model, pairs, seed=seed), on


def off_circuit_effect(model: Any, pairs: int = 64, seed: int = 0, metric: str = "logit_diff") -> float:
    """What the imposed circuit leaves out, measured: the effect (1 − the normalised ``metric``) of resampling every
    head and MLP outside it at once, from the corrupted word (every edge they send patched). Near 0 on a twin that
    carries only its imposed circuit; SIIT's strictness on the answers (``--strict-on answers``) leaves it large where
    the off-circuit nodes move the logits without changing an answer."""
    patcher, data, on = _off_circuit_setting(model, pairs, seed)
    off = [e for e in patcher.graph.edges if e.sender not in on]
    logits = patcher.run(data.clean, off, patcher.source(data, "resample"))[0]
    return float(patcher.effect(data, logits, metric))


def off_circuit_effects_alone(
    model: Any, pairs: int = 64, seed: int = 0, metric: str = "logit_diff"
) -> dict[str, float]:
    """Each head and MLP outside the imposed circuit resampled alone (every edge it sends patched from the corrupted
    word, the rest clean), on the pairs :func:`off_circuit_effect` uses: node → effect. Off-circuit nodes can matter
    alone and cancel together (a trained C4 counter twin's second-block MLP moved the logit difference by 0.23 of its
    span alone, everything off the circuit by 0.04), which the joint effect does not show."""
    patcher, data, on = _off_circuit_setting(model, pairs, seed)
    off = [n.name for n in patcher.graph.senders if n.name not in on]
    if not off:
        return {}
    settings = [([e for e in patcher.graph.edges if e.sender == name], None) for name in off]
    logits = patcher.run_many(data.clean, settings, patcher.source(data, "resample"))
    return {name: float(patcher.effect(data, logits[i], metric)) for i, name in enumerate(off)}


#: What a twin that carries only its imposed circuit may lose when everything outside it is resampled, or any one
#: off-circuit head or MLP alone (a share of the logit difference's clean-to-corrupted span): the circuit
#: leaderboard's trained rows count a twin below it.
OFF_CIRCUIT = 0.05


def carries_circuit(
    accuracy: float,
    least_iia: float | None,
    off_effect: float,
    reached: float,
    off_circuit: float = OFF_CIRCUIT,
    alone: Mapping[str, float] | None = None,
) -> bool:
    """Whether a twin counts as carrying its imposed circuit: accuracy and its least imposed held-out IIA at least
    ``reached``, :func:`off_circuit_effect` within ``off_circuit`` of 0 (either sign), and so is each off-circuit
    node's effect alone where ``alone`` (:func:`off_circuit_effects_alone`) is given."""
    return bool(
        accuracy >= reached
        and least_iia is not None
        and least_iia >= reached
        and abs(off_effect) < off_circuit
        and all(abs(v) < off_circuit for v in (alone or {}).values())
    )


def largest_alone(alone: Mapping[str, float] | None) -> tuple[str, float] | None:
    """The off-circuit node whose effect alone is largest in size, and that effect (None: none measured)."""
    if not alone:
        return None
    name = max(alone, key=lambda n: abs(alone[n]))
    return name, alone[name]


def _strictness(settings: Mapping[str, Any]) -> str:
    """The strictness weight and held-out target a twins board was trained with, where it records them."""
    if settings.get("strict_target") is None:
        return ""
    return (
        f" (weight {settings.get('strict_weight', 1.0):g}, trained on until the held-out strictness loss is at most "
        f"{settings['strict_target']:g} nats)"
    )


def twins_markdown(board: Mapping[str, Any]) -> str:
    """The twins (which count, and why not) and the methods on those that do, rendered like the leaderboard."""
    s = board["settings"]
    lines = [
        "# Trained twins with a known circuit",
        "",
        f"Twins trained with `--align` and strictness on the outputs{_strictness(s)}; a twin counts when its accuracy "
        "and every imposed "
        f"site's held-out IIA reach {s['reached']} and resampling everything outside its imposed circuit"
        + (
            ", or any one head or MLP outside it alone,"
            if any("off_circuit_alone" in t for t in board["twins"])
            else ""
        )
        + f" moves the logit difference by less than {s['off_circuit']} of its span. The truth is the edges between "
        "imposed nodes "
        "at the ablation's level (an upper bound on the edges a twin uses: precision is a lower bound). "
        f"Pairs {s['pairs']}, threshold {s['threshold']}; each number is the mean over the counted twins with its "
        f"{s['interval']}.",
        "",
        "| twin | seed | accuracy | steps | least imposed IIA | off-circuit effect | largest off-circuit node alone "
        "| counted |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for t in board["twins"]:
        iia = "—" if t["imposed_iia_min"] is None else f"{t['imposed_iia_min']:.3f}"
        big = largest_alone(t.get("off_circuit_alone"))
        lines.append(
            f"| {t['population']} | {t['seed']} | {t['accuracy']:.3f} | {t['steps']} | {iia} | "
            f"{t['off_circuit_effect']:.3f} | {'—' if big is None else f'{big[1]:.3f} ({big[0]})'} | "
            f"{'yes' if t['counted'] else 'no'} |"
        )
    lines.append("")
    if board["rows"]:
        table = markdown({"settings": {**s, "seeds": "the counted twins", "eap_ig_steps": 16}, "rows": board["rows"]})
        lines += [table.split("\n", 2)[2]]
    else:
        lines += ["No twin counts: no method is scored.", ""]
    return "\n".join(lines)


def _alignment(model: Any) -> dict[str, Any]:
    card = getattr(model, "card", None)
    alignment = card.options.get("alignment") if card is not None and card.construction == "trained" else None
    if not alignment:
        raise SandboxError("an imposed circuit needs a twin trained with `interp train --align`")
    return alignment


def score_imposed(result: Mapping[str, Any], alignment: Mapping[str, Any]) -> dict[str, Any]:
    """A method's result (:func:`sandbox_lens.interp.circuits.analyse.analyse` on the twin) against the imposed circuit."""
    on = imposed_nodes(alignment)
    names = list(result["graph"]["edges"])
    ends = [n.split("->") for n in names]
    senders = [s for s, _ in ends]
    receivers = [_node(r) for _, r in ends]
    labels = np.array([s in on and r in on for s, r in zip(senders, receivers)])
    scores = np.array([np.nan if v is None else v for v in result["ranking"]], dtype=np.float64)  # the method's order
    chosen = set(result["circuit"]["edges"]) if result.get("circuit") else set()
    chosen_mask = np.array([n in chosen for n in names])
    found_nodes = set(result["circuit"]["nodes"]) if result.get("circuit") else set()
    graph_nodes = set(result["graph"]["nodes"])
    node_labels = [n in on for n in sorted(graph_nodes)]
    node_chosen = [n in found_nodes for n in sorted(graph_nodes)]
    edge_p, edge_r = precision_recall(chosen_mask, labels) if chosen else (None, None)
    node_p, node_r = precision_recall(node_chosen, node_labels) if found_nodes else (None, None)
    return {
        "construction": alignment["construction"],
        "imposed_nodes": sorted(on & graph_nodes),
        "positives": int(labels.sum()),
        "edges": len(names),
        "auroc": auroc(scores, labels) if np.isfinite(scores).any() else None,
        "average_precision": average_precision(scores, labels) if np.isfinite(scores).any() else None,
        "edge_precision": edge_p,
        "edge_recall": edge_r,
        "node_precision": node_p,
        "node_recall": node_r,
    }


def _node(receiver: str) -> str:
    """``a1.0.q`` → ``a1.0``; ``m1`` and ``logits`` stay."""
    return receiver[:-2] if receiver.endswith((".q", ".k", ".v")) else receiver


#: What a trained-weights row reports (higher is better except seconds).
BOARD_METRICS = ("auroc", "average_precision", "edge_precision", "edge_recall", "node_precision", "node_recall")


def imposed_board(model: Any, methods: Any, seeds: Any, pairs: int = 32, progress: bool = False) -> dict[str, Any]:
    """Every method on an aligned twin over pair ``seeds``: per method, each metric's mean over the seeds with a
    Student's t interval (:func:`sandbox_lens.interp.stats.t_interval`), and the seconds per run."""
    import time

    alignment = _alignment(model)
    rows = []
    bar = progress_bar(total=len(methods) * len(seeds), disable=not progress, desc="imposed circuit", unit="run")
    for method in methods:
        runs, seconds = [], []
        for seed in seeds:
            t0 = time.perf_counter()
            r = analyse(model, method, None, pairs=pairs, seed=seed, curve=False)
            seconds.append(time.perf_counter() - t0)
            runs.append(score_imposed(r, alignment))
            bar.update(1)
        row: dict[str, Any] = {"method": method, "seeds": len(runs), "seconds": float(np.mean(seconds))}
        for metric in BOARD_METRICS:
            values = [x[metric] for x in runs if x[metric] is not None]
            row[metric] = {
                "mean": float(np.mean(values)) if values else None,
                "interval": t_interval(values, bounds=(0.0, 1.0)),  # every board metric is a share or an area in [0, 1]
                "values": values,
            }
        rows.append(row)
    bar.close()
    return {
        "construction": alignment["construction"],
        "task": model.card.task,
        "imposed": sorted(imposed_nodes(alignment)),
        "pairs": pairs,
        "rows": rows,
    }
