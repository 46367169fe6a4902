"""Running a model exactly: the precision settings, batched logits and argmax predictions, attention
patterns, the heads that write, and TransformerLens hook names.

Every forward pass that a number is reported from goes through :func:`exact_precision`: TF32
matmuls would break the constructions' look-back margins, and subnormal attention weights (e^-40)
are very slow on CPUs while far below float32's resolution of 1, so they are flushed to zero.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from sandbox_lens.interp.errors import LengthError, ModelKindError
from sandbox_lens.interp.model.bare import BareModel
from sandbox_lens.interp.model.device import on, to_numpy
from sandbox_lens.interp.model.hooked import is_bridge
from sandbox_lens.interp.progress import bar as progress_bar

__all__ = [
    "run_with_hooks",
    "hard_attention",
    "HardAttention",
    "readout_answer",
    "exact_precision",
    "hook_name",
    "logits",
    "predict",
    "attention_patterns",
    "live_heads",
    "Head",
    "BATCH_BYTES",
    "require_hooked",
    "forward_seconds",
]

Head = tuple[int, int]  # (layer, head)

#: Rough per-batch memory budget for a forward pass.
BATCH_BYTES = 256 * 2**20

# TransformerLens's hook names (transformer_lens.utils.get_act_name), without importing it.
_HOOKS = {
    "resid_pre": "hook_resid_pre",
    "resid_mid": "hook_resid_mid",
    "resid_post": "hook_resid_post",
    "pattern": "attn.hook_pattern",
    "attn_scores": "attn.hook_attn_scores",
    "z": "attn.hook_z",
    "q": "attn.hook_q",
    "k": "attn.hook_k",
    "v": "attn.hook_v",
    "result": "attn.hook_result",
    "attn_out": "hook_attn_out",
    "mlp_out": "hook_mlp_out",
    "post": "mlp.hook_post",
    "pre": "mlp.hook_pre",
}


def readout_answer(logits: Any, readout: Sequence[int] | None) -> np.ndarray:
    """The argmax of ``logits`` ``[..., d_vocab_out]`` among the ``readout`` classes (None: all), as class indices."""

    if readout is None:
        return to_numpy(logits.argmax(-1))
    index = np.asarray(readout)
    return index[to_numpy(logits[..., list(readout)].argmax(-1))]


class _Named:
    """A hook point seen under the name the caller registered it with (TransformerLens 4's bridge calls a hook
    with its canonical point, e.g. ``blocks.0.ln2.hook_in`` for ``blocks.0.hook_resid_mid``)."""

    def __init__(self, name: str, hook: Any) -> None:
        self.name, self._hook = name, hook

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self._hook, attribute)


def run_with_hooks(model: Any, tokens: Any, fwd_hooks: Sequence[tuple[str, Callable[..., Any]]], **kwargs: Any) -> Any:
    """``model.run_with_hooks(tokens, fwd_hooks=…, **kwargs)`` with TransformerLens 3.9's meaning on either back end.

    On 4.x's native ``TransformerBridge`` two things differ, and are mended here: a hook is called with its
    canonical point (so ``hook.name`` is not the name it was registered under: each hook gets the name it asked
    for), and ``blocks.l.hook_resid_mid`` is an alias of ``blocks.l.ln2.hook_in`` — a write there changes only the
    MLP's input, not the residual stream the next block reads (measured: a vector added there moves the logits
    by up to 148 against 3.9's). A hook at ``resid_mid`` is therefore run at the attention's output, on
    resid_mid = resid_pre + attn_out (kept from ``resid_pre`` in the same forward), and returns its change as
    the new attention output; elements the hook leaves alone are passed through bit for bit."""

    if not is_bridge(model):
        return model.run_with_hooks(tokens, fwd_hooks=list(fwd_hooks), **kwargs)
    import torch

    plain: list[tuple[str, Callable[..., Any]]] = []
    keeps: list[tuple[str, Callable[..., Any]]] = []
    writes: list[tuple[str, Callable[..., Any]]] = []
    for name, fn in fwd_hooks:
        if not name.endswith(".hook_resid_mid"):
            plain.append((name, lambda x, hook, fn=fn, name=name: fn(x, _Named(name, hook))))
            continue
        block, kept = name.rsplit(".", 1)[0], {}

        def keep(x: Any, hook: Any, kept: dict = kept) -> Any:
            kept["pre"] = x
            return None

        def write(x: Any, hook: Any, fn: Any = fn, name: str = name, kept: dict = kept) -> Any:
            mid = kept["pre"] + x
            before = mid.clone()  # a hook may write into mid in place
            new = fn(mid, _Named(name, hook))
            new = mid if new is None else new
            return torch.where(new == before, x, new - kept["pre"])

        keeps.append((f"{block}.hook_resid_pre", keep))
        writes.append((f"{block}.hook_attn_out", write))
    return model.run_with_hooks(tokens, fwd_hooks=plain + keeps + writes, **kwargs)


def hook_name(name: str, layer: int) -> str:
    """``hook_name("pattern", 1)`` = ``"blocks.1.attn.hook_pattern"`` (as TransformerLens's get_act_name)."""
    try:
        return f"blocks.{int(layer)}.{_HOOKS[name]}"
    except KeyError:
        raise KeyError(f"unknown activation {name!r} (known: {', '.join(_HOOKS)})") from None


@contextlib.contextmanager
def exact_precision(grad: bool = False) -> Iterator[None]:
    """Full float32 matmuls and flushed subnormals, restored afterwards; no autograd unless ``grad``
    (attribution patching differentiates the clean run)."""
    import torch

    prev = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")
    torch.set_flush_denormal(True)
    try:
        with torch.enable_grad() if grad else torch.inference_mode():
            yield
    finally:
        torch.set_float32_matmul_precision(prev)
        torch.set_flush_denormal(False)


def batch_size_for(model, n_positions: int) -> int:
    """Sequences per forward pass within :data:`BATCH_BYTES` (activations of every block)."""
    cfg = model.cfg
    per_seq = 4 * n_positions * (3 * cfg.n_heads * n_positions + 3 * cfg.d_mlp + 8 * cfg.d_model)
    return int(max(1, min(4096, BATCH_BYTES // max(per_seq, 1))))


def _check_context(model, tokens: np.ndarray) -> None:
    if tokens.shape[1] > model.cfg.n_ctx:
        raise LengthError(f"inputs of {tokens.shape[1]} tokens do not fit the model's context ({model.cfg.n_ctx})")


def logits(
    model,
    tokens: Any,
    batch_size: int | None = None,
    progress: bool = False,
    forward: Callable[[Any], Any] | None = None,
) -> Iterator[tuple[int, Any]]:
    """Yield ``(start, logits[batch, pos, vocab])`` for ``tokens`` in batches, at exact precision;
    ``forward`` (tokens → logits, e.g. :func:`sandbox_lens.interp.model.bare.bare_forward`) runs instead of ``model``."""

    tokens = np.atleast_2d(np.asarray(tokens, dtype=np.int64))
    _check_context(model, tokens)
    bs = batch_size or batch_size_for(model, tokens.shape[1])
    with exact_precision():
        for start in progress_bar(
            range(0, len(tokens), bs), disable=not progress, desc="forward", unit="batch", leave=False
        ):
            batch = on(model, tokens[start : start + bs])
            yield start, (forward(batch) if forward is not None else model(batch, return_type="logits"))


def predict(
    model,
    words: Any,
    batch_size: int | None = None,
    progress: bool = False,
    forward: Callable[[Any], Any] | None = None,
) -> np.ndarray:
    """Argmax predictions ``[batch, T]`` of a sandbox-lens model on symbol-index words ``[batch, T]``.

    The model's card says how words become tokens (``card.io``); the prediction for position t is
    read after σ_t.
    """
    io = model.card.io
    tokens = io.encode(words)
    P = len(io.prefix)
    if tokens.shape[1] > model.cfg.n_ctx:
        raise LengthError(
            f"inputs of length {tokens.shape[1] - P} do not fit the model's context ({model.cfg.n_ctx - P} symbols)"
        )
    out = np.empty((len(tokens), tokens.shape[1] - P), dtype=np.int64)
    for start, lg in logits(model, tokens, batch_size, progress, forward):
        out[start : start + len(lg)] = lg[:, P:, :].argmax(-1).cpu().numpy()
    return out


def forward_seconds(model, batch: int, length: int, repeats: int = 3) -> float:
    """Measured seconds of one forward pass of ``batch`` token sequences of ``length`` tokens (at most the model's
    context) on ``model``'s device: the median of ``repeats`` after a warm-up. For estimating work whose size an
    option sets (:func:`sandbox_lens.interp.budget.require`) on the machine it will run on; takes milliseconds
    on the models this project trains."""
    import time

    import torch

    n = int(max(1, min(length, model.cfg.n_ctx)))
    tokens = on(model, torch.zeros((int(max(1, batch)), n), dtype=torch.long))
    times = []
    with exact_precision():
        for _ in range(repeats + 1):
            t0 = time.perf_counter()
            model(tokens, return_type="logits")
            if tokens.is_cuda:  # kernels run asynchronously: wait for them
                torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
    return float(np.median(times[1:]))


def require_hooked(model, what: str) -> None:
    """Refuse, in one line, a model without attention and hook points (the LSTM baseline). A construction's weights
    (:class:`~sandbox_lens.interp.model.bare.BareModel`) pass without building their TransformerLens model: it is
    built when a hook point is first used."""
    if isinstance(model, BareModel):
        return
    if not hasattr(model, "run_with_cache") or not hasattr(model, "blocks"):
        kind = getattr(model.cfg, "model_kind", type(model).__name__) if hasattr(model, "cfg") else type(model).__name__
        raise ModelKindError(f"{what} needs a transformer with hook points; this model is an {kind} (no attention)")


def hooked_model(model: Any) -> Any:
    """``model`` as a TransformerLens model: a construction's weights (:class:`~sandbox_lens.interp.model.bare.BareModel`)
    build theirs; any other model is returned as it is. For code that copies or rewires the model itself (auto-circuit's
    patchable wrapper), where forwarding attribute by attribute is not enough."""
    return model.hooked() if isinstance(model, BareModel) else model


def live_heads(model) -> list[Head]:
    """Heads whose OV circuit is non-zero: padded heads of constructions (and blocks without
    attention) attend uniformly and write nothing, so they mean nothing."""
    import torch

    require_hooked(model, "finding attention heads")
    return [
        (l, h)
        for l in range(model.cfg.n_layers)
        for h in range(model.cfg.n_heads)
        if torch.any(model.blocks[l].attn.W_V[h] @ model.blocks[l].attn.W_O[h] != 0)
    ]


def attention_patterns(model, tokens: Any, heads: Sequence[Head] | None = None) -> dict[Head, np.ndarray]:
    """Attention patterns ``[batch, query, key]`` (float64) of ``heads`` (default: the live heads)
    on a token batch; one sequence of token ids gives ``[1, query, key]``."""
    import torch

    require_hooked(model, "attention patterns")
    tokens = np.atleast_2d(np.asarray(tokens, dtype=np.int64))
    _check_context(model, tokens)
    heads = live_heads(model) if heads is None else list(heads)
    names = sorted({hook_name("pattern", layer) for layer, _ in heads})
    with torch.inference_mode():
        _, cache = model.run_with_cache(on(model, tokens), names_filter=names)
        return {(l, h): cache[hook_name("pattern", l)][:, h].double().cpu().numpy() for l, h in heads}


def _argmax_pattern(pattern: Any, hook: Any) -> Any:
    """Every attention row replaced by its argmax: weight 1 on the largest score, split equally among ties."""
    top = pattern == pattern.amax(dim=-1, keepdim=True)
    hard = top.to(pattern.dtype)
    return hard / hard.sum(dim=-1, keepdim=True)


class HardAttention:
    """A model whose every attention row is its argmax at evaluation (hard attention; ties share the weight
    equally): ``hard_attention(model)``. It runs the model's own weights through a hook on each block's
    ``hook_pattern``; everything else (``cfg``, ``card``, ``parameters``) is the wrapped model's, so any function that
    takes a model (``predict``, ``evaluate``) takes this one."""

    def __init__(self, model: Any) -> None:
        require_hooked(model, "hard attention")
        self.model = model
        self.hooks = [(hook_name("pattern", layer), _argmax_pattern) for layer in range(model.cfg.n_layers)]

    def __call__(self, tokens: Any, **kwargs: Any) -> Any:
        return run_with_hooks(self.model, tokens, self.hooks, **kwargs)

    def __getattr__(self, name: str) -> Any:
        if name == "model":  # not yet set (a copy or an unpickling in progress): no recursion through it
            raise AttributeError(name)
        return getattr(self.model, name)


def hard_attention(model: Any) -> HardAttention:
    """``model`` evaluated with hard (argmax) attention: the same weights, each attention row one-hot on its
    largest score (shared among ties). The length-generalisation literature evaluates softmax-trained models this
    way to tell a learned rule from its soft approximation."""
    return HardAttention(model)
