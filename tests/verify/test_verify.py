"""sandbox_lens.interp.verify: the verifier proves an exact model exact on every short input, finds a broken one
with its counterexamples, gives the same verdict on the bare forward and on the model itself, and refuses options
its task cannot take (one error each, before any work)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from sandbox_lens.constructions import build_model  # noqa: E402
from sandbox_lens.interp.errors import ConstructionError, LengthError  # noqa: E402
from sandbox_lens.interp.tasks.catalogue import get_automaton  # noqa: E402
from sandbox_lens.interp.tasks.dyck import Dyck  # noqa: E402
from sandbox_lens.interp.tasks.kinds import all_kinds, resolve  # noqa: E402
from sandbox_lens.interp.verify import GENERIC_VERIFIER, verify  # noqa: E402


def _counter():
    return build_model("modular_counter", get_automaton("C3"), 8)


def test_an_exact_model_is_exact_on_every_short_word_and_on_samples():
    result = verify(_counter(), exhaustive_upto=6, samples=50)
    assert result.accuracy == 1.0 and not result.mismatches
    assert result.exhaustive_upto == 6
    # every word of length 6 over C3's increments (and, by causality, every shorter one) plus the samples
    assert result.sequences >= len(get_automaton("C3").alphabet) ** 6 + 50
    assert result.checked >= result.sequences  # at least one scored output per word


def test_a_broken_model_is_caught_with_its_counterexamples():
    model = _counter()
    with torch.no_grad():
        W_U = model.unembed.W_U
        W_U[:] = W_U[:, torch.roll(torch.arange(W_U.shape[1]), 1)]  # every state read as another
    result = verify(model, exhaustive_upto=4, samples=20, max_mismatches=3)
    assert result.accuracy < 1.0
    assert 0 < len(result.mismatches) <= 3
    assert all(m.expected != m.predicted for m in result.mismatches)


def test_the_bare_forward_and_the_model_give_one_verdict():
    model = _counter()
    bare = verify(model, exhaustive_upto=4, samples=30, forward="bare")
    own = verify(model, exhaustive_upto=4, samples=30, forward="model")
    assert (bare.accuracy, bare.checked, bare.sequences) == (own.accuracy, own.checked, own.sequences)
    assert bare.details["forward"] != own.details["forward"]  # and each says what ran


def test_options_a_task_cannot_take_are_refused():
    counter, dyck = _counter(), build_model("dyck", Dyck(2, 4), 16)
    ffl = build_model("ffl", None, 16)
    with pytest.raises(ConstructionError, match="forward"):
        verify(counter, forward="nope")
    with pytest.raises(LengthError, match="built for length 16"):
        verify(dyck, length=12)
    with pytest.raises(ConstructionError, match="length bands apply to Dyck"):
        verify(counter, bands=[(2, 4)])
    with pytest.raises(ConstructionError, match="not an automaton"):
        verify(ffl, automaton=get_automaton("flipflop"))


def test_every_task_kind_s_verifier_resolves_to_a_function():
    for kind in all_kinds():
        assert callable(resolve(kind.verifier or GENERIC_VERIFIER)), kind.name
