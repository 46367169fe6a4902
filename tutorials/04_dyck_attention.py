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
# # Tutorial 4 — Dyck: one function, three attention patterns (Theorem 1)
#
# A bounded Dyck language Dyck_{k,D} has k bracket types and nesting depth at most D. Predicting
# the next bracket needs the type of the last unmatched open bracket — the top of a stack. A
# natural guess is that a transformer that does this well must *attend* to the stack top. The
# thesis (§3.6) shows otherwise: a two-layer transformer predicts Dyck exactly whenever its second
# layer is **balanced** — every matched pair of brackets contributes zero net to the attention
# output — and stack-like, uniform and random-looking attention all qualify.
#
# Here we build all three, check they compute exactly the same next-token distribution, and look at
# how different their attention is.

# %%
import numpy as np

from sandbox_lens.constructions.dyck import build_dyck
from sandbox_lens.interp.tasks.dyck import Dyck
from sandbox_lens.interp.verify import verify

lang = Dyck(k=2, D=4, q=0.5)
print(lang.name, "brackets:", " ".join(lang.bracket_names))
word = lang.sample(1, 24, seed=3)[0]
print("a sample:", lang.decode(word))
print("exact next-token distribution after it:", dict(zip(lang.bracket_names, lang.next_token_distribution(word))))

# %% [markdown]
# ## Build the three constructions
#
# They share layer 1 (a counting head with a BOS sink for the depth, and an MLP that writes an
# exact one-hot of (token, depth)) and the read-out; only layer 2's attention differs:
#
# * `stack` attends to the last unmatched open bracket;
# * `uniform` attends to everything equally; open brackets write +e_(type, depth), closes write
#   −e_(type, depth), so every matched pair cancels and exactly the unmatched stack is left;
# * `balanced` uses random scores (seeded) and rescales each close's value by exp(score(open) −
#   score(close)), so that matched pairs *still* cancel.

# %%
N = 500  # the tutorial stays quick; the tests check N = 1000 (lengths 900–1000 too)
models = {v: build_dyck(lang, N, v, seed=0) for v in ("stack", "uniform", "balanced")}
for v, spec in models.items():
    r = verify(spec, samples=20, seed=1)
    bands = ", ".join(f"{b}: {x['accuracy']:.3f}" for b, x in r.details["bands"].items())
    print(f"{v:9s} accuracy {r.accuracy:.3f}  max TV {r.details['max_tv']:.1e}  ({bands})")
    assert r.exact and r.details["max_tv"] < 1e-5

# %% [markdown]
# All three are exact — in distribution (length ≤ 28) and at 400–500 — and their
# softmax matches the exact next-token distribution to float32 precision.
#
# ## Their layer-2 attention, on the same input

# %%
from IPython.display import HTML, Image, display

from sandbox_lens.interp.model.hooked import to_hooked
from sandbox_lens.interp.viz import circuitsvis_heads, heatmap_png
from sandbox_lens.probes.dyck import PROBE_INPUT, layer_patterns

probe = lang.encode(PROBE_INPUT)
tokens = ["BOS", *PROBE_INPUT]
hooked = {v: to_hooked(spec) for v, spec in models.items()}
patterns = {v: layer_patterns(m, probe, layer=1)[0] for v, m in hooked.items()}
panels = {(i, 0): p for i, p in enumerate(patterns.values())}  # one panel per model, each its block 1 head 0
names = [f"{v}: block 1 head 0" for v in patterns]
display(
    Image(
        heatmap_png(
            panels,
            tokens,
            "layer-2 attention on " + PROBE_INPUT,
            titles={key: name for key, name in zip(panels, names)},
        )
    )
)
HTML(circuitsvis_heads(panels, tokens, names=names))

# %% [markdown]
# ## Metrics
#
# * **stack-top mass**: the mean attention on the last unmatched open bracket (BOS when the stack
#   is empty);
# * **attention variation** ‖A₁ − A₂‖²_F between two patterns on the probe input, against random
#   causal patterns;
# * **balance violation** β (Theorems 1–2): how far matched pairs are from cancelling.

# %%
from sandbox_lens.probes.dyck import attention_variation, balance_violation, random_attention_baseline, stack_top_mass

words = lang.sample(20, 28, seed=5)
for v, m in hooked.items():
    print(f"{v:9s} stack-top mass {stack_top_mass(m, lang, words)[0]:.3f}   β = {balance_violation(models[v]):.3f}")
print("uniform share of attention:", np.mean([1 / (t + 1) for t in range(29)]).round(3))
for a, b in (("stack", "uniform"), ("stack", "balanced"), ("uniform", "balanced")):
    print(f"variation {a}–{b}: {attention_variation(patterns[a], patterns[b]):.2f}")
print(f"random causal patterns (n = {len(tokens)}, exact): {random_attention_baseline(len(tokens)):.2f}")

# %% [markdown]
# The stack head is perfectly stack-like (mass 1.0) yet is *not* balanced (β > 0): it is exact
# because it reads positions, not because pairs cancel. The uniform and balanced heads put about
# the uniform share on the stack top, and their patterns differ from the stack head's by much more
# than two random patterns differ from each other — while computing the same function.
#
# ## Balance is what matters: two negative controls
#
# Keep the random scores but drop the value rescaling, or keep uniform attention but zero the close
# brackets' values: matched pairs no longer cancel, and the models fail — worst at long lengths,
# where many more pairs have accumulated.

# %%
for variant, control in (("balanced", "unscaled"), ("uniform", "zeroed")):
    spec = build_dyck(lang, N, variant, as_printed=control)
    r = verify(spec, samples=40, seed=1)
    bands = ", ".join(f"{b}: {x['accuracy']:.2f}" for b, x in r.details["bands"].items())
    print(f"{variant}/{control}: β = {balance_violation(spec):.2f}; accuracy {bands}")

# %% [markdown]
# ## The lesson
#
# Three models, one function, three unrelated attention maps. Reading layer 2's attention would
# call the first a stack machine and the other two something else entirely; none of those readings
# is what makes them right. What they share is an algebraic property — balance — that no single
# attention pattern shows. An attention map is evidence about a mechanism, not the mechanism: check
# claims about a circuit against its function (here: exact next-token distributions at every length)
# and against interventions, not against how its attention looks.
