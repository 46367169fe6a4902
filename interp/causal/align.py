"""One causal alignment of a model to its task's high-level model: where the state lives (a scan of full
interchanges), how many dimensions it takes there (DAS over k with a matched random-subspace control,
on held-out pairs), beside a random-init null of the same shape and, optionally, a construction of the
same task scanned the same way. :func:`align` returns what ``align.json`` holds.

Only automaton tasks have a high-level model so far (the state, read in ``parallel`` or
``recurrent``); other task kinds are refused in one line.
"""

from __future__ import annotations

import time
from typing import Any, Sequence

import numpy as np

from interp.causal.das import das
from interp.causal.highlevel import HighLevelError, StateModel
from interp.causal.interchange import Site, iia, random_basis, word_pairs
from interp.causal.localise import first_sites, scan
from interp.causal.verdict import IMPLEMENTS, verdict

__all__ = ["align", "high_level_of", "null_of"]


def high_level_of(model: Any, mode: str = "parallel") -> StateModel:
    """The high-level model of ``model``'s task; refuses a task kind that has none yet and the LSTM."""
    card = getattr(model, "card", None)
    if card is None:
        raise HighLevelError("causal alignment needs a sandbox-lens model (one with a card saying its task)")
    if not hasattr(model, "run_with_hooks") or not hasattr(model, "blocks"):
        raise HighLevelError("causal alignment intervenes on a transformer's residual stream; this model has none "
                             f"({getattr(card, 'options', {}).get('arch', type(model).__name__)})")
    kind = card.task_kind
    if kind.high_level is None:
        raise HighLevelError(f"causal alignment covers automaton tasks so far; this model's task is {kind.name}")
    from interp.tasks.kinds import resolve

    return resolve(kind.high_level)(card.source, mode)


def null_of(model: Any, seed: int = 0) -> Any:
    """A random-init twin of ``model``'s task and shape (layers, width, heads): the null beside its numbers."""
    from interp.tasks.kinds import task_from_dict
    from interp.train import ModelShape, random_init

    shape = ModelShape(**{k: getattr(model.cfg, k) for k in ("n_layers", "d_model", "n_heads")})
    return random_init(task_from_dict(model.card.task), shape, seed)


def align(model: Any, *, constructions: dict[str, Any] | None = None, null: Any = None, mode: str = "parallel",
          pairs: int = 256, ks: Sequence[int] = (1, 2, 4, 8), das_steps: int = 200, seed: int = 0,
          progress: bool = False) -> dict[str, Any]:
    """The causal section for ``model`` (see the module docstring): its scan, first sites, DAS at the best
    site against a random subspace of each k, the ``null``'s scan, each of ``constructions``' scans and,
    beside each, the verdict (:func:`interp.causal.verdict.verdict`)."""
    t0 = time.perf_counter()
    high = high_level_of(model, mode)
    base, source = word_pairs(model, 2 * pairs, seed=seed)
    train_b, train_s, held_b, held_s = base[:pairs], source[:pairs], base[pairs:], source[pairs:]
    out: dict[str, Any] = {"variable": "state", "high_level_model": mode, "pairs": {"train": pairs, "held_out": pairs},
                           "seed": seed}
    out["model"] = _scanned(model, high, held_b, held_s, progress, _title(model))
    hook, position = _best_site(out["model"]["scan"])
    out["das"] = {"hook": hook, "position": position, "k": []}
    for k in ks:
        if k > model.cfg.d_model:
            continue
        basis, trace = das(model, high, hook, position, k, train_b, train_s, steps=das_steps, seed=seed)
        learned = iia(model, high, Site(hook, position, basis), held_b, held_s)
        control = iia(model, high, Site(hook, position, random_basis(model.cfg.d_model, k, seed)), held_b, held_s)
        out["das"]["k"].append({"k": k, "iia": learned["changed"], "random_subspace": control["changed"],
                                "final_loss": trace[-1]["loss"]})
    if null is not None:
        out["null"] = _scanned(null, StateModel(high.automaton, mode), held_b, held_s, progress, "random init (null)")
    out["constructions"] = {}
    for name, other in (constructions or {}).items():
        scanned = _scanned(other, StateModel(high.automaton, mode), held_b, held_s, progress, name)
        scanned["verdict"] = verdict(out["model"]["best"], out["model"]["first_sites"], scanned["first_sites"],
                                     out["null"]["best"] if null is not None else {})
        out["constructions"][name] = scanned
    out["seconds"] = time.perf_counter() - t0
    return out


def _title(model: Any) -> str:
    name = model.card.construction
    return "twin" if name == "trained" else name


def _scanned(model: Any, high: StateModel, base: np.ndarray, source: np.ndarray, progress: bool,
             title: str) -> dict[str, Any]:
    r = scan(model, high, base, source, progress=progress)
    best = {int(p): (None if np.all(np.isnan(r["iia"][:, j])) else float(np.nanmax(r["iia"][:, j])))
            for j, p in enumerate(r["positions"])}
    return {"title": title, "ceiling": r["ceiling"], "best": best,
            "first_sites": {int(p): h for p, h in first_sites(r, IMPLEMENTS).items()},
            "scan": {"hooks": r["hooks"], "positions": r["positions"],
                     "iia": [[None if np.isnan(v) else float(v) for v in row] for row in r["iia"]],
                     "outputs": r["outputs"].tolist()}}


def _best_site(s: dict[str, Any]) -> tuple[str, int]:
    """The middle position's first hook with the highest IIA (where DAS looks for a subspace)."""
    positions = s["positions"]
    j = len(positions) // 2
    column = [(-1.0 if row[j] is None else row[j]) for row in s["iia"]]
    return s["hooks"][int(np.argmax(column))], int(positions[j])
