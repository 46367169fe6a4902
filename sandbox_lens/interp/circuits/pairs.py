"""Counterfactual pairs drawn from a model's task, and the task's metric on them.

A pair is a clean word and a corrupted one that differs from it in one controlled way:

* automata — ``symbol``: one symbol replaced by another (position and symbol uniform);
  ``resample``: an independent word;
* Dyck — ``bracket-type``: one open bracket and its matching close change type together (the prefix
  stays valid and its depths do not change); ``resample``;
* flip-flop — ``bit``: the bit of one write flipped; ``instruction``: one later instruction turned
  from write into ignore or back; ``resample``: every write/ignore instruction and bit drawn afresh.
  The reads stay where they were (the metric compares answers at reads) and repeat the latest
  written bit, so the string stays in the language.

The model's outputs are read where the task scores them (every symbol for automata; every
position with an open bracket on the stack, over the closing brackets, for Dyck — the close that
must come is the one the stack top decides; every read for the flip-flop language). The clean
run's prediction there is the label. The metrics count only the *affected* outputs, where the clean
and the corrupted runs predict differently:

* ``logit_diff`` — the logit of the clean label minus that of the corrupted label, averaged;
* ``kl`` — minus the KL divergence of the output from the clean run's, over the readout outputs
  (ACDC's metric, Conmy et al. 2023: it notices a flipped argmax that a mean logit difference
  dominated by large margins hides);
* ``accuracy`` — the share of affected outputs whose argmax is still the clean label.

``normalised(m, metric)`` maps the corrupted run's value to 0 and the clean run's to 1.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from sandbox_lens.interp.budget import require
from sandbox_lens.interp.errors import SandboxError
from sandbox_lens.interp.model.device import on, to_numpy
from sandbox_lens.interp.model.run import exact_precision

__all__ = ["Pairs", "make_pairs", "CorruptionError", "METRICS"]

METRICS = ("logit_diff", "kl")


class CorruptionError(SandboxError, ValueError):
    """A corruption the task cannot produce (a bracket swap on an automaton, on Dyck with one type, ...)."""


@dataclass
class Pairs:
    """Clean and corrupted token batches ``[n, n_ctx_used]`` and where the metric reads the outputs."""

    kind: str
    corruption: str
    clean: np.ndarray
    corrupt: np.ndarray
    outputs: np.ndarray  # the output indices the readout ranges over (Dyck: the closing brackets)
    affected: np.ndarray  # bool [n, positions]: read here, and the two runs disagree
    clean_label: np.ndarray  # [n, positions], index into ``outputs``
    corrupt_label: np.ndarray
    clean_metric: float = float("nan")  # logit_diff of the unpatched clean run
    corrupt_metric: float = float("nan")  # ... of the corrupted run
    corrupt_kl: float = float("nan")  # kl of the corrupted run (the clean run's is 0)
    clean_probs: Any = None  # the clean run's log-probabilities over the readout outputs (for kl)
    read: Any = None  # bool [n, positions]: where the task scores an output (affected or not)
    clean_logprobs_full: Any = None  # the clean run's log-probabilities over every output, at ``read``
    word_metric: float = float("nan")  # the corrupted word's logit_diff where the normaliser is another run's
    word_kl: float = float("nan")  # ... and its kl

    def normaliser_ratio(self, metric: str = "logit_diff") -> float | None:
        """How many times farther from the clean run the normalising run (m(∅): every edge ablated) is than the
        corrupted word, on ``metric``; None where the normaliser *is* the corrupted word's run (resample) or the
        word does not move the metric. Far above 1, every effect is read against a run the corrupted word never
        comes near, and a threshold on effects removes edges for the normaliser's sake."""
        if metric == "kl":
            ablated, word = -self.corrupt_kl, -self.word_kl
        else:
            ablated, word = self.clean_metric - self.corrupt_metric, self.clean_metric - self.word_metric
        if np.isnan(word) or np.isnan(ablated) or word == 0:
            return None
        return float(ablated / word)

    @property
    def n_affected(self) -> int:
        return int(self.affected.sum())

    def _gathered(self, logits: Any):
        lg = logits[..., on(logits, self.outputs)]
        mask = on(logits, self.affected)
        return lg[mask], on(logits, self.clean_label)[mask], on(logits, self.corrupt_label)[mask]

    def logit_diff(self, logits: Any):
        """Mean over affected outputs of logit[clean label] − logit[corrupted label] (a torch scalar)."""
        lg, yc, yx = self._gathered(logits)
        if not len(lg):
            return lg.sum()
        return (lg.gather(-1, yc[:, None]) - lg.gather(-1, yx[:, None])).mean()

    def kl(self, logits: Any):
        """−mean KL(clean ‖ patched) over the affected outputs (a torch scalar; 0 for the clean run)."""
        import torch

        lg = logits[..., on(logits, self.outputs)][on(logits, self.affected)].double()
        logp = torch.log_softmax(lg, -1)
        ref = self.clean_probs
        return -(ref.exp() * (ref - logp)).sum(-1).mean() if len(lg) else lg.sum()

    def kl_full(self, logits: Any):
        """Mean KL(clean ‖ patched) over the model's full output distribution at every scored position
        (ACDC's reference metric, unnormalised; 0 for the clean run)."""
        import torch

        logp = torch.log_softmax(logits[on(logits, self.read)].double(), -1)
        ref = self.clean_logprobs_full
        return (ref.exp() * (ref - logp)).sum(-1).mean() if len(logp) else logp.sum()

    def value(self, logits: Any, metric: str = "logit_diff") -> float:
        if metric not in METRICS:
            raise CorruptionError(f"unknown metric {metric!r} (choose from {', '.join(METRICS)})")
        return float(self.kl(logits)) if metric == "kl" else float(self.logit_diff(logits))

    def accuracy(self, logits: Any) -> float:
        lg, yc, _ = self._gathered(logits)
        return float((lg.argmax(-1) == yc).double().mean()) if len(lg) else 1.0

    def normalised(self, value: float, metric: str = "logit_diff") -> float:
        clean, corrupt = (0.0, self.corrupt_kl) if metric == "kl" else (self.clean_metric, self.corrupt_metric)
        span = clean - corrupt
        return float((value - corrupt) / span) if span else 1.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "corruption": self.corruption,
            "pairs": int(len(self.clean)),
            "tokens": int(self.clean.shape[1]),
            "affected_outputs": self.n_affected,
            "clean_logit_diff": self.clean_metric,
            "corrupt_logit_diff": self.corrupt_metric,
            "corrupt_kl": -self.corrupt_kl,
            "normaliser_ratio": {m: self.normaliser_ratio(m) for m in METRICS},
        }


def make_pairs(
    model: Any,
    n: int = 64,
    corruption: str | None = None,
    length: int | None = None,
    seed: int = 0,
    forward: Callable[[np.ndarray], Any] | None = None,
) -> Pairs:
    """``n`` counterfactual pairs for ``model``'s task (see the module docstring); the default corruption is
    the task's first (symbol / bracket-type / bit). ``length`` defaults to the model's length. ``forward`` (tokens →
    logits) runs the model where it is given: a patching engine's own clean run, kept for the analysis after."""
    import torch

    card = model.card
    kind = card.task_kind
    choices = kind.corruptions
    corruption = corruption or choices[0]
    if corruption not in choices:
        raise CorruptionError(
            f"the {kind.name} task cannot produce the corruption {corruption!r} (it has: {', '.join(choices)})"
        )
    if n < 1:
        raise CorruptionError(f"need at least one pair, got {n}")
    P = len(card.io.prefix)
    longest = min(card.max_length, model.cfg.n_ctx - P)  # a twin trained on T tokens reads T − 1 before its last target
    T = int(length or min(card.options.get("trained_length") or card.task.get("length") or longest, longest))
    if not 1 <= T <= longest:
        raise CorruptionError(f"pairs of length {T} do not fit the model (1..{longest})")

    cfg = model.cfg
    per_pair = (
        T * (16.0 + 8 * cfg.d_model * (cfg.n_layers * (cfg.n_heads + 2) + 3)) + 8.0 * cfg.n_layers * cfg.n_heads * T * T
    )
    require(f"{n} counterfactual pairs of {T} tokens", memory=n * per_pair, lower="--pairs")
    rng = np.random.default_rng(seed)
    try:
        clean_w, corrupt_w, read_w, read_xw, readout = kind.pair_words(card.source, n, T, corruption, rng)
    except SandboxError as e:  # the kind's own refusal (one symbol, one bracket type, ...)
        raise CorruptionError(str(e)) from None
    clean, corrupt = card.io.encode(clean_w), card.io.encode(corrupt_w)
    outputs = np.arange(model.cfg.d_vocab_out) if readout is None else readout
    read, read_x = (np.concatenate([np.zeros((n, P), dtype=bool), r], axis=1) for r in (read_w, read_xw))

    with exact_precision():
        if forward is None:
            full_c = model(on(model, clean), return_type="logits")
            full_x = model(on(model, corrupt), return_type="logits")
        else:
            full_c, full_x = forward(clean), forward(corrupt)
    yc = to_numpy(full_c[..., on(full_c, outputs)].argmax(-1))
    yx = to_numpy(full_x[..., on(full_x, outputs)].argmax(-1))
    affected = read & read_x & (yc != yx)
    pairs = Pairs(kind.name, corruption, clean, corrupt, outputs, affected, yc, yx, read=read & read_x)
    if not pairs.n_affected:
        raise CorruptionError(
            f"no output differs between the clean and the {corruption} words "
            f"({n} pairs of length {T}): nothing to explain; try more pairs or another corruption"
        )
    pairs.clean_metric = float(pairs.logit_diff(full_c))
    pairs.corrupt_metric = float(pairs.logit_diff(full_x))
    pairs.clean_probs = torch.log_softmax(full_c[..., on(full_c, outputs)][on(full_c, affected)].double(), -1)
    pairs.corrupt_kl = float(pairs.kl(full_x))
    pairs.clean_logprobs_full = torch.log_softmax(full_c[on(full_c, pairs.read)].double(), -1)
    return pairs
