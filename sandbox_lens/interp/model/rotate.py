"""Rotated constructions: the exact test bed for alignment search (`interp build --rotate`).

A construction's residual stream is a sum of named subspaces, one coordinate per label. Here it is
embedded in a wider stream (``pad`` more dimensions) and rotated: with P the d × (d + pad) matrix whose
rows are orthonormal (the first d rows of a random orthogonal matrix), every weight that *writes* the
residual (W_E, W_pos, W_O, b_O, W_out, b_out) is multiplied by P on the right and every weight that
*reads* it (W_Q, W_K, W_V, W_in, W_U) by Pᵀ on the left. Since P Pᵀ = I, each read sees x P Pᵀ = x: the
model computes exactly the same function (up to float rounding, which `verify` checks), but no variable
sits on a coordinate any more — each named subspace is now the span of its rows of P, dense in every
coordinate, with ``pad`` dimensions of nothing beside it. That is the known answer DAS must recover.

Constructions have no LayerNorm, which would not commute with the rotation (refused).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sandbox_lens.interp.errors import ConstructionError
from sandbox_lens.interp.streams import Stream, rng

__all__ = ["rotation", "rotate_state_dict", "subspace_basis", "READS", "WRITES"]

#: state-dict entries that write the residual stream (their last axis is the residual): multiplied by P
WRITES = ("embed.W_E", "pos_embed.W_pos", "attn.W_O", "attn.b_O", "mlp.W_out", "mlp.b_out")
#: entries that read it (the residual is the axis before the last, or the first for W_in / W_U): Pᵀ on the left
READS = ("attn.W_Q", "attn.W_K", "attn.W_V", "mlp.W_in", "unembed.W_U")


def rotation(d: int, pad: int, seed: int = 0) -> np.ndarray:
    """P, d × (d + pad), with orthonormal rows: the first d rows of a Haar-random orthogonal matrix of size
    d + pad (QR of a Gaussian matrix with the signs fixed), drawn from the ``ROTATION`` stream of ``seed``."""
    if d < 1 or pad < 0:
        raise ConstructionError(f"a rotation needs d ≥ 1 and pad ≥ 0, got d = {d}, pad = {pad}")
    n = d + pad
    g = rng(seed, Stream.ROTATION).standard_normal((n, n))
    q, r = np.linalg.qr(g)
    q = q * np.sign(np.diag(r))[None, :]  # Haar measure: fix the signs QR leaves free
    return q.T[:d]


def _ends(name: str, suffixes: tuple[str, ...]) -> bool:
    return any(name == s or name.endswith("." + s) for s in suffixes)


def rotate_state_dict(arrays: dict[str, np.ndarray], P: np.ndarray) -> dict[str, np.ndarray]:
    """The state dict of the rotated model (see the module docstring); every other entry is copied."""
    d, n = P.shape
    if any(".ln" in name or name.startswith("ln") for name in arrays):
        raise ConstructionError("a model with LayerNorm cannot be rotated exactly (LayerNorm does not commute with it)")
    out: dict[str, np.ndarray] = {}
    for name, w in arrays.items():
        w = np.asarray(w, dtype=np.float64)
        if _ends(name, WRITES):
            if w.shape[-1] != d:
                raise ConstructionError(f"{name}: last axis {w.shape[-1]}, expected the residual width {d}")
            out[name] = w @ P
        elif _ends(name, READS):  # the residual is the axis before the last: [heads, d, d_head] or [d, out]
            out[name] = np.einsum("dn,...dk->...nk", P, w)
        else:
            out[name] = w
    return out


def subspace_basis(card_options: dict[str, Any], labels: list[str], name: str) -> np.ndarray:
    """The rotated model's basis (rows, orthonormal) of the original named subspace ``name``: the rows of P at
    the coordinates whose labels belong to it (``name`` or ``name:…``); ``labels`` are the construction's."""
    spec = card_options.get("rotate")
    if not spec:
        raise ConstructionError("the model is not rotated (build it with --rotate)")
    P = rotation(int(spec["d"]), int(spec["pad"]), int(spec["seed"]))
    rows = [i for i, label in enumerate(labels) if label == name or label.startswith(name + ":")]
    if not rows:
        raise ConstructionError(
            f"no residual subspace {name!r} (the construction's are: "
            f"{', '.join(dict.fromkeys(label.split(':')[0] for label in labels))})"
        )
    return P[rows]
