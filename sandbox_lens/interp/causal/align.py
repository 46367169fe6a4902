"""One causal alignment of a model to its task's high-level model, variable by variable:

* **where** — a scan of full interchanges over every (residual hook, position), with the first site per
  position that reaches :data:`~sandbox_lens.interp.causal.verdict.IMPLEMENTS` × the model's own accuracy;
* **how many dimensions** — DAS (linear, orthogonal) with one subspace shared by every position, at every
  residual hook with the largest k, then over k at the best hook and boundless DAS there (k learned), each beside a random subspace of the
  same k and the random-init null's DAS at the same hook and k; held-out IIA pooled over positions, with
  Wilson intervals;
* **probes against interventions** — at every residual hook, a linear probe's held-out accuracy (is the
  variable *readable* there?) beside the IIA of swapping the probe's own directions (is it *used* there?);
* **the proof's own sites** — for a construction (the model, or one compared with it): the IIA at the
  sites its card names (``carries``: should reach 1; ``inert``: a readable copy nothing reads, should
  change nothing);
* **verdicts** by stated rules (:mod:`sandbox_lens.interp.causal.verdict`), including the case DAS cannot settle: a
  construction whose named site carries a variable that DAS does not find at the same hook (a staircase
  MLP after a one-dimensional count defeats gradient search) — then a twin's negative DAS result is
  reported as no evidence of absence.

Every task kind with a ``high_level`` in its registry entry is aligned (automata: the state, read in
``parallel`` or ``recurrent``; Dyck: ``top`` and ``depth``; the flip-flop language: ``bit``); other kinds
and the LSTM are refused in one line. :func:`align` returns what ``align.json`` holds.
"""

from __future__ import annotations

import time
from typing import Any, Sequence

import numpy as np

from sandbox_lens.interp.causal.das import das
from sandbox_lens.interp.causal.highlevel import HighLevel, high_level_of
from sandbox_lens.interp.causal.interchange import Site, pooled_iia, random_basis, word_pairs
from sandbox_lens.interp.causal.localise import first_sites, residual_hooks, scan
from sandbox_lens.interp.causal.verdict import IMPLEMENTS, MIN_OUTPUTS, das_verdict, verdict

__all__ = ["align", "high_level_of", "null_of", "named_sites", "das_sweep", "off_circuit_ablation", "probe_sites"]


def null_of(model: Any, seed: int = 0) -> Any:
    """A random-init twin of ``model``'s task and shape (layers, width, heads, MLP width, norm): the null."""
    from sandbox_lens.interp.tasks.kinds import task_from_dict
    from sandbox_lens.interp.train import ModelShape, random_init

    cfg = model.cfg
    shape = ModelShape(n_layers=cfg.n_layers, d_model=cfg.d_model, n_heads=cfg.n_heads, d_head=cfg.d_head,
                       d_mlp=cfg.d_mlp, normalization="LN" if cfg.normalization_type else "none")
    return random_init(task_from_dict(model.card.task), shape, seed)


def align(model: Any, *, constructions: dict[str, Any] | None = None, null: Any = None, mode: str = "parallel",
          pairs: int = 256, ks: Sequence[int] = (1, 2, 4, 8), das_steps: int = 200, seed: int = 0,
          variables: Sequence[str] | None = None, progress: bool = False) -> dict[str, Any]:
    """The causal section for ``model`` (see the module docstring), per variable of its task's high-level model
    (``variables``: a subset; default all), beside the ``null`` and each of ``constructions``."""
    t0 = time.perf_counter()
    high = high_level_of(model, mode)
    names = [high.variable(v) for v in (variables or high.variables)]  # an unknown variable fails here
    base, source = word_pairs(model, 2 * pairs, seed=seed, high=high)
    train, held = (base[:pairs], source[:pairs]), (base[pairs:], source[pairs:])
    ks = sorted(k for k in set(ks) if 1 <= k <= model.cfg.d_model)
    out: dict[str, Any] = {"task_kind": model.card.task_kind.name, "high_level_model": mode,
                           "pairs": {"train": pairs, "held_out": pairs, "length": int(base.shape[1])}, "seed": seed,
                           "das_steps": das_steps, "variables": {}}
    for variable in names:
        v: dict[str, Any] = {"read_out": variable in high.read_out}
        v["model"] = _analysed(model, high, train, held, ks, das_steps, seed, variable, progress, _title(model))
        best_hook, k_max = v["model"]["das"]["hook"], v["model"]["das"]["k_max"]
        if null is not None:
            v["null"] = _scanned(null, high, *held, progress, "random init (null)", variable)
            v["null"]["das"] = _das_at(null, high, best_hook, k_max, train, held, das_steps, seed, variable)
        v["constructions"] = {}
        for name, other in (constructions or {}).items():
            c = _analysed(other, high, train, held, ks, das_steps, seed, variable, progress, name, compared=True)
            c["verdict"] = verdict(v["model"]["best"], v["model"]["first_sites"], c["first_sites"],
                                   v["null"]["best"] if null is not None else {}, variable,
                                   _trivial_from(model) if v["read_out"] else None, v["model"]["ceiling"])
            c["das_verdict"] = das_verdict(v["model"]["das"], v.get("null", {}).get("das"), c["das"],
                                           c["named_sites"], variable, v["model"]["ceiling"])
            v["constructions"][name] = c
        if not constructions:
            v["das_verdict"] = das_verdict(v["model"]["das"], v.get("null", {}).get("das"), None,
                                           v["model"]["named_sites"], variable, v["model"]["ceiling"])
        out["variables"][variable] = v
    imposed = model.card.options.get("alignment")
    if imposed:
        out["imposed"] = {"construction": imposed["construction"], "circuit": imposed["circuit"],
                          **off_circuit_ablation(model, high, *held)}
    out["seconds"] = time.perf_counter() - t0
    return out


def off_circuit_ablation(model: Any, high: HighLevel, base: np.ndarray, source: np.ndarray) -> dict[str, Any]:
    """A twin trained with ``--align``: its accuracy on the ``base`` words, and with every head and MLP off the
    imposed circuit resampled from the ``source`` words (strict IIT asks that this changes nothing), each
    with a Wilson interval, and the difference."""
    from sandbox_lens.interp.causal.interchange import answer, own_predictions
    from sandbox_lens.interp.model.device import on
    from sandbox_lens.interp.model.run import exact_precision
    from sandbox_lens.interp.stats import wilson_interval
    from sandbox_lens.interp.train.align import off_circuit_hooks, resample_hooks

    circuit = model.card.options["alignment"]["circuit"]
    io, P, T = model.card.io, len(model.card.io.prefix), base.shape[1]
    labels, scored = high.answers(base)
    with exact_precision():
        _, cache = model.run_with_cache(on(model, io.encode(source)), names_filter=off_circuit_hooks(circuit))
        logits = model.run_with_hooks(on(model, io.encode(base)), fwd_hooks=resample_hooks(circuit, cache),
                                      return_type="logits")
    ablated = answer(logits[:, P: P + T], high.readout)
    plain = own_predictions(model, base, high.readout)
    n = int(scored.sum())
    k_plain, k_ablated = int((plain == labels)[scored].sum()), int((ablated == labels)[scored].sum())
    return {"accuracy": k_plain / n, "accuracy_interval": wilson_interval(k_plain, n),
            "ablated_accuracy": k_ablated / n, "ablated_interval": wilson_interval(k_ablated, n),
            "drop": (k_plain - k_ablated) / n, "outputs": n}


def probe_sites(model: Any, high: HighLevel, train: tuple, held: tuple, variable: str) -> list[dict[str, Any]]:
    """At every residual hook: a linear probe for ``variable`` (trained on the training pairs' base words at every
    position), its held-out accuracy — *readable* — and the IIA of swapping the probe's directions — *used*."""
    from sandbox_lens.interp.causal.interchange import source_activations
    from sandbox_lens.interp.model.device import to_numpy
    from sandbox_lens.probes.linear import probe_directions

    hooks = residual_hooks(model.cfg.n_layers)
    P, T = len(model.card.io.prefix), train[0].shape[1]
    acts = {name: source_activations(model, words, hooks) for name, words in (("train", train[0]), ("held", held[0]))}
    values = {name: high.values(words, variable) for name, words in (("train", train[0]), ("held", held[0]))}
    rows = []
    for hook in hooks:
        x = {n: to_numpy(a[hook][:, P:P + T].double()) for n, a in acts.items()}
        (y_tr, m_tr, classes), (y_te, m_te, _) = values["train"], values["held"]
        if len(np.unique(y_tr[m_tr])) < 2:
            continue
        basis, w, b = probe_directions(x["train"][m_tr], y_tr[m_tr], classes)
        accuracy = float(((x["held"][m_te] @ w + b).argmax(-1) == y_te[m_te]).mean())
        used = pooled_iia(model, high, Site(hook, 0, basis), *held, variable) if basis.shape[1] else None
        rows.append({"hook": hook, "probe_accuracy": accuracy, "dims": int(basis.shape[1]),
                     "iia": None if used is None else used["iia"], "interval": None if used is None else used["interval"]})
    return rows


def _analysed(model: Any, high: HighLevel, train: tuple, held: tuple, ks: Sequence[int], steps: int, seed: int,
              variable: str, progress: bool, title: str, compared: bool = False) -> dict[str, Any]:
    """One model's scan, named sites and DAS sweep for ``variable``; a ``compared`` construction's DAS only at
    the hooks its proof names (enough to tell whether DAS finds what the named subspace carries)."""
    r = _scanned(model, high, *held, progress, title, variable)
    r["named_sites"] = named_sites(model, high, *held, variable)
    r["probes"] = probe_sites(model, high, train, held, variable)
    hooks = sorted({s["hook"] for s in r["named_sites"] if s["role"] == "carries"}) if compared else None
    r["das"] = das_sweep(model, high, train, held, ks, steps, seed, variable, progress, hooks or None)
    return r


def das_sweep(model: Any, high: HighLevel, train: tuple, held: tuple, ks: Sequence[int], steps: int, seed: int,
              variable: str, progress: bool = False, hooks: Sequence[str] | None = None) -> dict[str, Any]:
    """DAS with one subspace shared by every position: at every residual hook (or the given ``hooks``) with the
    largest k ("where"), then over every k at the best hook ("how many dimensions"), each beside a random
    subspace of that k; held-out IIA on changed outputs, pooled over the positions."""
    from tqdm import tqdm

    ks = [k for k in ks if k <= model.cfg.d_model] or [model.cfg.d_model]  # a narrow construction takes fewer
    k_max = max(ks)
    hooks = list(hooks or residual_hooks(model.cfg.n_layers))
    bar = tqdm(total=len(hooks) + len(ks) - 1, disable=not progress, desc=f"DAS ({variable})", unit="fit", leave=False)
    by_hook = []
    for hook in hooks:
        by_hook.append(_das_at(model, high, hook, k_max, train, held, steps, seed, variable))
        bar.update(1)
    best = max(by_hook, key=lambda r: -1.0 if r["iia"] is None else r["iia"])
    by_k = []
    for k in ks:
        by_k.append(best if k == k_max else _das_at(model, high, best["hook"], k, train, held, steps, seed, variable))
        if k != k_max:
            bar.update(1)
    bar.close()
    return {"shared_over_positions": True, "k_max": k_max, "hook": best["hook"], "by_hook": by_hook, "k": by_k,
            "boundless": _boundless_at(model, high, best["hook"], train, held, steps, seed, variable)}


def _boundless_at(model: Any, high: HighLevel, hook: str, train: tuple, held: tuple, steps: int, seed: int,
                  variable: str) -> dict[str, Any]:
    """Boundless DAS at ``hook``: the learned k and its held-out IIA (:func:`sandbox_lens.interp.causal.das.boundless_das`)."""
    from sandbox_lens.interp.causal.das import boundless_das

    basis, trace = boundless_das(model, high, hook, *train, steps=max(steps, 100), seed=seed, variable=variable)
    if not basis.shape[1]:
        return {"hook": hook, "k": 0, "iia": None, "interval": None}
    r = pooled_iia(model, high, Site(hook, 0, basis), *held, variable)
    return {"hook": hook, "k": int(basis.shape[1]), "iia": r["iia"], "interval": r["interval"],
            "final_loss": trace[-1]["loss"] if trace else None}


def _das_at(model: Any, high: HighLevel, hook: str, k: int, train: tuple, held: tuple, steps: int, seed: int,
            variable: str) -> dict[str, Any]:
    """A position-shared DAS subspace of ``hook`` (k dims) and a random one, scored on the held-out pairs."""
    from sandbox_lens.interp.causal.das import live_fraction

    basis, trace = das(model, high, hook, None, k, *train, steps=steps, seed=seed, variable=variable)
    learned = pooled_iia(model, high, Site(hook, 0, basis), *held, variable)
    control = pooled_iia(model, high, Site(hook, 0, random_basis(model.cfg.d_model, k, seed)), *held, variable)
    return {"hook": hook, "k": k, "iia": learned["iia"], "interval": learned["interval"], "outputs": learned["outputs"],
            "random_subspace": {"iia": control["iia"], "interval": control["interval"]},
            "live_fraction": live_fraction(model, hook, basis, held[0]),
            "final_loss": trace[-1]["loss"] if trace else None}


def named_sites(model: Any, high: HighLevel, base: np.ndarray, source: np.ndarray, variable: str) -> list[dict[str, Any]]:
    """IIA (changed outputs, pooled over every position) at each site ``model``'s card names for ``variable``
    (:func:`sandbox_lens.interp.causal.interchange.construction_sites`), with its role: ``carries`` should reach 1, ``inert``
    should change nothing. Empty for a trained model."""
    from sandbox_lens.interp.causal.interchange import construction_sites, own_predictions, pooled_iia, source_activations

    sites = construction_sites(model, variable)
    if not sites:
        return []
    activations = source_activations(model, source, sorted({s.hook for _, s in sites}))
    own = own_predictions(model, base, high.readout)
    return [{**pooled_iia(model, high, site, base, source, variable, activations, own), "subspace": entry["subspace"],
             "role": entry["role"], "note": entry.get("note", "")} for entry, site in sites]


def _trivial_from(model: Any) -> float:
    """The residual order of the last attention layer's output (see :mod:`sandbox_lens.interp.causal.verdict`)."""
    blocks = model.card.attention_blocks or list(range(model.cfg.n_layers))
    return max(blocks) + 1 / 3


def _title(model: Any) -> str:
    name = model.card.construction
    return "twin" if name == "trained" else name


def _scanned(model: Any, high: HighLevel, base: np.ndarray, source: np.ndarray, progress: bool,
             title: str, variable: str) -> dict[str, Any]:
    r = scan(model, high, base, source, progress=progress, variable=variable)
    best = {int(p): (None if np.all(np.isnan(r["iia"][:, j])) or r["outputs"][:, j].max() < MIN_OUTPUTS
                     else float(np.nanmax(r["iia"][:, j]))) for j, p in enumerate(r["positions"])}
    return {"title": title, "ceiling": r["ceiling"], "best": best,
            "first_sites": {int(p): (h if best[int(p)] is not None else None)
                            for p, h in first_sites(r, IMPLEMENTS * min(1.0, r["ceiling"] or 1.0)).items()},
            "scan": {"hooks": r["hooks"], "positions": r["positions"],
                     "iia": [[None if np.isnan(v) else float(v) for v in row] for row in r["iia"]],
                     "outputs": r["outputs"].tolist()}}
