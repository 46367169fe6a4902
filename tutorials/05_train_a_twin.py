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
# # Tutorial 5 — train a twin
#
# A construction shows that *some* transformer computes a task exactly. To learn what gradient
# descent finds instead, train a model of a similar shape on the same task. This tutorial trains
# a small twin of the Dyck constructions of Tutorial 4 — two layers, one head, width 50, as in the
# thesis — plots its learning curve, stops and resumes it, and loads it back for analysis.

# %%
import json
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt

from sandbox_lens.interp.tasks.batches import DyckTask
from sandbox_lens.interp.tasks.dyck import Dyck
from sandbox_lens.interp.train import TrainConfig, default_shape, load_trained, train

task = DyckTask(Dyck(2, 4), length=28)
shape = default_shape(task)
print(task.name, shape)

# %% [markdown]
# ## Train
#
# Batches are drawn fresh at every step (online learning, as in the thesis) from a generator seeded
# by (seed, step); every `eval_every` steps the model is scored on a fixed held-out set and a
# checkpoint is written. Training stops at the target accuracy, the step budget or the time budget.
# A time budget of 0 stops the run at its first evaluation, which lets us show resuming.

# %%
out = Path(tempfile.mkdtemp()) / "dyck-twin"
config = TrainConfig(steps=300, batch=32, lr=3e-3, warmup=50, eval_every=50, seed=0)
first = train(task, shape, TrainConfig(**{**config.__dict__, "max_minutes": 0.0}), out, progress=False)
print(f"interrupted after {first['steps']} steps (accuracy {first['final_accuracy']:.3f})")
metrics = train(task, shape, config, out, resume=True, progress=False)
print(
    f"resumed and finished: {metrics['steps']} steps, final accuracy {metrics['final_accuracy']:.4f}, "
    f"best {metrics['best_accuracy']:.4f}, {metrics['wall_seconds']:.0f} s"
)

# %% [markdown]
# ## The learning curve
#
# Accuracy is the thesis's: the argmax at positions whose next bracket is a closing one.

# %%
history = json.loads((out / "metrics.json").read_text())["history"]
steps = [h["step"] for h in history]
fig, ax = plt.subplots(1, 2, figsize=(9, 3.2))
ax[0].plot(steps, [h["loss"] for h in history], marker=".")
ax[0].set(xlabel="step", ylabel="held-out loss", title="loss")
ax[1].plot(steps, [h["accuracy"] for h in history], marker=".", color="C1")
ax[1].axhline(0.97, ls="--", color="grey", lw=1)
ax[1].set(xlabel="step", ylabel="closing-bracket accuracy", title="accuracy (dashed: 97%)")
fig.tight_layout()
plt.show()

# %% [markdown]
# ## Load it back
#
# `load_trained` rebuilds the `HookedTransformer` from the checkpoint (safetensors + JSON) and gives
# it a `card`, so the analyses of the other tutorials apply. Here: its second-layer attention on
# the thesis's probe input, and how stack-like it is.

# %%
from sandbox_lens.interp.verify.dyck import next_token_probabilities
from sandbox_lens.probes.dyck import PROBE_INPUT, layer_patterns, stack_top_mass

twin = load_trained(out)
probe = task.lang.encode(PROBE_INPUT)
probs = next_token_probabilities(twin, [probe])[0]
print("after", PROBE_INPUT[:8], "the twin predicts", dict(zip(task.lang.bracket_names, probs[8].round(3))))
words = task.lang.sample(20, 27, seed=1)
print("stack-top mass of the layer-2 head:", stack_top_mass(twin, task.lang, words))

# %%
from IPython.display import Image, display

from sandbox_lens.interp.viz import heatmap_png

pattern = layer_patterns(twin, probe, layer=1)
display(Image(heatmap_png({(1, h): p for h, p in pattern.items()}, ["BOS", *PROBE_INPUT], "trained twin, layer 2")))

# %% [markdown]
# Whatever this run's pattern looks like, Tutorial 4 is the warning: a stack-like pattern is not
# required for exactness, and a non-stack-like one does not mean the model has not learned the
# task. Comparing a twin with the constructions needs probes and interventions, not only pictures.
#
# From the command line the same run is
# `interp train dyck --dyck 2,4 --lr 3e-3 --steps 300 --warmup 50 --out runs/dyck`, and `--seeds 0-9` trains ten
# replicates in a process pool and writes `summary.json` (best and median accuracy).
