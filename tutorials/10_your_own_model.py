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
# # Tutorial 10 — your own model: trained in plain TransformerLens, held against the proof
#
# The toolkit's twins are trained by `interp train`, but the research question is usually about *your*
# model. This tutorial trains a small transformer on the cyclic group C3 with TransformerLens alone — no
# sandbox-lens in the loop — then brings it in with `sandbox_lens.adopt`, and from there every analysis
# takes it: verification against the exact automaton, the exact construction beside it, causal alignment,
# saving and loading.

# %%
import json
import tempfile
import warnings
from importlib.metadata import version
from pathlib import Path

import numpy as np
import torch
import transformer_lens
from IPython.display import Image, display

import sandbox_lens as sl
from sandbox_lens.interp.viz import interchange_scans_png

warnings.simplefilter("ignore", DeprecationWarning)  # TransformerLens 3.9 announces its 4.x bridge
torch.set_num_threads(1)  # models this small run faster on one thread (benchmarks/threads.py)

# %% [markdown]
# ## Training, the TransformerLens way
#
# The task: read a word over C3's three generators and output the group element after every symbol. The
# token layout is the one the toolkit's own twins use — token 0 a BOS, symbol s the token s + 1 — and the
# logits are the three states, read at each symbol's own token. (Another layout is fine: `adopt` takes
# `prefix=` and `symbol_tokens=`.) The exact answers come from the automaton.

# %%
c3 = sl.get_automaton("C3")
torch.manual_seed(0)
# TransformerLens 3.9 has HookedTransformer; 4.x builds the same model natively as a TransformerBridge
if version("transformer-lens").startswith("3."):
    Config, build = transformer_lens.HookedTransformerConfig, transformer_lens.HookedTransformer
else:
    Config, build = transformer_lens.TransformerBridgeConfig, transformer_lens.TransformerBridge.boot_native
cfg = Config(
    n_layers=2,
    d_model=32,
    n_heads=2,
    d_head=16,
    d_mlp=64,
    n_ctx=9,
    d_vocab=4,
    d_vocab_out=3,
    act_fn="relu",
    normalization_type="LN",
    seed=0,
)
model = build(cfg)
opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
rng = np.random.default_rng(0)
losses = []
for _step in range(300):
    words = rng.integers(0, 3, size=(32, 8))
    tokens = torch.tensor(np.concatenate([np.zeros((32, 1), int), words + 1], axis=1))
    loss = torch.nn.functional.cross_entropy(
        model(tokens)[:, 1:].reshape(-1, 3), torch.tensor(c3.run(words)).reshape(-1)
    )
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
print(f"final training loss {np.mean(losses[-20:]):.3f}")

# %% [markdown]
# ## Bringing it in
#
# `sl.adopt(model, task)` checks the model against the task — its vocabulary holds every input token, it has a
# logit per output class, its context holds an input — and gives it the card a twin trained here would get.
# `sl.verify` then checks it against the exact automaton: every word up to a short length, then samples.

# %%
mine = sl.adopt(model, sl.AutomatonTask(c3, 8), name="tutorial 10")
check = sl.verify(mine, samples=300)
exact = sl.verify(sl.load("modular_counter", "C3", length=8), samples=300)
print(f"your model: accuracy {check.accuracy:.3f}; Lemma 15's counter: {exact.accuracy:.3f}")
assert exact.accuracy == 1.0 and check.accuracy > 1 / 3

# %% [markdown]
# ## Held against the proof, causally
#
# Lemma 15's counter computes the state in one attention layer: the count goes into one direction, an MLP
# turns it into the state. Where does your model compute it? `sl.align` scans full interchange
# interventions over every residual hook and position and searches DAS subspaces, beside random-init models
# of the same shape searched the same way (two here, to stay quick; the default is five), and states its
# verdicts with their stability.

# %%
result = sl.align(
    mine,
    constructions={"modular_counter": sl.load("modular_counter", "C3", length=8)},
    null=sl.nulls_of(mine, 0, n=2),
    pairs=32,
    ks=(2, 4),
    das_steps=60,
)
state = result["variables"]["state"]
for kind in ("verdict", "das_verdict"):
    v = state["constructions"]["modular_counter"][kind]
    print(f"{kind}: {v['verdict']} (stability {v['stability']:.0%})")
display(Image(interchange_scans_png(result)))

# %% [markdown]
# ## Saved like a twin
#
# `sl.save_model` writes `model.json` (config, card, checksum) and `model.safetensors`; every command takes the
# directory (`interp verify --model DIR`, `interp align --model DIR`, `interp circuit --model DIR`). From files
# alone, `interp adopt automaton --automaton C3 -T 8 --state-dict w.pt --config cfg.json --out DIR` does the
# same as `adopt` here.

# %%
out = Path(tempfile.mkdtemp()) / "mine"
sl.save_model(mine, out)
again = sl.load_model(out)
print(again.card.notes, "->", sl.verify(again, samples=300).accuracy == check.accuracy)

# %% [markdown]
# ## Beside the constructions
#
# `sl.compare` (`interp compare C3 -T 8 --trained DIR`) takes the saved model where it would otherwise train a twin:
# probes for the state at every hook, attention, ablations, beside the constructions. Kept small here (one
# construction, few words, no masks, no circuits or causal section); the report is one HTML file.

# %%
from sandbox_lens.interp.compare import comparison_for  # noqa: E402

report = sl.compare(
    comparison_for("C3", length=8),
    out.parent / "compare",
    trained=str(out),
    constructions=("prefix_scan",),
    samples=24,
    examples=1,
    mask_steps=0,
    circuit_pairs=0,
    causal_pairs=0,
    progress=False,
)
print(
    report.name,
    "written;",
    "probes for:",
    ", ".join(json.loads((report.parent / "metrics.json").read_text())["probes"]),
)
