"""Saving and loading built models: ``model.safetensors`` (weights) + ``model.json`` (config, card, checksum).

Format 3 keeps ``config`` to what ``HookedTransformerConfig(**config)`` accepts — the dtype, a string
in JSON, sits beside it — so plain TransformerLens loads a saved model in three lines (README,
"Loading a saved model without sandbox-lens"). Format 4 adds ``card_sha256``, a checksum of the config,
dtype and card, so an edited card (another construction's name, another task) is refused like damaged
weights. Formats 3, 2 (dtype inside ``config``) and 1 (an ``automaton`` field beside the task) are still
read. ``model.json`` is checked against :data:`SCHEMA` before anything in it is used.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from sandbox_lens.interp.errors import CheckpointError
from sandbox_lens.interp.files import atomic_write_all
from sandbox_lens.interp.jsonfile import check_schema, read_json
from sandbox_lens.interp.model.card import ModelCard
from sandbox_lens.interp.model.hooked import carded, load_strict, new_model, tl_state_dict

__all__ = ["save_model", "load_model", "WEIGHTS_FILE", "META_FILE"]

FORMAT = "sandbox-lens-model"
FORMAT_VERSION = 4
READABLE_VERSIONS = (1, 2, 3, 4)
WEIGHTS_FILE = "model.safetensors"
META_FILE = "model.json"

#: JSON Schema of ``model.json`` (every format version): what is read before the card and config are used.
SCHEMA: dict = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "sandbox-lens saved model",
    "type": "object",
    "required": ["format", "format_version", "config", "card", "weights_sha256"],
    "properties": {
        "format": {"const": FORMAT},
        "format_version": {"enum": list(READABLE_VERSIONS)},
        "config": {
            "type": "object",
            "required": ["n_layers", "d_model", "n_ctx", "d_vocab"],
            "properties": {
                k: {"type": "integer", "minimum": 1, "maximum": 2**20}
                for k in ("n_layers", "d_model", "n_ctx", "d_vocab")
            },
        },
        "dtype": {"enum": ["float32", "float64", "float16", "bfloat16"]},
        "card": {
            "type": "object",
            "required": ["construction", "theorem", "io", "max_length"],
            "properties": {
                "construction": {"type": "string", "maxLength": 200},
                "theorem": {"type": "string"},
                "task": {"type": "object"},
                "io": {"type": "object"},
                "max_length": {"type": "integer", "minimum": 1},
                "verified_dtypes": {"type": "array", "items": {"type": "string"}},
                "input_tokens": {"type": "array", "items": {"type": "string"}},
                "output_names": {"type": "array", "items": {"type": "string"}},
                "attention_blocks": {"type": "array", "items": {"type": "integer"}},
                "options": {"type": "object"},
                "variables": {"type": "array", "items": {"type": "object"}},
            },
        },
        "weights_sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
        "card_sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
    },
    "if": {"properties": {"format_version": {"const": 4}}},
    "then": {"required": ["card_sha256", "dtype"]},
}


def _card_digest(meta: dict) -> str:
    """The checksum of what ``model.json`` says about the weights: config, dtype and card, in canonical JSON."""
    described = {k: meta.get(k) for k in ("config", "dtype", "card")}
    return hashlib.sha256(json.dumps(described, sort_keys=True, ensure_ascii=True).encode()).hexdigest()


def save_model(model, directory: str | Path) -> Path:
    """Save a built model: ``model.safetensors`` (weights) + ``model.json`` (config, card, checksum).

    Both files are written atomically; ``model.json`` is written last, so a directory with a
    valid ``model.json`` always has the weights it describes.

    Args:
        model: a model built, trained or adopted by sandbox-lens (it carries a ``card``).
        directory: where to write (created; an existing saved model there is replaced whole).

    Returns:
        ``directory``.
    """
    from safetensors.torch import save

    if not hasattr(model, "card") or not hasattr(model, "sandbox_config"):
        raise CheckpointError("only models built by sandbox-lens (to_hooked / load_model) can be saved here")
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)

    params = {
        name: p.detach().cpu().contiguous() for name, p in tl_state_dict(model).items()
    }  # 3.9 names on either back end
    blob = save(params)
    meta = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        # TransformerLens's config takes a torch.dtype; JSON holds its name, so it goes beside the config
        "config": {k: v for k, v in model.sandbox_config.items() if k != "dtype"},
        "dtype": str(model.sandbox_config.get("dtype", "float32")).removeprefix("torch."),
        "card": model.card.to_dict(),
        "weights_sha256": hashlib.sha256(blob).hexdigest(),
    }
    meta = json.loads(json.dumps(meta))  # the digest is of what a reader will see
    meta["card_sha256"] = _card_digest(meta)
    # one unit: neither file is replaced unless both were written whole (a full disk leaves the old model)
    atomic_write_all([(out / WEIGHTS_FILE, blob), (out / META_FILE, (json.dumps(meta, indent=2) + "\n").encode())])
    return out


def load_model(directory: str | Path, expect_construction: str | None = None):
    """Load a model saved by :func:`save_model`, checking format, checksum and shapes.

    Args:
        directory: the saved model's directory.
        expect_construction: refuse a model of another construction."""
    from safetensors.torch import load

    d = Path(directory)
    meta_path, weights_path = d / META_FILE, d / WEIGHTS_FILE
    if not meta_path.is_file():
        raise CheckpointError(f"no saved model in {d} ({META_FILE} missing)")
    meta = read_json(meta_path, error=CheckpointError, what="a saved model's model.json")
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise CheckpointError(f"{meta_path} is not a sandbox-lens model file")
    if meta.get("format_version") not in READABLE_VERSIONS:
        raise CheckpointError(f"{meta_path}: unsupported format version {meta.get('format_version')}")
    check_schema(meta, SCHEMA, str(meta_path), CheckpointError)
    if meta["format_version"] >= 4 and _card_digest(meta) != meta["card_sha256"]:
        raise CheckpointError(
            f"{meta_path} was edited after it was saved (its card or config no longer matches card_sha256); "
            "rebuild or retrain the model"
        )
    try:
        card = ModelCard.from_dict(meta["card"])
        cfg = dict(meta["config"])
        if meta["format_version"] >= 3:
            cfg["dtype"] = meta["dtype"]
    except (KeyError, TypeError, ValueError) as e:
        raise CheckpointError(f"{meta_path} is incomplete: {e}") from None
    if expect_construction is not None and card.construction != expect_construction:
        raise CheckpointError(f"{d} holds a {card.construction!r} model, not {expect_construction!r}")
    if not weights_path.is_file():
        raise CheckpointError(f"{weights_path} is missing")
    blob = weights_path.read_bytes()
    if hashlib.sha256(blob).hexdigest() != meta.get("weights_sha256"):
        raise CheckpointError(f"{weights_path} is corrupt (checksum mismatch)")
    try:
        tensors = load(blob)
    except Exception as e:  # safetensors raises its own error types
        raise CheckpointError(f"{weights_path} is corrupt: {e}") from None
    try:
        model = new_model(cfg)
    except Exception as e:  # TransformerLens validates configs with asserts and various errors
        raise CheckpointError(f"{meta_path} has an invalid config: {e}") from None
    load_strict(model, tensors)
    return carded(model, cfg, card)
