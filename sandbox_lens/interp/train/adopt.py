"""Bring your own model: a transformer trained elsewhere, in plain TransformerLens, given the card every analysis
reads (verify, the probes, ``interp align``, circuits, evaluate, save / load) — the same card a twin trained here
gets.

What a model must be: a TransformerLens ``HookedTransformer`` (or a 4.x ``TransformerBridge``), or a state dict
and its ``HookedTransformerConfig`` on disk; what it must compute: the task's outputs as its first
``d_vocab_out`` logits, in the task's order (``task.token_layout().output_names``), read at the token before
each position's next input; what it reads: ``prefix + [symbol_tokens[σ] for σ in the word]`` (defaults: the
layout a twin trained here uses — token 0 the BOS, symbol σ token σ + 1).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sandbox_lens.interp.errors import SandboxError
from sandbox_lens.interp.jsonfile import read_json
from sandbox_lens.interp.model.card import ModelCard, TokenIO
from sandbox_lens.interp.model.hooked import load_strict, new_model
from sandbox_lens.interp.tasks.kinds import task_kind

__all__ = ["adopt", "load_adopted", "AdoptError"]


class AdoptError(SandboxError, ValueError):
    """A model that does not fit the task it is brought in for (one line)."""


def adopt(
    model: Any,
    task: Any,
    *,
    prefix: Sequence[int] | None = None,
    symbol_tokens: Sequence[int] | None = None,
    name: str = "",
) -> Any:
    """``model`` with a card for ``task`` (an :class:`~sandbox_lens.interp.tasks.batches.AutomatonTask`,
    ``DyckTask``, ``FFLTask``: what it was trained on, at its training length), checked first: its vocabulary holds
    every token the layout uses, it has a logit per output class, its context holds a whole input.

    Args:
        model: a TransformerLens ``HookedTransformer`` (or a 4.x ``TransformerBridge``).
        task: the task it was trained on, at its training length.
        prefix: the tokens before the first symbol (default: the task's layout, a BOS token).
        symbol_tokens: the token of each input symbol (default: the task's layout).
        name: what reports call it.

    Returns:
        The same model object, with a ``card`` (every analysis accepts it; ``save_model`` writes it like a
        twin)."""
    from sandbox_lens.interp.model.tokens import attach_tokenizer

    cfg = getattr(model, "cfg", None)
    if cfg is None or not hasattr(model, "run_with_hooks"):
        raise AdoptError(
            f"adopt takes a TransformerLens HookedTransformer or TransformerBridge, not {type(model).__name__}"
        )
    layout = task.token_layout()
    io = TokenIO(
        tuple(int(t) for t in (layout.prefix if prefix is None else prefix)),
        tuple(int(t) for t in (layout.symbol_tokens if symbol_tokens is None else symbol_tokens)),
    )
    if len(io.symbol_tokens) != len(layout.symbol_tokens):
        raise AdoptError(
            f"{task.name} has {len(layout.symbol_tokens)} input symbols "
            f"({', '.join(layout.input_names[len(layout.prefix) :])}); symbol_tokens gives {len(io.symbol_tokens)}"
        )
    used = [*io.prefix, *io.symbol_tokens]
    if min(used) < 0 or max(used) >= cfg.d_vocab:
        raise AdoptError(
            f"the token layout uses token {max(used)} but the model's vocabulary has {cfg.d_vocab} "
            "(d_vocab); give the tokens it was trained with (prefix=, symbol_tokens=; --prefix, --symbol-tokens)"
        )
    if cfg.d_vocab_out < len(layout.output_names):
        raise AdoptError(
            f"{task.name} has {len(layout.output_names)} output classes but the model has "
            f"{cfg.d_vocab_out} logits (d_vocab_out)"
        )
    kind = task_kind(task)
    reads = len(io.prefix) + task.length - (1 if kind.next_token else 0)
    if cfg.n_ctx < reads:
        raise AdoptError(
            f"an input of {task.name} at length {task.length} is {reads} tokens; the model's context "
            f"(n_ctx) is {cfg.n_ctx}"
        )
    model.card = ModelCard(
        construction="trained",
        theorem="",
        task=task.to_dict(),
        io=io,
        max_length=task.length,
        verified_dtypes=("float32",),
        input_tokens=layout.input_names,
        output_names=layout.output_names,
        residual_labels=[],
        block_labels=[],
        attention_blocks=list(range(cfg.n_layers)),
        options={
            "step": None,
            "trained_length": task.length,
            "arch": "transformer",
            "positional": "learned",
            "n_ctx": int(cfg.n_ctx),
            "adopted": name or True,
        },
        notes=f"a model trained outside sandbox-lens{f' ({name})' if name else ''}, adopted for {task.name}",
        variables=[],
    )
    model.sandbox_config = _config(cfg)
    return attach_tokenizer(model)


def _config(cfg: Any) -> dict[str, Any]:
    """What ``save_model`` writes to rebuild the model (the fields :func:`~sandbox_lens.interp.train.twin.build_twin`
    sets, read off the model's own config)."""
    keys = (
        "n_layers",
        "d_model",
        "n_heads",
        "d_head",
        "d_mlp",
        "n_ctx",
        "d_vocab",
        "d_vocab_out",
        "act_fn",
        "normalization_type",
        "positional_embedding_type",
        "attn_only",
        "default_prepend_bos",
    )
    out = {k: getattr(cfg, k) for k in keys if hasattr(cfg, k)}
    out["dtype"] = "float32"
    return out


def load_adopted(state_dict: str | Path, config: str | Path, task: Any, **kwargs: Any) -> Any:
    """A TransformerLens state dict (``.pt`` / ``.pth`` from ``torch.save(model.state_dict())``, or
    ``.safetensors``) and its ``HookedTransformerConfig`` as JSON (``json.dump(model.cfg.to_dict())``-like: the
    constructor's keyword arguments), built with the installed TransformerLens and :func:`adopt`-ed.

    Args:
        state_dict: the weights file.
        config: the config JSON file.
        task: the task it was trained on.
        **kwargs: :func:`adopt`'s keywords (``prefix``, ``symbol_tokens``, ``name``)."""
    import torch

    try:
        cfg = read_json(config, error=AdoptError, what="a HookedTransformerConfig")
    except OSError as e:
        raise AdoptError(f"{config}: not a readable JSON config ({e.strerror or e})") from None
    if not isinstance(cfg, dict) or not all(k in cfg for k in ("n_layers", "d_model", "n_ctx", "d_vocab")):
        raise AdoptError(f"{config}: a HookedTransformerConfig needs n_layers, d_model, n_ctx and d_vocab")
    cfg = {k: v for k, v in cfg.items() if k in _CONFIG_KEYS}
    path = Path(state_dict)
    try:
        if path.suffix == ".safetensors":
            from safetensors.torch import load_file

            weights = load_file(str(path))
        else:
            weights = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 - torch and safetensors raise many kinds; one line names the file
        raise AdoptError(f"{path}: not a readable state dict ({type(e).__name__})") from None
    try:
        model = new_model({"dtype": "float32", **cfg})
    except Exception as e:  # noqa: BLE001 - TransformerLens validates configs with asserts and various errors
        raise AdoptError(
            f"{config}: not a valid HookedTransformerConfig ({str(e).splitlines()[0] if str(e) else type(e).__name__})"
        ) from None
    weights = {k: v for k, v in weights.items() if not k.endswith((".mask", ".IGNORE"))}  # buffers: the model's own
    load_strict(model, weights)
    model.eval()
    return adopt(model, task, **kwargs)


#: the HookedTransformerConfig fields a saved config may carry through (the rest are derived or runtime state)
_CONFIG_KEYS = {
    "n_layers",
    "d_model",
    "n_heads",
    "d_head",
    "d_mlp",
    "n_ctx",
    "d_vocab",
    "d_vocab_out",
    "act_fn",
    "normalization_type",
    "positional_embedding_type",
    "attn_only",
    "default_prepend_bos",
    "seed",
    "init_weights",
    "original_architecture",
    "use_attn_scale",
    "final_rms",
    "parallel_attn_mlp",
    "rotary_dim",
    "use_hook_tokens",
    "gated_mlp",
    "attn_types",
    "window_size",
}
