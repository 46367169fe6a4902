"""Constructed vs trained circuits on one task: probes, attention, ablation, pruning, one report.

:func:`compare` puts a task's constructions and a trained twin (trained here with the training
defaults, reused from ``out/twin``, or loaded from ``trained``) on the same words and measures:

* **probes** — held-out accuracy of a linear probe for each task latent (Dyck: depth, stack-top
  type; automata: the state, and for 1-D gridworlds the distance to the last boundary) at every
  ``hook_resid_pre/mid/post``, and the first hook where it reaches 0.99;
* **attention** — every live head against reference patterns (mean mass on the reference,
  argmax agreement, mean total-variation distance, averaged over example words), and a one-to-one
  Hungarian matching of the twin's heads to each construction's, in canonical coordinates
  (``sandbox_lens.interp.compare.canonical``);
* **ablation** — zero- and mean-ablation of every head on ``hook_z`` (others fixed), with a
  majority-class chance level;
* **circuits** — ACDC (``sandbox_lens.interp.circuits``) on every model with the task's counterfactual pairs:
  the recovered circuit's size and faithfulness, for constructions its precision, recall and AUROC
  against the ground truth their weights imply, and the overlap of the twin's circuit heads with each
  construction's after the Hungarian head matching;
* **pruning** — greedy head pruning at 95% of the intact accuracy, learned hard-concrete head
  masks with an L0 penalty of 0.1, 0.3 and 1 nat per open head (others adapt, ``sandbox_lens.probes.masks``), and for Dyck the Theorem-3 demo: a
  mask on a larger random transformer learned to reproduce the stack construction
  (``sandbox_lens.probes.weight_mask``), and Corollary 3: the stack and the uniform constructions pruned out of
  that one random network with an identical pruned key matrix.

It writes ``out/metrics.json`` (sections ``probes``, ``attention``, ``ablation``, ``pruning``, and
``example``), ``out/patterns.npz`` (every model's attention on one example word) and, from those two
files alone, the self-contained ``out/report.html`` (:mod:`sandbox_lens.interp.compare.report`; ``interp report
DIR`` rebuilds it without running a model).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from sandbox_lens.interp.compare.automaton import AutomatonComparison
from sandbox_lens.interp.compare.canonical import canonical, square
from sandbox_lens.interp.compare.config import CompareConfig
from sandbox_lens.interp.compare.dyck import DyckComparison
from sandbox_lens.interp.compare.estimate import require_time
from sandbox_lens.interp.compare.ffl import FFLComparison
from sandbox_lens.interp.compare.names import PATTERNS_FILE, TWIN, head_name
from sandbox_lens.interp.errors import CheckpointError, SandboxError
from sandbox_lens.interp.files import atomic_write, write_json
from sandbox_lens.interp.jsonfile import read_json
from sandbox_lens.interp.model.hooked import backend
from sandbox_lens.interp.model.run import attention_patterns, live_heads, require_hooked
from sandbox_lens.interp.streams import Stream
from sandbox_lens.interp.tasks.batches import step_rng
from sandbox_lens.interp.train.checkpoint import METRICS_SCHEMA

__all__ = ["compare", "comparison_for", "comparison_of_task", "attention_scores", "PATTERNS_FILE"]

PROBE_TARGET = 0.99  # "the hook where the latent is readable": first hook at this probe accuracy
PRUNE_FRACTION = 0.95  # greedy pruning keeps accuracy ≥ this × the intact accuracy

Comparison = DyckComparison | AutomatonComparison | FFLComparison


def _twin(
    comparison: Comparison,
    out: Path,
    trained: str | Path | None,
    steps: int | None,
    minutes: float,
    seed: int,
    progress: bool,
):
    from sandbox_lens.interp.train import TrainConfig, default_shape, has_checkpoint, load_trained, train

    task = comparison.task
    if trained is not None and not has_checkpoint(trained):  # a saved model: built, adopted, or a twin saved alone
        from sandbox_lens.interp.train import open_model

        model = open_model(trained)
        if dict(model.card.task) != task.to_dict():
            raise SandboxError(f"{trained} holds a model of another task than this comparison's ({task.name})")
        return model, Path(trained)
    if trained is not None:
        return load_trained(trained, expect_task=task.to_dict()), Path(trained)
    directory = out / "twin"
    d = comparison.train_defaults()
    config = TrainConfig(
        steps=steps or d["steps"],
        batch=32,
        lr=d["lr"],
        warmup=100,
        eval_every=50,
        target_accuracy=d["target_accuracy"],
        max_minutes=minutes,
        seed=seed,
    )
    done = _twin_record(directory)
    # a twin that ran out of minutes continues when more are given (the same run, resumed)
    more_time = (
        done is not None
        and done["stopped_by"] == "time"
        and minutes is not None
        and minutes > (done["config"].get("max_minutes") or 0)
    )
    if done is None or more_time:
        train(task, default_shape(task), config, directory, resume=has_checkpoint(directory), progress=progress)
    return load_trained(directory, expect_task=task.to_dict()), directory


def _twin_record(directory: Path) -> dict[str, Any] | None:
    try:
        return read_json(Path(directory) / "metrics.json", METRICS_SCHEMA, error=CheckpointError)
    except (FileNotFoundError, NotADirectoryError, CheckpointError):
        return None


def twin_training(directory: Path) -> dict[str, Any]:
    """How the twin's training ended, and whether it reached its target (an under-trained twin's
    circuits are not those of a model that learned the task)."""
    m = _twin_record(directory)
    if m is None:
        return {"known": False}
    target = m.get("config", {}).get("target_accuracy")
    return {
        "known": True,
        "final_accuracy": m["final_accuracy"],
        "best_accuracy": m["best_accuracy"],
        "target_accuracy": target,
        "stopped_by": m["stopped_by"],
        "steps": m["steps"],
        "seed": m["seed"],
        "minutes": round(m["wall_seconds"] / 60, 2),
        "reached_target": None if target is None else m["final_accuracy"] >= target,
        "history": [{k: h[k] for k in ("step", "loss", "accuracy") if k in h} for h in m.get("history", [])],
    }


def attention_scores(comparison: Comparison, model, heads, words: np.ndarray) -> tuple[dict, dict]:
    """Mean reference scores per head over ``words``, and the canonical pattern rows for matching
    (``sandbox_lens.probes.attention.match_heads``: Hungarian on the mean TV distance over those rows).

    Only the rows of ``comparison.scored_queries`` count (every row, except for the flip-flop
    language: its reads).
    """
    from sandbox_lens.probes.attention import score_head

    data = comparison.inputs(model, words, with_latents=False)
    raw = attention_patterns(model, data.tokens, heads)
    refs = [comparison.references(w) for w in words]
    queries = [comparison.scored_queries(w) for w in words]
    scores, canon = {}, {}
    for head, pats in raw.items():
        rows = [canonical(p, data.prefix) for p in pats]
        canon[head] = np.concatenate([c[q] for c, q in zip(rows, queries)])  # [scored rows, keys]
        per_ref = {}
        for name in comparison.reference_names:
            s = [score_head(c, r[name], q) for c, r, q in zip(rows, refs, queries)]
            per_ref[name] = {key: float(np.mean([x[key] for x in s])) for key in s[0]}
            if name == "uniform":  # its target is every key: the mass on it is 1 for any pattern, not a finding
                per_ref[name].pop("mass", None)
        best = min(per_ref, key=lambda n: per_ref[n]["tv_distance"])
        scores[head_name(head)] = {"references": per_ref, "best_reference": best}
    return scores, canon


def _analyse(
    comparison: Comparison,
    model,
    eval_words,
    example_words,
    seed: int,
    masks: bool,
    mask_steps: int,
    mask_sparsities: Sequence[float],
) -> tuple[dict, dict]:
    from sandbox_lens.probes.ablation import greedy_prune, head_ablation
    from sandbox_lens.probes.linear import probe_accuracy
    from sandbox_lens.probes.masks import learn_head_masks

    data = comparison.inputs(model, eval_words)
    heads = live_heads(model)
    probes = {}
    for latent, (labels, mask) in data.latents.items():
        acc = probe_accuracy(model, data.tokens, labels, mask, seed=seed)
        first = next((hook for hook, a in acc.items() if a >= PROBE_TARGET), None)
        best = max(acc, key=lambda hook: acc[hook])
        _, counts = np.unique(labels[mask], return_counts=True)
        # chance: always answering the commonest value (a probe below it has learned nothing)
        probes[latent] = {
            "accuracy": acc,
            "first_readable": first,
            "best": acc[best],
            "best_hook": best,
            "chance": float(counts.max() / counts.sum()) if counts.size else float("nan"),
        }
    attention, canon = attention_scores(comparison, model, heads, example_words)
    scored = data.targets[data.score_mask]
    chance = float(np.bincount(scored).max() / len(scored)) if len(scored) else float("nan")
    ablation: dict[str, Any] = {"chance": chance}
    for kind in ("zero", "mean"):
        ab = head_ablation(model, data.tokens, data.targets, data.score_mask, kind=kind, heads=heads)
        ablation["baseline"] = ab["baseline"]
        ablation[kind] = {head_name(h): a for h, a in ab["accuracy"].items()}
    pr = greedy_prune(
        model, data.tokens, data.targets, data.score_mask, threshold=PRUNE_FRACTION * ablation["baseline"], heads=heads
    )
    pruning: dict[str, Any] = {
        "greedy": {
            "threshold": pr["threshold"],
            "accuracy": pr["accuracy"],
            "surviving": [head_name(h) for h in pr["surviving"]],
            "removed": [head_name(h) for h in pr["removed"]],
            "trace": [{"removed": head_name(t["removed"]), "accuracy": t["accuracy"]} for t in pr["trace"]],
        }
    }
    if masks:

        def batches(step: int):
            d = comparison.inputs(model, comparison.train_words(step, seed), with_latents=False)
            return d.tokens, d.targets, d.loss_mask

        runs = []
        for sparsity in mask_sparsities:
            lm = learn_head_masks(
                model,
                batches,
                (data.tokens, data.targets, data.score_mask),
                sparsity=sparsity,
                steps=mask_steps,
                heads=heads,
                seed=seed,
            )
            runs.append(
                {
                    "sparsity": sparsity,
                    "gates": {head_name(h): g for h, g in lm["gates"].items()},
                    "surviving": [head_name(h) for h in lm["surviving"]],
                    "accuracy_masked": lm["accuracy_masked"],
                    "accuracy_masked_original_weights": lm["accuracy_masked_original_weights"],
                    "kept_accuracy": lm["kept_accuracy"],
                }
            )
        pruning["learned_masks"] = {"steps": mask_steps, "runs": runs}
    metrics = {
        "accuracy": ablation["baseline"],
        "heads": [head_name(h) for h in heads],
        "probes": probes,
        "attention": attention,
        "ablation": ablation,
        "pruning": pruning,
    }
    return metrics, canon


def compare(
    comparison: Comparison,
    out: str | Path,
    config: CompareConfig | None = None,
    *,
    progress: bool = True,
    **settings: Any,
) -> Path:
    """Write ``out/report.html`` and ``out/metrics.json`` (see the module docstring).

    Args:
        comparison: the task's comparison (its constructions and how to feed them), from the task kind.
        out: the directory to write.
        config: what to measure and at what scale (:class:`~sandbox_lens.interp.compare.config.CompareConfig`):
            the twin's training when it is trained here (``train_steps``, ``train_minutes``), the probes' words,
            the head masks, Theorem 3's weight-mask run (Dyck; 0 skips it) and Corollary 3's, the circuits
            section's pairs (0 skips it).
        progress: show progress bars.
        **settings: any of ``config``'s fields as keywords (``samples=80``, ``theorem3_steps=0``, ...).

    Returns:
        The report's path.
    """
    from sandbox_lens.interp.compare.report import write_report
    from sandbox_lens.interp.progress import bar as progress_bar
    from sandbox_lens.probes.attention import match_heads

    c = replace(config or CompareConfig(), **settings)
    samples, examples, seed = c.samples, c.examples, c.seed
    out = Path(out)
    started = time.time()
    models = dict(comparison.constructions(c.constructions, seed))  # an unknown name fails before OUT is made
    population_cells = None
    if c.population:  # a sweep of another task is refused before OUT is made
        from sandbox_lens.interp.compare.sweeps import population_runs

        population_cells = population_runs(comparison.task, c.population)
    out.mkdir(parents=True, exist_ok=True)
    twin, twin_dir = _twin(comparison, out, c.trained, c.train_steps, c.train_minutes, seed, progress)
    require_hooked(twin, "interp compare (probes, attention, ablation)")
    models[TWIN] = twin
    eval_words = comparison.words(samples, seed)
    example_words = comparison.words(examples, seed + 1)
    require_time(comparison, models, c, seed, population_cells)

    metrics: dict[str, Any] = {
        "task": comparison.title,
        "kind": comparison.kind,
        "twin": str(twin_dir),
        "twin_training": twin_training(twin_dir),
        "prefix_label": comparison.prefix_label,
        "scored_positions": comparison.scored_positions,
        "latents": list(comparison.latent_names),
        "samples": samples,
        "examples": examples,
        "seed": seed,
        "models": {},
        "probes": {},
        "attention": {"matching": {}},
        "ablation": {},
        "pruning": {},
    }
    canon = {}
    for name, model in progress_bar(models.items(), disable=not progress, desc="analysing", unit="model", leave=False):
        m, canon[name] = _analyse(
            comparison, model, eval_words, example_words, seed, c.masks, max(1, c.mask_steps), c.mask_sparsities
        )
        metrics["models"][name] = {
            "accuracy": m["accuracy"],
            "heads": m["heads"],
            "kind": "trained" if name == TWIN else "construction",
            "layers": model.cfg.n_layers,
            "d_model": model.cfg.d_model,
        }
        for section in ("probes", "attention", "ablation", "pruning"):
            metrics[section][name] = m[section]
    for name in models:
        if name != TWIN:
            metrics["attention"]["matching"][name] = [
                {**pair, "trained": head_name(pair["trained"]), "constructed": head_name(pair["constructed"])}
                for pair in match_heads(canon[TWIN], canon[name])
            ]
    if c.circuit_pairs:
        metrics["circuits"] = _circuits(models, metrics["attention"]["matching"], c.circuit_pairs, seed)
    if c.causal_pairs and twin.card.task_kind.high_level is not None:
        metrics["causal"] = _causal(models, c.causal_pairs, seed, progress)
    if population_cells:
        from sandbox_lens.interp.compare.sweeps import causal_population

        metrics["causal_population"] = {
            "directory": str(c.population),
            "cells": {
                name or "(all)": causal_population(runs, c.causal_pairs or 128, 100, (1, 2, 4, 8), seed, progress)
                for name, runs in population_cells.items()
            },
        }
    if comparison.theorem3 and c.theorem3_steps and backend() == "TransformerBridge":
        metrics["pruning"]["theorem3_skipped"] = (
            "the random network of Theorem 3 is a HookedTransformer (its weight "
            "mask uses 3.9's parameter names): run it under TransformerLens 3.9"
        )
    elif comparison.theorem3 and c.theorem3_steps:
        metrics["pruning"]["theorem3"] = _theorem3(
            comparison, models, eval_words, c.theorem3_steps, c.corollary3_steps, seed, progress
        )
    metrics["example"] = _write_example_patterns(out, comparison, models, seed)
    metrics["seconds"] = round(time.time() - started, 1)
    write_json(out / "metrics.json", metrics, strict=False)
    return write_report(out)


def _circuits(models: dict, matching: dict[str, list[dict]], pairs: int, seed: int) -> dict[str, Any]:
    """ACDC on every model; constructions scored against their ground truth; the twin's circuit heads
    mapped through the head matching onto each construction's."""
    from sandbox_lens.interp.circuits.analyse import analyse
    from sandbox_lens.interp.circuits.truth import ground_truth_of_model

    out: dict[str, Any] = {"method": "acdc", "pairs": pairs, "models": {}, "overlap": {}}
    heads: dict[str, set[str]] = {}
    for name, model in models.items():
        try:
            r = analyse(model, "acdc", None if name == TWIN else ground_truth_of_model(model), pairs=pairs, seed=seed)
        except SandboxError as e:  # e.g. a twin that answers every pair alike: nothing to explain
            out["models"][name] = {"error": str(e)}
            continue
        circuit_heads = sorted(n for n in r["circuit"]["nodes"] if n.startswith("a"))
        heads[name] = {head_name((int(n[1:].split(".")[0]), int(n.split(".")[1]))) for n in circuit_heads}
        out["models"][name] = {
            "edges": len(r["circuit"]["edges"]),
            "graph_edges": len(r["graph"]["edges"]),
            "heads": sorted(heads[name]),
            "nodes": r["circuit"]["nodes"],
            "faithfulness": r["faithfulness"],
            "faithfulness_kl": r["faithfulness_metrics"]["kl"],
            "corruption": r["pairs"]["corruption"],
            "affected_outputs": r["pairs"]["affected_outputs"],
            "auroc": r.get("auroc"),
            "precision": r.get("edge_precision"),
            "recall": r.get("edge_recall"),
            "relevant_edges": len(r["ground_truth_edges"]) if "ground_truth_edges" in r else None,
            "seconds": r["wall_seconds"],
        }
    for construction, pairs_ in matching.items():
        if TWIN not in heads or construction not in heads:
            continue
        partner = {m["trained"]: m["constructed"] for m in pairs_}
        mapped = {partner[h] for h in heads[TWIN] if h in partner}
        union = mapped | heads[construction]
        out["overlap"][construction] = {
            "twin_heads": sorted(heads[TWIN]),
            "mapped": sorted(mapped),
            "construction_heads": sorted(heads[construction]),
            "shared": sorted(mapped & heads[construction]),
            "jaccard": len(mapped & heads[construction]) / len(union) if union else None,
        }
    return out


def _causal(models: dict, pairs: int, seed: int, progress: bool) -> dict[str, Any]:
    """Where the twin computes the state, causally, beside each construction and a random-init null, with
    the verdict per construction (sandbox_lens.interp.causal.align)."""
    from sandbox_lens.interp.causal.align import align, nulls_of

    twin = models[TWIN]
    return align(
        twin,
        constructions={n: m for n, m in models.items() if n != TWIN},
        null=nulls_of(twin, seed),
        pairs=pairs,
        das_steps=100,
        seed=seed,
        progress=progress,
    )


def _write_example_patterns(out: Path, comparison: Comparison, models: dict, seed: int) -> dict[str, Any]:
    """Every model's live heads on one example word, as square canonical pictures, into PATTERNS_FILE;
    returns what the report needs to label them (the word's tokens, the array names per model)."""
    import io

    word = comparison.example_word(seed)
    arrays: dict[str, np.ndarray] = {}
    heads: dict[str, list[list[str]]] = {}
    for name, model in models.items():
        data = comparison.inputs(model, np.asarray(word)[None], with_latents=False)
        pats = attention_patterns(model, data.tokens)
        heads[name] = []
        for (layer, head), p in pats.items():
            key = f"{len(arrays)}"
            arrays[key] = square(p[0], data.prefix)
            heads[name].append([head_name((layer, head)), key])
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)  # type: ignore[arg-type]  # numpy stubs type **kwds as allow_pickle
    atomic_write(out / PATTERNS_FILE, buf.getvalue())
    shown = comparison.display_tokens(next(iter(models.values())), word)
    return {
        "tokens": [comparison.prefix_label, *shown[len(shown) - len(word) :]],
        "heads": heads,
        "patterns": PATTERNS_FILE,
    }


COROLLARY3_SHARED = ("blocks.1.attn.W_K",)  # the one matrix both prunings must share


def _theorem3(
    comparison: Any,  # a comparison whose task has Theorem 3's pruning (its ``theorem3`` is true: Dyck)
    models: dict,
    eval_words,
    steps: int,
    corollary3_steps: int | None,
    seed: int,
    progress: bool,
) -> dict:
    """Theorem 3 (a random network pruned into the stack construction) and, when both the stack
    and the uniform constructions are compared, Corollary 3 (both pruned out of one random network
    with one shared pruned matrix)."""
    from sandbox_lens.probes.weight_mask import RandomShape, learn_weight_mask, learn_weight_masks, random_transformer

    name = "stack" if "stack" in models else next(n for n in models if n != TWIN)
    target = models[name]
    shape = RandomShape(n_layers=2 * target.cfg.n_layers)
    large = random_transformer(target.cfg.d_vocab, target.cfg.d_vocab_out, comparison.length, shape, seed=seed)
    data = comparison.inputs(target, eval_words, with_latents=False)
    eval_data = (data.tokens, data.targets, data.score_mask)

    def batches(step: int) -> np.ndarray:
        return comparison.task.batch(step_rng(seed, step, Stream.THEOREM3_BATCHES), 32).tokens

    r = learn_weight_mask(target, large, batches, eval_data, steps=steps, seed=seed, progress=progress)
    r.update({"target": name, "random_shape": shape.__dict__})
    if corollary3_steps and {"stack", "uniform"} <= set(models):
        pair = ("stack", "uniform")
        c = learn_weight_masks(
            [models[n] for n in pair],
            large,
            batches,
            eval_data,
            steps=corollary3_steps,
            shared=COROLLARY3_SHARED,
            seed=seed,
            progress=progress,
        )
        r["corollary3"] = {
            "targets": {n: t for n, t in zip(pair, c["targets"])},
            "shared": c["shared"],
            "shared_identical": c["shared_identical"],
            "other_masks_jaccard": c["other_masks_jaccard"],
            "steps": corollary3_steps,
        }
    return r


def comparison_of_task(task: dict[str, Any]) -> Comparison:
    """The adapter for a training task's description (``task.to_dict()``, e.g. from a run's checkpoint):
    the ``comparison`` its kind names in the registry."""
    from sandbox_lens.interp.tasks.kinds import resolve, task_kind

    kind = task_kind(task)
    if kind.comparison is None:
        raise SandboxError(f"{kind.name} tasks have no `interp compare` adapter")
    return resolve(kind.comparison).from_task(kind.task_from_dict(task))


def comparison_for(
    task: str, *, dyck: tuple[int, int] = (2, 4), length: int | None = None, ffl: float = 0.8
) -> Comparison:
    """The adapter for ``interp compare TASK``: a task kind's name (``dyck``: Dyck_``dyck``; ``ffl``:
    FFL(``ffl``)) or a catalogue automaton's; ``length`` defaults to the kind's comparison length."""
    from sandbox_lens.interp.tasks.kinds import AUTOMATON, kind_names, task_kind

    if task in kind_names():
        kind, values = task_kind(task), {"dyck": f"{dyck[0]},{dyck[1]}", "ffl": str(ffl)}
    else:  # a catalogue automaton
        kind, values = AUTOMATON, {"automaton": task}
    t = kind.task_from_options(values, length or kind.compare_length or kind.default_length)
    return comparison_of_task(t.to_dict())
