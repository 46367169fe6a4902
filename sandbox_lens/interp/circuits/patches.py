"""The patches of a bare patched run (:meth:`~sandbox_lens.interp.circuits.bare.BarePatcher.run_many`): what each
receiver's input gains when some copies of the batch patch some of its incoming edges."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

from sandbox_lens.interp.circuits.graph import Edge, Graph
from sandbox_lens.interp.model.device import on

__all__ = ["Patches", "DENSE", "DENSE_BYTES"]

#: a receiver's channel is patched through one product over a buffer of differences (dense) where the buffer's
#: slots it reads, over every copy, are at most this many times the (copy, sender) patches it takes
DENSE = 2
#: the dense buffer's most bytes (every patched sender × every copy of the batch); above, every channel is sparse
DENSE_BYTES = 1 << 30


class Patches:
    """What :meth:`~sandbox_lens.interp.circuits.bare.BarePatcher.run_many` adds to each receiver's input: the sum,
    over the senders a copy patches into that channel, of (source − the sender's output in that copy). A channel few
    copies patch (path patching: one edge per copy) gathers and adds per sender; a dense one (most copies patch most
    senders: the faithfulness curve, ACDC) takes one batched product of its copies' 0/1 coefficients with a buffer of
    the differences, each sender's filled once. ``current`` fills in as the forward computes the senders; masks
    scale each copy's delta over positions."""

    def __init__(
        self,
        torch: Any,
        graph: Graph,
        settings: Sequence[tuple[Sequence[Edge], np.ndarray | None]],
        source: dict[str, Any],
        current: dict[str, Any],
        like: Any,
    ) -> None:
        self.torch, self.source, self.current, self.k = torch, source, current, len(settings)
        copies: dict[tuple[str, str], dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
        for i, (edges, _) in enumerate(settings):
            for e in edges:
                copies[(e.receiver, e.channel)][e.sender].append(i)
        #: every patched sender in the order the forward computes them: the dense buffer's slots
        self.order = sorted(
            {s for by_sender in copies.values() for s in by_sender}, key=lambda s: graph.by_name[s].order
        )
        slot = {name: j for j, name in enumerate(self.order)}
        roomy = self.k * len(self.order) * like.numel() * like.element_size() <= DENSE_BYTES
        self.sparse: dict[tuple[str, str], list[tuple[str, Any]]] = {}
        self.dense: dict[tuple[str, str], tuple[Any, int]] = {}
        for key, by_sender in copies.items():
            m = 1 + max(slot[name] for name in by_sender)
            if roomy and m * self.k <= DENSE * sum(len(idx) for idx in by_sender.values()):
                coefficients = np.zeros((self.k, 1, m))
                for name, idx in by_sender.items():
                    np.add.at(coefficients[:, 0, slot[name]], idx, 1.0)
                self.dense[key] = (on(like, coefficients).to(like.dtype), m)
            else:
                self.sparse[key] = [
                    (name, on(like, np.asarray(idx, dtype=np.int64))) for name, idx in by_sender.items()
                ]
        self.buffer: Any = None
        self.filled = 0
        self.scale = None  # each copy's mask over positions (1 where it has none): [copies, 1, positions, 1]
        if any(mask is not None for _, mask in settings):
            masks = [
                np.ones(like.shape[1], dtype=bool) if m is None else np.asarray(m, dtype=bool) for _, m in settings
            ]
            self.scale = on(like, np.stack(masks)).to(like.dtype)[:, None, :, None]

    def input(self, receiver: str, channel: str, x: Any) -> Any:
        """The receiver's ``channel`` input: the residual ``x`` ``[copies · batch, pos, d]`` plus its patches."""
        key = (receiver, channel)
        if key not in self.dense and key not in self.sparse:
            return x
        view = x.view(self.k, -1, *x.shape[1:])
        if key in self.dense:
            coefficients, m = self.dense[key]
            self._fill(m, view)
            delta = self.torch.matmul(coefficients, self.buffer[:, :m].flatten(2)).view_as(view)
        else:
            delta = self.torch.zeros_like(view)
            for s, idx in self.sparse[key]:
                delta.index_add_(0, idx, self.source[s][None] - self.current[s].view_as(view).index_select(0, idx))
        return (view + (delta if self.scale is None else delta * self.scale)).view_as(x)

    def _fill(self, m: int, view: Any) -> None:
        """The buffer's slots up to ``m``: each sender's (source − output) in every copy."""
        if self.buffer is None:
            self.buffer = view.new_empty((self.k, len(self.order), *view.shape[1:]))
        for j in range(self.filled, m):
            name = self.order[j]
            self.buffer[:, j] = self.source[name][None] - self.current[name].view_as(view)
        self.filled = max(self.filled, m)
