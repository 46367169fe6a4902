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
# # Tutorial 3 — the gridworld in two attention layers (Theorem 12)
#
# The gridworld `grid<n>` is a walker on n cells: L moves left, R moves right, and the walls
# stop it. It contains no group at all, yet Tutorial 2's Krohn–Rhodes cascade needs 2n − 3
# attention layers for it. Theorem 12 says **two** suffice, for every n and every length.
#
# **The algorithm in words.** Let z_t be the sum of the moves so far (L = −1, R = +1), ignoring
# the walls. Whenever the walker is pressed against a wall, z keeps moving but the state does not;
# between wall contacts, state and z move together. So the state is z_t minus the value z had at
# the last time the walker stood at the left wall — or, equivalently, the values of z seen since
# the last wall contact span exactly the S + 1 = n cells. The recipe:
#
# 1. compute every prefix sum z_t (one attention layer with an attention sink: Lemma 15);
# 2. for each offset k = −S..S, find the latest position whose prefix sum is z_t + k (one head per
#    offset, in the second attention layer) — or notice that the value never occurred;
# 3. among the windows of S + 1 consecutive values that contain z_t and were all visited, take the
#    one whose oldest endpoint is most recent: if it is [lo, lo + S], the state is z_t − lo. That
#    oldest endpoint is where the walker last touched a wall — the *boundary*.
#
# Step 3 is a max over a few numbers, which the unembedding's argmax does for free.

# %%
import numpy as np

from sandbox_lens.constructions import build
from sandbox_lens.interp.model.hooked import to_hooked
from sandbox_lens.interp.model.run import attention_patterns
from sandbox_lens.interp.tasks.catalogue import get_automaton
from sandbox_lens.interp.verify import verify
from sandbox_lens.interp.viz import circuitsvis_heads, heatmap_png

grid = get_automaton("grid5")
S = grid.n_states - 1
print(grid, "—", grid.description)

# %% [markdown]
# ## Algorithm 1 in plain numpy
#
# Before looking at weights, the algorithm itself on one walk: the state equals z_t minus the
# lower end of the most recent complete window.

# %%
rng = np.random.default_rng(0)
word = rng.integers(2, size=30)
moves = np.where(word == 1, 1, -1)
pad = -np.ones(S + 1, dtype=int)  # S + 1 L moves first: the walker starts at the left wall
z = np.cumsum(np.concatenate([pad, moves]))
states = grid.run(word)
for t in range(len(pad), len(z)):
    seen = set(z[: t + 1])
    complete = [lo for lo in range(z[t] - S, z[t] + 1) if all(v in seen for v in range(lo, lo + S + 1))]
    last = {v: max(i for i in range(t + 1) if z[i] == v) for v in seen}
    best = max(complete, key=lambda lo: min(last[lo], last[lo + S]))
    assert z[t] - best == states[t - len(pad)]
print("Algorithm 1 reproduces all", len(word), "states")

# %% [markdown]
# ## Build and verify
#
# Layer 1 holds one counting head; layer 2 holds 2S + 1 offset heads. The MLPs are one hidden
# layer each: the first rounds the prefix sum and writes ±1 bit codes of z and z + k, the second scores the
# windows. Exactly two TransformerLens blocks, both with attention.

# %%
T = 64
spec = build("gridworld", grid, T)
print(spec.shape_summary())
for i, block in enumerate(spec.blocks):
    print(f"block {i}: {block.label} ({len(block.heads)} heads)")
model = to_hooked(spec)
result = verify(model, samples=300, exhaustive_upto=10)
print(f"accuracy {result.accuracy} over {result.checked} positions")
assert result.exact
for n in (2, 3, 9, 16):
    s = build("gridworld", get_automaton(f"grid{n}"), 256)
    print(f"grid{n:<2d} at T = 256: n_layers {s.n_layers}, attention layers {s.attention_layers}, heads {s.n_heads}")

# %% [markdown]
# ## Look at the heads
#
# The layer-1 head is a prefix average: a sink on BOS plus equal weight on every move. Each
# layer-2 head looks up one value of z. Below, the model's input is `BOS`, the padding moves, then
# the walk.

# %%
from IPython.display import HTML, Image, display

word = grid.sample(1, 24, seed=1)[0]
ids, tokens = model.card.io.encode(word), model.card.token_names(word)
patterns = {head: p[0] for head, p in attention_patterns(model, ids).items()}
labels = {key: model.card.block_labels[key[0]] for key in patterns}
display(
    Image(
        heatmap_png(
            {k: v for k, v in patterns.items() if k[0] == 1}, tokens, "grid5: layer-2 offset heads (one per k = -S..S)"
        )
    )
)
HTML(circuitsvis_heads(patterns, tokens))

# %% [markdown]
# ## The boundary detector score
#
# At each query position, where did the walker last touch a wall? A head "detects the boundary"
# when its largest attention weight is on that position. In this construction the detection is
# *distributed over the offset heads*: the head whose offset is the winning window's oldest
# endpoint attends exactly there, so some layer-2 head detects the boundary at every position,
# while no single head does.

# %%
from sandbox_lens.probes.boundary import boundary_detector_scores

scores = boundary_detector_scores(model, grid.sample(50, T, seed=2))
print("per block (some head on the boundary):", scores.blocks)
for (block, head), value in scores.heads.items():
    if block == 1:
        print(f"  layer-2 head {head} (offset {head - S:+d}): {value:.3f}")
assert scores.blocks[1] == 1.0

# %% [markdown]
# Compare the Krohn–Rhodes cascade for the same automaton (Tutorial 2): its heads remember the
# last move into each level (or fetch the previous position), and none of its layers detects the
# boundary at every position — two exact simulators of one automaton, two different attention
# stories.

# %%
kr = to_hooked(build("krohn_rhodes", grid, T))
print("krohn_rhodes cascade, per block:", boundary_detector_scores(kr, grid.sample(50, T, seed=2)).blocks)

# %% [markdown]
# ## What breaks if you build it as printed
#
# The thesis's network (automata-and-gridworld.md §1.5 lists five defects) has no padding: early
# in a walk fewer than S + 1 distinct prefix sums have been seen, so no window is complete and the
# read-out has nothing to go on. `as_printed="no_padding"` rebuilds that: the errors sit at the
# start of the walks, and get worse as n grows because more values must be seen first.

# %%
for n in (3, 5, 9):
    a = get_automaton(f"grid{n}")
    broken = verify(build("gridworld", a, 32, as_printed="no_padding"), samples=200, exhaustive_upto=6)
    print(f"grid{n}: accuracy {broken.accuracy:.3f}; first mismatch at t = {broken.mismatches[0].position}")

# %% [markdown]
# The other printed defects are repaired in the construction's design rather than switchable:
# the circle code cos(πz/2N) of the prefix sum is replaced by ±1 bit codes of z (the match
# margin is 2γ at every length instead of ~π²/(16N²), and the codes are exact in float32), unmatched
# offsets are detected by an attention sink rather than by "attends to itself", and window s
# always means state S − s.
#
# ## 2-D
#
# `grid<a>x<b>` runs one detector per axis side by side (Lemma 17): still two attention layers.

# %%
g2 = get_automaton("grid3x4")
s2 = build("gridworld", g2, 64)
print(s2.shape_summary())
assert verify(s2, samples=100, exhaustive_upto=4).exact
