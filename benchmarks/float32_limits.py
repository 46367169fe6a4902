"""Measure how close each construction runs to float32's limits (``make bench``).

For every construction it measures, on the built HookedTransformer in float32, the quantity
that decides exactness, next to the tolerance the construction's MLP allows:

* prefix scan: the look-back heads' smallest score gap (target − best other key) over all
  real queries and layers, the smallest softmax weight on the target, and accuracy; for the
  rotary code (default) and the thesis's circle code. The circle code is measured at
  T = 4096 as well, although the library refuses to *verify* it there — this is the evidence
  for that refusal;
* modular counter: the largest error |N·s_t − Σ a_j| of the counting head (tolerance 1/4);
* memory unit: the largest error |mem_t − last write| of the latest-write head (tolerance 1/4);
* flip-flop language (Proposition 3): the largest error of each layer's head output before its
  Lemma 12 threshold — layer 1's flag 1[x_{t−1} = w ∨ x_t = w], layer 2's copied bit — on
  FFL(0.8) and the dense FFL(0.1) (tolerance 1/4 each);
* Krohn–Rhodes, the gridworld detector and Dyck: the largest error of any MLP pre-activation
  against the same weights run in float64, over every block. Their MLPs are Lemma 10 trapezoids
  (pre-activation scaled so that the tolerance is exactly 1), one-hot lookups (integer
  pre-activations, margin 1), the gridworld's windows (integer positions: tolerance 1/2) and
  Dyck's stack-top clamps (threshold 1), so an error below 1/2 cannot change a unit's verdict; the
  largest logit error and the float64 logits' smallest top-2 margin (automata) are printed too.

Timings are printed for information only. Results go to ``reports/bench/float32_limits.json``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sandbox_lens.constructions import build  # noqa: E402
from sandbox_lens.interp.files import atomic_write  # noqa: E402
from sandbox_lens.interp.model.hooked import to_hooked  # noqa: E402
from sandbox_lens.interp.model.run import predict  # noqa: E402
from sandbox_lens.interp.tasks.catalogue import get_automaton  # noqa: E402
from sandbox_lens.interp.tasks.ffl import read_targets, sample_ffl  # noqa: E402

torch.set_float32_matmul_precision("highest")
torch.set_flush_denormal(True)


def lookback_stats(model, T: int) -> dict:
    """Min score gap, min target weight and wrong-argmax fraction over all look-back heads."""
    io = model.card.io
    P = len(io.prefix)
    tokens = torch.tensor([list(io.prefix) + [io.symbol_tokens[0]] * T])
    gaps, weights, wrong = [], [], 0
    for layer, block in enumerate(model.card.attention_blocks, start=1):
        shift = 2 ** (layer - 1)
        names = {f"blocks.{block}.attn.hook_attn_scores", f"blocks.{block}.attn.hook_pattern"}
        with torch.inference_mode():
            _, cache = model.run_with_cache(tokens, names_filter=list(names), stop_at_layer=block + 1)
        scores = cache[f"blocks.{block}.attn.hook_attn_scores"][0, 0, P:, :].double()
        pattern = cache[f"blocks.{block}.attn.hook_pattern"][0, 0, P:, :]
        rows = torch.arange(T)
        target = rows + P - shift
        tgt_scores = scores[rows, target]
        others = scores.clone()
        others[rows, target] = -float("inf")
        gaps.append(float((tgt_scores - others.max(dim=1).values).min()))
        weights.append(float(pattern[rows, target].min()))
        wrong += int((scores.argmax(dim=1) != target).sum())
        del cache
    return {"min_gap": min(gaps), "min_target_weight": min(weights), "wrong_argmax": wrong}


def prefix_scan_rows(samples: int) -> list[dict]:
    rows = []
    a = get_automaton("S5")
    for code, lengths in (("rotary", (1024, 2048, 4096)), ("circle", (1024, 2048, 4096))):
        for T in lengths:
            t0 = time.perf_counter()
            model = to_hooked(build("prefix_scan", a, T, code=code), "float32")
            stats = lookback_stats(model, T)
            words = a.sample(samples, T, seed=T)
            acc = float((predict(model, words) == a.run(words)).mean())
            rows.append(
                {
                    "construction": "prefix_scan",
                    "option": f"code={code}",
                    "automaton": "S5",
                    "T": T,
                    **stats,
                    "accuracy": acc,
                    "samples": samples,
                    "seconds": round(time.perf_counter() - t0, 1),
                }
            )
            print(rows[-1], flush=True)
    return rows


def head_error(model, words: np.ndarray, channel: str, truth: np.ndarray, scale: float) -> float:
    """max |scale · channel − truth| of the block-0 head output over all real positions."""
    io = model.card.io
    tokens = torch.tensor(
        np.concatenate(
            [np.full((len(words), len(io.prefix)), io.prefix[0]), np.asarray(io.symbol_tokens)[words]], axis=1
        )
    )
    idx = model.card.residual_labels.index(channel)
    with torch.inference_mode():
        _, cache = model.run_with_cache(tokens, names_filter="blocks.0.hook_attn_out", stop_at_layer=1)
    got = cache["blocks.0.hook_attn_out"][:, len(io.prefix) :, idx].double().numpy() * scale
    return float(np.abs(got - truth).max())


def counter_and_memory_rows(samples: int) -> list[dict]:
    rows = []
    for name in ("parity", "C5"):
        a = get_automaton(name)
        for T in (1024, 4096):
            t0 = time.perf_counter()
            spec = build("modular_counter", a, T)
            model = to_hooked(spec, "float32")
            words = a.sample(samples, T, seed=T)
            incs = np.asarray(spec.options["increments"])[words]
            err = head_error(model, words, "s", np.cumsum(incs, axis=1), spec.options["N"])
            acc = float((predict(model, words) == a.run(words)).mean())
            rows.append(
                {
                    "construction": "modular_counter",
                    "option": f"N={spec.options['N']}",
                    "automaton": name,
                    "T": T,
                    "max_head_error": err,
                    "tolerance": 0.25,
                    "accuracy": acc,
                    "samples": samples,
                    "seconds": round(time.perf_counter() - t0, 1),
                }
            )
            print(rows[-1], flush=True)
    for name in ("flipflop", "memory5"):
        a = get_automaton(name)
        for T in (1024, 4096):
            t0 = time.perf_counter()
            model = to_hooked(build("memory", a, T), "float32")
            words = a.sample(samples, T, seed=T)
            truth = a.run(words)  # the state is the last written value (or q0)
            err = head_error(model, words, "mem", truth, 1.0)
            acc = float((predict(model, words) == truth).mean())
            rows.append(
                {
                    "construction": "memory",
                    "option": "",
                    "automaton": name,
                    "T": T,
                    "max_head_error": err,
                    "tolerance": 0.25,
                    "accuracy": acc,
                    "samples": samples,
                    "seconds": round(time.perf_counter() - t0, 1),
                }
            )
            print(rows[-1], flush=True)
    return rows


def preactivation_error(spec, tokens: np.ndarray) -> tuple[float, float, float]:
    """(max |pre-activation float32 − float64| over every MLP unit, max |logit error|, min float64 top-2
    logit margin) on ``tokens``, one sequence at a time; the float32 activations are cached, the
    float64 run compares as it goes (both caches at once would need 12 GB for S4 at T = 4096)."""
    m32, m64 = to_hooked(spec, "float32"), to_hooked(spec, "float64")
    names = [f"blocks.{l}.mlp.hook_pre" for l in range(m32.cfg.n_layers)]
    P = len(m32.card.io.prefix)
    worst, logit_err, margin = 0.0, 0.0, float("inf")
    for row in tokens:
        tok = torch.from_numpy(row[None])
        with torch.inference_mode():
            l32, cache = m32.run_with_cache(tok, names_filter=names)
            errors = []

            def compare(x, hook, cache=cache):
                errors.append(float((cache[hook.name].double() - x).abs().max()))

            l64 = m64.run_with_hooks(tok, fwd_hooks=[(n, compare) for n in names])
        worst = max([worst, *errors])
        logit_err = max(logit_err, float((l32.double() - l64).abs().max()))
        top2 = l64[0, P:].topk(2, -1).values
        margin = min(margin, float((top2[:, 0] - top2[:, 1]).min()))
        del cache
    return worst, logit_err, margin


def preactivation_rows(samples: int) -> list[dict]:
    from sandbox_lens.interp.tasks.dyck import Dyck

    rows = []
    cases = [
        ("krohn_rhodes", "S4", {}),
        ("krohn_rhodes", "Q8", {}),
        ("gridworld", "grid5", {}),
        ("gridworld", "grid3x4", {}),
        *(("dyck", "Dyck_{2,4}", {"variant": v}) for v in ("stack", "uniform", "balanced")),
    ]
    for construction, name, opts in cases:
        for T in (1024, 4096):
            t0 = time.perf_counter()
            if construction == "dyck":
                lang = Dyck(2, 4)
                spec = build("dyck", lang, T, **opts)
                tokens = spec.card().io.encode(lang.sample(samples, T, seed=T))  # q = 1/2: long stretches near D
            else:
                a = get_automaton(name)
                spec = build(construction, a, T)
                tokens = spec.card().io.encode(a.sample(samples, T, seed=T))
            err, logit_err, margin = preactivation_error(spec, tokens)
            rows.append(
                {
                    "construction": construction,
                    "option": ", ".join(f"{k}={v}" for k, v in opts.items()),
                    "automaton": name,
                    "T": T,
                    "max_preactivation_error": err,
                    "max_logit_error": logit_err,
                    "min_float64_logit_margin": None if construction == "dyck" else margin,
                    "tolerance": 0.5,
                    "samples": samples,
                    "seconds": round(time.perf_counter() - t0, 1),
                }
            )
            print(rows[-1], flush=True)
    return rows


def ffl_rows(samples: int) -> list[dict]:
    rows = []
    for p in (0.8, 0.1):
        for T in (1024, 4096):
            t0 = time.perf_counter()
            model = to_hooked(build("ffl", None, T), "float32")
            tokens = sample_ffl(p, samples, T, np.random.default_rng(T))
            is_w = tokens == 0
            flag = is_w.copy()
            flag[:, 1:] |= is_w[:, :-1]
            # layer 2 copies data1 from the latest flagged position
            latest = np.maximum.accumulate(np.where(flag, np.arange(T), -1), axis=1)
            bit = (np.take_along_axis(tokens, latest, axis=1) == 4).astype(float)
            labels = model.card.residual_labels
            names = ["blocks.0.hook_attn_out", "blocks.1.hook_attn_out"]
            with torch.inference_mode():
                logits, cache = model.run_with_cache(torch.from_numpy(tokens), names_filter=names)
            flag_raw = cache[names[0]][..., labels.index("flag_raw")].double().numpy()
            bit_raw = cache[names[1]][..., labels.index("bit_raw")].double().numpy()
            written, reads = read_targets(tokens)
            acc = float((logits.argmax(-1).numpy() == written)[reads].mean())
            rows.append(
                {
                    "construction": "ffl",
                    "option": f"FFL({p})",
                    "automaton": "flip-flop language",
                    "T": T,
                    "max_flag_error": float(np.abs(flag_raw - flag).max()),
                    "max_bit_error": float(np.abs(bit_raw - bit).max()),
                    "tolerance": 0.25,
                    "accuracy": acc,
                    "samples": samples,
                    "seconds": round(time.perf_counter() - t0, 1),
                }
            )
            print(rows[-1], flush=True)
    return rows


def main() -> None:
    samples = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    sections = {
        "prefix_scan": lambda: prefix_scan_rows(samples),
        "counter_memory": lambda: counter_and_memory_rows(samples),
        "ffl": lambda: ffl_rows(samples),
        "preactivation": lambda: preactivation_rows(min(samples, 2)),
    }
    chosen = sys.argv[2:] or list(sections)  # e.g. `python benchmarks/float32_limits.py 2 preactivation`
    rows = [row for name in chosen for row in sections[name]()]
    out = Path("reports/bench")
    out.mkdir(parents=True, exist_ok=True)
    target = out / ("float32_limits.json" if chosen == list(sections) else f"float32_limits_{'_'.join(chosen)}.json")
    atomic_write(target, (json.dumps(rows, indent=2) + "\n").encode())
    print("\n| construction | option | automaton | T | decisive quantity | accuracy |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        if r["construction"] == "prefix_scan":
            q = f"min gap {r['min_gap']:.3g}, min target weight {r['min_target_weight']:.3g}, wrong argmax {r['wrong_argmax']}"
        elif "max_preactivation_error" in r:
            margin = (
                ""
                if r["min_float64_logit_margin"] is None
                else f", float64 logit margin {r['min_float64_logit_margin']:.3g}"
            )
            q = (
                f"max MLP pre-activation error {r['max_preactivation_error']:.2e} (tolerance 0.5), max logit error "
                f"{r['max_logit_error']:.2e}{margin}"
            )
            print(f"| {r['construction']} | {r['option']} | {r['automaton']} | {r['T']} | {q} | |")
            continue
        elif r["construction"] == "ffl":
            q = f"max flag error {r['max_flag_error']:.2e}, max bit error {r['max_bit_error']:.2e} (tolerance 0.25)"
        else:
            q = f"max head error {r['max_head_error']:.2e} (tolerance 0.25)"
        print(f"| {r['construction']} | {r['option']} | {r['automaton']} | {r['T']} | {q} | {r['accuracy']:.5f} |")
    print(f"\nwritten to {target}")


if __name__ == "__main__":
    main()
