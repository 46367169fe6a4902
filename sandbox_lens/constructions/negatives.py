"""Informative negatives: parts added to any construction that keep it exact but are *not* in its
circuit, so that a circuit-discovery method can be wrong (``negatives=`` on every builder).

Each gadget reads word information (a direction that tells every symbol's embedding apart) and is
written in block 0, on fresh residual coordinates, so the construction's own parts never see it — all but
the backup, which carries the construction's own input:

* ``distractor`` — a head that attends by the word and copies it, and an MLP unit that reads it,
  both writing into ``neg_trash``, which nothing reads. Edges into them are structural but dead.
* ``cancel`` — two heads with the same pattern (it depends on the word) whose outputs are exact
  negatives (W_O and −W_O, rank one), both writing ``neg_signal``, which the unembedding reads.
  The sum is exactly 0 on every input, so the model is unchanged; patching *one* of the two moves
  the logits. A method that patches one edge at a time sees two important heads; jointly they do
  nothing. The ground truth detects the pair from the weights (equal W_Q·W_Kᵀ, opposite W_V·W_O).
* ``backup`` — two routes, either sufficient, that carry the construction's *whole token input*: a block put in
  front of the construction, whose two self-attending heads copy the token and whose MLP takes their maximum
  (:mod:`sandbox_lens.constructions.backup`). Under zero ablation it is an OR (zeroing one route changes nothing,
  zeroing both removes the input), recorded in the options as ``negative_routes`` so the ground truth scores it
  as one item (``sandbox_lens.interp.circuits.levels``). It is in the circuit, not beside it; the other gadgets
  join its block.
* ``constant`` — the "looks important" trap: a head whose attention is sharp and depends on the
  word but whose value reads ``neg_one`` (1 at every token), so its output is the constant 1 whatever
  it attends to. It writes ``neg_bias``, which the unembedding reads, and the unembedding's bias
  takes the constant back. Resampling cannot move it; zero ablation can (it belongs to the zero
  ablation's ground truth only).

**Dials** (:class:`Dials`, each a construction option) set the gadgets' constants, so a ranking of circuit
methods is reported across a sweep of each rather than at one hand-set value, each with a known effect:

* ``negative_gain`` — how strongly the unembedding reads the cancelling pair's and the constant head's
  outputs (default 20, relative to its largest weight): the size of each cancelling head's effect alone;
* ``negative_sharpness`` — the gadget heads' attention scale (default 8). Large, the softmax is pinned at
  its argmax: a patched query or key input still moves the pattern (patching sees it), but the gradient
  through the softmax vanishes (attribution does not);

A dial needs its gadget (``negative_gain`` needs ``cancel`` or ``constant``, ``negative_sharpness`` any but ``backup``,
whose heads must attend exactly to their own position):
asked for alone, it is refused in one line. Both keep every family exact over their whole range
(``tests/constructions/test_dials.py``), because neither changes what the gadgets sum to. A dial that does —
a cancelling pair off by a margin — moves the construction's own logits by its
size times the unembedding's largest weight, which breaks the prefix scan at a margin of 0.01 (measured);
it needs a scale relative to the construction's logit gaps and is not offered yet.

**Switches** (:data:`SWITCHES`) are gadgets a sweep turns off (0) and on (1) beside the others, like a dial: the
``backup``. :func:`dial_options` gives the construction options of one value of any dial or switch.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from sandbox_lens.constructions.backup import add_backup_block
from sandbox_lens.interp.errors import ConstructionError
from sandbox_lens.interp.model.spec import MLP, ConstructionSpec, Head

__all__ = ["NEGATIVES", "DIALS", "SWITCHES", "Dials", "add_negatives", "dial_options"]

NEGATIVES = ("distractor", "cancel", "constant", "backup")
#: The attention scale of the gadgets' word-dependent patterns (sharp, not saturated).
SHARP = 8.0
#: How strongly the unembedding reads the gadgets' outputs, relative to its largest weight: enough that
#: patching one head of the cancelling pair moves the logit difference by about a tenth of its range.
GAIN = 20.0


@dataclass(frozen=True)
class Dials:
    """The gadgets' constants (see the module docstring); the defaults are the gadgets' own."""

    gain: float = GAIN
    sharpness: float = SHARP


#: option name → (Dials field, the gadgets it dials (any one suffices), lowest, highest, what it sets).
DIALS: dict[str, tuple[str, tuple[str, ...], float, float, str]] = {
    "negative_gain": ("gain", ("cancel", "constant"), 1e-3, 1e3, "the read-out of the cancelling and constant heads"),
    "negative_sharpness": ("sharpness", NEGATIVES[:3], 1e-3, 1e4, "the gadget heads' attention scale"),
}


#: gadget → what it adds: the gadgets a sweep turns off (0) and on (1) beside the others, like a dial.
SWITCHES: dict[str, str] = {"backup": "the construction's token input through two redundant routes"}


def dial_options(negatives: str, dial: str, value: float) -> tuple[tuple[str, float] | None, dict[str, object]]:
    """(key, construction options) of one value of one dial beside ``negatives`` (comma-separated gadgets): a
    :data:`DIALS` option set to ``value``, or a :data:`SWITCHES` gadget left out (0) or added (1). The key is
    ``None`` where every dial stays at its default (the same construction for every dial), else ``(dial, value)``."""
    if dial in SWITCHES:
        if value not in (0.0, 1.0):
            raise ConstructionError(f"the {dial} switch takes 0 (without) or 1 (with), got {value:g}")
        return ((dial, 1.0), {"negatives": f"{negatives},{dial}"}) if value else (None, {"negatives": negatives})
    if dial not in DIALS:
        raise ConstructionError(f"no dial {dial!r}: one of {', '.join([*DIALS, *SWITCHES])}")
    key = None if value == getattr(Dials(), DIALS[dial][0]) else (dial, value)
    return key, {"negatives": negatives, dial: value}


def dials_of(options: dict[str, float], chosen: Sequence[str]) -> Dials:
    """The :class:`Dials` the construction options ``options`` (option name → value) set, each checked: finite, in
    its range, and with its gadget among ``chosen`` (one-line refusals)."""
    values = {}
    for name, value in options.items():
        field_name, needs, lo, hi, what = DIALS[name]
        if not any(n in chosen for n in needs):
            raise ConstructionError(f"{name} dials {what}: add negatives={needs[0]}")
        if not (math.isfinite(value) and lo <= value <= hi):
            raise ConstructionError(f"{name} ({what}) takes {lo:g} to {hi:g}, got {value!r}")
        values[field_name] = float(value)
    return Dials(**values)


def add_negatives(spec: ConstructionSpec, negatives: Sequence[str], dials: Dials | None = None) -> ConstructionSpec:
    """A copy of ``spec`` with the named gadgets in block 0 (see the module docstring), set by ``dials``; its
    options record them as ``negatives`` (and ``negative_dials`` where a dial is not at its default)."""
    dials = dials or Dials()
    chosen = [n for n in dict.fromkeys(negatives) if n]
    unknown = [n for n in chosen if n not in NEGATIVES]
    if unknown:
        raise ConstructionError(f"unknown negatives {', '.join(unknown)} (choose from {', '.join(NEGATIVES)})")
    if not chosen:
        return spec
    spec = copy.deepcopy(spec)
    layout = spec.layout
    d_old = layout.d_model
    for name in ("neg_one", "neg_trash", "neg_signal", "neg_bias"):
        layout.add(name)
    spec.widen()
    spec.W_E[:, layout.index("neg_one")] = 1.0
    readout = dials.gain * _ramp(spec.W_U.shape[1]) * max(float(np.abs(spec.W_U[:d_old]).max()), 1.0)
    routes = add_backup_block(spec) if "backup" in chosen else {}  # first: the other gadgets join its block
    word = _word_direction(spec)
    sharp = dials.sharpness
    block = spec.blocks[0]
    if "distractor" in chosen:
        block.heads.append(_distractor_head(layout, word, sharp))
        extra = MLP(layout, "distractor unit").unit(word, 0.0, {"neg_trash": 1.0})
        block.mlp = MLP.combine(
            layout, [m for m in (block.mlp, extra) if m is not None], block.mlp.label if block.mlp else ""
        )
    if "cancel" in chosen:
        block.heads.extend(_cancelling_pair(layout, word, sharp))
        spec.W_U[layout.index("neg_signal")] = readout
    if "constant" in chosen:
        block.heads.append(_constant_head(layout, word, sharp))
        spec.W_U[layout.index("neg_bias")] = readout
        spec.b_U = spec.b_U - readout  # the head writes exactly 1 (up to rounding): take it back
    moved = {k: v for k, v in asdict(dials).items() if v != getattr(Dials(), k)}
    spec.options = {
        **spec.options,
        "negatives": ",".join(chosen),
        **({"negative_routes": [routes]} if routes else {}),
        **({"negative_dials": moved} if moved else {}),
    }
    spec.notes = (spec.notes + "\n" if spec.notes else "") + f"informative negatives: {', '.join(chosen)}"
    spec.__post_init__()
    return spec


def _word_direction(spec: ConstructionSpec) -> dict[tuple[str, int], float]:
    """A direction that tells every two symbols apart: the residual coordinates where the symbols' token
    embeddings differ, with distinct weights 1/(k + 1.5) (so two symbols one-hot on different coordinates,
    or differing anywhere, read differently)."""
    sym = spec.W_E[list(spec.io.symbol_tokens)]
    differ = np.flatnonzero(sym.max(axis=0) - sym.min(axis=0) > 0)
    if not len(differ):
        raise ConstructionError(f"{spec.name}: no coordinate of the token embedding depends on the symbol")
    weights = np.array([1.0 / (k + 1.5) for k in range(len(differ))])
    if len(np.unique(sym[:, differ] @ weights, axis=0)) < len(np.unique(sym, axis=0)):
        raise ConstructionError(f"{spec.name}: the negatives' word direction does not tell every symbol apart")
    return {spec.layout.locate(int(i)): float(w) for i, w in zip(differ, weights)}


def _ramp(n: int) -> np.ndarray:
    """A different weight for every output, centred: moving it changes every logit difference."""
    return (np.arange(n) - (n - 1) / 2) / max(n - 1, 1)


def _distractor_head(layout, word, sharp: float) -> Head:
    """Attends by the word and copies it into ``neg_trash``, which nothing reads."""
    return Head(layout, "distractor").qk(word, word, sharp).ov(word, {"neg_trash": 1.0})


def _cancelling_pair(layout, word, sharp: float) -> list[Head]:
    """Two heads with one pattern and opposite rank-one outputs on ``neg_signal``: they sum to exactly 0."""
    return [
        Head(layout, f"cancel {sign:+d}").qk(word, word, sharp).ov(word, {"neg_signal": float(sign)})
        for sign in (1, -1)
    ]


def _constant_head(layout, word, sharp: float) -> Head:
    """A sharp, word-dependent pattern over a value that is 1 at every token: its output is the constant 1."""
    return Head(layout, "constant").qk(word, word, sharp).ov({"neg_one": 1.0}, {"neg_bias": 1.0})
