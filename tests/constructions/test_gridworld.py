"""Theorem 12: the two-attention-layer gridworld boundary detector, exactly, 1-D and 2-D."""

import json
import math

import numpy as np
import pytest

from sandbox_lens.constructions import build
from sandbox_lens.constructions.gridworld import MAX_LENGTH, grid_axes
from sandbox_lens.interp.errors import AutomatonError, ConstructionError, LengthError
from sandbox_lens.interp.model.hooked import to_hooked
from sandbox_lens.interp.tasks.automata import Semiautomaton
from sandbox_lens.interp.tasks.catalogue import get_automaton
from sandbox_lens.interp.tasks.gridworld import last_boundary_positions
from sandbox_lens.interp.verify import verify
from sandbox_lens.probes.boundary import boundary_detector_scores


def assert_exact(result):
    assert result.accuracy == 1.0, result.mismatches
    assert result.checked > 0


@pytest.mark.parametrize(
    "name", ["grid2", "grid3", "grid5", "grid9", "grid16", "grid3x4", "grid4+noop", "grid2x3+noop"]
)
def test_exact_exhaustive_short_and_sampled_at_256(name):
    a = get_automaton(name)
    K = int(math.log(4096, a.n_symbols))
    short = verify(build("gridworld", a, 16), exhaustive_upto=min(K, 16), samples=0)
    assert_exact(short)
    assert short.sequences == a.n_symbols**short.exhaustive_upto
    samples = 40 if name == "grid16" else 100
    assert_exact(verify(build("gridworld", a, 256), exhaustive_upto=1, samples=samples, seed=3))


@pytest.mark.parametrize("name", ["grid2", "grid5", "grid16", "grid3x4"])
def test_two_attention_layers_at_every_n_and_T(name):
    a = get_automaton(name)
    for T in (1, 16, 256, MAX_LENGTH if name == "grid2" else 1024):  # a 4096 spec of grid16 takes 10 s
        spec = build("gridworld", a, T)
        assert (spec.n_layers, spec.attention_layers) == (2, 2)
    axes = grid_axes(a)
    assert spec.n_heads == sum(2 * ax.S + 1 for ax in axes)


def test_other_initial_states_use_a_longer_padding():
    a = get_automaton("grid5").with_initial("3")
    spec = build("gridworld", a, 32)
    assert spec.options["padding"] == 5 + 3
    assert_exact(verify(spec, samples=100))


def test_layer2_heads_always_detect_the_last_boundary():
    for name in ("grid3", "grid5", "grid9", "grid4+noop"):
        a = get_automaton(name)
        model = to_hooked(build("gridworld", a, 64))
        scores = boundary_detector_scores(model, a.sample(20, 64, seed=5))
        assert scores.blocks[1] == 1.0  # some layer-2 head's argmax is the last boundary, at every query
        assert scores.blocks[0] < 0.5  # the counting head is not a boundary detector
        assert scores.queries == 20 * 64


def test_boundary_positions_and_score_errors():
    states = np.array([0, 1, 2, 2, 1, 0, 1])
    assert list(last_boundary_positions(states, 3)) == [0, 0, 2, 3, 3, 5, 5]
    model = to_hooked(build("gridworld", get_automaton("grid3x4"), 8))
    with pytest.raises(AutomatonError, match="1-D"):
        boundary_detector_scores(model, np.zeros((1, 8), dtype=int))


def test_missing_padding_as_printed_breaks_the_construction():
    """Defect D5: without the padding prefix, early positions have no complete window."""
    a = get_automaton("grid5")
    r = verify(build("gridworld", a, 16, as_printed="no_padding"), samples=100)
    assert r.accuracy < 0.8
    assert r.mismatches and r.mismatches[0].position <= 16


def test_refusals():
    with pytest.raises(ConstructionError, match="gridworld"):
        build("gridworld", get_automaton("S3"), 8)
    with pytest.raises(LengthError):
        build("gridworld", get_automaton("grid3"), MAX_LENGTH + 1)
    with pytest.raises(ConstructionError, match="as_printed"):
        build("gridworld", get_automaton("grid3"), 8, as_printed="nonsense")


def test_grid_recognised_from_a_json_file_with_permuted_symbols():
    g = get_automaton("grid4")
    a = Semiautomaton("mine", g.states, ("right", "left"), g.delta[::-1].copy(), 0)
    assert grid_axes(a)[0].step == (1, -1)
    assert_exact(verify(build("gridworld", a, 24), samples=50))


def test_cli_verify_gridworld_json(interp_cli):
    r = interp_cli(
        "verify", "gridworld", "--automaton", "grid9", "-T", "32", "--samples", "50", "--exhaustive-upto", "6", "--json"
    )
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["accuracy"] == 1.0 and out["attention_layers"] == 2 and out["n_layers"] == 2


@pytest.mark.slow
@pytest.mark.parametrize("T, samples", [(1024, 200), (MAX_LENGTH, 40)])  # ~3 s a word at 4096
@pytest.mark.parametrize("name", ["grid3", "grid9", "grid16", "grid3x4"])
def test_exact_at_the_longest_supported_length(name, T, samples):
    a = get_automaton(name)
    assert_exact(verify(build("gridworld", a, T), exhaustive_upto=1, samples=samples, seed=13))
