"""Which algorithm, how fast (``make bench``; alone: ``python benchmarks/identify.py``).

1. **The batched sweep against one intervention per forward.** Full swaps at every residual site and position
   of a 2-layer C3 twin (T = 8): :func:`sandbox_lens.interp.causal.identify.sweep` (one forward per
   site, every position at once) against :func:`sandbox_lens.interp.causal.interchange.interchange` at each
   (site, position) in turn, at 16 and 128 pairs; the two alternate, five repeats each, in CPU time, and the
   ratio is printed pair by pair with its median. Both give the same answers (tests/causal/test_identify.py).
   Batching saves the per-forward overhead, which matters where a forward is small (few pairs); the sweep's
   residual swaps also run only the blocks after their hook, on the bare forward, which is what it gains at 128
   pairs, where the arithmetic dominates.
   Then the cost of one interchange in the sweep — every residual and component site of the twin, 128 pairs, its
   CPU time divided by (sites × positions), the words' streams and the source activations included — against one
   bare forward of the same 128 words (issue 47: at most 2×), alternating, five repeats.
2. **DAS on the rest of the model against hooked steps.** One 100-step DAS fit of the C3 twin's state at each
   hook ``identify --das`` fits (the cached streams at the hook, then only the blocks after it on the bare
   forward: :func:`sandbox_lens.interp.causal.das.das`) against the same fit with every step a hooked run of the
   whole model, alternating, five repeats, in CPU time: the ratio per repeat and its median, per hook.
3. **All candidates on a 2-layer twin.** ``identify(twin, "all")`` at the defaults (128 pairs per split, five
   random-init nulls swept the same way) on the C3 twin and a Dyck_{2,4} twin, on one thread, against the
   issue's budget of 3 CPU-minutes; on the C3 twin also with DAS sites (``identify(..., das=True)``).
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

BUDGET = 180.0  # issue 42: a causal section of a 2-layer twin with all candidates within 3 CPU-minutes
REPEATS = 5


def _per_forward(model, hooks, base, source) -> None:
    from sandbox_lens.interp.causal.interchange import Site, answer, interchange, source_activations

    P, T = len(model.card.io.prefix), base.shape[1]
    acts = source_activations(model, source, hooks)
    for hook in hooks:
        for p in range(T):
            answer(interchange(model, base, source, Site(hook, p), activations=acts)[:, P : P + T], None)


def _das_engines(twin) -> None:
    """Section 2: a DAS fit on the bare forward from the hook against the same fit on hooked steps."""
    from sandbox_lens.interp.causal import das as engine
    from sandbox_lens.interp.causal.fitted import STEPS, das_hooks
    from sandbox_lens.interp.causal.highlevel import high_level_of
    from sandbox_lens.interp.causal.interchange import word_pairs

    high = high_level_of(twin)
    base, source = word_pairs(twin, 128, seed=0, high=high)
    bare_tail = engine.bare_tail
    for hook in das_hooks(twin.cfg.n_layers):
        ratios = []
        for _ in range(REPEATS):
            times = []
            for tail in (lambda *_: None, bare_tail):
                engine.bare_tail = tail
                t0 = time.process_time()
                engine.das(twin, high, hook, None, 2, base, source, steps=STEPS, seed=0)
                times.append(time.process_time() - t0)
            engine.bare_tail = bare_tail
            ratios.append(times[0] / times[1])
        print(
            f"a {STEPS}-step DAS fit at {hook}, 128 pairs (C3 twin): hooked steps / bare forward from the hook, "
            "per repeat: " + ", ".join(f"{r:.2f}" for r in ratios) + f"; median {statistics.median(ratios):.2f}×"
        )


def _per_interchange(twin) -> None:
    """Section 1, last line: one interchange of the sweep against one bare forward of the same words."""
    from sandbox_lens.interp.causal.identify import sweep
    from sandbox_lens.interp.causal.interchange import word_pairs
    from sandbox_lens.interp.causal.sweep import model_sites
    from sandbox_lens.interp.model.bare import bare_forward
    from sandbox_lens.interp.model.device import on
    from sandbox_lens.interp.model.run import exact_precision

    base, source = word_pairs(twin, 128, seed=0)
    sites = [(h, None) for h in model_sites(twin)]
    forward, tokens = bare_forward(twin), on(twin, twin.card.io.encode(base))
    ratios = []
    for _ in range(REPEATS):
        t0 = time.process_time()
        sweep(twin, sites, base, source, None)
        each = (time.process_time() - t0) / (len(sites) * base.shape[1])
        t0 = time.process_time()
        with exact_precision():
            for _ in range(10):
                forward(tokens)
        ratios.append(each / ((time.process_time() - t0) / 10))
    print(
        f"one interchange in the sweep ({len(sites)} residual and component sites × {base.shape[1]} positions, 128 "
        "pairs, C3 twin) / one bare forward of the same words, per repeat: "
        + ", ".join(f"{r:.2f}" for r in ratios)
        + f"; median {statistics.median(ratios):.2f}× (issue 47: ≤ 2)"
    )


def main() -> None:
    import torch

    from sandbox_lens.interp.causal.align import nulls_of
    from sandbox_lens.interp.causal.identify import identify, residual_sites, sweep
    from sandbox_lens.interp.causal.interchange import word_pairs
    from sandbox_lens.interp.tasks.batches import AutomatonTask, DyckTask
    from sandbox_lens.interp.tasks.catalogue import get_automaton
    from sandbox_lens.interp.tasks.dyck import Dyck
    from sandbox_lens.interp.train import ModelShape, TrainConfig, load_trained, train

    torch.set_num_threads(1)
    cases = [
        ("C3, T = 8", AutomatonTask(get_automaton("C3"), 8), ModelShape(n_layers=2, d_model=64, n_heads=2), 400),
        ("Dyck_{2,4}, N = 16", DyckTask(Dyck(2, 4), 16), ModelShape(n_layers=2, d_model=50, n_heads=1, d_mlp=50), 600),
    ]
    worst = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for i, (title, task, shape, steps) in enumerate(cases):
            metrics = train(task, shape, TrainConfig(steps=steps, seed=0), Path(tmp) / str(i), progress=False)
            twin = load_trained(Path(tmp) / str(i))
            if i == 0:
                hooks = residual_sites(twin.cfg.n_layers)
                for pairs in (16, 128):
                    base, source = word_pairs(twin, pairs, seed=0)
                    ratios = []
                    for _ in range(REPEATS):
                        t0 = time.process_time()
                        _per_forward(twin, hooks, base, source)
                        one = time.process_time() - t0
                        t0 = time.process_time()
                        sweep(twin, [(h, None) for h in hooks], base, source, None)
                        batched = time.process_time() - t0
                        ratios.append(one / batched)
                    print(
                        f"full swaps at {len(hooks)} residual sites × {base.shape[1]} positions, {pairs} pairs "
                        f"({title} twin): one intervention per forward / batched sweep, per repeat: "
                        + ", ".join(f"{r:.1f}" for r in ratios)
                        + f"; median {statistics.median(ratios):.1f}×"
                    )
                _per_interchange(twin)
                _das_engines(twin)
            for das in (False, True) if i == 0 else (False,):
                t0 = time.process_time()  # fresh nulls each time: nothing remembered from the other call
                found = identify(twin, "all", nulls=nulls_of(twin, 0), das=das)
                seconds = time.process_time() - t0
                worst = max(worst, seconds)
                print(
                    f"all candidates on a 2-layer {title} twin (accuracy {metrics['final_accuracy']:.3f})"
                    f"{', with DAS sites' if das else ''}: {found['verdict']}; {seconds:.1f} CPU-s (budget {BUDGET:.0f})"
                )
    print(f"identify: slowest/budget {worst / BUDGET:.2f}")


if __name__ == "__main__":
    main()
