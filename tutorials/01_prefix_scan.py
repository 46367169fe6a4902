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
# # Tutorial 1 — the log-depth prefix scan (Theorem 10)
#
# **Claim.** Any semiautomaton — a finite state machine without output — can be simulated
# exactly by a transformer with ⌈log₂T⌉ attention layers, for inputs of length T.
#
# **Idea.** Give every position its transition map δ(·, σ_t). In attention layer l, position t
# fetches the map held 2^(l−1) positions back and composes it with its own (an MLP does the
# composition). After l layers, position t holds the composition of the last 2^l maps — a
# parallel prefix scan, like a Hillis–Steele scan. Padding positions in front hold the constant
# map "go to q0", so at the end position t holds "go to q_t".
#
# In this tutorial we build the construction for the symmetric group S5 acting on 5 points,
# load it into a TransformerLens `HookedTransformer`, prove it exact, look at its attention,
# and read the scan's intermediate maps out of the residual stream.

# %%
import math

import numpy as np
import torch

from sandbox_lens.constructions import build
from sandbox_lens.interp.model.hooked import to_hooked
from sandbox_lens.interp.model.run import attention_patterns, hook_name
from sandbox_lens.interp.tasks.catalogue import get_automaton
from sandbox_lens.interp.verify import verify
from sandbox_lens.interp.viz import heatmap_png

s5 = get_automaton("S5")
print(s5, "—", s5.description)
print("alphabet (generators):", s5.alphabet)

# %% [markdown]
# ## Build the weights
#
# `build` returns a framework-neutral **spec**: named residual subspaces, heads and MLP units.
# `R` holds the current map (1-based: `R_q = F(q) + 1`), `L` the fetched map, `H` the hidden
# values of Lemma 14's composition MLP, and `pos` the multi-scale rotary position code.

# %%
T = 16
spec = build("prefix_scan", s5, T)
print(spec.shape_summary())
print("residual subspaces:", {name: spec.layout.size(name) for name in spec.layout.names})
for i, block in enumerate(spec.blocks):
    print(f"block {i}: {block.label}")

# %% [markdown]
# Each thesis layer is **two** TransformerLens blocks: TL blocks have a single hidden layer,
# but Lemma 14's composition needs two, so the second half runs in a block whose attention is
# zero. That is why `n_layers` is twice `attention_layers`.
#
# ## Load it and prove it exact
#
# `to_hooked` builds a `HookedTransformer` with a strict `load_state_dict` — no weight
# processing. `verify` checks every word up to a length K exhaustively, plus random words at
# the full length, against exact simulation.

# %%
model = to_hooked(spec)
result = verify(model, samples=300, exhaustive_upto=8)
print(
    f"accuracy {result.accuracy} over {result.checked} positions "
    f"({result.sequences} words, every word of length ≤ {result.exhaustive_upto})"
)
assert result.exact

# %% [markdown]
# ## Look at the attention
#
# Attention layer l should put weight exactly 1 on the key 2^(l−1) positions back.

# %%
word = s5.sample(1, T, seed=0)[0]
ids, tokens = model.card.io.encode(word), model.card.token_names(word)
patterns = {head: p[0] for head, p in attention_patterns(model, ids).items()}
P = len(model.card.io.prefix)
for layer, ((block, _head), pattern) in enumerate(sorted(patterns.items()), start=1):
    shifts = {i - int(np.argmax(pattern[i])) for i in range(P, P + T)}
    exact = all(pattern[i, i - 2 ** (layer - 1)] == 1.0 for i in range(P, P + T))
    print(f"attention layer {layer} (block {block}): looks back by {shifts}, weight exactly 1.0: {exact}")

# %%
from IPython.display import Image, display

png = heatmap_png(
    patterns,
    tokens,
    "S5 prefix scan: look-back heads",
    head_labels={b: model.card.block_labels[b] for b, _ in patterns},
)
display(Image(png))

# %% [markdown]
# The same patterns in circuitsvis (self-contained HTML, so it works offline):

# %%
from IPython.display import HTML

from sandbox_lens.interp.viz import circuitsvis_heads

HTML(circuitsvis_heads(patterns, tokens))

# %% [markdown]
# ## Read the scan out of the residual stream
#
# After thesis layer l, position t should hold δ_t ∘ … ∘ δ_{t−2^l+1} (composed with the
# constant map q0 once the window reaches the padding). We check that against maps composed in
# numpy, for every position and layer.

# %%
with torch.inference_mode():
    _, cache = model.run_with_cache(torch.from_numpy(ids), names_filter=lambda name: name.endswith("hook_resid_post"))
R = spec.layout["R"]
maps = [tuple(s5.delta[s]) for s in word]
const_q0 = tuple([s5.initial] * s5.n_states)


def window_map(t: int, width: int) -> tuple:
    f = tuple(range(s5.n_states))  # identity
    for s in range(max(0, t - width + 1), t + 1):
        f = tuple(maps[s][x] for x in f)  # apply δ_s after f
    if t - width + 1 < 0:
        f = tuple(f[x] for x in const_q0)
    return f


for l in range(1, spec.attention_layers + 1):
    resid = cache[hook_name("resid_post", 2 * l - 1)][0].numpy()
    held = [tuple(int(v) - 1 for v in resid[P + t, R]) for t in range(T)]
    print(
        f"after layer {l}: every position holds its 2^{l}-window map: {held == [window_map(t, 2**l) for t in range(T)]}"
    )

# %% [markdown]
# ## What breaks if you build it exactly as printed
#
# The printed proof has three defects; `as_printed` rebuilds each one. The rotation sign makes
# every head look *forward* by 2^(l−1) — a masked position — so the softmax falls back on
# whatever it can see; the printed value matrix copies the empty scratch space `L` instead of
# the map in `R`; and the printed read-out takes "an arbitrary" coordinate of the final map,
# which is only right while the scan window still reaches the padding, i.e. not at t = T = 2^L.

# %%
for defect in ("rotation_sign", "value_matrix", "readout"):
    broken = verify(build("prefix_scan", s5, T, as_printed=defect), samples=200, exhaustive_upto=6)
    first = broken.mismatches[0]
    print(
        f"{defect:14s} accuracy {broken.accuracy:.3f}; first mismatch at t = {first.position}: "
        f"expected state {first.expected}, model says {first.predicted}"
    )

# %% [markdown]
# ## Why a multi-scale position code?
#
# The thesis selects the look-back key with a single rotation on a circle of 2T points: the
# best wrong key scores only γ(1 − cos(π/T)) below the target, a *relative* gap of about
# π²/(2T²). Float32 resolves relative differences of about 6·10⁻⁸, so the circle code stops
# working near T = 4096, whatever γ is. The multi-scale rotary code (one rotation per power of
# two) has a margin of exactly 2γ at every length. Here is the relative gap of each, in units of
# float32's rounding error:

# %%
u = 2.0**-24
for T_ in (256, 1024, 2048, 4096, 8192):
    circle = (1 - math.cos(math.pi / T_)) / u
    rotary = 2 / (2 * math.ceil(math.log2(2 * T_))) / u  # gap 2γ over a score of size ≈ γ·(number of pairs)
    print(f"T = {T_:5d}: circle {circle:10.1f} u    rotary {rotary:12.0f} u")

# %% [markdown]
# The project's tests confirm it: `code="circle"` is exact in float32 up to T = 2048 and the
# library refuses float32 beyond that; the rotary default is verified at T = 4096.
#
# ## Depth grows like log₂ T
#
# The number of attention layers is ⌈log₂T⌉ — and it does not depend on the automaton.

# %%
for T_ in (2, 16, 100, 1024, 4096):
    s = build("prefix_scan", get_automaton("parity"), T_)
    print(f"T = {T_:5d}: attention layers {s.attention_layers:2d}, TL blocks {s.n_layers:2d}, d_model {s.d_model}")
