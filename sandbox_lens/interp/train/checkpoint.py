"""Training checkpoints: one safetensors file holds the model, the optimizer state (and the moving
average, when kept) with the run's metadata in its header, so a kill at any instant leaves a whole
checkpoint; ``checkpoint.json`` is a readable copy of the header. Version-1 checkpoints (metadata in
``checkpoint.json`` only, with the file's sha256) still load."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from sandbox_lens.interp.errors import CheckpointError
from sandbox_lens.interp.files import atomic_write, remove_torn_writes
from sandbox_lens.interp.jsonfile import check_schema, parse_json, read_json
from sandbox_lens.interp.model.card import normalise_task
from sandbox_lens.interp.model.hooked import load_strict, tl_state_dict
from sandbox_lens.interp.tasks.kinds import task_from_dict
from sandbox_lens.interp.train.config import ModelShape

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "CKPT_WEIGHTS",
    "CKPT_META",
    "METRICS",
    "METRICS_SCHEMA",
    "SCHEMA",
    "has_checkpoint",
    "save_checkpoint",
    "read_checkpoint",
    "restore",
    "load_weights",
    "task_label",
]

FORMAT = "sandbox-lens-training"
FORMAT_VERSION = 2  # 2: the metadata also travels in the safetensors header, with a digest of the tensors
HEADER_KEY = "sandbox_lens_checkpoint"
CKPT_WEIGHTS, CKPT_META, METRICS = "checkpoint.safetensors", "checkpoint.json", "metrics.json"

#: JSON Schema of a finished run's ``metrics.json`` (what a sweep, a comparison and a report read of it).
METRICS_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "sandbox-lens training run metrics",
    "type": "object",
    "required": ["task", "steps", "final_accuracy", "history"],
    "properties": {
        "task": {"type": "object"},
        "shape": {"type": "object"},
        "config": {"type": "object"},
        "steps": {"type": "integer", "minimum": 0},
        "final_accuracy": {"type": ["number", "null"]},
        "best_accuracy": {"type": ["number", "null"]},
        "wall_seconds": {"type": "number"},
        "history": {"type": "array", "items": {"type": "object"}},
    },
}

_WIDTH = {"type": ["integer", "null"], "minimum": 1, "maximum": 2**16}
#: JSON Schema of a checkpoint's metadata (the safetensors header, or ``checkpoint.json`` for version 1): checked
#: before the task, shape or config is used, so a damaged or edited header is one line, not a KeyError.
SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "sandbox-lens training checkpoint",
    "type": "object",
    "required": ["format", "task", "shape", "config", "step", "history", "wall_seconds"],
    "properties": {
        "format": {"const": FORMAT},
        "task": {"type": "object", "required": ["kind"]},
        "shape": {
            "type": "object",
            "properties": {k: _WIDTH for k in ("n_layers", "d_model", "n_heads", "d_head", "d_mlp", "n_ctx", "hidden")},
        },
        "config": {"type": "object", "required": ["seed"], "properties": {"seed": {"type": "integer", "minimum": 0}}},
        "step": {"type": "integer", "minimum": 0},
        "history": {"type": "array", "items": {"type": "object"}},
        "wall_seconds": {"type": "number", "minimum": 0},
        "threads": {"type": "integer", "minimum": 1},
    },
}


# -- checkpoints -----------------------------------------------------------------------------------
def _tensor_digest(tensors: dict[str, Any]) -> str:
    """sha256 over the names and bytes of ``tensors`` in name order (what a checkpoint's header vouches for)."""
    import torch

    h = hashlib.sha256()
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous().reshape(-1)
        h.update(f"{name}:{t.dtype}:{tuple(tensors[name].shape)};".encode())
        h.update(t.view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def save_checkpoint(out: Path, model, opt, meta: dict[str, Any], ema=None) -> None:
    """One atomic file holds the weights, the optimizer state and the metadata (in the safetensors header),
    so a kill at any instant leaves either the previous checkpoint or this one, never half of each.
    ``checkpoint.json`` is a readable copy of the metadata, written after."""
    import torch
    from safetensors.torch import save

    # TransformerLens 3.9 names on either back end: a twin trained on the bridge loads under 3.9 too
    # CPU copies: a run trained on one device resumes on any other
    tensors = {f"model.{k}": v.detach().cpu().contiguous().clone() for k, v in tl_state_dict(model).items()}
    if ema is not None:
        tensors.update({f"ema.{k}": v.detach().cpu().contiguous().clone() for k, v in ema.state.items()})
    for i, state in opt.state_dict()["state"].items():
        for name, value in state.items():
            tensors[f"optim.{i}.{name}"] = torch.as_tensor(value).detach().cpu().contiguous().clone()
    meta = dict(meta, format=FORMAT, version=FORMAT_VERSION, tensors_sha256=_tensor_digest(tensors))
    atomic_write(out / CKPT_WEIGHTS, save(tensors, metadata={HEADER_KEY: json.dumps(meta)}))
    atomic_write(out / CKPT_META, json.dumps(meta, indent=1).encode())


def has_checkpoint(directory: str | Path) -> bool:
    """Whether ``directory`` holds a training checkpoint to resume."""
    return (Path(directory) / CKPT_WEIGHTS).exists() or (Path(directory) / CKPT_META).exists()


def _header_meta(data: bytes) -> dict[str, Any] | None:
    """The metadata a checkpoint carries in its safetensors header (None for version-1 checkpoints)."""
    try:
        n = int.from_bytes(data[:8], "little")
        header = parse_json(data[8 : 8 + n], "checkpoint header") if 0 < n <= len(data) - 8 else {}
        text = (header.get("__metadata__") or {}).get(HEADER_KEY) if isinstance(header, dict) else None
        return parse_json(text, "checkpoint metadata") if text else None
    except (ValueError, UnicodeDecodeError, AttributeError):
        return None


def read_checkpoint(out: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """A run's checkpoint: (its metadata, its tensors); a missing or damaged checkpoint is a :class:`CheckpointError`."""
    from safetensors.torch import load

    try:
        data = (out / CKPT_WEIGHTS).read_bytes()
    except FileNotFoundError as e:
        raise CheckpointError(f"{out}: no checkpoint ({Path(e.filename).name} missing)") from None
    meta = _header_meta(data)
    if meta is None:  # version 1: the metadata lives only in checkpoint.json, with the file's sha256
        try:
            meta = read_json(out / CKPT_META, error=CheckpointError, what="checkpoint metadata")
        except FileNotFoundError as e:
            raise CheckpointError(f"{out}: no checkpoint ({Path(e.filename).name} missing)") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise CheckpointError(f"{out}: not a sandbox-lens training checkpoint")
    check_schema(meta, SCHEMA, f"{out / CKPT_WEIGHTS} (its metadata)", CheckpointError)
    if "tensors_sha256" not in meta and hashlib.sha256(data).hexdigest() != meta.get("sha256"):
        raise CheckpointError(f"{out / CKPT_WEIGHTS}: checksum mismatch (corrupt or partly written file)")
    try:
        tensors = load(data)
    except Exception as e:  # safetensors raises its own error types
        raise CheckpointError(f"{out / CKPT_WEIGHTS}: unreadable ({e})") from None
    if "tensors_sha256" in meta and _tensor_digest(tensors) != meta["tensors_sha256"]:
        raise CheckpointError(f"{out / CKPT_WEIGHTS}: checksum mismatch (corrupt or partly written file)")
    if isinstance(meta.get("task"), dict):
        meta["task"] = normalise_task(meta["task"])  # checkpoints written when FFL was "flipflop"
    if isinstance(meta.get("shape"), dict):
        try:  # fields added since (e.g. n_ctx) take their defaults
            meta["shape"] = asdict(ModelShape(**meta["shape"]))
        except TypeError as e:
            raise CheckpointError(f"{out / CKPT_META}: unreadable model shape ({e})") from None
    return meta, tensors


def restore(out: Path, model, opt, ema, identity: dict[str, Any]) -> tuple[int, list[dict[str, Any]], float]:
    """Load ``out``'s checkpoint into the model, the optimizer and the moving average, after checking that it
    is the same run (``identity``); (step, history, wall seconds) to continue from."""
    import torch

    meta, tensors = read_checkpoint(out)
    for name in (CKPT_WEIGHTS, CKPT_META):  # a save that SIGKILL cut short; the checkpoint itself is whole
        remove_torn_writes(out / name)
    for key, value in identity.items():
        if meta.get(key) != value:
            raise CheckpointError(
                f"{out}: cannot resume, the checkpoint has a different {key} "
                f"({task_label(meta.get('task')) if key == 'task' else meta.get(key)})"
            )
    load_weights(model, {k[6:]: v for k, v in tensors.items() if k.startswith("model.")}, out)
    state: dict[int, dict[str, Any]] = {}
    for k, v in tensors.items():
        if k.startswith("optim."):
            _, i, name = k.split(".", 2)
            state.setdefault(int(i), {})[name] = v
    sd = opt.state_dict()
    sd["state"] = state
    opt.load_state_dict(sd)
    if ema is not None:
        own = model.state_dict()
        saved = {k[4:]: v for k, v in tensors.items() if k.startswith("ema.")}

        # every parameter's average from the checkpoint, the mask buffers the model's own (a TransformerLens model
        # holds them, a hook-free twin does not)
        ema.state = {
            k: (own[k] if _mask_buffer(k) else saved[k].to(own[k].device)).clone()
            for k in own
            if _mask_buffer(k) or k in saved
        }
        ema.state.update({k: v.clone() for k, v in saved.items() if k not in own and not _mask_buffer(k)})
    if meta.get("threads", torch.get_num_threads()) != torch.get_num_threads():
        import warnings

        warnings.warn(
            f"{out} was trained with {meta['threads']} torch thread(s), resumed with "
            f"{torch.get_num_threads()}: sums split differently, so the weights will not match an "
            f"uninterrupted run bit for bit (use --threads {meta['threads']})",
            stacklevel=3,
        )
    return meta["step"], meta["history"], meta["wall_seconds"]


def _mask_buffer(name: str) -> bool:
    """Whether a state-dict name is one of TransformerLens 3.9's causal-mask buffers (older checkpoints hold them;
    a hook-free twin has none): never weights, always the model's own."""
    return name.endswith((".attn.mask", ".attn.IGNORE"))


def load_weights(model, state: dict[str, Any], where: Path) -> None:
    """Checkpoint weights into ``model``: TransformerLens 3.9 names (what is saved now, from either back
    end; older checkpoints also hold the causal-mask buffers) or the back end's own names (an EMA state)."""

    tl_names = any(k == "embed.W_E" or ".attn.W_Q" in k for k in state)
    try:
        if tl_names:
            params = {k: v for k, v in state.items() if not _mask_buffer(k)}
            load_strict(model, params)
        else:
            model.load_state_dict(state, strict=True)
    except (RuntimeError, CheckpointError) as e:
        raise CheckpointError(f"{where}: weights do not fit the recorded shape ({str(e).splitlines()[0]})") from None


def task_label(d: Any) -> str:
    """A task dict's display name, or a description of it when it is not a valid task."""
    try:
        return task_from_dict(d).name
    except Exception:
        return "unknown task"
