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
# # Tutorial 2 — Krohn–Rhodes: constant depth for solvable automata (Theorem 11)
#
# **Claim.** Tutorial 1's prefix scan needs ⌈log₂T⌉ attention layers for *any* automaton. For a
# *solvable* one — every group inside it is solvable — the depth can be a constant that does not
# depend on T at all (Theorem 11). The thesis proves this with gadgets (counters, memory units,
# semidirect and wreath products) but gives no procedure; sandbox-lens computes the
# decomposition and emits the weights.
#
# **Idea, for a group G.** Take the derived series G = D₀ ⊳ D₁ ⊳ … ⊳ D_d = 1. Each quotient
# D_{i−1}/D_i is abelian, i.e. a product of cyclic groups, and a cyclic group is simulated by one
# Lemma 15 counter (a head that averages over the prefix, plus an MLP that rounds). Pick a
# transversal τ (one representative per coset). For the input x_s at level i let P_s be the
# prefix coordinate (counted by the level's heads) and
#
#   c_s = τ(P_s)⁻¹ ∘ x_s ∘ τ(P_s − coord(x_s))  ∈ D_i.
#
# The product telescopes: x_t ∘ … ∘ x_1 = τ(P_t) ∘ (c_t ∘ … ∘ c_1), so level i+1 only has to
# simulate the c_s. When τ is a homomorphism this is Lemma 18 (semidirect products); when it is
# not — Q8 — the same four stages still work, so the wreath product of Lemma 19 is not needed.

# %%
import math

import matplotlib.pyplot as plt

from sandbox_lens.constructions import build
from sandbox_lens.constructions.solvable import plan_solvable_group
from sandbox_lens.interp.model.hooked import to_hooked
from sandbox_lens.interp.tasks.catalogue import get_automaton
from sandbox_lens.interp.verify import verify

d8, q8 = get_automaton("D8"), get_automaton("Q8")
for a in (d8, q8):
    print(a, "—", a.description)

# %% [markdown]
# ## Decompose D8 and Q8
#
# `plan_solvable_group` computes the derived series with sympy and, for every level, a basis of
# the abelian quotient (the cyclic factors, one counter each) and the lifts that define τ.

# %%
from sandbox_lens.constructions.solvable import cycle_notation as cycles

for a in (d8, q8):
    gens = [a.transition_map(s) for s in range(a.n_symbols)]
    plan = plan_solvable_group(gens, a.n_states, a.name)
    print(f"{a.name}: |G| = {plan.order}, derived length {plan.derived_length}")
    for i, level in enumerate(plan.levels, start=1):
        quotient = " × ".join(f"Z{n}" for n in level.orders)
        lifts = ", ".join(cycles(t) for t in level.lifts)
        print(f"  level {i}: |D{i - 1}| = {len(level.elements)} -> quotient {quotient}; lifts τ: {lifts}")

# %% [markdown]
# Is τ a homomorphism (then Lemma 18 applies literally) or not (Lemma 18′ is needed)? For
# S3 = C3 ⋊ C2 the lift of the quotient is a transposition and τ is a homomorphism. D8 over its
# derived subgroup {e, r²} does not split (the coset of the rotation r holds only elements of
# order 4), and in Q8 *every* element outside {±1} has order 4 — no complement exists at all.
# The construction does not care: any transversal works.

# %%
from sandbox_lens.interp.tasks.groups import compose

for a in (get_automaton("S3"), d8, q8):
    gens = [a.transition_map(s) for s in range(a.n_symbols)]
    level = plan_solvable_group(gens, a.n_states).levels[0]
    homomorphic = all(
        compose(level.tau(P), level.tau(Q)) == level.tau(tuple((p + q) % n for p, q, n in zip(P, Q, level.orders)))
        for P in level.prefixes()
        for Q in level.prefixes()
    )
    print(f"{a.name}: τ is a homomorphism: {homomorphic}")

# %% [markdown]
# ## Build, load and verify
#
# Each level costs two TransformerLens blocks: one whose heads count (one head per cyclic
# factor) and whose MLP rounds the counts to one-hot coordinates, and one whose MLP computes
# the next level's input c_s by table lookup. A last lookup composes τ₁(P¹) ∘ τ₂(P²) and
# applies it to q₀. So D8 and Q8 take 4 blocks, 2 of them with attention.

# %%
for a in (d8, q8):
    spec = build("krohn_rhodes", a, 64)
    print(f"{a.name}: {spec.shape_summary()}")
    for i, block in enumerate(spec.blocks):
        print(f"  block {i}: {block.label}")
    result = verify(to_hooked(spec), samples=200, exhaustive_upto=10)
    print(
        f"  accuracy {result.accuracy} over {result.checked} positions "
        f"(every word of length ≤ {result.exhaustive_upto}, 200 random words of length 64)"
    )
    assert result.exact

# %% [markdown]
# ## The cascade behind it
#
# Written out as a cascade (Definition 6), the D8 simulator is: a Z2 × Z2 counter that reads
# the tokens, then a Z2 counter that reads c_s — a function of the token and of the first
# level's prefix. The same shape appears in an explicit cascade file: a car on a 3-cycle whose
# heading bit (C2) decides whether "go" adds +1 or −1 to its position (C3).

# %%
from pathlib import Path

import sandbox_lens.interp
from sandbox_lens.interp.tasks.cascade import load_cascade_file

examples = Path(sandbox_lens.interp.__file__).resolve().parents[2] / "examples" / "cascades"  # in the repository
car = load_cascade_file(examples / "car_on_a_circle.json")
for level in car.levels:
    print(f"level {level.name}: {level.automaton.name}, input table:")
    for (prev, s), b in sorted(level.wiring.items()):
        state = ", ".join(f"{car.levels[j].name}={car.levels[j].automaton.states[q]}" for j, q in enumerate(prev))
        print(f"    σ={car.alphabet[s]:4s} {state:12s} -> {level.automaton.alphabet[b]}")
spec = build("krohn_rhodes", car.automaton(), 64, cascade=car)
print(spec.shape_summary())
assert verify(spec, samples=200).exact

# %% [markdown]
# A cascade level reads the earlier levels' states **before** σ_t. The thesis's wiring (Lemma 21)
# reads them after; sandbox-lens fixes it with a previous-token head in the wiring block.
# `as_printed="wiring"` rebuilds the printed version — on the gridworld cascade it is wrong at most
# positions:

# %%
grid4 = get_automaton("grid4")
for as_printed in ("", "wiring"):
    r = verify(build("krohn_rhodes", grid4, 8, as_printed=as_printed), exhaustive_upto=8, samples=0)
    print(f"as_printed={as_printed!r:8s}: accuracy {r.accuracy:.3f} over every word of length ≤ 8")

# %% [markdown]
# ## Depth against T
#
# The prefix scan's depth grows like log₂T; the Krohn–Rhodes constructions stay flat. The
# gridworld is aperiodic (no groups at all) but its cascade of n − 1 flip-flops has depth growing
# with n: 2n − 3 attention layers — while Theorem 12 (issue: the gridworld construction) needs 2.

# %%
lengths = [4, 16, 64, 256, 1024]
series = {
    "prefix scan (any automaton)": [build("prefix_scan", d8, T).attention_layers for T in lengths],
    "krohn_rhodes D8": [build("krohn_rhodes", d8, T).attention_layers for T in lengths],
    "krohn_rhodes Q8": [build("krohn_rhodes", q8, T).attention_layers for T in lengths],
    "krohn_rhodes S4": [build("krohn_rhodes", get_automaton("S4"), T).attention_layers for T in lengths],
    "krohn_rhodes grid5 (cascade)": [
        build("krohn_rhodes", get_automaton("grid5"), T).attention_layers for T in lengths
    ],
}
fig, ax = plt.subplots(figsize=(6.5, 3.8))
for label, ys in series.items():
    ax.plot(lengths, ys, marker="o", label=label)
ax.set_xscale("log", base=2)
ax.set_xlabel("maximum length T")
ax.set_ylabel("attention layers")
ax.set_title("Depth: prefix scan vs Krohn–Rhodes")
ax.legend(fontsize=8)
fig.tight_layout()
plt.show()
for label, ys in series.items():
    print(f"{label:30s} {ys}")

# %% [markdown]
# ## Where the bounds come from
#
# Theorem 16 bounds the depth of a solvable group's simulator by 3·log₂|G| thesis layers. Here
# each derived-series level costs 2 TL blocks, so the depth is 2d ≤ 2·log₂|G|. `make bench`
# prints the whole table (`benchmarks/krohn_rhodes_depth.py`).

# %%
for name in ("C2^3", "D8", "S3", "A4", "S4", "Q8"):
    a = get_automaton(name)
    plan = plan_solvable_group([a.transition_map(s) for s in range(a.n_symbols)], a.n_states)
    spec = build("krohn_rhodes", a, 16)
    print(
        f"{name:5s} |G| = {plan.order:3d}: {spec.n_layers} TL blocks ({spec.attention_layers} with attention); "
        f"Theorem 16 bound 3·log2|G| = {3 * math.log2(plan.order):.1f}"
    )

# %% [markdown]
# ## Refusals
#
# A5 is the smallest non-solvable group; S5 contains it. Theorem 11 does not apply, and
# `krohn_rhodes` says so (the CLI prints one line and exits with status 2):

# %%
from sandbox_lens.interp.errors import ConstructionError

for name in ("A5", "S5"):
    try:
        build("krohn_rhodes", get_automaton(name), 16)
    except ConstructionError as e:
        print(f"{name}: {e}")

# %% [markdown]
# ## Any solvable automaton: the holonomy decomposition
#
# Groups, permutation-reset automata and hand-written cascades have their own paths above. Every other
# solvable automaton goes through its **holonomy decomposition**. Take a three-state automaton that is none
# of those: `a` shifts 0 → 1 → 2 and stays at 2, `b` swaps 0 and 1 and keeps 2.
#
# *By hand.* The **images** of its transformation semigroup are the sets of states a word can leave you in:
# Q = {0, 1, 2}; {1, 2} after `a`; {0, 2} after `ab` (0 → 1 → 0, 1 → 2 → 2, 2 → 2 → 2); {2} after `aa`; and
# every singleton. An image P is **subduced** by R when some word carries R onto a superset of P; {0, 2} and
# {1, 2} subduce each other (`b` carries each onto the other), so they are one **class**, as are {0} and {1};
# {2} is alone (nothing leaves 2). The **tiles** of an image are the largest images strictly inside it: Q's are
# {0, 2} and {1, 2}, and the words that map Q onto itself (here `b`) swap them — Q's **holonomy group** has
# order 2. The tiles of {0, 2} are {0} and {2}; only words acting as the identity map {0, 2} onto itself, so
# its holonomy group is trivial. Heights order the classes (singletons 0, the two-element class 1, Q 2): two
# levels — the top one a permutation-reset automaton on Q's two tiles (`b` swaps them, `a` resets), the lower
# one a reset automaton on the tiles of {0, 2} — each holding a dummy value besides (for "this level is not on
# the chain"). A state is a chain of tiles from Q down to a singleton.
#
# *By the library:*

# %%
import numpy as np

from sandbox_lens.interp.tasks.automata import Semiautomaton
from sandbox_lens.interp.tasks.holonomy import holonomy_skeleton
from sandbox_lens.interp.tasks.holonomy_cascade import holonomy_cascade

shift_swap = Semiautomaton("shift-swap", ("0", "1", "2"), ("a", "b"), np.array([[1, 2, 2], [1, 0, 2]]), 0)
h = holonomy_skeleton(shift_swap)
print("images:", [sorted(p) for p in h.images])
print("classes:", [[sorted(p) for p in c] for c in h.classes])
for c in h.components:
    print(f"level {c['height']}: image {c['representative']}, tiles {c['tiles']}, holonomy group of order {c['order']}")
cascade = holonomy_cascade(shift_swap)  # the covering is checked on every reachable product state
for level in cascade.levels:
    print(level.name, "values", level.automaton.states, "inputs", level.automaton.delta.tolist())

# %% [markdown]
# The cascade is in the same JSON format as `examples/cascades` (`interp decompose --automaton-file F --out
# cascade.json` writes it), so `krohn_rhodes` builds it like any other — and the transformer is exact, at a
# depth that does not depend on T:

# %%
for T in (16, 256):
    spec = build("krohn_rhodes", shift_swap, T)
    result = verify(spec, exhaustive_upto=min(T, 10), samples=300)
    print(f"T = {T}: {len(spec.blocks)} blocks, accuracy {result.accuracy:.4f} on {result.checked:,} positions")
