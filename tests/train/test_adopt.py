"""Bring your own model: a transformer trained in plain TransformerLens, adopted for its task, is verified, aligned,
saved and loaded like a twin; a model that does not fit its task is refused in one line."""

import json
import warnings

import numpy as np
import pytest
import torch

import sandbox_lens as sl
from sandbox_lens.interp.train.adopt import AdoptError


def _plain_c3(steps: int = 60):
    """A C3 model trained the way a user would, with TransformerLens alone (token 0 BOS, symbol s token s + 1): a
    ``HookedTransformer`` on 3.9, a native ``TransformerBridge`` on 4.x."""
    from sandbox_lens.interp.model.hooked import backend

    if backend() == "TransformerBridge":
        from transformer_lens import TransformerBridge as Model
        from transformer_lens import TransformerBridgeConfig as Config

        build = Model.boot_native
    else:
        from transformer_lens import HookedTransformer as Model
        from transformer_lens import HookedTransformerConfig as Config

        build = Model

    warnings.simplefilter("ignore", DeprecationWarning)
    torch.manual_seed(0)
    c3 = sl.get_automaton("C3")
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
    for _ in range(steps):
        words = rng.integers(0, 3, size=(32, 8))
        tokens = torch.tensor(np.concatenate([np.zeros((32, 1), int), words + 1], axis=1))
        loss = torch.nn.functional.cross_entropy(
            model(tokens)[:, 1:].reshape(-1, 3), torch.tensor(c3.run(words)).reshape(-1)
        )
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model, cfg, sl.AutomatonTask(c3, 8)


@pytest.fixture(scope="module")
def plain():
    return _plain_c3()


def test_an_adopted_model_is_verified_saved_loaded_and_aligned(plain, tmp_path):
    model, cfg, task = plain
    mine = sl.adopt(model, task, name="plain TL")
    accuracy = sl.verify(mine, samples=200).accuracy
    assert 1 / 3 < accuracy <= 1.0 and mine.card.options["adopted"] == "plain TL"
    sl.save_model(mine, tmp_path / "m")
    back = sl.load_model(tmp_path / "m")
    assert back.card.construction == "trained" and sl.verify(back, samples=200).accuracy == accuracy
    r = sl.align(mine, null=sl.nulls_of(mine, 0, n=1), pairs=16, ks=(2,), das_steps=5)
    assert r["variables"]["state"]["das_verdict"]["verdict"] and r["nulls"] == 1


def test_a_state_dict_and_its_config_on_disk(plain, tmp_path):
    model, cfg, task = plain
    torch.save(model.state_dict(), tmp_path / "w.pt")
    simple = {k: v for k, v in cfg.to_dict().items() if isinstance(v, (int, float, str, bool, type(None)))}
    (tmp_path / "cfg.json").write_text(json.dumps(simple))
    again = sl.load_adopted(tmp_path / "w.pt", tmp_path / "cfg.json", task)
    tokens = torch.tensor([[0, 1, 2, 3, 1, 2, 3, 1, 2]])
    assert torch.allclose(again(tokens), model(tokens), atol=1e-5)
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(AdoptError, match="bad.json: malformed JSON"):
        sl.load_adopted(tmp_path / "w.pt", tmp_path / "bad.json", task)
    (tmp_path / "junk.pt").write_bytes(b"not a state dict")
    with pytest.raises(AdoptError, match="not a readable state dict"):
        sl.load_adopted(tmp_path / "junk.pt", tmp_path / "cfg.json", task)


def test_a_model_that_does_not_fit_its_task_is_refused(plain):
    model, cfg, task = plain
    with pytest.raises(AdoptError, match="d_vocab"):
        sl.adopt(model, task, symbol_tokens=(1, 2, 7))
    with pytest.raises(AdoptError, match="3 input symbols"):
        sl.adopt(model, task, symbol_tokens=(1, 2))
    with pytest.raises(AdoptError, match="n_ctx"):
        sl.adopt(model, sl.AutomatonTask(sl.get_automaton("C3"), 16))
    c5 = sl.get_automaton("C5")
    with pytest.raises(AdoptError, match="5 output classes"):
        sl.adopt(model, sl.AutomatonTask(c5, 8), symbol_tokens=[1 + s % 3 for s in range(c5.n_symbols)])
    with pytest.raises(AdoptError, match="not Linear"):
        sl.adopt(torch.nn.Linear(2, 2), task)


def test_an_adopted_model_is_compared_with_the_constructions(plain, tmp_path):
    """`compare --trained` takes a saved model (adopted here), not only a run of `interp train`."""
    from sandbox_lens.interp.compare import comparison_for

    model, cfg, task = plain
    sl.save_model(sl.adopt(model, task, name="plain TL"), tmp_path / "m")
    settings = dict(samples=24, examples=1, mask_steps=0, circuit_pairs=0, causal_pairs=0, progress=False)
    settings["constructions"] = ("prefix_scan",)
    report = sl.compare(comparison_for("C3", length=8), tmp_path / "c", trained=str(tmp_path / "m"), **settings)
    metrics = json.loads((tmp_path / "c" / "metrics.json").read_text())
    assert report.is_file() and "trained twin" in metrics["probes"] and "prefix_scan" in metrics["probes"]
    with pytest.raises(sl.SandboxError, match="another task"):
        sl.compare(comparison_for("C4", length=8), tmp_path / "d", trained=str(tmp_path / "m"), **settings)


def test_adopting_twice_keeps_the_model_shape(plain):
    """A second adoption (a new card on the same module) attaches a fresh tokenizer and leaves the config alone: on
    TransformerLens 4.x a reassigned tokenizer used to rewrite d_vocab_out from the vocabulary."""
    model, cfg, task = plain
    first = sl.adopt(model, task, name="once")
    d_vocab, d_vocab_out = first.cfg.d_vocab, first.cfg.d_vocab_out
    second = sl.adopt(model, task, name="twice")
    assert (second.cfg.d_vocab, second.cfg.d_vocab_out) == (d_vocab, d_vocab_out) == (4, 3)
    assert second.card.options["adopted"] == "twice"
    assert second.to_str_tokens(second.to_tokens("0 1 2")) == ["BOS", "0", "1", "2"]
