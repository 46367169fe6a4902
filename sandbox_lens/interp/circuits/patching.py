"""Edge patching on TransformerLens hooks: the one operation every method is a use of.

The operation: run the clean words while some edges deliver
another value to their receiver. Patching edge s → r (channel c) replaces, in r's channel-c input
only, s's output *in this run* by s's output from a *source* (ACDC's convention): the corrupted
run (``resample``, the interchange intervention), zeros (``zero``) or the clean batch's mean per
position (``mean``). Every other reader still sees s's own output. Patching every outgoing edge of
a node is activation patching of that node.

The hooks TransformerLens has for this (enabled for the duration of a call, restored after):
``hook_result`` (one head's output, ``use_attn_result``), ``hook_q_input``/``k``/``v``
(one head's inputs, ``use_split_qkv_input``), ``hook_mlp_in`` and ``hook_mlp_out``; the logits
read ``blocks.<last>.hook_resid_post``, the embeddings write ``hook_embed`` and ``hook_pos_embed``.

What is measured with it is in :mod:`sandbox_lens.interp.circuits.effects` (path, node and attribution patching,
faithfulness) and :mod:`sandbox_lens.interp.circuits.acdc`.

Effects are reported as the fraction of the gap between the clean run and the fully ablated run
(under resample: the corrupted word's run; see :func:`ablated_pairs`) that patching closes:
1 − normalised metric (0 = no effect, 1 = as if every edge were ablated).
"""

from __future__ import annotations

import contextlib
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sandbox_lens.interp.circuits.graph import CHANNELS, Edge, Graph, Node
from sandbox_lens.interp.circuits.pairs import Pairs
from sandbox_lens.interp.errors import ModelKindError
from sandbox_lens.interp.model.device import on
from sandbox_lens.interp.model.hooked import tl_state_dict
from sandbox_lens.interp.model.run import exact_precision, hooked_model

__all__ = ["Patcher", "CleanState", "ablated_pairs", "ABLATIONS", "BRIDGE_UNSUPPORTED"]

ABLATIONS = ("resample", "zero", "mean")
#: TransformerLens 4.3's native bridge refuses ``use_attn_result`` and ``use_split_qkv_input`` for its
#: plain attention, and edge patching needs both (one head's output, one head's inputs).
BRIDGE_UNSUPPORTED = (
    "circuit analyses need per-head output and input hooks (use_attn_result, "
    "use_split_qkv_input), which TransformerLens 4's native TransformerBridge does not offer; "
    "run them under TransformerLens 3.9 (models saved under 4.x load there)"
)


def _sender_hook(node: Node) -> str:
    if node.kind == "embed":
        return "hook_embed"
    if node.kind == "pos":
        return "hook_pos_embed"
    if node.kind == "head":
        return f"blocks.{node.layer}.attn.hook_result"
    return f"blocks.{node.layer}.hook_mlp_out"


def _receiver_hook(node: Node, channel: str, n_layers: int) -> str:
    if node.kind == "head":
        return f"blocks.{node.layer}.hook_{channel}_input"
    if node.kind == "mlp":
        return f"blocks.{node.layer}.hook_mlp_in"
    return f"blocks.{n_layers - 1}.hook_resid_post"


class Patcher:
    """Runs one model with edges of its :class:`~sandbox_lens.interp.circuits.graph.Graph` patched."""

    def __init__(self, model: Any, graph: Graph | None = None) -> None:
        model = hooked_model(model)  # hooks sit on a construction's TransformerLens model, built here
        if type(model).__name__ == "TransformerBridge":
            raise ModelKindError(BRIDGE_UNSUPPORTED)
        if not hasattr(model, "run_with_hooks") or not hasattr(model, "set_use_split_qkv_input"):
            raise ModelKindError(
                "circuit analyses need a TransformerLens HookedTransformer (per-head input and output "
                f"hooks); this model is a {type(model).__name__}"
            )
        self.model = model
        self.graph = graph or Graph.of_model(model)
        self.L = model.cfg.n_layers

    def connected(self) -> np.ndarray:
        """Per graph edge: can a change of the sender's output reach the receiver's channel at all? False
        when every coordinate the sender can write (nonzero columns of W_E, W_pos, a head's W_O, an MLP's
        W_out and b_out) meets a zero row of what the channel reads (W_Q, W_K, W_V, W_in, W_U): patching
        such an edge leaves every output bit for bit the same. With a LayerNorm every edge is connected."""
        edges = self.graph.edges
        if self.model.cfg.normalization_type is not None:
            return np.ones(len(edges), dtype=bool)

        sd = {k: v.detach().cpu().numpy() for k, v in tl_state_dict(self.model).items()}
        writes, reads = {}, {}
        for node in self.graph.nodes:
            p = f"blocks.{node.layer}."
            if node.kind in ("embed", "pos"):
                writes[node.name] = np.any(sd["embed.W_E" if node.kind == "embed" else "pos_embed.W_pos"] != 0, axis=0)
            elif node.kind == "head":
                writes[node.name] = np.any(sd[p + "attn.W_O"][node.head] != 0, axis=0)
                for c, w in (("q", "W_Q"), ("k", "W_K"), ("v", "W_V")):
                    reads[(node.name, c)] = np.any(sd[p + f"attn.{w}"][node.head] != 0, axis=1)
            elif node.kind == "mlp":
                writes[node.name] = np.any(sd[p + "mlp.W_out"] != 0, axis=0) | (sd[p + "mlp.b_out"] != 0)
                reads[(node.name, "in")] = np.any(sd[p + "mlp.W_in"] != 0, axis=1)
            else:
                reads[(node.name, "in")] = np.any(sd["unembed.W_U"] != 0, axis=1)
        return np.array([bool(np.any(writes[e.sender] & reads[(e.receiver, e.channel)])) for e in edges])

    @contextlib.contextmanager
    def hooks_on(self, result: bool = True, split: bool = True) -> Iterator[None]:
        """Switch on the hooks edge patching uses (restored after): per-head outputs (``result``), per-head
        inputs (``split``) and the MLP's input."""
        cfg = self.model.cfg
        before = (cfg.use_attn_result, cfg.use_split_qkv_input, cfg.use_hook_mlp_in)
        self.model.set_use_attn_result(result)
        self.model.set_use_split_qkv_input(split)
        self.model.set_use_hook_mlp_in(True)
        try:
            yield
        finally:
            self.model.set_use_attn_result(before[0])
            self.model.set_use_split_qkv_input(before[1])
            self.model.set_use_hook_mlp_in(before[2])

    # -- sender outputs of an unpatched run ---------------------------------------------------------
    def outputs(self, tokens: np.ndarray) -> dict[str, Any]:
        """Every sender's output ``[batch, pos, d_model]`` on ``tokens`` (no patching)."""
        names = sorted({_sender_hook(n) for n in self.graph.senders})
        with self.hooks_on(), exact_precision():
            _, cache = self.model.run_with_cache(on(self.model, tokens), names_filter=names, return_type="logits")
            return {n.name: self._pick(cache[_sender_hook(n)], n).clone() for n in self.graph.senders}

    def source(self, pairs: Pairs, kind: str = "resample") -> dict[str, Any]:
        """What patched edges deliver: the corrupted run's outputs, zeros, or the clean batch's mean."""
        import torch

        if kind not in ABLATIONS:
            raise ModelKindError(f"unknown patching source {kind!r} (choose from {', '.join(ABLATIONS)})")
        if kind == "resample":
            return self.outputs(pairs.corrupt)
        clean = self.outputs(pairs.clean)
        if kind == "zero":
            return {k: torch.zeros_like(v[:1]) for k, v in clean.items()}
        return {k: v.mean(0, keepdim=True) for k, v in clean.items()}

    @staticmethod
    def _pick(x: Any, node: Node) -> Any:
        return x[:, :, node.head] if node.kind == "head" else x

    # -- patched runs -------------------------------------------------------------------------------
    def run(
        self, tokens: np.ndarray, patched: Iterable[Edge], source: dict[str, Any], positions: np.ndarray | None = None
    ) -> Any:
        """Logits of ``tokens`` with ``patched`` edges delivering ``source`` (at ``positions`` only, if given)."""
        return self.run_many(tokens, [(list(patched), positions)], source)

    def logits(self, tokens: np.ndarray) -> Any:
        """The unpatched model's logits on ``tokens``."""
        with exact_precision():
            return self.model(on(self.model, tokens), return_type="logits")

    def clean_state(self, tokens: np.ndarray) -> CleanState:
        """The unpatched run of ``tokens``: the residual entering every block (and leaving the last) and
        every sender's output — what a patched run that starts at a later block takes as given."""
        L = self.L
        resid_names = [f"blocks.{l}.hook_resid_pre" for l in range(L)] + [f"blocks.{L - 1}.hook_resid_post"]
        names = sorted({_sender_hook(n) for n in self.graph.senders}) + resid_names
        with self.hooks_on(), exact_precision():
            _, cache = self.model.run_with_cache(on(self.model, tokens), names_filter=names, return_type="logits")
            return CleanState(
                tokens,
                [cache[h].clone() for h in resid_names],
                {n.name: self._pick(cache[_sender_hook(n)], n).clone() for n in self.graph.senders},
            )

    def start_layer(self, edges: Iterable[Edge]) -> int:
        """The first block a run patching ``edges`` must compute (the logits count as block L)."""
        return min((self.graph.by_name[e.receiver].layer for e in edges), default=self.L)

    def run_many(
        self,
        tokens: np.ndarray,
        settings: Sequence[tuple[Sequence[Edge], np.ndarray | None]],
        source: dict[str, Any],
        state: CleanState | None = None,
    ) -> Any:
        """One forward pass over ``len(settings)`` copies of the batch, copy i patched as ``settings[i]``
        says (edges, and optionally a boolean mask over positions); logits ``[copies, batch, pos, vocab]``.

        With the clean run's ``state``, the pass starts at the first block a patched edge enters: the
        blocks before it compute what the clean run computed, so their residual and outputs are taken
        from ``state`` (ACDC and path patching save the blocks below the receiver)."""
        k, n = len(settings), len(tokens)
        start = 0 if state is None else self.start_layer(e for edges, _ in settings for e in edges)
        groups: dict[str, dict[tuple[int, int], list[tuple[int, str]]]] = defaultdict(lambda: defaultdict(list))
        needed: set[str] = set()
        for i, (edges, _) in enumerate(settings):
            for e in edges:
                r = self.graph.by_name[e.receiver]
                groups[_receiver_hook(r, e.channel, self.L)][(i, r.head)].append((i, e.sender))
                needed.add(e.sender)
        masks = [None if m is None else on(self.model, np.asarray(m, dtype=bool)) for _, m in settings]
        current: dict[str, Any] = {}
        by_hook: dict[str, list[Node]] = defaultdict(list)
        for name in needed:
            node = self.graph.by_name[name]
            by_hook[_sender_hook(node)].append(node)

        if state is not None:  # senders below the start block: their clean outputs, the same in every copy
            for name in needed:
                node = self.graph.by_name[name]
                if node.layer < start:
                    current[name] = state.outputs[name].expand(k, *state.outputs[name].shape)
                    by_hook.pop(_sender_hook(node), None)

        def record(x, hook):
            for node in by_hook[hook.name]:
                current[node.name] = self._pick(x, node).view(k, n, *x.shape[1:2], x.shape[-1])
            return x

        def patch(x, hook):
            x = x.clone()
            view = x.view(k, n, *x.shape[1:])
            for (i, head), items in groups[hook.name].items():
                delta = sum(source[s] - current[s][i] for _, s in items)
                if masks[i] is not None:
                    delta = delta * masks[i].reshape(-1, 1).to(delta.dtype)
                if head >= 0:
                    view[i, :, :, head] += delta
                else:
                    view[i] += delta
            return x

        hooks = [(h, record) for h in by_hook] + [(h, patch) for h in groups]
        result = any(n.kind == "head" for nodes in by_hook.values() for n in nodes)  # a head's output to record
        split = any(h.endswith(("q_input", "k_input", "v_input")) for h in groups)  # a head's input to patch
        with self.hooks_on(result=result or state is None, split=split or state is None), exact_precision():
            if state is None:
                batch = on(self.model, np.tile(tokens, (k, 1)))
                logits = self.model.run_with_hooks(batch, fwd_hooks=hooks, return_type="logits")
            else:
                resid = state.resid[start].repeat(k, 1, 1)
                last = f"blocks.{self.L - 1}.hook_resid_post"
                if start == self.L and last in groups:  # no block runs: patch the final residual itself
                    resid = patch(resid, type("Hook", (), {"name": last})())
                logits = self.model.run_with_hooks(resid, fwd_hooks=hooks, return_type="logits", start_at_layer=start)
        return logits.view(k, n, *logits.shape[1:])

    def gradients(
        self, tokens: np.ndarray, metric: Any, base: dict[str, Any] | None = None, alpha: float = 1.0
    ) -> tuple[dict[str, Any], dict[str, Any], dict[tuple[str, str], Any]]:
        """One differentiated run of ``tokens`` whose token and position embeddings lie at ``alpha`` of the way
        from ``base``'s (``embed``, ``pos``) to their own: (every sender's output, ∂metric/∂ that output,
        ∂metric/∂ every receiver channel's input), each ``[batch, pos, d_model]``, detached."""
        import torch

        senders: dict[str, Any] = {}
        receivers: dict[str, Any] = {}
        sender_hooks: dict[str, list[Node]] = defaultdict(list)
        for node in self.graph.senders:
            sender_hooks[_sender_hook(node)].append(node)
        channels = [(r, c) for r in self.graph.receivers for c in CHANNELS[r.kind]]

        def interpolate(x, node):
            return x if base is None or alpha == 1 else base[node] + alpha * (x - base[node])

        def record_sender(x, hook):
            if not x.requires_grad:  # frozen embeddings: a leaf that gradients can reach
                x = x.detach().requires_grad_(True)
            senders[hook.name] = x
            return x

        def record_receiver(x, hook):
            receivers[hook.name] = x
            return x

        hooks = [
            ("hook_embed", lambda x, hook: interpolate(x, "embed")),
            ("hook_pos_embed", lambda x, hook: interpolate(x, "pos")),
        ]
        hooks += [(h, record_sender) for h in sender_hooks]
        hooks += [(h, record_receiver) for h in sorted({_receiver_hook(r, c, self.L) for r, c in channels})]
        with self.hooks_on(), exact_precision(grad=True):
            logits = self.model.run_with_hooks(on(self.model, tokens), return_type="logits", fwd_hooks=hooks)
            names = list(senders) + list(receivers)
            grads = dict(
                zip(
                    names,
                    torch.autograd.grad(
                        metric(logits),
                        [senders[n] for n in senders] + [receivers[n] for n in receivers],
                        allow_unused=True,
                    ),
                )
            )
        pick = self._pick
        outputs = {n.name: pick(senders[_sender_hook(n)], n).detach() for n in self.graph.senders}
        sender_grads = {
            n.name: None if grads[_sender_hook(n)] is None else pick(grads[_sender_hook(n)], n)
            for n in self.graph.senders
        }
        receiver_grads = {
            (r.name, c): None
            if grads.get(_receiver_hook(r, c, self.L)) is None
            else pick(grads[_receiver_hook(r, c, self.L)], r)
            for r, c in channels
        }
        return outputs, sender_grads, receiver_grads

    @staticmethod
    def effect(pairs: Pairs, logits: Any, metric: str = "logit_diff") -> float:
        """1 − the normalised metric: 0 when nothing changed, 1 when the clean word answers as the corrupted one."""
        return 1.0 - pairs.normalised(pairs.value(logits, metric), metric)


@dataclass
class CleanState:
    """The unpatched run of a batch (see :meth:`Patcher.clean_state`)."""

    tokens: np.ndarray
    resid: list[Any]  # [batch, pos, d_model] entering block l, for l < L; leaving the last block at L
    outputs: dict[str, Any]  # each sender's output


#: What effects are normalised against: MIB's m(∅) (every edge ablated), or the corrupted word's run whatever the
#: ablation (the task's own distance: a gadget whose zeroing throws the ablated run far away cannot shrink it).
NORMALISERS = ("ablated", "word")


def ablated_pairs(
    patcher: Patcher, pairs: Pairs, kind: str, source: dict[str, Any], normaliser: str = "ablated"
) -> Pairs:
    """``pairs`` normalised against the run with *every* edge ablated by ``kind`` (MIB's m(∅)): effects
    read 0 = the clean run, 1 = everything ablated. Under resample that run is the corrupted word's,
    which is what ``pairs`` already holds; zero and mean ablation have their own (a uniform output is far
    from the clean run, but much nearer than a confidently wrong corrupted run). With ``normaliser="word"``
    every ablation keeps the corrupted word's run as its normaliser (``pairs`` as they are)."""
    from dataclasses import replace

    if kind == "resample" or normaliser == "word":
        return pairs
    logits = patcher.run(pairs.clean, patcher.graph.edges, source)[0]
    return replace(
        pairs,
        corrupt_metric=float(pairs.logit_diff(logits)),
        corrupt_kl=float(pairs.kl(logits)),
        word_metric=pairs.corrupt_metric,
        word_kl=pairs.corrupt_kl,
    )


def _chunk(total: int, model: Any, tokens: np.ndarray) -> int:
    """Copies of the batch per forward pass. Side by side they save Python overhead on short words;
    on long ones the attention patterns outgrow the caches and one copy at a time is faster
    (measured: T = 16, 64 pairs: 8 copies 1.3× faster than 1; T = 256, 8 pairs: 8 copies 3× slower)."""
    n, T = tokens.shape
    per_copy = n * T * T * max(model.cfg.n_heads, 1)
    return int(max(1, min(total, 8, (1 << 20) // max(per_copy, 1))))
