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
# # Tutorial 9 — does the twin run the proof? Causal alignment
#
# A probe tells you a latent is *readable* somewhere; it does not tell you the model *uses* it there.
# An **interchange intervention** does: run the model on a *base* word with one site (a hook, a
# position, a subspace) set to its value on a *source* word, and check the outputs against what the
# high-level model — here the exact automaton — says should happen when its variable is swapped.
# The share that agree is the interchange intervention accuracy (IIA). We score it on the outputs
# the swap *changes* (otherwise "nothing happened" counts as success) and always beside a random-init
# null. (`interp align` does all of this from the shell; `interp compare` shows it for a twin.)

# %%
from IPython.display import Image, display

from sandbox_lens.constructions.registry import build
from sandbox_lens.interp.causal.das import das
from sandbox_lens.interp.causal.highlevel import StateModel, high_level_of
from sandbox_lens.interp.causal.interchange import Site, iia, random_basis, subspace_basis, word_pairs
from sandbox_lens.interp.model.hooked import to_hooked
from sandbox_lens.interp.tasks.catalogue import get_automaton

c3 = get_automaton("C3")
counter = to_hooked(build("modular_counter", c3, 8))
base, source = word_pairs(counter, 400, seed=0)
high = StateModel(c3, "parallel")  # output p is the state S_p, computed from the word
print("residual subspaces:", sorted(set(lab.split(":")[0] for lab in counter.card.residual_labels)))

# %% [markdown]
# ## The counter's variables, and a site that only looks like one
#
# Lemma 15's counter has one head that averages the symbols' values into the subspace `s`, then an MLP
# that turns the count into the one-hot `state`. Swapping `state` after the MLP, or `s` before it, moves
# the answer exactly as the automaton says. After the MLP, `s` is still there — a probe would read the
# count from it — but nothing downstream uses it: swapping it changes nothing.

# %%
POST, MID = "blocks.0.hook_resid_post", "blocks.0.hook_resid_mid"
for name, hook, sub in (
    ("state after the MLP", POST, "state"),
    ("count before the MLP", MID, "s"),
    ("count after the MLP", POST, "s"),
):
    r = iia(counter, high, Site(hook, 4, subspace_basis(counter, sub)), base[:200], source[:200])
    print(
        f"{name:22s} IIA {r['changed']['iia']:.3f} on {r['changed']['outputs']} changed outputs "
        f"(interval {r['changed']['interval'][0]:.2f}–{r['changed']['interval'][1]:.2f})"
    )
r = iia(counter, StateModel(c3, "recurrent"), Site(POST, 4, subspace_basis(counter, "state")), base[:200], source[:200])
print(f"the rival 'recurrent' model at the state: IIA {r['changed']['iia']:.3f} — the counter counts in parallel")

# %% [markdown]
# ## Finding a subspace nobody named: DAS, and where it fails
#
# Distributed alignment search learns a k-dimensional rotation of a site whose interchange makes the
# model follow the automaton. After the MLP, k = 2 finds the state. *Before* the MLP, the variable is a
# single direction (the count), but the MLP reads it through a ReLU staircase: gradients are flat
# almost everywhere, and k = 1 fails although the known direction scores 1.0. A failure to find a
# subspace is not evidence that there is none.

# %%
for hook, k in ((POST, 2), (MID, 1)):
    basis, _ = das(counter, high, hook, 4, k, base[:300], source[:300], steps=200)
    learned = iia(counter, high, Site(hook, 4, basis), base[300:], source[300:])["changed"]["iia"]
    control = iia(counter, high, Site(hook, 4, random_basis(counter.cfg.d_model, k)), base[300:], source[300:])
    print(
        f"DAS at {hook.split('.')[-1]}, k = {k}: held-out IIA {learned:.3f} (a random {k}-dim subspace: "
        f"{control['changed']['iia']:.3f})"
    )

# %% [markdown]
# ## Where a twin computes the state, against the construction and a null
#
# A two-layer twin trained for a few seconds, aligned with the same tools. The pairs are split three ways:
# DAS is *fitted* on the first, the hook and k are *chosen* on the second, and only the third is
# *reported* (a number chosen on the pairs it is reported on is biased upwards). A scan of full swaps
# over every residual hook and position finds the first site where the state is complete; DAS says in
# how many dimensions. Three baselines stand beside it: a random subspace of the same k, the untrained
# readout basis (the unembedding's own directions: any subspace containing them moves the answer), and
# five random-init twins of the same shape searched exactly the same way. A verdict passes only when its
# lower bound clears chance by a floor, the nulls and the readout basis, and it says "readout" for a
# read-out variable at or after the last attention layer, where a swap sets the output itself. Each
# verdict carries its stability: the share of resamples of the pairs that give it.

# %%
import tempfile
from pathlib import Path

from sandbox_lens.interp.causal.align import align, nulls_of
from sandbox_lens.interp.tasks.batches import AutomatonTask
from sandbox_lens.interp.train import ModelShape, TrainConfig, load_trained, train
from sandbox_lens.interp.viz import interchange_scans_png

task, shape = AutomatonTask(c3, 8), ModelShape(n_layers=2, d_model=64, n_heads=2)
run = Path(tempfile.mkdtemp()) / "c3-twin"
train(task, shape, TrainConfig(steps=400, seed=0), run, progress=False)
twin = load_trained(run)
result = align(
    twin, constructions={"modular_counter": counter}, null=nulls_of(twin, 0), pairs=64, ks=(2, 8), das_steps=100
)
state = result["variables"]["state"]
print("pairs per split:", result["pairs"])
print("twin's first sites (chosen on the select split):", state["model"]["first_sites"])
for kind in ("verdict", "das_verdict"):
    v = state["constructions"]["modular_counter"][kind]
    print(f"{kind}: {v['verdict']} (stability {v['stability']:.0%})")
chosen = state["model"]["das"]["chosen"]
print(
    f"DAS chosen: {chosen['hook']}, k = {chosen['k']}; test IIA {chosen['test']['iia']:.3f} "
    f"{tuple(round(x, 3) for x in chosen['test']['interval'])}"
)
print(
    "untrained readout basis, test IIA by hook:",
    {r["hook"]: round(r["iia"], 3) for r in state["model"]["das"]["readout"]},
)
print(f"nulls: DAS test IIA up to {state['null']['das']['iia']:.3f} (upper bound {state['null']['das']['upper']:.3f})")
display(Image(interchange_scans_png(result)))

# %% [markdown]
# ## Two variables: Dyck's depth and the bracket on top
#
# Every task kind has a high-level model (`high_level_of`): for bounded Dyck, the `depth` after each
# bracket and `top`, the open bracket at that depth — the closing bracket the model must allow. Swapping
# `top` makes the model close the *source's* bracket; swapping `depth` makes it close the *base's*
# bracket at the source's depth (scored after closing brackets only: an open bracket is a key of its
# own attention, and the constructions' variants disagree there). Each construction's card names where
# its proof puts them — `carries` sites should reach IIA 1, `inert` ones (a readable copy that nothing
# reads) should change nothing.
#
# The depth is the counter's story again: Theorem 1's first layer counts it into one direction, `depth`,
# and an MLP of trapezoids turns it into a (token, depth) one-hot. The named direction carries it
# exactly; DAS, searching by gradient through those trapezoids, does not find it — and the verdict says
# that a twin's negative DAS result is then no evidence of absence.

# %%
from sandbox_lens.interp.tasks.dyck import Dyck

dyck = to_hooked(build("dyck", Dyck(2, 4), 12))
high = high_level_of(dyck)
print("variables:", high.variables)
result = align(dyck, pairs=96, ks=(1, 2), das_steps=60)
for v in result["variables"].values():
    for site in v["model"]["named_sites"]:
        print(f"{site['site']:55s} IIA {site['iia']:.3f} on {site['outputs']} changed outputs")
    chosen = v["model"]["das"]["chosen"]
    print(f"  DAS, chosen at {chosen['hook']} (k = {chosen['k']}): test IIA {chosen['test']['iia']:.3f}")
    print("  verdict (DAS):", v["das_verdict"]["verdict"])

# %% [markdown]
# ## More variables: a cascade's levels, the scan's windows, and a rival reading rejected
#
# An automaton has more variables than its state where a construction computes them on the way. The 1-D
# gridworld is a cascade of flip-flops (Definition 6, Lemma 21): each level's state is a variable (`f1`,
# `f2`), and the `krohn_rhodes` construction holds each as a one-hot until its output map reads them. The
# prefix scan's `window<l>` is the map of the 2^l symbols ending at p (ask for it by name); swapping it
# rebuilds the scan tree above that node. A gridworld's `displacement` (layer 1's prefix sum) has a site
# in Theorem 12's construction; its `boundary` — where the walk last stood at a wall — has none: MLP 2
# only ever writes the winning window. And a high-level model can have a rival: in the recurrent reading of
# the flip-flop language the bit is passed along, so swapping it at p should change every read up to the
# next write. The construction looks back to the latest write instead, and the rival is rejected.

# %%
from sandbox_lens.interp.causal.interchange import construction_sites, pooled_iia

for name, source, T in (
    ("krohn_rhodes", get_automaton("grid3"), 12),
    ("prefix_scan", get_automaton("C3"), 16),
    ("gridworld", get_automaton("grid3"), 12),
):
    model = to_hooked(build(name, source, T))
    high = high_level_of(model)
    base, other = word_pairs(model, 128, seed=0, high=high)
    for entry, site in construction_sites(model):
        r = pooled_iia(model, high, site, base, other, entry["variable"])
        print(f"{name:13s} {site.name:52s} IIA {r['iia']:.3f} ({r['outputs']} changed outputs)")

ffl = to_hooked(build("ffl", None, 15))
entry, site = construction_sites(ffl, "bit")[1]
for mode in ("parallel", "recurrent"):
    high = high_level_of(ffl, mode)
    base, other = word_pairs(ffl, 300, seed=0, high=high)
    r = pooled_iia(ffl, high, site, base, other)
    print(f"FFL, {mode} reading, {site.name}: IIA {r['iia']:.3f} on {r['outputs']} changed outputs")
