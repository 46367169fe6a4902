"""TransformerLens's string habits on every model: to_tokens, to_str_tokens, to_string, model(text), generate."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from sandbox_lens.constructions import build_model
from sandbox_lens.interp.errors import ModelKindError, VocabularyError
from sandbox_lens.interp.tasks.catalogue import get_automaton
from sandbox_lens.interp.tasks.dyck import Dyck

MODELS = {
    "prefix_scan/S3": lambda: build_model("prefix_scan", get_automaton("S3"), 8),
    "modular_counter/C3": lambda: build_model("modular_counter", get_automaton("C3"), 8),
    "krohn_rhodes/S4": lambda: build_model("krohn_rhodes", get_automaton("S4"), 8),
    "gridworld/grid4": lambda: build_model("gridworld", get_automaton("grid4"), 8),
    "dyck/stack": lambda: build_model("dyck", Dyck(2, 3), 12),
    "ffl": lambda: build_model("ffl", None, 16),
}


def _word(model, rng, length):
    return rng.integers(len(model.card.io.symbol_tokens), size=length)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_text_in_the_cards_names_is_the_cards_encoding(name):
    model = MODELS[name]()
    card, rng = model.card, np.random.default_rng(0)
    words = np.stack([_word(model, rng, 6) for _ in range(3)])
    expected = torch.as_tensor(card.io.encode(words))
    texts = [" ".join(card.input_tokens[card.io.symbol_tokens[s]] for s in w) for w in words]
    tokens = model.to_tokens(texts)
    assert torch.equal(tokens, expected)
    assert model.to_str_tokens(expected[0]) == [card.input_tokens[int(t)] for t in expected[0]]
    assert model.to_str_tokens(texts[0]) == model.to_str_tokens(expected[0])
    assert torch.equal(model(texts[0]), model(expected[:1]))  # a string runs like its tokens


@pytest.mark.parametrize("name", sorted(MODELS))
def test_names_outside_the_card_and_ragged_batches_get_one_line(name):
    model = MODELS[name]()
    first = model.card.input_tokens[model.card.io.symbol_tokens[0]]
    with pytest.raises(VocabularyError, match="'zz' is not a token of this model; its tokens are"):
        model.to_tokens(f"{first} zz {first}")
    with pytest.raises(VocabularyError, match="no padding token"):
        model.to_tokens([first, f"{first} {first}"])


def test_generate_is_refused_where_outputs_are_not_inputs_and_works_for_ffl():
    scan = MODELS["prefix_scan/S3"]()
    with pytest.raises(ModelKindError, match="sandbox_lens.interp.model.run.predict"):
        scan.generate("(0 1)", max_new_tokens=1)
    dyck = MODELS["dyck/stack"]()
    with pytest.raises(ModelKindError):
        dyck.generate(dyck.to_tokens("( ("), max_new_tokens=1)
    ffl = MODELS["ffl"]()
    # the construction reads the last write at every read: generating after "r" gives it
    assert ffl.generate("w 1 i i r", max_new_tokens=1, do_sample=False, verbose=False) == "w 1 i i r 1"
    assert ffl.generate("w 0 w 1 w 0 i r", max_new_tokens=1, do_sample=False, verbose=False) == "w 0 w 1 w 0 i r 0"


def test_twins_and_saved_models_have_the_tokenizer_too(tmp_path):
    from sandbox_lens.interp.model.saved import load_model, save_model
    from sandbox_lens.interp.tasks.batches import AutomatonTask
    from sandbox_lens.interp.train import ModelShape, TrainConfig, load_trained, train

    save_model(MODELS["prefix_scan/S3"](), tmp_path / "m")
    assert load_model(tmp_path / "m").to_str_tokens("(0 1)")[-1] == "(0 1)"
    train(
        AutomatonTask(get_automaton("parity"), 6),
        ModelShape(n_layers=1, d_model=16, n_heads=2),
        TrainConfig(steps=2, batch=4, eval_every=2, eval_size=8),
        tmp_path / "twin",
        progress=False,
    )
    twin = load_trained(tmp_path / "twin")
    assert twin.to_str_tokens("0 1 1") == ["BOS", "0", "1", "1"]
    assert torch.equal(twin.to_tokens("0 1 1"), torch.as_tensor(twin.card.io.encode([[0, 1, 1]])))


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(0, 5), min_size=1, max_size=12), st.booleans())
def test_any_word_round_trips_with_or_without_spaces(word, spaces):
    """Names of several characters (the generators of S3, a counter's digits) read longest first."""
    model = _S3
    names = [model.card.input_tokens[model.card.io.symbol_tokens[s % 2]] for s in word]
    text = (" " if spaces else "").join(names)
    assert model.to_str_tokens(text)[len(model.card.io.prefix) :] == names


_S3 = build_model("prefix_scan", get_automaton("S3"), 16)


def test_the_lstm_baseline_keeps_its_plain_forward():
    """An LSTM has no TransformerLens string methods: attaching the tokenizer leaves it as it was."""
    from sandbox_lens.interp.model.lstm import LSTMConfig, LSTMModel
    from sandbox_lens.interp.model.tokens import attach_tokenizer

    model = LSTMModel(LSTMConfig(d_vocab=5, d_vocab_out=5, d_model=8, hidden=8, n_layers=1, n_ctx=16))
    model.card = build_model("ffl", None, 16).card
    assert attach_tokenizer(model) is model
    assert not hasattr(model, "generate") and not hasattr(model, "tokenizer")
    assert model(torch.zeros(1, 4, dtype=torch.long)).shape == (1, 4, 5)
