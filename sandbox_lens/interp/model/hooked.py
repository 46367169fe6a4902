"""Weight spec -> TransformerLens ``HookedTransformer`` (saved models: :mod:`sandbox_lens.interp.model.saved`).

The model is built from a ``HookedTransformerConfig`` and loaded with
``load_state_dict(strict=True)``: no folding, centring or other weight processing, so the
weights in the model are exactly the spec's (cast to the requested dtype).

Attention temperature: TransformerLens divides scores by √d_head when
``use_attn_scale=True`` (its default, and always in the 4.x bridge). The spec stores true
scores, so the export multiplies W_Q and b_Q by √d_head in that case; with
``use_attn_scale=False`` it leaves them as they are. Either way the model computes the
spec's scores.
"""

from __future__ import annotations

import contextlib
import io
import math
import warnings
from typing import Any

import numpy as np

from sandbox_lens.interp.errors import CheckpointError, ConstructionError, LengthError
from sandbox_lens.interp.model.device import current
from sandbox_lens.interp.model.spec import ConstructionSpec

__all__ = [
    "to_hooked",
    "state_dict_arrays",
    "attention_arrays",
    "spec_config",
    "config_dict",
    "hooked_config",
    "new_model",
    "load_strict",
    "carded",
    "DTYPES",
    "backend",
    "tl_state_dict",
    "is_bridge",
    "check_backend_length",
    "spec_parts",
]

DTYPES = ("float32", "float64")


def _torch_dtype(dtype: str):
    import torch

    if dtype not in DTYPES:
        raise ConstructionError(f"unsupported dtype {dtype!r} (choose from {', '.join(DTYPES)})")
    return getattr(torch, dtype)


def config_dict(spec: ConstructionSpec, dtype: str = "float32", use_attn_scale: bool = True) -> dict[str, Any]:
    """The HookedTransformerConfig fields of a spec, as plain JSON-able values."""
    s = spec.shape_summary()
    return {
        "n_layers": s["n_layers"],
        "d_model": s["d_model"],
        "n_ctx": s["n_ctx"],
        "d_head": s["d_head"],
        "n_heads": s["n_heads"],
        "d_mlp": s["d_mlp"],
        "d_vocab": s["d_vocab"],
        "d_vocab_out": s["d_vocab_out"],
        "act_fn": "relu",
        "normalization_type": None,
        "positional_embedding_type": "standard",
        "use_attn_scale": bool(use_attn_scale),
        "default_prepend_bos": False,
        "dtype": dtype,
        "seed": 0,
    }


def hooked_config(cfg: dict[str, Any]):
    """A ``HookedTransformerConfig`` from this project's config dict (the keys ``model.json`` stores)."""
    from transformer_lens import HookedTransformerConfig

    kw = dict(cfg)
    kw["dtype"] = _torch_dtype(kw["dtype"])
    kw.setdefault("device", current())  # not TransformerLens's own choice (CUDA whenever present)
    return HookedTransformerConfig(**kw)


def parameter_count(spec: ConstructionSpec) -> int:
    """How many numbers the exported model holds (its TransformerLens state dict, heads and MLPs padded)."""
    return int(sum(np.asarray(v).size for v in state_dict_arrays(spec).values()))


def state_dict_arrays(spec: ConstructionSpec, use_attn_scale: bool = True) -> dict[str, np.ndarray]:
    """The spec's weights under TransformerLens 3.9 state-dict names, padded to common sizes."""
    spec.check_size()  # before the first dense matrix
    d_mlp, d = spec.d_mlp, spec.d_model
    sd: dict[str, np.ndarray] = {"embed.W_E": spec.W_E, "pos_embed.W_pos": spec.W_pos}
    for l, block in enumerate(spec.blocks):
        p = f"blocks.{l}."
        sd.update(attention_arrays(spec, l, use_attn_scale))
        w_in, b_in, w_out, b_out = (
            block.mlp.matrices()
            if block.mlp is not None
            else (np.zeros((d, 0)), np.zeros(0), np.zeros((0, d)), np.zeros(d))
        )
        width = w_in.shape[1]
        sd[p + "mlp.W_in"] = np.pad(w_in, ((0, 0), (0, d_mlp - width)))
        sd[p + "mlp.b_in"] = np.pad(b_in, (0, d_mlp - width))
        sd[p + "mlp.W_out"] = np.pad(w_out, ((0, d_mlp - width), (0, 0)))
        sd[p + "mlp.b_out"] = b_out
    sd["unembed.W_U"] = spec.W_U
    sd["unembed.b_U"] = spec.b_U
    return sd


def attention_arrays(spec: ConstructionSpec, layer: int, use_attn_scale: bool = True) -> dict[str, np.ndarray]:
    """Block ``layer``'s attention weights under TransformerLens 3.9 state-dict names (``blocks.{layer}.attn.W_Q``
    ...), every head padded to the spec's d_head, the temperature √d_head baked into W_Q (with ``use_attn_scale``)."""
    n_heads, d_head, d = spec.n_heads, spec.d_head, spec.d_model
    q_scale = math.sqrt(d_head) if use_attn_scale else 1.0
    W = {k: np.zeros((n_heads, d, d_head)) for k in ("W_Q", "W_K", "W_V")}
    W_O = np.zeros((n_heads, d_head, d))
    for h, head in enumerate(spec.blocks[layer].heads):
        wq, wk, wv, wo = head.matrices()
        W["W_Q"][h, :, : wq.shape[1]] = wq * q_scale
        W["W_K"][h, :, : wk.shape[1]] = wk
        W["W_V"][h, :, : wv.shape[1]] = wv
        W_O[h, : wo.shape[0], :] = wo
    p = f"blocks.{layer}.attn."
    sd = {}
    for k, v in W.items():
        sd[p + k] = v
        sd[p + "b_" + k[-1]] = np.zeros((n_heads, d_head))
    sd[p + "W_O"] = W_O
    sd[p + "b_O"] = np.zeros(d)
    return sd


def backend() -> str:
    """The model back end the installed TransformerLens has: ``"HookedTransformer"`` (3.9) or
    ``"TransformerBridge"`` (4.x). Read from the package metadata, without importing TransformerLens."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        v = version("transformer-lens")
    except PackageNotFoundError:
        raise ConstructionError("TransformerLens is not installed (pip install 'transformer-lens>=3.9,<5')") from None
    major, minor = (int(x) for x in v.split(".")[:2])
    if (major, minor) >= (3, 9) and major < 4:
        return "HookedTransformer"
    if major == 4:
        return "TransformerBridge"
    raise ConstructionError(
        f"TransformerLens {v} is not supported: sandbox-lens runs on 3.9 (HookedTransformer) or 4.x (TransformerBridge)"
    )


def _bridge(cfg: dict[str, Any]):
    """A native TransformerBridge (TransformerLens 4.x) of the same shape; it always scales scores by
    1/√d_head, which the exported W_Q already compensates when ``use_attn_scale`` is true."""
    if cfg.get("positional_embedding_type", "standard") != "standard":
        raise ConstructionError(BRIDGE_LACKS["alibi"])
    from transformer_lens import TransformerBridge, TransformerBridgeConfig

    if not cfg.get("use_attn_scale", True):
        raise ConstructionError(
            "TransformerLens 4's bridge always divides attention scores by √d_head; build with "
            "use_attn_scale=True (the default) to run on it"
        )
    keep = (
        "n_layers",
        "d_model",
        "n_ctx",
        "d_head",
        "n_heads",
        "d_mlp",
        "d_vocab",
        "d_vocab_out",
        "act_fn",
        "normalization_type",
        "seed",
    )
    kw = {k: cfg[k] for k in keep if k in cfg}
    dtype = _torch_dtype(cfg["dtype"])
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        model = TransformerBridge.boot_native(TransformerBridgeConfig(**kw, dtype=dtype))
        # 4.3's boot_native builds float32 whatever the config says: cast, or float64 would silently be float32
        if next(model.parameters()).dtype != dtype:
            model = model.to(dtype)
    if next(model.parameters()).dtype != dtype:
        raise ConstructionError(f"the TransformerBridge did not take dtype {cfg['dtype']}")

    if current() != "cpu":  # the bridge's .to() announces itself on stdout, which --json output must not carry
        with contextlib.redirect_stdout(io.StringIO()):
            model = model.to(current())
    return model


def new_model(cfg: dict[str, Any]):
    """An empty model of config ``cfg`` on the installed back end (see :func:`backend`)."""
    if backend() == "TransformerBridge":
        return _bridge(cfg)
    from transformer_lens import HookedTransformer

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # 3.9 warns on every construction
        model = HookedTransformer(hooked_config(cfg))
    return model


#: What TransformerLens 4.x's native bridge cannot serve, by the option that asks for it: the one-line refusal the
#: command line gives at parse time (``cli.common.BRIDGE_REFUSALS``) and the Python API when the model is built.
BRIDGE_LACKS: dict[str, str] = {
    "init_from": "--init-from copies a construction's weights by HookedTransformer parameter names: it needs "
    "TransformerLens 3.9 (pip install 'transformer-lens>=3.9,<3.10'); the twin it trains loads under 4.x",
    "align": "--align resamples HookedTransformer's per-head outputs (blocks.<l>.attn.hook_z) in every training step: "
    "it needs TransformerLens 3.9 (pip install 'transformer-lens>=3.9,<3.10'); the twin it trains loads under 4.x",
    "alibi": "--pos alibi (ALiBi's recency bias) needs TransformerLens 3.9's HookedTransformer (pip install "
    "'transformer-lens>=3.9,<3.10'); TransformerLens 4's native bridge has no ALiBi",
    "engine": "--engine hooks patches through per-head input and output hooks (use_attn_result, "
    "use_split_qkv_input), which TransformerLens 4's bridge does not offer: it needs TransformerLens 3.9; "
    "--engine bare (the default here) runs on 4.x",
}


def is_bridge(model) -> bool:
    """Whether ``model`` is TransformerLens 4.x's ``TransformerBridge`` (else a ``HookedTransformer`` or an LSTM)."""
    return type(model).__name__ == "TransformerBridge"


_ATTN = ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O")
_MLP = ("W_in", "b_in", "W_out", "b_out")


def tl_state_dict(model) -> dict[str, Any]:
    """The model's parameters under TransformerLens 3.9 state-dict names (``blocks.0.attn.W_Q`` ...), on
    either back end: what sandbox-lens saves, so a file written under one back end loads under the other.
    (The bridge's own ``state_dict`` uses its component names, ``blocks.0.attn.q.weight``.)"""
    if not is_bridge(model):
        return {name: p.detach() for name, p in model.named_parameters()}
    cfg = model.cfg
    sd: dict[str, Any] = {
        "embed.W_E": model.W_E,
        "pos_embed.W_pos": model.W_pos,
        "unembed.W_U": model.W_U,
        "unembed.b_U": model.b_U,
    }
    for l, block in enumerate(model.blocks):
        for k in _ATTN:
            sd[f"blocks.{l}.attn.{k}"] = getattr(block.attn, k)
        for k in _MLP:
            sd[f"blocks.{l}.mlp.{k}"] = getattr(block.mlp, k)
        if cfg.normalization_type == "LN":
            for ln in ("ln1", "ln2"):
                sd[f"blocks.{l}.{ln}.w"], sd[f"blocks.{l}.{ln}.b"] = getattr(block, ln).w, getattr(block, ln).b
    if cfg.normalization_type == "LN":
        sd["ln_final.w"], sd["ln_final.b"] = model.ln_final.w, model.ln_final.b
    return {k: v.detach().clone() for k, v in sd.items()}


def load_strict(model, tensors: dict[str, Any]) -> None:
    """Load parameters strictly; buffers (causal mask, IGNORE) come from the fresh model. Weights are
    held in HookedTransformer state-dict names; on the bridge they are converted first."""
    if is_bridge(model):
        from transformer_lens.utilities.tl_checkpoint_conversion import convert_tl_checkpoint

        own = model.state_dict()
        if set(tensors) == set(own):
            # the bridge's own names (``torch.save(bridge.state_dict())``): no conversion
            try:
                model.load_state_dict(dict(tensors), strict=True)
            except RuntimeError as e:
                raise CheckpointError(f"weights do not fit the model: {str(e).splitlines()[0]}") from None
            return

        try:  # the bridge maps its own parameter names; it reports what it could not place
            result = model.load_state_dict(convert_tl_checkpoint(dict(tensors), model.cfg), strict=False)
        except (RuntimeError, KeyError, ValueError) as e:
            raise CheckpointError(f"weights do not fit the model: {str(e).splitlines()[0]}") from None
        if result.missing_keys or result.unexpected_keys:
            raise CheckpointError(
                f"weights do not match the model: missing {result.missing_keys[:3]}, "
                f"unexpected {result.unexpected_keys[:3]}"
            )
        return
    full = dict(tensors)
    params = {name for name, _ in model.named_parameters()}
    missing = sorted(params - set(tensors))
    unexpected = sorted(set(tensors) - params)
    if missing or unexpected:
        raise CheckpointError(
            f"weights do not match the model: missing {missing[:3]}{'...' if len(missing) > 3 else ''}, "
            f"unexpected {unexpected[:3]}{'...' if len(unexpected) > 3 else ''}"
        )
    current = model.state_dict()
    for name in params:
        if tuple(full[name].shape) != tuple(current[name].shape):
            raise CheckpointError(
                f"weight {name} has shape {tuple(full[name].shape)}, model expects {tuple(current[name].shape)}"
            )
    for name, buf in current.items():
        full.setdefault(name, buf)
    model.load_state_dict(full, strict=True)


def spec_parts(
    spec: ConstructionSpec, dtype: str = "float32", use_attn_scale: bool = True
) -> tuple[dict[str, Any], dict[str, np.ndarray], Any]:
    """A spec's model configuration (:func:`config_dict`), weights (:func:`state_dict_arrays`) and card, after the
    checks every model of it passes (its size, and the back end's float32 length limit): what :func:`to_hooked` and
    the TransformerLens-free :class:`sandbox_lens.interp.model.bare.BareModel` both start from."""
    cfg, card = spec_config(spec, dtype, use_attn_scale)
    spec.check_size()
    return cfg, state_dict_arrays(spec, use_attn_scale), card


def spec_config(
    spec: ConstructionSpec, dtype: str = "float32", use_attn_scale: bool = True
) -> tuple[dict[str, Any], Any]:
    """A spec's model configuration and card after the back end's float32 length check, with no weight built: what
    :func:`spec_parts` gives less the dense weights (the bare forward builds its own, sparse, from the spec)."""
    check_backend_length(spec, dtype)
    card = spec.card()
    card.options = {**card.options, "use_attn_scale": bool(use_attn_scale)}
    return config_dict(spec, dtype, use_attn_scale), card


def check_backend_length(spec: ConstructionSpec, dtype: str) -> None:
    """Refuse a float32 model longer than the spec is verified exact at on the installed back end (4.x's bridge
    rounds differently from 3.9's kernels, so some constructions carry a shorter float32 limit there)."""
    limit = spec.bridge_float32_max_length
    if dtype == "float32" and limit is not None and spec.max_length > limit and backend() == "TransformerBridge":
        raise LengthError(
            f"{spec.name} is verified exact in float32 on TransformerLens 4's bridge only up to "
            f"T = {limit} (its kernels round differently from 3.9's); use --dtype float64 or T ≤ {limit}"
        )


def carded(model, cfg: dict[str, Any], card) -> Any:
    """``model`` (its weights loaded) made ready for the analyses: evaluation mode, its ``card`` and
    ``sandbox_config``, and the card's tokenizer (:func:`sandbox_lens.interp.model.tokens.attach_tokenizer`)."""
    from sandbox_lens.interp.model.tokens import attach_tokenizer

    model.eval()
    model.card = card
    model.sandbox_config = cfg
    return attach_tokenizer(model)


def to_hooked(
    spec: ConstructionSpec, dtype: str = "float32", use_attn_scale: bool = True, rotate: dict[str, int] | None = None
):
    """Build a ``HookedTransformer`` whose weights are exactly the spec's.

    The model gets a ``card`` attribute (:class:`~sandbox_lens.interp.model.spec.ModelCard`) that tells
    :func:`sandbox_lens.interp.verify.verify` how to feed it automaton inputs. ``rotate={"pad": p, "seed": s}`` embeds the
    residual stream in p more dimensions and rotates it (:mod:`sandbox_lens.interp.model.rotate`): the same function, no
    variable on a coordinate; the card records how to find each named subspace again.
    """
    import torch

    tdtype = _torch_dtype(dtype)
    cfg, arrays, card = spec_parts(spec, dtype, use_attn_scale)  # checked before TransformerLens allocates the model
    if rotate is not None:
        from sandbox_lens.interp.model.rotate import rotate_state_dict, rotation  # off the command line's start-up

        pad, seed = int(rotate.get("pad", spec.d_model)), int(rotate.get("seed", 0))
        arrays = rotate_state_dict(arrays, rotation(spec.d_model, pad, seed))
        cfg = {**cfg, "d_model": spec.d_model + pad}
        card.options["rotate"] = {"d": spec.d_model, "pad": pad, "seed": seed, "labels": card.residual_labels}
        card.residual_labels = [f"rotated:{i}" for i in range(spec.d_model + pad)]
        card.notes = (card.notes + " " if card.notes else "") + (
            f"residual stream rotated into {spec.d_model + pad} dimensions (pad {pad}, seed {seed}): "
            "sandbox_lens.interp.model.rotate.subspace_basis finds each named subspace"
        )
    model = new_model(cfg)
    load_strict(model, {k: torch.tensor(v, dtype=tdtype) for k, v in arrays.items()})
    return carded(model, cfg, card)


@contextlib.contextmanager
def fused_layernorm(model):
    """Within the block, TransformerLens 3.9's ``LayerNorm`` modules of ``model`` compute with torch's fused
    ``layer_norm`` — the same function, (x − mean) / sqrt(biased var + ε) · w + b, in one kernel instead of
    seven passes over the residual stream — whenever nothing is hooked on their ``hook_scale`` /
    ``hook_normalized`` (then they fall back to TransformerLens's own forward, hooks and all). Training steps
    run 1.2× faster (``benchmarks/step_profile.py``, interleaved); weights agree with the unfused steps to float
    rounding. Other back ends and normalisations are left as they are (a hook-free twin fuses its own)."""
    if getattr(model, "hook_free", False):
        yield model
        return
    try:
        from transformer_lens.components import LayerNorm
    except ImportError:  # pragma: no cover - a back end without TransformerLens 3.9's components
        yield model
        return
    import torch

    def fused(self, x):
        if (
            self.hook_scale._forward_hooks
            or self.hook_normalized._forward_hooks
            or self.cfg.dtype not in (torch.float32, torch.float64)
        ):
            return LayerNorm.forward(self, x)
        return torch.nn.functional.layer_norm(x, (x.shape[-1],), self.w, self.b, self.eps)

    patched = [m for m in model.modules() if type(m) is LayerNorm]
    for m in patched:
        m.forward = fused.__get__(m)
    try:
        yield model
    finally:
        for m in patched:
            del m.forward
