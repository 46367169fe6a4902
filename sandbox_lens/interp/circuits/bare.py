"""Edge patching without hooks: a plain PyTorch forward over the model's TransformerLens weights in which
every receiver channel's input is an explicit tensor.

:class:`BarePatcher` does what :class:`~sandbox_lens.interp.circuits.patching.Patcher` does — the same operation
(patching s → r delivers ``source[s]`` in place of s's output *in this run*, on r's channel only), the
same :meth:`run_many`, :meth:`clean_state` and :meth:`gradients` — on any model whose weights
:func:`sandbox_lens.interp.model.hooked.tl_state_dict` reads: a 3.9 ``HookedTransformer`` and TransformerLens 4's
native ``TransformerBridge`` alike (the bridge refuses the per-head hooks the hook engine needs). It
is also the faster engine: attention runs through ``scaled_dot_product_attention``; a head's query,
key or value is recomputed only for the copies that patch it, and per-head outputs are formed only in
blocks whose heads a patch reads. The LayerNorm, the attention and its scale are the shared ones of
:mod:`sandbox_lens.interp.model.arithmetic`; the projections stay head by head, since each head's query, key and
value channel takes its own input. The arithmetic is TransformerLens's in another summation order, so scores agree
with the hook engine to rounding (``tests/circuits/test_bare_engine.py``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

from sandbox_lens.interp.circuits.gim import frozen_layer_norm, rule_attend
from sandbox_lens.interp.circuits.graph import CHANNELS, Edge, Graph
from sandbox_lens.interp.circuits.patches import Patches
from sandbox_lens.interp.circuits.patching import CleanState, Patcher
from sandbox_lens.interp.errors import ModelKindError
from sandbox_lens.interp.model.arithmetic import attend, attention_scale, layer_norm
from sandbox_lens.interp.model.bare import bare_unsupported
from sandbox_lens.interp.model.device import on
from sandbox_lens.interp.model.hooked import tl_state_dict
from sandbox_lens.interp.model.run import exact_precision

__all__ = ["BarePatcher", "patcher_for"]


def patcher_for(model: Any, graph: Graph | None = None, engine: str = "auto") -> Patcher:
    """The patching engine for ``model``: ``hooks`` (TransformerLens hooks), ``bare`` (:class:`BarePatcher`)
    or ``auto`` — bare where it runs, hooks otherwise."""

    if engine not in ("auto", "hooks", "bare"):
        raise ModelKindError(f"unknown patching engine {engine!r} (choose from auto, hooks, bare)")
    if engine == "bare" or (engine == "auto" and bare_unsupported(model) is None):
        return BarePatcher(model, graph)
    return Patcher(model, graph)


#: clean states a :class:`BarePatcher` keeps (the clean and the corrupted batch)
KEPT_STATES = 2


def _detached(t: Any) -> Any:
    return t.detach()


def _as_is(t: Any) -> Any:
    return t


class BarePatcher(Patcher):
    """Edge patching on a bare forward (see the module docstring)."""

    def __init__(self, model: Any, graph: Graph | None = None) -> None:
        import torch

        cfg = model.cfg
        why = bare_unsupported(model)  # the bare forward's own coverage: the same arithmetic
        if why is not None:
            raise ModelKindError(f"the bare patching engine does not cover this model ({why})")
        self.model = model
        self.graph = graph or Graph.of_model(model)
        self.L = cfg.n_layers
        self.sd = {k: v.detach() for k, v in tl_state_dict(model).items()}
        self.ln = getattr(cfg, "normalization_type", None) == "LN"
        self.eps = getattr(cfg, "eps", 1e-5)
        self.scale = attention_scale(cfg)
        self.heads = {l: [n for n in self.graph.nodes if n.kind == "head" and n.layer == l] for l in range(self.L)}
        self.torch = torch
        #: backward rules (:class:`~sandbox_lens.interp.circuits.gim.Rules`) that :meth:`gradients` runs under; None:
        #: the plain gradient
        self.rules: Any = None
        self._groups: dict[tuple[str, str], tuple[Any, list[str]]] | None = None
        self._gate_plan: list[tuple] = []  # run_gated's stages, laid out by its first run
        #: the last clean states, by their tokens: an analysis asks for the clean and corrupted runs several times
        self._states: dict[tuple[tuple[int, ...], bytes], CleanState] = {}

    # -- the forward ------------------------------------------------------------------------------
    def _norm(self, x: Any, name: str) -> Any:
        if not self.ln:
            return x
        if self.rules is not None and self.rules.freeze_norm:
            return frozen_layer_norm(x, self.sd[f"{name}.w"], self.sd[f"{name}.b"], self.eps)
        return layer_norm(x, self.sd[f"{name}.w"], self.sd[f"{name}.b"], self.eps)

    def _forward(
        self,
        x: Any,
        start: int,
        inputs: Any,
        record: set[str],
        current: dict[str, Any],
        stream: list | None = None,
        drop: int | None = None,
    ) -> Any:
        """Blocks ``start``.. on the residual ``x`` [B, T, d]; ``inputs(receiver, channel, resid)`` returns a
        channel's input (the residual, or it plus a patch); outputs of senders in ``record`` go to ``current``;
        ``stream`` collects the residual entering each block and leaving the last. Block ``drop``'s writes
        enter the residual detached: the same values, no gradient back through that block (AtP*'s GradDrop)."""
        torch, sd = self.torch, self.sd
        for l in range(start, self.L):
            p = f"blocks.{l}"
            cut = _detached if l == drop else _as_is
            if stream is not None:
                stream.append(x)
            heads = self.heads[l]
            if heads:
                B, T, _ = x.shape
                qkv = {}
                base = self._norm(x, f"{p}.ln1")
                for c in "qkv":
                    W, b = sd[f"{p}.attn.W_{c.upper()}"], sd[f"{p}.attn.b_{c.upper()}"]
                    owns = [inputs(node.name, c, x) for node in heads]
                    if [n.head for n in heads] == list(range(W.shape[0])) and all(o is not x for o in owns):
                        # every head's channel is patched: one product over the stacked inputs
                        own = self._norm(torch.stack(owns, 1), f"{p}.ln1")
                        qkv[c] = torch.einsum("bhtd,hde->bhte", own, W) + b[None, :, None, :]
                        continue
                    full = torch.einsum("btd,hde->bhte", base, W) + b[None, :, None, :]
                    for node, own in zip(heads, owns):
                        if own is not x:  # this head's channel is patched in some copy
                            full[:, node.head] = self._norm(own, f"{p}.ln1") @ W[node.head] + b[node.head]
                    qkv[c] = full
                if self.rules is None:
                    z = attend(qkv["q"], qkv["k"], qkv["v"], self.scale)
                else:
                    z = rule_attend(qkv["q"], qkv["k"], qkv["v"], self.scale, self.rules)
                W_O = sd[f"{p}.attn.W_O"]
                if any(n.name in record for n in heads):
                    # each head's output is its own tensor on the way on, so a gradient reaches it
                    per_head = torch.einsum("bhte,hed->bthd", z, W_O).unbind(2)
                    for node in heads:
                        if node.name in record:
                            current[node.name] = per_head[node.head]
                    x = x + cut(sum(per_head)) + sd[f"{p}.attn.b_O"]
                else:
                    x = x + cut(torch.einsum("bhte,hed->btd", z, W_O)) + sd[f"{p}.attn.b_O"]
            name = f"m{l}"
            if name in self.graph.by_name:
                h = torch.relu(
                    self._norm(inputs(name, "in", x), f"{p}.ln2") @ sd[f"{p}.mlp.W_in"] + sd[f"{p}.mlp.b_in"]
                )
                out = h @ sd[f"{p}.mlp.W_out"] + sd[f"{p}.mlp.b_out"]
                if name in record:
                    current[name] = out
                x = x + cut(out)
        if stream is not None:
            stream.append(x)
        final = self._norm(inputs("logits", "in", x), "ln_final")
        return final @ sd["unembed.W_U"] + sd["unembed.b_U"]

    def _embed(self, tokens: np.ndarray) -> tuple[Any, Any]:
        tokens = on(self.sd["embed.W_E"], np.asarray(tokens))  # on the weights' device
        T = tokens.shape[1]
        embed = self.sd["embed.W_E"][tokens]
        return embed, self.sd["pos_embed.W_pos"][:T].expand_as(embed)

    # -- the Patcher interface --------------------------------------------------------------------
    def outputs(self, tokens: np.ndarray) -> dict[str, Any]:
        return dict(self.clean_state(tokens).outputs)

    def logits(self, tokens: np.ndarray) -> Any:
        """The unpatched logits, from the kept clean state (the arithmetic of every patched run's last step)."""
        with exact_precision():
            final = self._norm(self.clean_state(tokens).resid[-1], "ln_final")
            return final @ self.sd["unembed.W_U"] + self.sd["unembed.b_U"]

    def clean_state(self, tokens: np.ndarray) -> CleanState:
        """As :meth:`Patcher.clean_state`; the last :data:`KEPT_STATES` are kept (by the tokens' values) and
        returned again: the weights do not change under a patcher, and nothing writes into a state."""
        array = np.ascontiguousarray(tokens)
        key = (array.shape, array.tobytes())
        if key in self._states:
            self._states[key] = self._states.pop(key)  # the most recent last
            return self._states[key]
        with exact_precision():
            embed, pos = self._embed(tokens)
            current = {"embed": embed, "pos": pos}
            resid: list[Any] = []
            self._forward(embed + pos, 0, lambda r, c, x: x, {n.name for n in self.graph.senders}, current, resid)
        state = CleanState(tokens, resid, {n.name: current[n.name].clone() for n in self.graph.senders})
        self._states[key] = state
        while len(self._states) > KEPT_STATES:
            del self._states[next(iter(self._states))]
        return state

    def run_many(
        self,
        tokens: np.ndarray,
        settings: Sequence[tuple[Sequence[Edge], np.ndarray | None]],
        source: dict[str, Any],
        state: CleanState | None = None,
    ) -> Any:
        k, n = len(settings), len(tokens)
        if state is None:  # from the tokens: the embeddings are the only senders computed before block 0
            with exact_precision():
                embed, pos = self._embed(tokens)
            state = CleanState(tokens, [embed + pos], {"embed": embed, "pos": pos})
            start = 0
        else:
            start = self.start_layer(e for edges, _ in settings for e in edges)
        resid = state.resid[start]
        current: dict[str, Any] = {}
        patches = Patches(self.torch, self.graph, settings, source, current, resid)
        for name in patches.order:
            if self.graph.by_name[name].layer < start:
                current[name] = state.outputs[name].repeat(k, 1, 1)
        record = {s for s in patches.order if self.graph.by_name[s].layer >= start}
        inputs = patches.input
        with exact_precision():
            logits = self._forward(resid.repeat(k, 1, 1), start, inputs, record, current)
        return logits.view(k, n, *logits.shape[1:])

    def gradients(
        self,
        tokens: np.ndarray,
        metric: Any,
        base: dict[str, Any] | None = None,
        alpha: float = 1.0,
        drop: int | None = None,
    ) -> tuple[dict[str, Any], dict[str, Any], dict[tuple[str, str], Any]]:
        """As :meth:`Patcher.gradients`; ``drop``: no gradient back through block ``drop``'s writes (GradDrop)."""
        torch = self.torch
        probes: dict[tuple[str, str], Any] = {}

        def inputs(receiver, channel, x):
            probe = torch.zeros_like(x, requires_grad=True)
            probes[(receiver, channel)] = probe
            return x + probe

        with exact_precision(grad=True):
            embed, pos = self._embed(tokens)
            if base is not None and alpha != 1:
                embed, pos = base["embed"] + alpha * (embed - base["embed"]), base["pos"] + alpha * (pos - base["pos"])
            embed, pos = embed.detach().requires_grad_(True), pos.detach().requires_grad_(True)
            current: dict[str, Any] = {"embed": embed, "pos": pos}
            record = {n.name for n in self.graph.senders}
            logits = self._forward(embed + pos, 0, inputs, record, current, drop=drop)
            names = [n.name for n in self.graph.senders]
            keys = [(r.name, c) for r in self.graph.receivers for c in CHANNELS[r.kind] if (r.name, c) in probes]
            grads = torch.autograd.grad(
                metric(logits), [current[x] for x in names] + [probes[x] for x in keys], allow_unused=True
            )
        outputs = {x: current[x].detach() for x in names}
        sender_grads = dict(zip(names, grads[: len(names)]))
        receiver_grads = dict(zip(keys, grads[len(names) :]))
        return outputs, sender_grads, receiver_grads

    def head_outputs(self, resid: Any, node: Any, channel: str, deltas: Any) -> Any:
        """Head ``node``'s output ``[k, B, T, d]`` (before the shared output bias) when its ``channel`` (q, k or v)
        input is the residual ``resid`` ``[B, T, d]`` entering its block plus each of ``deltas`` ``[k, B, T, d]``
        and its other inputs are ``resid``: the softmax recomputed exactly (AtP*'s QK fix)."""
        sd, p, h = self.sd, f"blocks.{node.layer}", node.head
        k, B, T, d = deltas.shape

        def project(c: str, x: Any) -> Any:
            return self._norm(x, f"{p}.ln1") @ sd[f"{p}.attn.W_{c.upper()}"][h] + sd[f"{p}.attn.b_{c.upper()}"][h]

        with exact_precision():
            own = {c: project(c, resid).expand(k, B, T, -1) for c in "qkv"}
            own[channel] = project(channel, resid[None] + deltas)
            z = attend(*(own[c].reshape(k * B, 1, T, -1) for c in "qkv"), self.scale)
            return (z[:, 0] @ sd[f"{p}.attn.W_O"][h]).view(k, B, T, d)

    def run_gated(self, tokens: np.ndarray, source: dict[str, Any], keep: Any) -> Any:
        """A differentiable run of ``tokens`` in which edge e (graph order) delivers ``keep[e]`` of its sender's
        output and ``1 − keep[e]`` of ``source``'s: keep = 1 everywhere is the clean run, 0 everywhere the fully
        ablated one. Logits ``[batch, pos, vocab]`` (learned edge masks train ``keep`` through this). ``keep`` of
        shape ``[edges, positions]`` gates each edge at each position of its receiver's input on its own (the
        per-position ground truth is checked through this); of shape ``[edges, batch, positions]``, each word as
        well (UGS samples a mask per word).

        The receivers' corrections are formed a group at a time: once every sender of some receiver channels
        exists, their senders' differences from ``source`` are stacked once and all those channels' corrections
        come from one product with the gates (a few operations a block, not a few an edge)."""
        torch = self.torch
        groups = self._gate_groups()
        plan = self._gate_plan
        embed, pos = self._embed(tokens)
        product = {1: "rs,sbtd->rbtd", 2: "rst,sbtd->rbtd", 3: "rsbt,sbtd->rbtd"}[keep.dim()]
        current: dict[str, Any] = {"embed": embed, "pos": pos}
        ready: dict[tuple[str, str], Any] = {}
        stacked: list[Any] = []  # the senders' differences from the source, in the order they were formed

        def inputs(receiver, channel, x):
            key = (receiver, channel)
            if key not in groups:
                return x
            if key not in ready:
                stage = len(stacked)
                if stage == len(plan):  # the first run lays out the stages; every later run repeats them
                    plan.append(self._gate_stage(groups, ready, current, plan))
                due, new, rows, cols, edges = plan[stage]
                diffs = [(source[s] - current[s]).expand_as(x) for s in new]
                stacked.append(torch.cat(stacked[-1:] + [torch.stack(diffs)]) if diffs else stacked[-1])
                gates = torch.zeros(len(due), len(stacked[-1]), *keep.shape[1:], dtype=x.dtype, device=x.device)
                gates = gates.index_put((rows, cols), 1 - keep[edges], accumulate=True)
                for g, c in zip(due, torch.einsum(product, gates, stacked[-1]).unbind(0)):
                    ready[g] = c
            return x + ready[key]

        return self._forward(embed + pos, 0, inputs, {n.name for n in self.graph.senders}, current)

    def _gate_stage(self, groups: dict, ready: dict, current: dict, plan: list) -> tuple:
        """The next stage of :meth:`run_gated`: the receiver channels whose senders all exist now (``due``), the
        senders formed since the last stage (``new``), and each due edge's row, its sender's column in the stacked
        differences, and its index in graph order."""
        torch = self.torch
        done = [s for stage in plan for s in stage[1]]
        new = [s for s in current if s not in done]
        col = {s: j for j, s in enumerate(done + new)}
        due = [g for g in groups if g not in ready and all(s in col for s in groups[g][1])]
        device = self.sd["embed.W_E"].device
        rows = torch.tensor([i for i, g in enumerate(due) for _ in groups[g][1]], device=device)
        cols = torch.tensor([col[s] for g in due for s in groups[g][1]], device=device)
        return due, new, rows, cols, torch.cat([groups[g][0] for g in due])

    def _gate_groups(self) -> dict[tuple[str, str], tuple[Any, list[str]]]:
        """Each receiver channel's incoming edges: their indices in graph order (a tensor) and their senders."""
        if self._groups is None:
            incoming: dict[tuple[str, str], list[tuple[int, str]]] = defaultdict(list)
            for i, e in enumerate(self.graph.edges):
                incoming[(e.receiver, e.channel)].append((i, e.sender))
            self._groups = {
                key: (
                    self.torch.tensor([i for i, _ in items], device=self.sd["embed.W_E"].device),
                    [s for _, s in items],
                )
                for key, items in incoming.items()
            }
        return self._groups

    def hooks_on(self, result: bool = True, split: bool = True):
        raise ModelKindError("the bare engine has no hooks")
