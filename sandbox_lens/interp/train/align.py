"""Training a twin to carry a known circuit: interchange intervention training (IIT; Geiger, Wu, Lu,
Rozner, Kreiss, Icard, Goodman, Potts 2022) on the variables a construction's proof names, with the
strictness term of strict IIT (SIIT; Gupta et al. 2024, InterpBench).

The **correspondence** (a plain dict, chosen by the command line from the construction's card and
recorded in the run's config and card): for each high-level variable, a residual hook of the twin and a
block of its coordinates ``[start, stop)`` — the variable is to live *there*, axis-aligned; and the
circuit's nodes — the construction's own heads and MLPs, block by block (:func:`circuit_nodes`); every
other head and MLP of the twin (extra heads, extra blocks) is off the circuit. Each step adds to the task loss

* **IIT**: a base and a source word from the high-level model's pairs, one position per pair; the base
  run with the variable's coordinates at that position set to the source run's; cross-entropy against
  the high-level model's counterfactual labels, over the task's readout (one variable per step, in turn);
* **strictness**: the base run with every off-circuit head's output (``hook_z``) and MLP output set to the
  source run's (resample ablation); cross-entropy against the base's own answers — nothing off the
  circuit may matter. The gradient runs through the source run too: that is what teaches the off-circuit
  nodes to write nothing the answer depends on (with the resampled values detached, the loss stays at
  0.7 nats on C3 while the task is learnt: measured).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from sandbox_lens.interp.errors import OptionError
from sandbox_lens.interp.model.run import readout_answer, run_with_hooks
from sandbox_lens.interp.streams import Stream, rng
from sandbox_lens.interp.tasks.batches import step_rng
from sandbox_lens.interp.tasks.kinds import resolve, task_kind
from sandbox_lens.interp.train.align_graph import (
    counterfactual_labels,
    edge_loss,
    edge_name,
    held_out_edge,
    held_out_joint,
    joint_loss,
    joint_name,
    readout_loss,
)

__all__ = [
    "aligned_losses",
    "check_alignment",
    "circuit_nodes",
    "off_circuit_hooks",
    "resample_hooks",
    "imposed_iia",
    "held_out_strictness",
    "edge_name",
    "joint_name",
    "HELD_OUT_PAIRS",
]

#: Held-out pairs the imposed sites' IIA is read on at every evaluation of an aligned run.
HELD_OUT_PAIRS = 64


def circuit_nodes(heads_per_block: list[int], mlp_blocks: list[int], n_layers: int, n_heads: int) -> dict[str, Any]:
    """The imposed circuit: the construction's own nodes on the twin — heads 0 … h_l − 1 of each of its blocks
    l (``heads_per_block``, capped at the twin's heads) and the MLPs of ``mlp_blocks``; every other head and
    MLP of the twin (extra heads, extra blocks) is off the circuit."""
    heads = [[l, h] for l, n in enumerate(heads_per_block) if l < n_layers for h in range(min(n, n_heads))]
    mlps = [l for l in mlp_blocks if l < n_layers]
    off_heads = [[l, h] for l in range(n_layers) for h in range(n_heads) if [l, h] not in heads]
    off_mlps = [l for l in range(n_layers) if l not in mlps]
    return {"heads": heads, "mlps": mlps, "off_heads": off_heads, "off_mlps": off_mlps}


def check_alignment(alignment: Mapping[str, Any], shape: Any, task: Any) -> None:
    """Refuse, in one line, a correspondence the twin cannot hold (a hook or a circuit block past its blocks,
    coordinates past its width, an LSTM, a task the construction does not model)."""

    if shape.arch != "transformer":
        raise OptionError("--align intervenes on a transformer's residual stream; an LSTM has none")
    if alignment.get("kind") != task_kind(task).name:
        raise OptionError(
            f"--align {alignment.get('construction')} models the {alignment.get('kind')} task, not "
            f"this {task_kind(task).name} task"
        )
    needed = alignment.get("blocks", 0)
    if needed > shape.n_layers:
        raise OptionError(
            f"--align {alignment['construction']} has {needed} blocks: the twin needs at least as many "
            f"(--layers), it has {shape.n_layers}"
        )
    for v in alignment["variables"]:
        layer = int(v["hook"].removeprefix("blocks.").split(".", 1)[0])
        if layer >= shape.n_layers:
            raise OptionError(
                f"--align {alignment['construction']} puts {v['variable']!r} at {v['hook']}: the twin "
                f"needs at least {layer + 1} blocks (--layers), it has {shape.n_layers}"
            )
        if v["dims"][1] > shape.d_model:
            raise OptionError(
                f"--align needs {v['dims'][1]} residual coordinates for its variables; the twin has "
                f"d_model = {shape.d_model}"
            )


def off_circuit_hooks(circuit: Mapping[str, Any]) -> list[str]:
    """The hooks whose values an off-circuit resample replaces: ``hook_z`` of every block with an off-circuit head,
    ``hook_mlp_out`` of every off-circuit MLP."""
    return [f"blocks.{l}.attn.hook_z" for l in sorted({l for l, _ in circuit["off_heads"]})] + [
        f"blocks.{l}.hook_mlp_out" for l in circuit["off_mlps"]
    ]


def resample_hooks(
    circuit: Mapping[str, Any], values: Mapping[str, Any], rows: Mapping[str, Any] | None = None
) -> list[tuple[str, Any]]:
    """Forward hooks that set every off-circuit head's output and MLP output to ``values`` (keyed by hook name,
    e.g. another word's run): strict IIT's resample ablation, in training and when measuring it. ``rows``: per
    off-circuit node (``a<l>.<h>``, ``m<l>``), a boolean mask over the batch — the node is resampled in those rows
    only (a random subset of the off-circuit nodes per pair)."""
    import torch

    def chosen(name: str, x: Any) -> Any:
        return torch.as_tensor(rows[name], device=x.device)

    def heads(layer: int):
        off = [h for l, h in circuit["off_heads"] if l == layer]

        def hook(z, hook):
            z = z.clone()
            if rows is None:
                z[:, :, off] = values[hook.name][:, :, off]
                return z
            for h in off:
                m = chosen(f"a{layer}.{h}", z)[:, None, None]
                z[:, :, h] = torch.where(m, values[hook.name][:, :, h], z[:, :, h])
            return z

        return hook

    def mlp(x, hook):
        if rows is None:
            return values[hook.name]
        m = chosen(f"m{hook.name.split('.')[1]}", x)[:, None, None]
        return torch.where(m, values[hook.name], x)

    return [
        (name, heads(int(name.split(".")[1])) if name.endswith("hook_z") else mlp)
        for name in off_circuit_hooks(circuit)
    ]


def aligned_losses(
    model: Any,
    task: Any,
    alignment: Mapping[str, Any],
    seed: int,
    step: int,
    batch: int,
    every_variable: bool = False,
    strict_on: str = "answers",
    strict_subsets: bool = False,
) -> tuple[Any, Any]:
    """(IIT loss, strictness loss) of one training step (see the module docstring).

    Args:
        model: the twin being trained.
        task: its task.
        alignment: the imposed correspondence (:func:`sandbox_lens.interp.causal.impose.correspondence`).
        seed: the run's seed (the pairs come from its ``ALIGN_PAIRS`` stream at ``step``).
        step: the optimizer step.
        batch: pairs per step.
        every_variable: swap every imposed variable (each at its own positions, one forward each; the loss is
            their mean) rather than the step's one in turn.
        strict_on: ``answers`` (SIIT: cross-entropy against the base's answers) or ``outputs`` (the KL from the
            base's unablated output distribution over the readout, at the answered positions).
        strict_subsets: resample each off-circuit node in a random half of the pairs (:func:`_subsets`) rather
            than all of them in every pair.
    """
    import torch

    kind = task_kind(task)
    high = resolve(kind.high_level).of_task(task.to_dict())
    layout = task.token_layout()
    T = task.length - (1 if kind.next_token else 0)
    g = step_rng(seed, step, Stream.ALIGN_PAIRS)
    base, source = high.pairs(batch, T, g)
    P = len(layout.prefix)
    encode = np.asarray(layout.symbol_tokens)

    def tokens(words: np.ndarray) -> Any:
        return torch.from_numpy(
            np.concatenate([np.tile(np.asarray(layout.prefix, dtype=np.int64), (len(words), 1)), encode[words]], axis=1)
        )

    variables = alignment["variables"]
    swapped = list(variables) if every_variable else [variables[step % len(variables)]]
    circuit = alignment["circuit"]
    saved: dict[str, Any] = {}
    parents = {e["parent"] for e in alignment.get("edges", ())} | {
        u for j in alignment.get("joints", ()) for u, _ in j["parents"]
    }
    hooks = {v["hook"] for v in variables if v in swapped or v["variable"] in parents} | set(off_circuit_hooks(circuit))

    def save(x, hook):
        saved[hook.name] = x
        return x

    run_with_hooks(model, tokens(source), fwd_hooks=[(h, save) for h in hooks], return_type=None)
    base_tokens = tokens(base)
    answered_labels, answered = high.answers(base)

    def interchange(v: Mapping[str, Any]) -> Any:
        """IIT on one variable: its coordinates at one position per pair set from the source run."""
        positions = g.integers(T, size=batch)
        labels, scored = counterfactual_labels(high, base, source, positions, v["variable"], answered)
        device = saved[v["hook"]].device
        rows_t = torch.arange(batch, device=device)
        at = torch.from_numpy(P + positions).to(device)
        d0, d1 = v["dims"]

        def swap(x, hook):
            x = x.clone()
            x[rows_t, at, d0:d1] = saved[v["hook"]][rows_t, at, d0:d1]
            return x

        logits = run_with_hooks(model, base_tokens, fwd_hooks=[(v["hook"], swap)], return_type="logits")
        return readout_loss(logits[:, P : P + T], labels, scored, high)

    terms = [interchange(v) for v in swapped]
    by_name = {v["variable"]: v for v in variables}
    # the algorithm's edges, where the correspondence imposes them (``--iit-variables graph``): a path interchange each
    terms += [
        edge_loss(model, high, base, source, base_tokens, saved, by_name, e, g, P, T, answered)
        for e in alignment.get("edges", ())
    ]
    # and each variable its parents determine, by a joint interchange of all of them
    terms += [
        joint_loss(model, high, base, source, base_tokens, saved, by_name, j, g, P, T, answered)
        for j in alignment.get("joints", ())
    ]
    iit = sum(terms) / len(terms)

    rows = _subsets(circuit, batch, g) if strict_subsets else None
    strict = _strictness(model, high, base_tokens, saved, circuit, answered_labels, answered, P, T, strict_on, rows)
    return iit, iit * 0.0 if strict is None else strict


def _subsets(circuit: Mapping[str, Any], batch: int, g: np.random.Generator) -> dict[str, np.ndarray]:
    """Each off-circuit head and MLP resampled in a random half of the pairs (drawn independently per node and per
    pair): every subset of them, single nodes included, is held irrelevant by the strictness term."""
    names = [f"a{l}.{h}" for l, h in circuit["off_heads"]] + [f"m{l}" for l in circuit["off_mlps"]]
    return {name: g.random(batch) < 0.5 for name in names}


def _strictness(
    model: Any,
    high: Any,
    base_tokens: Any,
    saved: Mapping[str, Any],
    circuit: Mapping[str, Any],
    answered_labels: np.ndarray,
    answered: np.ndarray,
    P: int,
    T: int,
    strict_on: str,
    rows: Mapping[str, Any] | None = None,
) -> Any:
    """The strictness loss: the base run with every off-circuit head and MLP resampled from the source run's
    values in ``saved``, against the base's answers or its unablated outputs (``strict_on``); None when every head
    and MLP is on the circuit."""
    import torch

    fwd = resample_hooks(circuit, saved, rows)
    if not fwd:
        return None
    logits = run_with_hooks(model, base_tokens, fwd_hooks=fwd, return_type="logits")
    if strict_on == "outputs":
        with torch.no_grad():
            clean = run_with_hooks(model, base_tokens, fwd_hooks=[], return_type="logits")
        return readout_kl(clean[:, P : P + T], logits[:, P : P + T], answered, high)
    return readout_loss(logits[:, P : P + T], answered_labels, answered, high)


def held_out_strictness(
    model: Any, task: Any, alignment: Mapping[str, Any], seed: int, strict_on: str, pairs: int = HELD_OUT_PAIRS
) -> float | None:
    """The strictness loss (:func:`aligned_losses`' second term) on the held-out pairs the imposed IIA is read on
    (:attr:`~sandbox_lens.interp.streams.Stream.ALIGN_HELD_OUT`, never trained on), every off-circuit head and MLP
    resampled from the source words; None when the circuit holds every head and MLP. A stop target can rest on it
    (``--strict-target``) where the step's own pairs would make it noisy."""
    import torch

    hooks = off_circuit_hooks(alignment["circuit"])
    if not hooks:
        return None
    high, base, _, tb, ts, P, T = _held_out_words(task, seed, pairs)
    labels, answered = high.answers(base)
    with torch.no_grad():
        _, cache = model.run_with_cache(ts, names_filter=hooks)
        saved = {h: cache[h] for h in hooks}
        strict = _strictness(model, high, tb, saved, alignment["circuit"], labels, answered, P, T, strict_on)
    return None if strict is None else float(strict)


def _held_out_words(task: Any, seed: int, pairs: int) -> tuple[Any, np.ndarray, np.ndarray, Any, Any, int, int]:
    """The fixed held-out pairs of an aligned run (:attr:`~sandbox_lens.interp.streams.Stream.ALIGN_HELD_OUT`): the
    high-level model, the base and source words, their token tensors, the prefix length P and the word length T."""
    import torch

    kind = task_kind(task)
    high = resolve(kind.high_level).of_task(task.to_dict())
    layout = task.token_layout()
    T = task.length - (1 if kind.next_token else 0)
    base, source = high.pairs(pairs, T, rng(seed, Stream.ALIGN_HELD_OUT))
    P = len(layout.prefix)
    encode = np.asarray(layout.symbol_tokens)
    prefix = np.tile(np.asarray(layout.prefix, dtype=np.int64), (pairs, 1))
    tb, ts = (torch.from_numpy(np.concatenate([prefix, encode[w]], axis=1)) for w in (base, source))
    return high, base, source, tb, ts, P, T


def readout_kl(clean: Any, ablated: Any, scored: np.ndarray, high: Any) -> Any:
    """KL(clean ‖ ablated) of two runs' output distributions over ``high``'s readout classes at ``scored``
    (``[n, T]``), averaged over those positions; the clean run is the target (no gradient)."""
    import torch

    if high.readout is not None:
        clean, ablated = clean[..., list(high.readout)], ablated[..., list(high.readout)]
    mask = torch.from_numpy(scored).to(ablated.device)
    if not bool(mask.any()):
        return ablated.sum() * 0.0
    target = torch.log_softmax(clean[mask].detach(), -1)
    return torch.nn.functional.kl_div(
        torch.log_softmax(ablated[mask], -1), target, log_target=True, reduction="batchmean"
    )


def imposed_iia(
    model: Any, task: Any, alignment: Mapping[str, Any], seed: int, pairs: int = HELD_OUT_PAIRS
) -> dict[str, dict[str, Any]]:
    """Per imposed variable, its held-out IIA at the imposed coordinates: on ``pairs`` fixed base and source words
    (:attr:`~sandbox_lens.interp.streams.Stream.ALIGN_HELD_OUT`, never trained on), the variable swapped at every
    position in turn, the share of changed outputs that follow the high-level model (``{"iia", "outputs"}``, and the
    same per position swapped under ``by_position``)."""
    import torch

    high, base, source, tb, ts, P, T = _held_out_words(task, seed, pairs)
    plain, answered = high.answers(base)
    out = {}
    with torch.no_grad():
        # one source run for every imposed site: the variables', edges' and joint interchanges' source values
        hooks = sorted({v["hook"] for v in alignment["variables"]})
        _, cache = model.run_with_cache(ts, names_filter=hooks)
        acts = {h: cache[h] for h in hooks}
        for v in alignment["variables"]:
            src = acts[v["hook"]]
            d0, d1 = v["dims"]
            hits = total = 0
            by_position = []
            for p in range(T):

                def swap(x, hook, p=p):
                    x = x.clone()
                    x[:, P + p, d0:d1] = src[:, P + p, d0:d1]
                    return x

                logits = run_with_hooks(model, tb, fwd_hooks=[(v["hook"], swap)], return_type="logits")[:, P : P + T]
                got = readout_answer(logits, high.readout)
                labels, scored = high.counterfactual(base, source, p, v["variable"])
                changed = scored & answered & (labels != plain)
                here, n = int((got == labels)[changed].sum()), int(changed.sum())
                by_position.append({"iia": here / n if n else None, "outputs": n})
                hits, total = hits + here, total + n
            out[v["variable"]] = {"iia": hits / total if total else None, "outputs": total, "by_position": by_position}
        by_name = {v["variable"]: v for v in alignment["variables"]}
        for e in alignment.get("edges", ()):
            out[edge_name(e)] = held_out_edge(model, high, base, source, tb, acts, by_name, e, P, T, plain, answered)
        for j in alignment.get("joints", ()):
            out[joint_name(j)] = held_out_joint(model, high, base, source, tb, acts, by_name, j, P, T, plain, answered)
    return out
