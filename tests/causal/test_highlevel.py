"""The high-level models of every task kind (what an interchange should do, on hand-checked words) and the
sites each construction's proof names: on every construction family its variables have IIA 1 at their
``carries`` sites and change nothing at the named inert ones."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from sandbox_lens.constructions.registry import build
from sandbox_lens.interp.causal.highlevel import DyckModel, FFLModel, HighLevelError, dyck_stacks, high_level_of
from sandbox_lens.interp.causal.interchange import Site, construction_sites, iia, pooled_iia, subspace_basis, word_pairs
from sandbox_lens.interp.model.hooked import to_hooked
from sandbox_lens.interp.tasks.catalogue import get_automaton
from sandbox_lens.interp.tasks.dyck import Dyck
from sandbox_lens.interp.tasks.ffl import ONE, ZERO, I, R, W

# ( = 0, ) = 1, [ = 2, ] = 3
WORD = np.array([[0, 2, 3, 2, 0, 1, 3]])  # ( [ ] [ ( ) ]  -> depths 1 2 1 2 3 2 1


def test_dyck_stacks_follow_the_brackets():
    depth, stack = dyck_stacks(WORD, 3)
    assert depth[0].tolist() == [1, 2, 1, 2, 3, 2, 1]
    assert stack[0, 4].tolist() == [0, 1, 0] and stack[0, 5].tolist() == [0, 1, -1]
    with pytest.raises(HighLevelError, match="not a legal Dyck prefix"):
        dyck_stacks(np.array([[1]]), 3)


def test_the_dyck_models_counterfactuals():
    """``top``: the source's top; ``depth``: the base's element at the source's depth, after a closing bracket
    only (an open bracket at p is a key of its own attention: the variants disagree there)."""
    high = DyckModel(Dyck(2, 3))
    labels, scored = high.answers(WORD)
    assert labels[0].tolist() == [1, 3, 1, 3, 1, 3, 1] and scored.all()  # the close of the top's type
    source = np.array([[2, 0, 1, 0, 1, 3, 0]])  # [ ( ) ( ) ] (  -> depths 1 2 1 2 1 0 1
    top, at = high.counterfactual(WORD, source, 3, "top")
    assert top[0, 3] == 1 and at[0].tolist() == [False, False, False, True, False, False, False]  # source top (
    top, at = high.counterfactual(WORD, source, 5, "top")
    assert not at.any()  # the source's stack is empty at 5: no top to set
    depth, at = high.counterfactual(WORD, source, 5, "depth")  # base closes to depth 2; source depth 0: none
    assert not at.any()
    depth, at = high.counterfactual(WORD, source, 4, "depth")  # base *opens* at 4: depth is not scored there
    assert not at.any()
    depth, at = high.counterfactual(WORD, source, 6, "depth")  # base closes to depth 1, source at depth 1
    assert at[0, 6] and depth[0, 6] == 1  # the base's element at depth 1, "(": unchanged
    with pytest.raises(HighLevelError, match="has no variable 'state'"):
        high.counterfactual(WORD, source, 1, "state")
    with pytest.raises(HighLevelError, match="unknown high-level model"):
        DyckModel(Dyck(2, 3), "recurrent")


def test_a_depth_swap_to_a_shallower_level_reads_that_level():
    high = DyckModel(Dyck(2, 4))
    base = np.array([[0, 2, 0, 0, 1]])  # ( [ ( ( )  -> depth 3 after the close at 4; stack ( [ (
    source = np.array([[0, 1, 0, 1, 2]])  # ( ) ( ) [  -> depth 1 at 4
    labels, at = high.counterfactual(base, source, 4, "depth")
    assert at[0, 4] and labels[0, 4] == 1 and high.answers(base)[0][0, 4] == 1  # "(" at depth 1, as on top
    base = np.array([[2, 0, 2, 2, 3]])  # [ ( [ [ ]  -> stack [ ( [ at depth 3; depth-1 element "["
    labels, at = high.counterfactual(base, source, 4, "depth")
    assert at[0, 4] and labels[0, 4] == 3 and high.answers(base)[0][0, 4] == 3
    labels, at = high.counterfactual(base, np.array([[0, 0, 0, 1, 1]]), 4, "depth")  # source depth 1 at 4
    assert labels[0, 4] == 3  # the base's "[" at depth 1
    labels, at = high.counterfactual(np.array([[0, 2, 2, 2, 3]]), np.array([[0, 0, 0, 1, 1]]), 4, "depth")
    assert at[0, 4] and labels[0, 4] == 1 and high.answers(np.array([[0, 2, 2, 2, 3]]))[0][0, 4] == 3  # changed


def test_the_flip_flop_model_keeps_reads_aligned():
    high = FFLModel(0.8)
    base, source = high.pairs(200, 15, np.random.default_rng(0))
    assert ((base == R) == (source == R)).all()  # the reads stay where they are
    word = np.array([[W, ONE, I, ZERO, R, ONE, W, ZERO, R]])
    other = np.array([[W, ZERO, W, ONE, R, ONE, I, ONE, R]])
    labels, at = high.counterfactual(word, other, 4)
    assert at[0].tolist() == [False] * 4 + [True] + [False] * 4 and labels[0, 4] == ONE
    labels, at = high.counterfactual(word, other, 8)
    assert labels[0, 8] == ONE and high.answers(word)[0][0, 8] == ZERO  # the swap changes the read's answer


def test_the_recurrent_flip_flop_rival_carries_the_bit_to_the_next_write():
    high = FFLModel(0.8, "recurrent")
    word = np.array([[W, ONE, I, ZERO, R, ONE, W, ZERO, R]])
    other = np.array([[W, ZERO, W, ONE, R, ONE, I, ONE, R]])
    labels, at = high.counterfactual(word, other, 1)  # the source's bit at 1 (0) reaches the read at 4, not 8
    assert at[0].tolist() == [False] * 4 + [True] + [False] * 4 and labels[0, 4] == ZERO
    labels, at = FFLModel(0.8).counterfactual(word, other, 1)  # the parallel reading: position 1 is no read
    assert not at.any()


def test_the_flip_flop_construction_rejects_the_recurrent_rival():
    model = to_hooked(build("ffl", None, 15))
    ((entry, site),) = [
        (e, s)
        for e, s in construction_sites(model)
        if e["hook"].endswith("1.hook_resid_post") and e["role"] == "carries"
    ]
    got = {}
    for mode in ("parallel", "recurrent"):
        high = high_level_of(model, mode)
        base, source = word_pairs(model, 300, seed=0, high=high)
        got[mode] = pooled_iia(model, high, site, base, source)
    assert got["parallel"]["iia"] == 1.0
    assert got["recurrent"]["outputs"] > got["parallel"]["outputs"] and got["recurrent"]["iia"] < 0.8, got


#: (construction, source, T, options, the variables its proof names a site for)
FAMILIES = [
    ("modular_counter", "C3", 8, {}, {"state"}),
    ("memory", "flipflop", 8, {}, {"state"}),
    ("prefix_scan", "C3", 8, {}, {"state", "window1", "window2"}),
    ("prefix_scan", "grid3", 16, {}, {"state", "window1", "window2", "window3"}),
    ("gridworld", "grid5", 8, {}, {"state", "displacement"}),
    ("gridworld", "grid3x3", 6, {}, {"state"}),
    ("krohn_rhodes", "S3", 8, {}, {"state", "level1", "level2"}),
    ("krohn_rhodes", "grid4", 8, {}, {"state", "f1", "f2", "f3"}),
    ("dyck", "2,4", 14, {}, {"top", "depth"}),
    ("dyck", "2,4", 14, {"variant": "balanced", "first_layer": "minimal"}, {"top", "depth"}),
    ("ffl", None, 15, {}, {"bit"}),
]


@pytest.mark.parametrize(
    "name,source,T,options,named", FAMILIES, ids=lambda x: str(sorted(x)) if isinstance(x, set) else str(x)
)
def test_every_family_carries_its_variables_at_the_sites_its_proof_names(name, source, T, options, named):
    if name == "dyck":
        src = Dyck(*map(int, source.split(",")))
    else:
        src = None if source is None else get_automaton(source)
    model = to_hooked(build(name, src, T, **options))
    high = high_level_of(model)
    base, source_words = word_pairs(model, 300, seed=0, high=high)
    sites = construction_sites(model)
    assert {v["variable"] for v, _ in sites} == named
    assert any(v["role"] == "inert" for v, _ in sites)
    for entry, site in sites:
        r = pooled_iia(model, high, site, base, source_words, high.variable(entry["variable"]))
        assert r["outputs"] >= 20, (site.name, r["outputs"])
        if entry["role"] == "carries":
            assert r["iia"] == 1.0, (site.name, r)
        else:  # a readable copy nothing downstream reads: the output never follows the source
            assert r["iia"] == 0.0, (site.name, r)


def test_a_site_that_does_not_exist_is_refused():
    model = to_hooked(build("ffl", None, 7))
    high = high_level_of(model)
    base, source = word_pairs(model, 20, high=high)
    with pytest.raises(HighLevelError, match="position 9 is outside words of length 7"):
        iia(model, high, Site("blocks.1.hook_resid_mid", 9), base, source)
    with pytest.raises(HighLevelError, match="no hook 'blocks.7.hook_resid_mid'"):
        iia(model, high, Site("blocks.7.hook_resid_mid", 2), base, source)
    with pytest.raises(HighLevelError, match="no residual subspace 'stack'"):
        subspace_basis(model, "stack")
    site = dataclasses.replace(construction_sites(model)[0][1], position=4)
    assert iia(model, high, site, base, source)["changed"]["iia"] in (None, 1.0)
