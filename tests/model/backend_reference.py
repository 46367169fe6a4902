"""The TransformerLens 3.9 side of `make test-tl4` (run with .venv's python).

``write DIR``: for every construction at two lengths, the HookedTransformer's logits and its
activations at the hooks the probes read, on fixed words (``DIR/<case>.npz``); a model saved under
3.9 (``DIR/saved-on-tl39``); a small `compare parity` run (``DIR/compare-tl39/metrics.json``); and
the forward-pass time of one model (``DIR/timing.json``). ``tests/model/test_backends.py``, run on 4.x,
checks the bridge against all of it and saves a model into ``DIR/saved-on-tl4``.

``load DIR``: load a model saved under the other back end and verify it exact here.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

#: (case name, construction, source, options) — every construction family; each at two lengths.
CASES = [
    ("prefix_scan-S5", "prefix_scan", "S5", {}),
    ("prefix_scan-parity-circle", "prefix_scan", "parity", {"code": "circle"}),
    ("modular_counter-C3", "modular_counter", "C3", {}),
    ("memory-memory3", "memory", "memory3", {}),
    ("gridworld-grid5", "gridworld", "grid5", {}),
    ("krohn_rhodes-S4", "krohn_rhodes", "S4", {}),
    ("krohn_rhodes-cascade", "krohn_rhodes", "cascade", {}),
    ("dyck-stack", "dyck", "2,3", {"variant": "stack"}),
    ("dyck-uniform", "dyck", "2,3", {"variant": "uniform"}),
    ("dyck-balanced", "dyck", "2,3", {"variant": "balanced"}),
    ("ffl", "ffl", None, {}),
]
LENGTHS = (16, 64)
CASCADE = Path(__file__).resolve().parents[2] / "examples" / "cascades" / "parity_flipflop_counter.json"
TIMED = ("prefix_scan", "S5", 256)


def build_case(construction: str, source: str | None, options: dict, length: int):
    from sandbox_lens.constructions.registry import build
    from sandbox_lens.interp.tasks.catalogue import get_automaton

    if construction == "dyck":
        from sandbox_lens.interp.tasks.dyck import Dyck

        k, D = (int(x) for x in source.split(","))
        return build("dyck", Dyck(k, D), length, **options)
    if source is None:
        return build(construction, None, length, **options)
    if source == "cascade":
        from sandbox_lens.interp.tasks.cascade import load_cascade_file

        c = load_cascade_file(CASCADE)
        return build(construction, c.automaton(), length, cascade=c, **options)
    return build(construction, get_automaton(source), length, **options)


def probe_hooks(n_layers: int) -> list[str]:
    from sandbox_lens.interp.model.run import hook_name

    # the residual hooks and patterns the probes read, and the MLP's hidden units (the largest values in play)
    return [
        hook_name(h, l)
        for l in range(n_layers)
        for h in ("resid_pre", "resid_mid", "resid_post", "pattern", "pre", "post")
    ]


def words_for(model, n: int = 16, seed: int = 0) -> np.ndarray:
    """Token ids of ``n`` fixed inputs at the model's full length."""
    rng = np.random.default_rng(seed)
    card = model.card
    T = card.max_length
    return card.io.encode(rng.integers(card.io.n_symbols, size=(n, T)))


def activations(model, tokens: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    import torch

    from sandbox_lens.interp.model.run import exact_precision

    names = probe_hooks(model.cfg.n_layers)
    with exact_precision():
        logits, cache = model.run_with_cache(torch.from_numpy(tokens), names_filter=names)
        return logits.double().numpy(), {n: cache[n].double().numpy() for n in names}


def forward_seconds(model, tokens: np.ndarray, repeats: int = 7) -> float:
    import torch

    from sandbox_lens.interp.model.run import exact_precision

    x = torch.from_numpy(tokens)
    times = []
    with exact_precision():
        model(x)
        for _ in range(repeats):
            t = time.perf_counter()
            model(x)
            times.append(time.perf_counter() - t)
    return statistics.median(times)


def small_compare(out: Path) -> dict:
    from sandbox_lens.interp.compare.analyse import compare, comparison_for

    compare(
        comparison_for("parity", length=8),
        out,
        constructions=["modular_counter", "prefix_scan"],
        samples=64,
        examples=4,
        train_steps=30,
        masks=False,
        theorem3_steps=0,
        circuit_pairs=0,
        causal_pairs=0,
        progress=False,
    )
    return json.loads((out / "metrics.json").read_text())


#: (case, construction, source, options, method) whose circuit analyses 4.x must reproduce.
CIRCUIT_CASES = [
    ("modular_counter-C3-negatives", "modular_counter", "C3", {"negatives": "distractor,cancel,constant"}, "path"),
    ("gridworld-grid5", "gridworld", "grid5", {}, "acdc"),
    ("dyck-stack", "dyck", "2,3", {"variant": "stack"}, "eap-ig"),
]


def circuit_analyses(engine: str) -> dict:
    """Each circuit case's scores at T = 16 (24 pairs, seed 1) on ``engine``."""
    from sandbox_lens.interp.circuits.analyse import analyse
    from sandbox_lens.interp.circuits.truth import ground_truth_of_model
    from sandbox_lens.interp.model.hooked import to_hooked

    out = {}
    for name, construction, source, options, method in CIRCUIT_CASES:
        model = to_hooked(build_case(construction, source, options, 16))
        r = analyse(model, method, ground_truth_of_model(model), pairs=24, seed=1, curve=False, engine=engine)
        out[name] = {
            "method": method,
            "edges": r.get("edges"),
            "circuit": r["circuit"]["edges"],
            "auroc": r["auroc"],
            "ground_truth_edges": r["ground_truth_edges"],
            "engine": r["engine"],
        }
    return out


def write(directory: Path) -> None:
    import torch

    from sandbox_lens.interp.model.hooked import backend, to_hooked
    from sandbox_lens.interp.model.saved import save_model

    torch.set_num_threads(1)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "measured.txt").unlink(missing_ok=True)
    for name, construction, source, options in CASES:
        for T in LENGTHS:
            model = to_hooked(build_case(construction, source, options, T))
            tokens = words_for(model)
            logits, acts = activations(model, tokens)
            np.savez_compressed(
                directory / f"{name}-T{T}.npz", tokens=tokens, logits=logits, **{f"act:{k}": v for k, v in acts.items()}
            )
    save_model(to_hooked(build_case("memory", "memory3", {}, 16)), directory / "saved-on-tl39")
    small_compare(directory / "compare-tl39")
    (directory / "circuits-tl39.json").write_text(json.dumps(circuit_analyses("hooks")))
    c, s, T = TIMED
    model = to_hooked(build_case(c, s, {}, T))
    timing = {
        "backend": backend(),
        "model": f"{c} {s} T={T}",
        "batch": 64,
        "seconds": forward_seconds(model, words_for(model, 64)),
    }
    (directory / "timing.json").write_text(json.dumps(timing))
    print(f"wrote the {backend()} reference to {directory}")


def load(directory: Path) -> None:
    from sandbox_lens.interp.model.hooked import backend
    from sandbox_lens.interp.model.saved import load_model
    from sandbox_lens.interp.verify import verify

    model = load_model(directory)
    r = verify(model, samples=50)
    if not r.exact:
        raise SystemExit(f"{directory}: loaded under {backend()} but not exact ({r.accuracy})")
    print(f"{directory} loads under {backend()} and is exact ({r.checked} {r.checked_unit})")


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("write", "load"):
        raise SystemExit("usage: backend_reference.py write|load DIR")
    (write if sys.argv[1] == "write" else load)(Path(sys.argv[2]))
