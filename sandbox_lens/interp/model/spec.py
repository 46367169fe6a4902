"""A framework-neutral weight spec for hand-built transformers.

A construction writes its weights against a :class:`Layout` of **named** residual-stream
subspaces (``"R"``, ``"L"``, ``"pos"``, ...), never against raw indices. Heads are written
as sums of rank-one terms on named directions:

* ``head.qk(query, key, scale)`` adds ``scale·(x_i·query)(x_j·key)`` to the score of query
  position i on key position j — the **true** score, before any 1/√d_head scaling;
* ``head.ov(read, write)`` adds ``(Σ_j a_ij x_j·read)·write`` to the output;
* ``head.copy(src, dst)`` copies a whole subspace.

MLPs are lists of ReLU units (:class:`MLP`), each reading and writing named coordinates.
The width of a head (d_head) and of an MLP (d_mlp) is whatever it needs; the export to a
TransformerLens state dict (:mod:`sandbox_lens.interp.model.hooked`) pads everything to common sizes and bakes
the attention temperature into W_Q. The array layout follows TransformerLens's state-dict
conventions (``x @ W``), so other back-ends (e.g. a 4.x ``TransformerBridge``) only need an
adapter.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sandbox_lens.interp.errors import ConstructionError
from sandbox_lens.interp.model.card import ModelCard, TokenIO
from sandbox_lens.interp.model.layout import Direction, Layout
from sandbox_lens.interp.tasks.kinds import TaskKindError, task_kind

__all__ = ["Layout", "Head", "MLP", "Block", "ConstructionSpec", "Direction", "variable_site"]


def variable_site(
    variable: str, block: int, where: str, subspace: str | Sequence[str], role: str = "carries", note: str = ""
) -> dict[str, Any]:
    """Where a construction's proof puts one of its task's high-level variables (:mod:`sandbox_lens.interp.causal.highlevel`):
    the residual hook ``blocks.<block>.hook_resid_<where>``, the named subspace(s) and the ``role`` — ``carries``
    (swapping it there sets the variable: IIA 1) or ``inert`` (a readable copy nothing downstream reads:
    swapping it changes no output). ``block`` −1 is the last block."""
    if role not in ("carries", "inert") or where not in ("pre", "mid", "post"):
        raise ConstructionError(f"variable site: role carries|inert and where pre|mid|post, got {role!r}, {where!r}")
    names = [subspace] if isinstance(subspace, str) else list(subspace)
    return {"variable": variable, "block": int(block), "where": where, "subspace": names, "role": role, "note": note}


class Head:
    """One attention head as rank-one QK and OV terms on named directions."""

    def __init__(self, layout: Layout, label: str = "") -> None:
        self.layout = layout
        self.label = label
        # Sparse rank-one factors, made dense only in matrices(): a construction may add
        # residual subspaces after writing a head.
        self._q: list[dict[int, float]] = []
        self._k: list[dict[int, float]] = []
        self._v: list[dict[int, float]] = []
        self._o: list[dict[int, float]] = []

    def qk(self, query: Direction, key: Direction, scale: float = 1.0) -> Head:
        """score(i, j) += scale · (x_i · query) · (x_j · key)."""
        self._q.append({i: w * scale for i, w in self.layout.sparse(query).items()})
        self._k.append(self.layout.sparse(key))
        return self

    def ov(self, read: Direction, write: Direction, scale: float = 1.0) -> Head:
        """output_i += scale · Σ_j a_ij (x_j · read) · write."""
        self._v.append({i: w * scale for i, w in self.layout.sparse(read).items()})
        self._o.append(self.layout.sparse(write))
        return self

    def copy(self, src: str, dst: str, scale: float = 1.0) -> Head:
        """Copy subspace ``src`` into ``dst`` (same size), coordinate by coordinate."""
        n = self.layout.size(src)
        if self.layout.size(dst) != n:
            raise ConstructionError(f"cannot copy {src!r} (size {n}) into {dst!r} (size {self.layout.size(dst)})")
        for r in range(n):
            self.ov((src, r), (dst, r), scale)
        return self

    @property
    def qk_rank(self) -> int:
        return len(self._q)

    @property
    def ov_rank(self) -> int:
        return len(self._v)

    def matrices(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(W_Q, W_K, W_V, W_O) with d_head = the head's own ranks (unscaled scores)."""
        d = self.layout.d_model

        def cols(vs: list[dict[int, float]]) -> np.ndarray:
            return np.stack([self.layout.dense(v) for v in vs], axis=1) if vs else np.zeros((d, 0))

        return cols(self._q), cols(self._k), cols(self._v), cols(self._o).T

    @property
    def writes(self) -> bool:
        """True when the head's OV circuit is non-zero (it changes the residual stream)."""
        _, _, w_v, w_o = self.matrices()
        return bool(np.any(w_v @ w_o != 0))


class MLP:
    """A one-hidden-layer ReLU MLP written unit by unit.

    ``unit(read={("L", q): 4}, bias=-6, write={("H", k): 2})`` adds one hidden unit
    h = ReLU(4·x[L_q] − 6) that adds 2h to H_k. ``out_bias`` sets b_out.
    """

    def __init__(self, layout: Layout, label: str = "") -> None:
        self.layout = layout
        self.label = label
        self._in: list[dict[int, float]] = []
        self._b: list[float] = []
        self._out: list[dict[int, float]] = []
        self._b_out: dict[int, float] = {}

    def unit(self, read: Direction, bias: float, write: Direction) -> MLP:
        self._in.append(self.layout.sparse(read))
        self._b.append(float(bias))
        self._out.append(self.layout.sparse(write))
        return self

    def out_bias(self, write: Direction) -> MLP:
        for i, w in self.layout.sparse(write).items():
            self._b_out[i] = self._b_out.get(i, 0.0) + w
        return self

    def erase(self, name: str) -> MLP:
        """Zero a subspace whose values are known to be ≥ 0: one unit x ↦ −ReLU(x) per coordinate."""
        for r in range(self.layout.size(name)):
            self.unit({(name, r): 1.0}, 0.0, {(name, r): -1.0})
        return self

    @property
    def width(self) -> int:
        return len(self._b)

    @staticmethod
    def combine(layout: Layout, mlps: Sequence[MLP], label: str = "") -> MLP | None:
        """One MLP holding the units of several (they run side by side in one block), or None."""
        if not mlps:
            return None
        out = MLP(layout, label)
        for m in mlps:
            if m.layout is not layout:
                raise ConstructionError("cannot combine MLPs written against different layouts")
            out._in += m._in
            out._b += m._b
            out._out += m._out
            for i, w in m._b_out.items():
                out._b_out[i] = out._b_out.get(i, 0.0) + w
        return out

    def entries(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`matrices` without a dense matrix: (W_in's entries ``[3, n]`` — rows, columns, values —, b_in, W_out's
        entries ``[3, n]``, b_out), every entry a unit's read or write (its non-zeros, and nothing else)."""
        ins = [(i, j, w) for j, read in enumerate(self._in) for i, w in read.items()]
        outs = [(j, i, w) for j, write in enumerate(self._out) for i, w in write.items()]
        return (
            np.array(ins, dtype=np.float64).reshape(-1, 3).T,
            np.array(self._b),
            np.array(outs, dtype=np.float64).reshape(-1, 3).T,
            self.layout.dense(self._b_out),
        )

    def matrices(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(W_in [d_model, width], b_in, W_out [width, d_model], b_out)."""
        d = self.layout.d_model
        w_in = np.stack([self.layout.dense(v) for v in self._in], axis=1) if self._in else np.zeros((d, 0))
        w_out = np.stack([self.layout.dense(v) for v in self._out], axis=0) if self._out else np.zeros((0, d))
        return w_in, np.array(self._b), w_out, self.layout.dense(self._b_out)


@dataclass
class Block:
    """One TransformerLens block: attention heads (possibly none) then an MLP (possibly empty)."""

    heads: list[Head]
    mlp: MLP | None
    label: str = ""

    @property
    def has_attention(self) -> bool:
        return any(h.writes for h in self.heads)


#: The largest construction built (about 7 GiB at the peak of building, on machines with 24 GB).
MAX_PARAMETERS = 300_000_000
BUILD_BYTES_PER_PARAMETER = 24  # float64 spec arrays + their padded copies + the model's float32 tensors (+ init)


@dataclass
class ConstructionSpec:
    """Everything needed to build a model: layout, embeddings, blocks, unembedding, metadata.

    Arrays are float64; they are cast when a model is built. ``W_E`` is
    ``[d_vocab, d_model]``, ``W_pos`` is ``[n_ctx, d_model]``, ``W_U`` is
    ``[d_model, d_vocab_out]``.
    """

    name: str
    theorem: str
    layout: Layout
    W_E: np.ndarray
    W_pos: np.ndarray
    blocks: list[Block]
    W_U: np.ndarray
    b_U: np.ndarray
    input_tokens: list[str]
    output_names: list[str]
    io: TokenIO
    max_length: int
    task: dict[str, Any]  # the task modelled, with its "kind" (see sandbox_lens.interp.model.card)
    verified_dtypes: tuple[str, ...] = ("float32", "float64")
    options: dict[str, Any] = field(default_factory=dict)
    #: Where float32 rounding on TransformerLens 4's bridge (other kernels than 3.9's) is measured to
    #: break exactness sooner: the longest length verified there, or None for "as on 3.9".
    bridge_float32_max_length: int | None = None
    notes: str = ""
    #: where the proof puts the task's high-level variables (:func:`variable_site`)
    variables: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        d = self.layout.d_model
        checks = [
            ("W_E", self.W_E.shape, (len(self.input_tokens), d)),
            ("W_U", self.W_U.shape, (d, len(self.output_names))),
            ("b_U", self.b_U.shape, (len(self.output_names),)),
        ]
        for name, got, want in checks:
            if got != want:
                raise ConstructionError(f"{self.name}: {name} has shape {got}, expected {want}")
        if self.W_pos.ndim != 2 or self.W_pos.shape[1] != d:
            raise ConstructionError(f"{self.name}: W_pos has shape {self.W_pos.shape}, expected (n_ctx, {d})")
        if len(self.io.prefix) + self.max_length > self.n_ctx:
            raise ConstructionError(
                f"{self.name}: n_ctx {self.n_ctx} is too short for prefix + {self.max_length} tokens"
            )
        if not self.blocks:
            raise ConstructionError(f"{self.name}: a construction needs at least one block")
        try:
            task_kind(self.task)
        except TaskKindError as e:
            raise ConstructionError(f"{self.name}: {e}") from None
        for b in self.blocks:
            for part in [*b.heads, *([b.mlp] if b.mlp else [])]:
                if part.layout is not self.layout:
                    raise ConstructionError(f"{self.name}: block {b.label!r} was written against another layout")

    def widen(self) -> None:
        """Pad ``W_E``, ``W_pos`` (columns) and ``W_U`` (rows) with zeros to the layout's width, after subspaces
        were added to it (a gadget added to a finished construction)."""
        d = self.layout.d_model
        self.W_E = np.pad(self.W_E, [(0, 0), (0, d - self.W_E.shape[1])])
        self.W_pos = np.pad(self.W_pos, [(0, 0), (0, d - self.W_pos.shape[1])])
        self.W_U = np.pad(self.W_U, [(0, d - self.W_U.shape[0]), (0, 0)])

    # -- shape summary -------------------------------------------------------------------
    @property
    def d_model(self) -> int:
        return self.layout.d_model

    @property
    def n_ctx(self) -> int:
        return int(self.W_pos.shape[0])

    @property
    def n_layers(self) -> int:
        """TransformerLens blocks."""
        return len(self.blocks)

    @property
    def attention_blocks(self) -> list[int]:
        """Indices of the blocks whose attention writes something."""
        return [i for i, b in enumerate(self.blocks) if b.has_attention]

    @property
    def attention_layers(self) -> int:
        """Blocks whose attention writes something (the thesis's notion of depth)."""
        return len(self.attention_blocks)

    @property
    def n_heads(self) -> int:
        return max(1, max(len(b.heads) for b in self.blocks))

    @property
    def d_head(self) -> int:
        ranks = [max(h.qk_rank, h.ov_rank) for b in self.blocks for h in b.heads]
        return max([1, *ranks])

    @property
    def d_mlp(self) -> int:
        return max([1, *(b.mlp.width for b in self.blocks if b.mlp is not None)])

    @property
    def d_vocab(self) -> int:
        return len(self.input_tokens)

    @property
    def d_vocab_out(self) -> int:
        return len(self.output_names)

    @property
    def parameters(self) -> int:
        """TransformerLens parameters of the built model (every head padded to d_head, every MLP to d_mlp),
        counted from the sparse spec before any dense weight exists."""
        d, h, dh, m = self.d_model, self.n_heads, self.d_head, self.d_mlp
        per_block = 4 * h * d * dh + 3 * h * dh + d + 2 * d * m + m + d
        return self.n_layers * per_block + (self.d_vocab + self.n_ctx + self.d_vocab_out) * d + self.d_vocab_out

    def check_size(self) -> None:
        """Refuse, before allocating, a model whose dense weights would not fit: building keeps float64
        arrays, their padded copies and the model's own tensors at once (about 24 bytes a parameter)."""
        n = self.parameters
        if n > MAX_PARAMETERS:
            raise ConstructionError(
                f"{self.name} at this size has {n:,} parameters (d_model {self.d_model:,}, d_mlp {self.d_mlp:,}, "
                f"{self.n_layers} blocks): building it would need about {n * BUILD_BYTES_PER_PARAMETER / 2**30:.0f} GiB; "
                f"the limit is {MAX_PARAMETERS:,} parameters (a smaller language, alphabet or length fits)"
            )

    def shape_summary(self) -> dict[str, int]:
        return {
            "n_layers": self.n_layers,
            "attention_layers": self.attention_layers,
            "d_model": self.d_model,
            "n_heads": self.n_heads,
            "d_head": self.d_head,
            "d_mlp": self.d_mlp,
            "d_vocab": self.d_vocab,
            "d_vocab_out": self.d_vocab_out,
            "n_ctx": self.n_ctx,
        }

    def card(self) -> ModelCard:
        return ModelCard(
            construction=self.name,
            theorem=self.theorem,
            task=dict(self.task),
            io=self.io,
            max_length=self.max_length,
            verified_dtypes=tuple(self.verified_dtypes),
            input_tokens=list(self.input_tokens),
            output_names=list(self.output_names),
            residual_labels=self.layout.labels(),
            block_labels=[b.label for b in self.blocks],
            attention_blocks=self.attention_blocks,
            options=dict(self.options),
            notes=self.notes,
            variables=[
                {**v, "hook": f"blocks.{v['block'] % len(self.blocks)}.hook_resid_{v['where']}"} for v in self.variables
            ],
        )
