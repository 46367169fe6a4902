"""The twin: a ``HookedTransformer`` (or the LSTM baseline) of a :class:`~sandbox_lens.interp.train.config.ModelShape`
for a task — built (:func:`build_twin`), started from a construction's weights and partly frozen
(:func:`initialise_and_freeze`), and loaded back from a run with a card (:func:`load_trained`) so the
probes and visualisers work on it like on a construction."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from sandbox_lens.interp.errors import CheckpointError, OptionError, SandboxError
from sandbox_lens.interp.model.card import ModelCard, TokenIO
from sandbox_lens.interp.model.device import current
from sandbox_lens.interp.model.hooked import BRIDGE_LACKS, backend, is_bridge, new_model, state_dict_arrays
from sandbox_lens.interp.model.saved import load_model
from sandbox_lens.interp.tasks.kinds import task_from_dict, task_kind
from sandbox_lens.interp.train.checkpoint import has_checkpoint, load_weights, read_checkpoint, task_label
from sandbox_lens.interp.train.config import MAX_N_CTX, ModelShape, TrainConfig

__all__ = [
    "build_twin",
    "hook_free_possible",
    "default_shape",
    "task_defaults",
    "load_trained",
    "initialise_and_freeze",
    "query_key_parameters",
    "open_model",
    "random_init",
]


def task_defaults(task) -> dict[str, Any]:
    """Steps, learning rate and target accuracy of a twin of ``task``'s kind (`interp train` and `interp
    compare`'s twin share them; the registry holds them)."""
    return dict(task_kind(task).train_defaults)


def default_shape(task, arch: str = "transformer") -> ModelShape:
    """The kind's twin shape (the thesis's Dyck models: 2 layers, 1 head, width 50; small GPT-style
    models otherwise); the thesis's LSTM baseline (embedding 64, hidden 128, 1 layer) for ``arch="lstm"``."""
    if arch == "lstm":
        return ModelShape(n_layers=1, d_model=64, n_heads=1, arch="lstm", hidden=128)
    return ModelShape(**task_kind(task).twin_shape)


def _sinusoid(n_ctx: int, d: int) -> np.ndarray:
    pos = np.arange(n_ctx)[:, None]
    freq = np.exp(-math.log(10000.0) * (np.arange(0, d, 2) / d))
    out = np.zeros((n_ctx, d))
    out[:, 0::2] = np.sin(pos * freq)
    out[:, 1::2] = np.cos(pos * freq)[:, : d // 2]
    return out


def hook_free_possible(shape: ModelShape) -> bool:
    """Whether the twin of ``shape`` can be built without TransformerLens, as
    :class:`~sandbox_lens.interp.model.hook_free.HookFreeTransformer` (the same parameters and initialisation as
    TransformerLens 3.9's ``HookedTransformer``): a transformer with standard positions (not ALiBi) while 3.9 is
    the installed back end — TransformerLens 4's bridge initialises its own way, so a seed keeps its twin there."""
    return shape.arch == "transformer" and shape.positional != "alibi" and backend() == "HookedTransformer"


def build_twin(task, shape: ModelShape, seed: int = 0, hook_free: bool = False):
    """A fresh twin of ``shape`` for ``task`` (seeded): a ``HookedTransformer`` (or ``TransformerBridge`` under
    TransformerLens 4.x) with the fixed position code the shape names, or the LSTM baseline. With ``hook_free``
    (where :func:`hook_free_possible`), the same twin bit for bit as a
    :class:`~sandbox_lens.interp.model.hook_free.HookFreeTransformer`: no hook points, no TransformerLens import."""
    import torch

    torch.manual_seed(seed)
    if shape.arch == "lstm":
        from sandbox_lens.interp.model.lstm import LSTMConfig, LSTMModel

        return LSTMModel(
            LSTMConfig(
                d_vocab=task.d_vocab,
                d_vocab_out=task.d_vocab_out,
                d_model=shape.d_model,
                hidden=shape.hidden or 128,
                n_layers=shape.n_layers,
                n_ctx=MAX_N_CTX,
            )
        ).to(current())

    n_ctx = shape.context(task)
    # the installed TransformerLens's model: a HookedTransformer (3.9) or a native TransformerBridge (4.x)
    cfg = {
        "n_layers": shape.n_layers,
        "d_model": shape.d_model,
        "n_heads": shape.n_heads,
        "d_head": shape.d_head or max(1, shape.d_model // shape.n_heads),
        "d_mlp": shape.d_mlp or 4 * shape.d_model,
        "n_ctx": n_ctx,
        "d_vocab": task.d_vocab,
        "d_vocab_out": task.d_vocab_out,
        "act_fn": "relu",
        "normalization_type": "LN" if shape.normalization == "LN" else None,
        "default_prepend_bos": False,
        "seed": seed,
        "dtype": "float32",
    }
    if shape.positional == "alibi":  # written only here: the other twins' configs keep their bits
        cfg["positional_embedding_type"] = "alibi"
    if hook_free and hook_free_possible(shape):
        from sandbox_lens.interp.model.hook_free import HookFreeTransformer

        model = HookFreeTransformer(cfg, device=current())
    else:
        model = new_model(cfg)
    model.sandbox_config = cfg  # what save_model writes: a trained twin saves like a construction
    if shape.positional != "learned":
        values = np.zeros((n_ctx, shape.d_model))
        if shape.positional == "sinusoidal":
            values = _sinusoid(n_ctx, shape.d_model)
        elif shape.positional == "linear":
            values[:, 0] = np.arange(n_ctx) / n_ctx
        with torch.no_grad():
            model.pos_embed.W_pos.copy_(torch.as_tensor(values, dtype=model.pos_embed.W_pos.dtype))
        model.pos_embed.W_pos.requires_grad_(False)
    return model


def query_key_parameters(model) -> list[tuple[str, Any]]:
    """Every head's query and key weights and biases: ``blocks.l.attn.W_Q``, ``W_K``, ``b_Q``, ``b_K`` of a
    ``HookedTransformer``, the ``attn.q`` and ``attn.k`` projections of TransformerLens 4's bridge."""
    out = []
    for name, p in model.named_parameters():
        parts = [x for x in name.split(".") if x != "_original_component"]
        if "attn" in parts[:-1] and parts[parts.index("attn") + 1] in ("W_Q", "W_K", "b_Q", "b_K", "q", "k"):
            out.append((name, p))
    return out


def initialise_and_freeze(model, config: TrainConfig, init_spec: Any) -> None:
    """Copy ``config.init_layers`` from the construction ``init_spec`` (its exact TransformerLens
    weights, same shapes) and freeze ``config.freeze``; a prefix that names no parameter is refused. With
    ``config.attention == "uniform"``, every head's query and key weights and biases are set to 0 and frozen."""
    import torch

    if (config.init_layers or config.freeze) and is_bridge(model):
        raise OptionError(BRIDGE_LACKS["init_from"])
    names = [n for n, _ in model.named_parameters()]
    for prefix in (*config.init_layers, *config.freeze):
        if not any(n == prefix or n.startswith(prefix + ".") for n in names):
            raise SandboxError(
                f"{prefix!r} names no parameter of the model (e.g. embed, pos_embed, blocks.0, blocks.1.attn, unembed)"
            )
    if config.init_layers:
        if init_spec is None:
            raise SandboxError(f"the config starts from {config.init!r}, but no construction was given")

        arrays = state_dict_arrays(init_spec)
        params = dict(model.named_parameters())
        with torch.no_grad():
            for name, p in params.items():
                if any(name == x or name.startswith(x + ".") for x in config.init_layers):
                    if name not in arrays or tuple(arrays[name].shape) != tuple(p.shape):
                        got = tuple(arrays[name].shape) if name in arrays else "nothing"
                        raise SandboxError(
                            f"cannot start {name} {tuple(p.shape)} from {config.init} ({got}): "
                            f"the twin needs the construction's shape"
                        )
                    p.copy_(torch.as_tensor(arrays[name], dtype=p.dtype))
    for name, p in model.named_parameters():
        if any(name == x or name.startswith(x + ".") for x in config.freeze):
            p.requires_grad_(False)
    if config.attention == "uniform":
        qk = query_key_parameters(model)
        if not qk:
            raise OptionError("--attention uniform sets a transformer's query and key weights; this model has none")
        with torch.no_grad():
            for _, p in qk:
                p.zero_()
                p.requires_grad_(False)


def load_trained(directory: str | Path, expect_task: dict[str, Any] | None = None, hook_free: bool = False):
    """The trained model of ``directory`` (its last checkpoint), with a ``card`` for the analyses.

    Args:
        directory: a run directory written by ``interp train`` or :func:`~sandbox_lens.interp.train.train`.
        expect_task: refuse a run whose task (its card's task dict) is another one.
        hook_free: where :func:`hook_free_possible`, load it without TransformerLens (no hook points: for saving
            or running it, not for the analyses)."""
    out = Path(directory)
    meta, tensors = read_checkpoint(out)
    if expect_task is not None and meta.get("task") != expect_task:
        raise CheckpointError(
            f"{out}: the checkpoint was trained on {meta.get('task', {}).get('kind')} "
            f"({task_label(meta.get('task'))}), not on the requested task"
        )
    task = task_from_dict(meta["task"])
    model = build_twin(task, ModelShape(**meta["shape"]), meta["config"]["seed"], hook_free=hook_free)
    # a run with a moving average keeps the averaged weights (the ones it was evaluated with)
    prefix = "ema." if any(k.startswith("ema.") for k in tensors) else "model."
    state = {k[len(prefix) :]: v for k, v in tensors.items() if k.startswith(prefix)}
    load_weights(model, state, out)
    model.card = _card(task, meta)
    if getattr(model, "hook_free", False):  # no string methods to serve (and transformers' tokenizer not imported)
        return model
    from sandbox_lens.interp.model.tokens import attach_tokenizer

    return attach_tokenizer(model)


def random_init(task: Any, shape: ModelShape, seed: int = 0):
    """A twin as initialised and never trained, with its card: the null every causal number sits beside."""
    from dataclasses import asdict

    from sandbox_lens.interp.model.tokens import attach_tokenizer

    model = build_twin(task, shape, seed)
    model.card = _card(task, {"shape": asdict(shape), "step": 0, "config": {"seed": seed}})
    model.card.notes = "randomly initialised, untrained (a null)"
    return attach_tokenizer(model)


def open_model(directory: str | Path, expect_construction: str | None = None):
    """The model in ``directory``, whichever wrote it: a run of `interp train` (its last checkpoint, the
    moving average when kept) or a model saved by `interp build` (or a finished twin's ``model.json``).

    Args:
        directory: a run directory, or a directory written by ``interp build`` / :func:`save_model`.
        expect_construction: refuse a model of another construction (``trained`` for a twin)."""

    if has_checkpoint(directory):
        if expect_construction not in (None, "trained"):
            raise CheckpointError(f"{directory} holds a trained twin, not a {expect_construction} construction")
        return load_trained(directory)

    return load_model(directory, expect_construction=expect_construction)


def _card(task, meta: dict[str, Any]):

    layout = task.token_layout()
    io = TokenIO(layout.prefix, layout.symbol_tokens)
    shape = ModelShape(**meta["shape"])
    # Learned positions past the training context never received a gradient: such a twin is only
    # defined up to its training length. Fixed codes (sinusoidal, linear, none) reach n_ctx.
    capacity = (MAX_N_CTX if shape.arch == "lstm" else shape.context(task)) - len(io.prefix)
    if task_kind(task).next_token:
        capacity += 1  # the last token (a read's answer, the closing bracket) is predicted, never read
    config = meta.get("config", {})
    # positions copied from a construction and frozen are the construction's: defined over the whole context
    frozen_positions = any(p in ("pos_embed", "pos_embed.W_pos") for p in config.get("freeze", ())) and any(
        p in ("pos_embed", "pos_embed.W_pos") for p in config.get("init_layers", ())
    )
    positional = "construction (frozen)" if frozen_positions else shape.positional
    trained_positions = positional == "learned" and shape.arch != "lstm"
    # learned positions are trained up to the training length, plus the random shifts when there are any
    reach = task.length + int(config.get("pos_shift", 0) or 0)
    max_length = min(max(task.length, capacity), reach) if trained_positions else max(task.length, capacity)
    return ModelCard(
        construction="trained",
        theorem="",
        task=task.to_dict(),
        io=io,
        max_length=max_length,
        verified_dtypes=("float32",),
        input_tokens=layout.input_names,
        output_names=layout.output_names,
        residual_labels=[],
        block_labels=[],
        attention_blocks=list(range(meta["shape"]["n_layers"])) if shape.arch == "transformer" else [],
        options={
            "step": meta["step"],
            "trained_length": task.length,
            "arch": shape.arch,
            "positional": positional if shape.arch == "transformer" else "none (recurrent)",
            "n_ctx": shape.context(task) if shape.arch == "transformer" else MAX_N_CTX,
            **({"alignment": config["alignment"]} if config.get("alignment") else {}),
        },
        notes="trained model"
        + (
            f" with the variables of {config['alignment']['construction']} imposed (--align)"
            if config.get("alignment")
            else ""
        ),
        variables=imposed_sites(
            config.get("alignment"), (meta.get("history") or [{}])[-1], config.get("align_target", 0.95)
        ),
    )


def imposed_sites(
    alignment: dict[str, Any] | None, last: dict[str, Any] | None = None, target: float = 0.95
) -> list[dict[str, Any]]:
    """The variable sites ``--align`` imposed on a twin, in the card's format (``sandbox_lens.interp.model.spec.variable_site``,
    with the coordinates ``dims`` instead of a named subspace). A site ``carries`` its variable only where the run's
    last evaluation measured its held-out IIA at ``target`` or above (``last``: that evaluation); otherwise its role
    is ``imposed`` (trained for, not reached), with the IIA measured in its note."""
    if not alignment:
        return []
    measured = (last or {}).get("imposed_iia") or {}
    out = []
    for v in alignment["variables"]:
        iia = measured.get(v["variable"])
        carried = iia is not None and iia >= target
        note = f"imposed by --align {alignment['construction']} (its {v['construction_site']})"
        if iia is not None:
            note += f"; held-out IIA {iia:.3f} at the last evaluation (target {target:g})"
        out.append(
            {
                "variable": v["variable"],
                "hook": v["hook"],
                "dims": list(v["dims"]),
                "subspace": [f"dims {v['dims'][0]}–{v['dims'][1] - 1}"],
                "role": "carries" if carried or not measured else "imposed",
                "note": note,
            }
        )
    return out
