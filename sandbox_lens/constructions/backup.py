"""The ``backup`` gadget (``negatives=backup``): the construction's whole token input carried by two redundant
heads, either of which suffices under zero ablation — a backup whose effect is the construction's own.

The token embedding's varying coordinates are moved onto fresh ones (``bk_emb``), shifted to be nonnegative, and
one block is put in front of the construction:

* two heads (the two *routes*) attend to their own position — a score rising by :data:`SELF_GAP` per position, so
  every other key's weight is below e⁻⁴⁰ and rounds away next to 1 in float32 — and copy ``bk_emb`` into their own
  coordinates ``bk_a`` and ``bk_b``;
* the block's MLP writes their maximum back where the construction reads its token input, coordinate by
  coordinate, as ReLU(a) + ReLU(b − a) (exact for a, b ≥ 0), with the shift restored by the embedding.

On every input a = b = the embedding, so the model computes the construction exactly (verified on every family).
Zeroing one route's output leaves the maximum as it was, since the other route is nonnegative; zeroing both takes
every token's identity from the construction — an effect as large as the construction's input, not a small
read-out beside it. Under resample each route alone delivers the corrupted token, and the maximum of two
different tokens' rows is neither: each route is needed. The routes are recorded (``negative_routes``) so the
ground truth scores them as one OR item at the zero level (:mod:`sandbox_lens.interp.circuits.levels`).

The routes' query and key inputs are not protected by the OR: zeroing either spreads the head's attention over
every position, and the maximum of that average and the other route's copy is not the token. Only a whole route
is redundant.
"""

from __future__ import annotations

import numpy as np

from sandbox_lens.interp.errors import ConstructionError
from sandbox_lens.interp.model.spec import MLP, Block, ConstructionSpec, Head

__all__ = ["SELF_GAP", "add_backup_block"]

#: How far a position's own key beats the one before it (nats of score): e⁻⁴⁰ ≈ 4·10⁻¹⁸.
SELF_GAP = 40.0


def add_backup_block(spec: ConstructionSpec, one: str = "neg_one") -> dict:
    """Reroute ``spec``'s token input (in place) through a new block 0 of two redundant self-attending heads and a
    maximum (see the module docstring); ``one`` names a coordinate the embedding sets to 1 on every token. Returns
    the OR group to record: the two routes' nodes, their reader and the ablation under which either suffices.
    Every later block moves up one (its variable sites with it)."""
    layout = spec.layout
    varying = np.flatnonzero(spec.W_E.max(axis=0) - spec.W_E.min(axis=0) > 0)
    if not len(varying):
        raise ConstructionError(f"{spec.name}: no coordinate of the token embedding depends on the token")
    labels = layout.labels()
    names = [labels[i] for i in varying]
    for name in ("bk_emb", "bk_a", "bk_b"):
        layout.add(name, len(varying), names)
    layout.add("bk_pos")
    spec.widen()
    shift = spec.W_E[:, varying].min(axis=0)
    spec.W_E[:, layout["bk_emb"]] = spec.W_E[:, varying] - shift
    spec.W_E[:, varying] = shift  # the same on every token: the constant part stays where it was
    n_ctx = spec.W_pos.shape[0]
    spec.W_pos[:, layout.index("bk_pos")] = np.arange(n_ctx) / n_ctx
    routes = [_route_head(layout, c, n_ctx, one) for c in "ab"]
    maximum = MLP(layout, "backup maximum")
    for k, i in enumerate(varying):
        target = layout.locate(int(i))
        maximum.unit({("bk_a", k): 1.0}, 0.0, {target: 1.0})
        maximum.unit({("bk_b", k): 1.0, ("bk_a", k): -1.0}, 0.0, {target: 1.0})
    spec.blocks.insert(0, Block(routes, maximum, "backup routes"))
    spec.variables = [{**v, "block": v["block"] + 1} if v["block"] >= 0 else v for v in spec.variables]
    return {"routes": [["a0.0"], ["a0.1"]], "reader": "m0", "ablation": "zero"}


def _route_head(layout, route: str, n_ctx: int, one: str) -> Head:
    """One route: attends to its own position (score SELF_GAP · position) and copies ``bk_emb`` into ``bk_<route>``."""
    return Head(layout, f"backup {route}").qk(one, "bk_pos", SELF_GAP * n_ctx).copy("bk_emb", f"bk_{route}")
