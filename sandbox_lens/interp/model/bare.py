"""A bare PyTorch forward on a model's TransformerLens weights: the verifier's fast path.

The package's one hook-free forward, :func:`sandbox_lens.interp.model.arithmetic.run` (TransformerLens's
standard forward without hook points, per-head einsums or the mask tensor: one matmul for Q, K and V of
every head, torch's ``scaled_dot_product_attention`` and fused bias-matmuls), on weights read once
(:func:`sandbox_lens.interp.model.hooked.tl_state_dict`, so a ``HookedTransformer`` and a 4.x
``TransformerBridge`` give the same one).

Constructions read and write few residual coordinates (a counter's MLP reads one count and writes a
few state coordinates, whatever its width), so every projection keeps only the rows its input
actually reads and the columns it writes (:class:`_Projection`): the dropped terms are exact zeros,
so this changes rounding only, and on the constructions whose MLP grows with T it is most of the
work saved. Those wide MLPs also run in chunks of rows whose hidden units fit a CPU cache
(:data:`HIDDEN_CHUNK`; 2.0–2.6× on the counter and Krohn–Rhodes at T = 1024, measured alternating).

Summation order differs from TransformerLens's, so logits agree to rounding, not bit for bit: the
verifier runs both on a sample of every check and runs the model itself if a prediction differs, and
the probes do the same with the residual stream: one policy, :class:`sandbox_lens.interp.model.checked.CheckedForward`. :func:`bare_forward` returns None for
configurations it does not cover; callers then use the model itself.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import numpy as np

from sandbox_lens.interp.model.arithmetic import Block, dense_stack, residual_start, run
from sandbox_lens.interp.model.device import current
from sandbox_lens.interp.model.hooked import (
    _torch_dtype,
    attention_arrays,
    spec_config,
    spec_parts,
    tl_state_dict,
    to_hooked,
)
from sandbox_lens.interp.model.spec import ConstructionSpec

__all__ = ["bare_forward", "bare_rest", "bare_tail", "bare_unsupported", "sparse_state", "BareModel", "BareRest"]

#: hidden activations per MLP row chunk (floats): wide MLPs run in chunks of rows that fit a CPU cache
HIDDEN_CHUNK = 1 << 18


#: a restricted weight matrix of at least this many entries of which at most this share is non-zero is kept sparse
SPARSE_MIN_ENTRIES, SPARSE_MAX_SHARE = 1 << 16, 1 / 16


class _Projection:
    """``x @ W + b`` restricted to the rows of ``W`` that are not all zero (the coordinates read) and,
    with ``restrict_out``, to the output columns that are not all zero in ``W`` and ``b``
    (added into those columns of the residual stream by :meth:`add_into`).

    What is left is kept as a sparse (CSR) matrix where it is large and mostly zeros
    (:data:`SPARSE_MIN_ENTRIES`, :data:`SPARSE_MAX_SHARE`; a prefix scan's MLPs, whose units each read one or two
    coordinates of a residual stream |Q|² wide): the product then costs its non-zeros, not its size. ``W`` may come
    sparse already (:func:`sparse_state`); its rows are then all kept (the sparse product skips them anyway)."""

    def __init__(self, W: Any, b: Any, restrict_out: bool = False) -> None:
        import torch

        if W.layout == torch.sparse_csr:
            self.rows, used = None, W.col_indices()
        else:
            rows = torch.nonzero(W.ne(0).any(1)).flatten()
            self.rows = None if len(rows) == W.shape[0] else rows
            W = W if self.rows is None else W[rows]
            used = torch.nonzero(W.ne(0).any(0)).flatten()
        cols = None
        if restrict_out:
            written = torch.zeros(W.shape[1], dtype=torch.bool, device=b.device)
            cols = torch.nonzero(written.index_fill(0, used, True) | b.ne(0)).flatten()
        self.cols = None if cols is None or len(cols) == W.shape[1] else cols
        if self.cols is not None:
            W, b = _columns(W, self.cols), b[self.cols]
        if W.layout != torch.sparse_csr and W.numel() >= SPARSE_MIN_ENTRIES:
            if int(W.count_nonzero()) <= SPARSE_MAX_SHARE * W.numel():
                with _sparse_beta():
                    W = W.to_sparse_csr()
        self.W, self.b = (W if W.layout == torch.sparse_csr else W.contiguous()), b.contiguous()

    def __call__(self, x: Any) -> Any:  # x: [rows, d_in]
        import torch

        return torch.addmm(self.b, x if self.rows is None else x.index_select(1, self.rows), self.W)

    def add_into(self, resid: Any, x: Any) -> Any:
        """``resid + (x @ W + b)`` with the full output width; ``resid`` is [rows, d_out]."""
        out = self(x)
        if self.cols is None:
            return resid + out
        return resid.index_add(1, self.cols, out)


def _columns(W: Any, cols: Any) -> Any:
    """``W[:, cols]`` for a dense or a CSR matrix (for CSR, ``cols`` must hold every column with an entry)."""
    import torch

    if W.layout != torch.sparse_csr:
        return W[:, cols]
    where = torch.full((W.shape[1],), -1, dtype=W.col_indices().dtype, device=W.device)
    where[cols] = torch.arange(len(cols), dtype=where.dtype, device=W.device)
    with _sparse_beta():
        return torch.sparse_csr_tensor(
            W.crow_indices(), where[W.col_indices()], W.values(), (W.shape[0], len(cols)), check_invariants=True
        )


@contextmanager
def _sparse_beta() -> Iterator[None]:
    """Silence torch's one-time notice that its CSR tensors are a beta feature (the bare forward's use of them, a
    product with a dense matrix, is tested against the dense one)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
        yield


def sparse_state(spec: ConstructionSpec, dtype: str = "float32", use_attn_scale: bool = True) -> dict[str, Any]:
    """A construction's weights as the bare forward needs them, on the current device, without the dense model:
    the attention's and the embeddings' as :func:`~sandbox_lens.interp.model.hooked.state_dict_arrays` gives them,
    and each MLP's W_in and W_out as sparse CSR matrices of its own width (no padding to d_mlp) built from its units'
    entries (:meth:`~sandbox_lens.interp.model.spec.MLP.entries`). A prefix scan over |Q| states has a residual
    stream |Q|² wide and |Q|² units per MLP, so its dense weights grow as |Q|⁴ where these grow as |Q|²."""
    import torch

    kind, device = _torch_dtype(dtype), current()

    def tensor(a: Any) -> Any:
        return torch.tensor(a, dtype=kind, device=device)

    def csr(entries: Any, shape: tuple[int, int]) -> Any:
        rows, cols, values = entries
        coo = torch.sparse_coo_tensor(
            torch.tensor(np.stack([rows, cols]).astype(np.int64)), values, shape, check_invariants=True
        )
        with _sparse_beta():
            return coo.coalesce().to(dtype=kind, device=device).to_sparse_csr()

    d = spec.d_model
    sd = {"embed.W_E": tensor(spec.W_E), "pos_embed.W_pos": tensor(spec.W_pos)}
    for l, block in enumerate(spec.blocks):
        sd.update({k: tensor(v) for k, v in attention_arrays(spec, l, use_attn_scale).items()})
        w_in, b_in, w_out, b_out = (
            block.mlp.entries()
            if block.mlp is not None
            else (np.zeros((3, 0)), np.zeros(0), np.zeros((3, 0)), np.zeros(d))
        )
        width = len(b_in)
        p = f"blocks.{l}.mlp."
        sd[p + "W_in"], sd[p + "b_in"] = csr(w_in, (d, width)), tensor(b_in)
        sd[p + "W_out"], sd[p + "b_out"] = csr(w_out, (width, d)), tensor(b_out)
    sd["unembed.W_U"], sd["unembed.b_U"] = tensor(spec.W_U), tensor(spec.b_U)
    return sd


class BareModel:
    """A construction's weights and card, run on :func:`sandbox_lens.interp.model.arithmetic.run` without
    TransformerLens: what :func:`sandbox_lens.interp.verify.verify` checks when it is given a spec, so that
    ``interp verify`` never imports TransformerLens (its import is most of a short check's time).

    ``cfg`` holds the fields of the TransformerLens configuration the model would have (``config_dict``), the
    weights are the ones ``to_hooked`` would load, each MLP's kept sparse (:func:`sparse_state`: no dense model is
    built, so a construction too large for one — a prefix scan over 64 states — still verifies), on the current
    device. Calling it, or
    reading anything else a TransformerLens model has (``run_with_cache``, hooks), builds that model
    (:meth:`hooked`) and answers from it: the verifier falls back to it where the bare forward and a float64 run of
    the same weights disagree (:class:`sandbox_lens.interp.model.checked.CheckedForward`).

    ``sparse=False`` keeps the dense weights TransformerLens would hold (for engines that read them matrix by matrix,
    as circuit patching does). ``bare_calls=True``: a plain call (``model(tokens)``, ``return_type="logits"``) runs
    the bare forward — logits equal to TransformerLens's to float32 rounding — for as long as the TransformerLens model
    has not been built; once anything has built it (hooks can only be attached to it), every call answers from it."""

    def __init__(
        self,
        spec: ConstructionSpec,
        dtype: str = "float32",
        use_attn_scale: bool = True,
        sparse: bool = True,
        bare_calls: bool = False,
    ) -> None:
        import torch

        self.spec, self.dtype, self.use_attn_scale = spec, dtype, use_attn_scale
        self._bare_calls: Callable[[Any], Any] | None = None
        if sparse:
            self.sandbox_config, self.card = spec_config(spec, dtype, use_attn_scale)
            self._weights = sparse_state(spec, dtype, use_attn_scale)
        else:  # the dense weights TransformerLens would hold, for engines that read them matrix by matrix
            self.sandbox_config, arrays, self.card = spec_parts(spec, dtype, use_attn_scale)
            kind, device = _torch_dtype(dtype), current()
            self._weights = {k: torch.tensor(v, dtype=kind, device=device) for k, v in arrays.items()}
        self.cfg = SimpleNamespace(**self.sandbox_config)
        self._hooked: Any = None
        if bare_calls:
            self._bare_calls = _forward_of(self._weights, self.cfg)
        self._float64: Callable[[Any], Any] | None = None

    def named_parameters(self) -> Any:
        return iter(self._weights.items())

    def parameters(self) -> Any:
        return iter(self._weights.values())

    @property
    def backend(self) -> str:
        """What ran: ``"bare"``, or the TransformerLens class once it had to be built."""
        return "bare" if self._hooked is None else type(self._hooked).__name__

    def hooked(self) -> Any:
        """The TransformerLens model of the same weights (built on first use)."""
        if self._hooked is None:
            self._hooked = to_hooked(self.spec, self.dtype, self.use_attn_scale)
        return self._hooked

    def float64_forward(self, tokens: Any) -> Any:
        """The logits of the same weights in float64 (:func:`bare_forward`'s arithmetic): the cross-check's reference."""
        if self._float64 is None:
            self._float64 = _forward_of({k: v.double() for k, v in self._weights.items()}, self.cfg)
        return self._float64(tokens)

    def __call__(self, tokens: Any, *args: Any, **kwargs: Any) -> Any:
        plain = not args and set(kwargs) <= {"return_type"} and kwargs.get("return_type", "logits") == "logits"
        if self._bare_calls is not None and self._hooked is None and plain:
            return self._bare_calls(tokens)
        return self.hooked()(tokens, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:  # what only a TransformerLens model has
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.hooked(), name)


def bare_unsupported(model: Any) -> str | None:
    """Why the bare forward cannot run ``model`` (None when it can)."""
    cfg = getattr(model, "cfg", None)
    if cfg is None or not (isinstance(model, BareModel) or hasattr(type(model), "run_with_hooks")):  # e.g. an LSTM
        return f"{type(model).__name__} is not a TransformerLens model"
    return config_unsupported(cfg)


def config_unsupported(cfg: Any) -> str | None:
    """Which field of a TransformerLens configuration (attributes; absent ones take their defaults) puts the model
    outside the bare forward (None when none does)."""
    checks = {
        "positional_embedding_type": ("standard",),
        "act_fn": ("relu",),
        "normalization_type": (None, "LN"),
        "attn_only": (False,),
        "parallel_attn_mlp": (False,),
        "gated_mlp": (False,),
        "n_key_value_heads": (None,),
        "attention_dir": ("causal",),
    }
    for name, allowed in checks.items():
        value = getattr(cfg, name, allowed[0])
        if value not in allowed:
            return f"{name} = {value!r}"
    return None


def bare_forward(model: Any, residuals: bool = False) -> Callable[[Any], Any] | None:
    """``tokens [batch, pos] → logits [batch, pos, d_vocab_out]`` on ``model``'s weights, or None.

    With ``residuals`` the forward returns ``(logits, stream)``, ``stream`` holding the residual stream
    under TransformerLens's names (``blocks.{l}.hook_resid_pre``, ``…_mid``, ``…_post``), each
    ``[batch, pos, d_model]``."""
    if bare_unsupported(model) is not None:
        return None
    return _forward_of({k: v.detach() for k, v in tl_state_dict(model).items()}, model.cfg, residuals)


def bare_tail(model: Any, hook: str) -> Callable[[Any], Any] | None:
    """``resid [batch, pos, d_model] → logits [batch, pos, d_vocab_out]``: ``model``'s forward from the residual hook
    ``hook`` (``blocks.{l}.hook_resid_pre``, ``…_mid``, ``…_post``) on, given the stream there, differentiable in
    it (the weights detached), or None where the bare forward does not cover ``model``. An intervention at
    ``hook`` then costs only the blocks after it and no hook points: DAS
    (:func:`sandbox_lens.interp.causal.das.das`) caches the stream at ``hook`` once and trains on this."""
    residual_start(hook, model.cfg.n_layers)  # refuses a hook that is not a residual one
    rest = bare_rest(model)
    return None if rest is None else (lambda resid: rest(resid, hook))


class BareRest:
    """``model``'s forward from a residual hook on, on the bare forward (:func:`bare_rest`): ``rest(resid, hook)``
    runs the blocks after ``hook`` (``blocks.{l}.hook_resid_pre``, ``…_mid``, ``…_post``) from the stream ``resid``
    ``[batch, pos, d_model]`` there; ``edits`` (hook name → function of the activation, as
    :func:`~sandbox_lens.interp.model.arithmetic.run` takes them) intervene on the way, at the residual stream, an
    attention layer's output, a head's ``attn.hook_z`` or an MLP's output. :meth:`embed` gives the stream at
    ``blocks.0.hook_resid_pre`` of some tokens, where a whole forward starts."""

    def __init__(self, model: Any) -> None:
        sd = {k: v.detach() for k, v in tl_state_dict(model).items()}
        self.stack = _stack_of(sd, model.cfg)
        self.W_E, self.W_pos = sd["embed.W_E"], sd["pos_embed.W_pos"]

    def embed(self, tokens: Any) -> Any:
        """The residual stream at ``blocks.0.hook_resid_pre`` of ``tokens`` ``[batch, pos]``."""
        return self.W_E[tokens] + self.W_pos[: tokens.shape[1]]

    def __call__(self, resid: Any, hook: str, edits: dict[str, Any] | None = None) -> Any:
        batch, n, d = resid.shape
        return run(self.stack, resid.reshape(batch * n, d), n, start=hook, edits=edits).view(batch, n, -1)


def bare_rest(model: Any) -> BareRest | None:
    """:func:`bare_tail` at any residual hook, with interventions on the way (:class:`BareRest`), the weights read
    once (a sweep over many hooks), or None where the bare forward does not cover ``model``."""
    return None if bare_unsupported(model) is not None else BareRest(model)


def _stack_of(sd: dict[str, Any], cfg: Any) -> Any:
    """The bare forward's :class:`~sandbox_lens.interp.model.arithmetic.Stack` on the weights ``sd``
    (TransformerLens's state-dict names) of a model configured as ``cfg``: each projection restricted."""
    import torch

    dense = dense_stack(sd.__getitem__, cfg)  # the weights as TransformerLens holds them, then restricted
    blocks = []
    for block in dense.blocks:
        W_in, b_in, W_out = block.mlp_in.W, block.mlp_in.b, block.mlp_out.W
        used = W_out.ne(0).any(1) if W_out.layout == torch.strided else None  # hidden units whose output is read
        if used is not None and not bool(used.all()):
            W_in, b_in, W_out = W_in[:, used], b_in[used], W_out[used]
        blocks.append(
            Block(
                ln1=block.ln1,
                qkv=_Projection(block.qkv.W.contiguous(), block.qkv.b),
                out=_Projection(block.out.W, block.out.b, restrict_out=True),
                ln2=block.ln2,
                mlp_in=_Projection(W_in, b_in),
                mlp_out=_Projection(W_out, block.mlp_out.b, restrict_out=True),
                rows=max(64, HIDDEN_CHUNK // max(1, W_in.shape[1])),  # rows per MLP pass
            )
        )
    return replace(dense, blocks=blocks, unembed=_Projection(sd["unembed.W_U"], sd["unembed.b_U"]))


def _forward_of(sd: dict[str, Any], cfg: Any, residuals: bool = False) -> Callable[[Any], Any]:
    """:func:`bare_forward` on the weights ``sd`` (TransformerLens's state-dict names) of a model configured as ``cfg``."""
    stack = _stack_of(sd, cfg)
    W_E, W_pos = sd["embed.W_E"], sd["pos_embed.W_pos"]

    def forward(tokens: Any) -> Any:
        batch, n = tokens.shape
        stream: dict[str, Any] | None = {} if residuals else None
        out = run(stack, (W_E[tokens] + W_pos[:n]).reshape(batch * n, -1), n, stream).view(batch, n, -1)
        if stream is None:
            return out
        return out, {name: value.view(batch, n, -1) for name, value in stream.items()}

    return forward
