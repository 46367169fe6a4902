# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Tutorial 11 — which proven algorithm does this twin run?
#
# Every correct algorithm for an automaton gives the same answers, so an interchange on the final state cannot
# tell them apart. What tells them apart is their *intermediate* variables: the prefix scan's windows of 2^l
# symbols, the counter's running count, the Krohn–Rhodes cascade's levels, the sign of the prefix that a
# "parity first" model computes early. Each is a record of `sandbox_lens.interp.causal.algorithms.ALGORITHMS`
# — its variables, the edges by which they reach later outputs, the construction that builds it exactly, and
# when a task cannot have it.

# %%
from IPython.display import Image, display

import sandbox_lens as sl
from sandbox_lens.interp.causal.algorithms import ALGORITHMS, resolve
from sandbox_lens.interp.causal.align import nulls_of
from sandbox_lens.interp.causal.identify import identify
from sandbox_lens.interp.viz import candidates_png

for a in ALGORITHMS.values():
    print(f"{a.name:<13} {a.kind:<10} {a.summary}")
print()
possible, refused = resolve("all", "automaton", sl.get_automaton("C3"), 8)
print("C3 can have:", [a.name for a in possible])
print("and not:", refused)

# %% [markdown]
# ## The constructions are identified as the algorithms they build
#
# `identify` swaps every residual site and every head's and MLP's output from a source word, at every position,
# and scores each candidate's variables against what *its* high-level model predicts. Sites are chosen on one
# split of the pairs and reported on another; random-init models of the same shape are searched the same way.
# The prefix-scan construction on C3 passes the scan (windows, then state) and fails the counter; the counter
# construction the reverse.

# %%
for name in ("prefix_scan", "modular_counter"):
    model = sl.load(name, "C3", length=8)
    found = identify(model, "all", nulls=nulls_of(model, 0, n=1), pairs=32)
    print(f"{name}: {found['verdict']}")
    for row in found["candidates"]:
        print(
            f"   {row['algorithm']:<11} {row['status']:<8} score {row['score']['iia']:.3f}  "
            + ", ".join(f"{v['variable']} {v['iia']:.2f}" for v in row["variables"])
        )

# %% [markdown]
# The Krohn–Rhodes construction on S3 carries the cascade's two levels (the sign of the permutation, then its
# position in A3) where its proof puts them:

# %%
kr = sl.load("krohn_rhodes", "S3", length=8)
found = identify(kr, "all", nulls=nulls_of(kr, 0, n=1), pairs=32)
print(found["verdict"])
display(Image(candidates_png(found)))

# %% [markdown]
# ## S5: the scan, parity first, or the recurrent update
#
# S5 is not solvable, so it has no cascade; its rivals are the ones Li, Guo & Andreas (2025) saw language models
# choose between: the associative scan (AA) and parity first, then the scan (PAA). A window of the scan holds one
# of S5's 120 permutations (or, for a window that begins before the word, a constant map), and the prefix's sign
# comes from composing its symbols. The prefix scan construction is identified as the scan. PAA fails at its
# `sign` alone: the construction keeps no sign apart from the state, so no site moves it by itself.

# %%
s5 = sl.load("prefix_scan", "S5", length=8)
found = identify(s5, "all", nulls=nulls_of(s5, 0, n=1), pairs=32)
print(found["verdict"])
for row in found["candidates"]:
    print(
        f"   {row['algorithm']:<12} {row['status']:<8} score {row['score']['iia']:.3f}  "
        + ", ".join(f"{v['variable']} {v['iia']:.2f}" for v in row["variables"])
    )

# %% [markdown]
# ## A twin
#
# A 2-layer twin of C3, trained for a few hundred steps on a CPU. Its score for each candidate is the IIA of all
# that candidate's interventions together; a candidate *passes* only when every variable clears the bar (0.95 ×
# the twin's accuracy, 0.25 above chance, above every null). "None of these" is an answer, and so is
# "inconclusive" when resamples of the pairs disagree.

# %%
import tempfile
from pathlib import Path

from sandbox_lens.interp.tasks.batches import AutomatonTask
from sandbox_lens.interp.train import ModelShape, TrainConfig, load_trained, train

run = Path(tempfile.mkdtemp()) / "c3"
task = AutomatonTask(sl.get_automaton("C3"), 8)
metrics = train(
    task,
    ModelShape(n_layers=2, d_model=64, n_heads=2),
    TrainConfig(steps=600, eval_every=50, target_accuracy=0.99, keep_checkpoints=3),
    run,
    progress=False,
)
twin = load_trained(run)
found = identify(twin, "all", nulls=nulls_of(twin, 0, n=1), pairs=32)
print(f"accuracy {metrics['final_accuracy']:.3f}: {found['verdict']}")
for row in found["candidates"]:
    print(
        f"   {row['algorithm']:<11} {row['status']:<8} score {row['score']['iia']:.3f}  "
        + ", ".join(f"{v['variable']} {v['iia']:.2f} ({v['status']})" for v in row["variables"])
    )

# %% [markdown]
# ## Over training
#
# The run kept its model at log-spaced evaluations (`keep_checkpoints=3`; `interp train --keep-checkpoints 3`).
# Identifying each shows when, and in what order, a candidate's variables appear (`interp align --run DIR
# --checkpoints` does this from the shell).

# %%
from sandbox_lens.interp.causal.over_training import over_training
from sandbox_lens.interp.viz import over_training_png

history = over_training(run, "all", pairs=16, nulls=1)
for row in history["steps"]:
    print(
        f"step {row['step']:>4}: accuracy {row['accuracy']:.3f}, "
        + ", ".join(f"{n} {c['score']:.2f}" for n, c in row["candidates"].items())
        + f" -> {row['identified']}"
    )
display(Image(over_training_png(history)))

# %% [markdown]
# The census of plain twins (`interp experiment algorithm-census`: parity, C3, C4, S3, A4 and Dyck_{2,4}, two
# depths, ten seeds each) is in the docs' Causal alignment page (`docs/causal.md`, "The census").
