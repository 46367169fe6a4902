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
# # Tutorial 8 — circuit discovery against a proof
#
# Circuit-discovery methods are usually judged on models whose circuit nobody knows for sure. A
# construction is different: its weights *are* a proof, so the circuit it uses can be read off them.
# This tutorial derives that ground truth, checks that it is what the model really uses, then runs
# four methods against it — activation patching, path patching, attribution patching and ACDC — and
# looks at what each one misses and why; then it adds *informative negatives* to a construction, so
# that a method can be wrong, and compares the methods that way. The same commands run on a trained
# twin, where no ground truth exists. (`interp circuit` does all of this from the shell;
# `make leaderboard` runs every method on every family: docs/circuits/leaderboard.md.)

# %%
import torch
from IPython.display import Image, display

from sandbox_lens.constructions.registry import build
from sandbox_lens.interp.circuits.analyse import analyse
from sandbox_lens.interp.circuits.draw import circuit_png
from sandbox_lens.interp.circuits.pairs import make_pairs
from sandbox_lens.interp.circuits.patching import Patcher
from sandbox_lens.interp.circuits.truth import ground_truth
from sandbox_lens.interp.model.hooked import to_hooked
from sandbox_lens.interp.tasks.catalogue import get_automaton

spec = build("prefix_scan", get_automaton("S5"), 8)
model = to_hooked(spec)
truth = ground_truth(spec)
print(
    f"{spec.name} for S5 at T = 8: {spec.n_layers} blocks, {len(truth.graph.nodes)} nodes, "
    f"{len(truth.graph.edges)} edges in the complete graph"
)
print(f"structural edges (something nonzero written where the reader reads): {len(truth.structural)}")
print(f"task-relevant edges (word information that reaches the logits):       {len(truth.relevant)}")

# %% [markdown]
# ## The ground truth comes from the weights
#
# Every component writes named residual subspaces and reads others (the construction was written
# that way). An edge writer → reader is **structural** when the writer puts something nonzero where
# the reader's query, key, value or MLP input reads. It is **task-relevant** when what travels on it
# depends on the input word: the position code is read by the heads (structural) but is the same
# for every word, so it carries nothing a counterfactual could change.

# %%
for e, subspaces in list(truth.relevant.items())[:8]:
    print(f"  {e.name:18s} through {', '.join(subspaces)}")
print("structural but not relevant:", ", ".join(e.name for e in truth.structural if e not in truth.relevant)[:300])

# %% [markdown]
# ## It is what the model uses
#
# A counterfactual pair is a clean word and a corrupted one (here: one symbol changed). Patching an
# edge makes its reader see the corrupted word's value on that edge alone. Patch every edge *outside*
# the ground truth and nothing changes; patch every edge *inside* it and the clean word is answered
# as the corrupted one. The test suite checks this on every construction family.

# %%
pairs = make_pairs(model, 48, seed=0)
patcher = Patcher(model, truth.graph)
source = patcher.source(pairs)
relevant = [e for e in truth.graph.edges if e in truth.relevant]
other = [e for e in truth.graph.edges if e not in truth.relevant]
with torch.inference_mode():
    print("accuracy with every other edge patched:  ", pairs.accuracy(patcher.run(pairs.clean, other, source)[0]))
    print("accuracy with every relevant edge patched:", pairs.accuracy(patcher.run(pairs.clean, relevant, source)[0]))

# %% [markdown]
# ## Four methods, one scorecard
#
# Each method scores edges (activation patching scores nodes) by their *effect*: the share of the
# clean-vs-corrupted gap in the metric that patching removes. The AUROC says how well that ranking
# puts ground-truth edges first; the recovered circuit (effects ≥ 0.01, or what ACDC keeps) gets a
# precision, a recall and a faithfulness: its accuracy on the outputs the corruption changes when
# everything outside it is patched.

# %%
results = {m: analyse(model, m, truth, pairs=48) for m in ("patching", "path", "attribution", "acdc")}
print(f"{'method':12s} {'AUROC':>6s} {'precision':>9s} {'recall':>6s} {'faithful':>8s} {'seconds':>7s}")
for m, r in results.items():
    p = r["edge_precision"] if r["level"] == "edge" else r.get("node_precision")
    rc = r["edge_recall"] if r["level"] == "edge" else r.get("node_recall")
    print(f"{m:12s} {r['auroc']:6.3f} {p:9.3f} {rc:6.3f} {r['faithfulness']:8.3f} {r['wall_seconds']:7.2f}")

# %%
display(Image(circuit_png(results["acdc"], "prefix scan, S5, T = 8: ACDC")))

# %% [markdown]
# **ACDC** finds the prefix scan's chain: it keeps no edge outside the ground truth and its circuit
# answers like the full model. **Path patching** ranks almost as well, but a circuit made of the edges
# that matter *one at a time* is not faithful: the scan composes maps along a tree, and several edges
# that each move the metric little are needed together. **Attribution patching** is the fastest (one
# backward pass for every edge) and the least reliable here, for a reason the next cell shows.

# %% [markdown]
# ## Why attribution patching misses edges: flat ReLU staircases
#
# Lemma 15's modular counter sums the symbols' values with one head and turns the sum into a state
# with an MLP whose ReLUs form a staircase. Every clean input sits on a flat step, so the gradient
# through the MLP is zero: the linear estimate gives the edges into the MLP no effect at all, while
# really patching them flips the answer.

# %%
counter = build("modular_counter", get_automaton("C3"), 8)
c_truth = ground_truth(counter)
c_path = analyse(to_hooked(counter), "path", c_truth, pairs=48)
c_attr = analyse(to_hooked(counter), "attribution", c_truth, pairs=48)
for e in c_truth.relevant:
    print(
        f"  {e.name:16s} path patching {c_path['edges'][e.name] + 0.0:.3f}   attribution {c_attr['edges'][e.name] + 0.0:.3f}"
    )

# %% [markdown]
# ## What a method *can* find: the counterfactual and the ablation decide
#
# The flip-flop construction first finds the latest write (layer 1), then copies its bit (layer 2).
# Flipping one written bit moves no write, so the edges of the write detector carry the *same* value
# in both strings: no resampling method can see them. The ground truth comes in levels, and the
# `resample` level — the one a method that patches from the corrupted word is scored against — leaves
# such edges out, with the reason `invisible`. Resampling the instructions puts them back.

# %%
ffl = build("ffl", None, 16)
f_truth = ground_truth(ffl)
for corruption in ("bit", "resample"):
    r = analyse(to_hooked(ffl), "acdc", f_truth, pairs=48, corruption=corruption)
    invisible = [e for e, v in r["levels"]["edges"].items() if v["absent"].get("resample") == "invisible"]
    print(
        f"{corruption:9s}: {len(r['ground_truth_edges'])} edges at the resample level; recall {r['edge_recall']:.2f}; "
        f"invisible to this corruption: {invisible or 'nothing'}"
    )

# %% [markdown]
# ## When the proof routes word information that the task never varies
#
# The Krohn–Rhodes construction for S4 routes the symbols into its first level, the sign of the
# permutation so far. But both of this S4's generators — (0 1) and (0 1 2 3) — are odd, so that sign
# is just t mod 2: the same for every word of a length. The weights say those edges *could* carry
# word information (they are task-relevant); the data say no counterfactual moves them, so the
# `resample` level leaves them out and no method is charged for missing them.

# %%
from sympy.combinatorics import Permutation

kr = build("krohn_rhodes", get_automaton("S4"), 16)
k_truth = ground_truth(kr)
r = analyse(to_hooked(kr), "acdc", k_truth, pairs=48, corruption="resample")
print(
    "relevant but invisible:",
    [e for e, v in r["levels"]["edges"].items() if v["absent"].get("resample") == "invisible"],
)
print("missed:", {e: m["reason"] for e, m in r["missed"].items()} or "nothing")
s4 = get_automaton("S4")
print("signs of the generators:", {a: Permutation(list(s4.delta[i])).signature() for i, a in enumerate(s4.alphabet)})

# %% [markdown]
# ## Making methods fail: informative negatives
#
# On a bare construction every edge outside the circuit has effect exactly 0 under resampling, so
# every patching method's precision is 1 whatever it does. `negatives=` adds parts that keep the model
# exact but are *not* in its circuit: a distractor that reads the word and writes where nothing reads,
# a pair of heads whose outputs cancel exactly (patching one moves the logits, patching both does
# not), and a sharp, word-dependent attention pattern over a constant value. The ground truth finds the
# cancelling pair in the weights and leaves it out (reason `cancelled`). Now the methods differ:
# path patching, which patches one edge at a time, keeps the pair; ACDC, which tests each removal
# against the circuit so far, drops it here (not on every family); learned edge masks, trained
# jointly, could close both gates together but keep most of it; the activation-magnitude baseline
# keeps everything loud.

# %%
grid = build("gridworld", get_automaton("grid4"), 8, negatives="distractor,cancel,constant")
g_truth, g_model = ground_truth(grid), to_hooked(grid)
print("cancelling pair found in the weights:", g_truth.flow.cancelled)
print(f"{'method':10s} {'AUROC':>6s} {'AP':>6s} {'precision':>9s} {'recall':>6s}  spurious (why)")
for m in ("path", "acdc", "masks", "magnitude"):
    r = analyse(g_model, m, g_truth, pairs=32)
    why = sorted(set(r["spurious"].values()))
    print(
        f"{m:10s} {r['auroc']:6.3f} {r['average_precision']:6.3f} {r['edge_precision']:9.3f} {r['edge_recall']:6.3f}  "
        f"{len(r['spurious'])} ({', '.join(why) or '—'})"
    )
display(Image(circuit_png(analyse(g_model, "path", g_truth, pairs=32), "gridworld grid4 + negatives: path patching")))

# %% [markdown]
# ## A trained twin
#
# On a twin the same methods run, without scores (there is no proof to score against). Here a tiny
# parity twin, trained for a few seconds: what ACDC keeps, and how faithful that is.

# %%
import tempfile
from pathlib import Path

from sandbox_lens.interp.tasks.batches import AutomatonTask
from sandbox_lens.interp.train import ModelShape, TrainConfig, load_trained, train

run = Path(tempfile.mkdtemp()) / "parity-twin"
train(
    AutomatonTask(get_automaton("parity"), 8),
    ModelShape(n_layers=2, d_model=32, n_heads=2),
    TrainConfig(steps=150, batch=64, lr=3e-3, warmup=20, eval_every=150, seed=0),
    run,
    progress=False,
)
twin = load_trained(run)
r = analyse(twin, "acdc", None, pairs=48)
print(
    f"twin: {len(r['circuit']['edges'])} of {len(r['graph']['edges'])} edges kept, faithfulness {r['faithfulness']:.3f}"
)
display(Image(circuit_png(r, "parity twin: ACDC")))
