"""Ground truth in levels, tied to behaviour: patching every edge outside a level with that level's
ablation leaves the outputs the metric reads exact, on every family and corruption and on random
automata; every reason given for an absent edge is checked by an intervention."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from circuit_families import BACKUP_FAMILIES, FAMILIES, NEGATIVE_FAMILIES, random_automaton
from hypothesis import given, settings
from hypothesis import strategies as st

from sandbox_lens.constructions.registry import build
from sandbox_lens.interp.circuits.effects import path_patching
from sandbox_lens.interp.circuits.levels import ABLATION_LEVEL, LEVEL_NAMES, LevelError, levels_of
from sandbox_lens.interp.circuits.pairs import CorruptionError, make_pairs
from sandbox_lens.interp.circuits.patching import Patcher
from sandbox_lens.interp.circuits.truth import ground_truth
from sandbox_lens.interp.model.hooked import to_hooked
from sandbox_lens.interp.model.run import exact_precision
from sandbox_lens.interp.tasks.automata import Semiautomaton
from sandbox_lens.interp.tasks.catalogue import get_automaton


def _setup(spec, corruption=None, n=32, seed=1):
    truth = ground_truth(spec)
    model = to_hooked(spec)
    pairs = make_pairs(model, n, corruption, seed=seed)
    patcher = Patcher(model, truth.graph)
    return truth, model, pairs, patcher, levels_of(truth, patcher, pairs)


def _read(logits, pairs):
    return logits[..., torch.as_tensor(pairs.outputs)]


def _assert_exact_outside(patcher, pairs, lv, level, ablation):
    outside = [e for e in patcher.graph.edges if e not in lv.members[level]]
    with exact_precision():
        clean = patcher.run(pairs.clean, [], patcher.source(pairs, ablation))[0]
        patched = patcher.run(pairs.clean, outside, patcher.source(pairs, ablation))[0]
    scale = float(clean.abs().max())
    torch.testing.assert_close(
        _read(patched, pairs),
        _read(clean, pairs),
        rtol=0,
        atol=1e-5 * scale,
        msg=lambda m: f"{level} under {ablation}: {m}",
    )


@pytest.mark.parametrize("family", sorted(FAMILIES) + sorted(NEGATIVE_FAMILIES) + sorted(BACKUP_FAMILIES))
def test_every_level_leaves_the_read_outputs_exact(family):
    spec = {**FAMILIES, **NEGATIVE_FAMILIES, **BACKUP_FAMILIES}[family]()
    for corruption in to_hooked(spec).card.task_kind.corruptions:
        truth, model, pairs, patcher, lv = _setup(spec, corruption)
        sizes = {level: len(lv.members[level]) for level in LEVEL_NAMES}
        assert sizes["structural"] >= sizes["live"] >= sizes["relevant"] >= sizes["read"] >= sizes["resample"]
        assert (
            lv.members["mean"] <= lv.members["read"] and lv.members["mean"] <= lv.members["zero"] <= lv.members["live"]
        )
        for level in ("relevant", "read", "resample"):
            _assert_exact_outside(patcher, pairs, lv, level, "resample")
        for ablation, level in ABLATION_LEVEL.items():
            _assert_exact_outside(patcher, pairs, lv, level, ablation)


def _permutation_reset(n_states: int, n_symbols: int, seed: int) -> Semiautomaton:
    """A random automaton whose every symbol permutes the states or resets them (Krohn–Rhodes builds it)."""
    rng = np.random.default_rng(seed)
    table = [
        rng.permutation(n_states) if rng.random() < 0.5 else np.full(n_states, rng.integers(n_states))
        for _ in range(n_symbols)
    ]
    return Semiautomaton(
        f"pr{n_states}x{n_symbols}",
        tuple(f"q{i}" for i in range(n_states)),
        tuple(f"s{i}" for i in range(n_symbols)),
        np.array(table),
    )


@settings(max_examples=8, deadline=None)
@given(
    n_states=st.integers(2, 5),
    n_symbols=st.integers(2, 3),
    seed=st.integers(0, 10_000),
    construction=st.sampled_from(["prefix_scan", "krohn_rhodes"]),
)
def test_levels_of_random_automata_tie_to_behaviour(n_states, n_symbols, seed, construction):
    a = (
        random_automaton(n_states, n_symbols, seed)
        if construction == "prefix_scan"
        else _permutation_reset(min(n_states, 4), n_symbols, seed)
    )  # five states can make A5, which is not solvable
    try:
        spec = build(construction, a, 4)
        truth, model, pairs, patcher, lv = _setup(spec, n=16, seed=seed)
    except CorruptionError:  # an automaton whose state never depends on the word: nothing to explain
        return
    for ablation, level in ABLATION_LEVEL.items():
        _assert_exact_outside(patcher, pairs, lv, level, ablation)
    inside = sorted(lv.members["resample"], key=patcher.graph.index.get)
    with exact_precision():
        swapped = patcher.run(pairs.clean, inside, patcher.source(pairs))[0]
    assert pairs.accuracy(swapped) == 0.0  # patching the whole level gives the corrupted word's answers


@pytest.mark.parametrize(
    "family,corruption", [("ffl", "bit"), ("dyck/stack", "bracket-type"), ("gridworld/grid4", "symbol")]
)
def test_edges_called_invisible_have_no_effect_under_the_corruption(family, corruption):
    truth, model, pairs, patcher, lv = _setup(FAMILIES[family](), corruption, n=48)
    invisible = [e for e, why in lv.reasons["resample"].items() if why == "invisible"]
    assert invisible, "each of these corruptions leaves some task-relevant edge unchanged"
    assert np.all(path_patching(patcher, pairs, invisible) == 0.0)
    together = patcher.run(pairs.clean, invisible, patcher.source(pairs))[0]
    assert Patcher.effect(pairs, together) == 0.0


def test_edges_equal_to_their_mean_have_no_effect_under_mean_ablation():
    truth, model, pairs, patcher, lv = _setup(FAMILIES["gridworld/grid4"](), n=32)
    absent = [e for e, why in lv.reasons["mean"].items() if why == "mean-on-data"]
    assert absent == [e for e, why in lv.reasons["resample"].items() if why == "invisible"]  # a1.3 -> m1
    effects = path_patching(patcher, pairs, absent, source=patcher.source(pairs, "mean"))
    assert np.all(np.abs(effects) < 1e-9)


def test_per_coordinate_liveness_drops_the_edges_no_logit_reads():
    """S5 at T = 16: the read-out reads R_q0 only, and both generators fix q0's image, so these three edges
    carry word information only where nothing reaches an output; per-node liveness counted them."""
    spec = build("prefix_scan", get_automaton("S5"), 16)
    truth, model, pairs, patcher, lv = _setup(spec, n=24)
    names = {e.name: e for e in truth.graph.edges}
    dropped = [names[n] for n in ("embed->a6.0.v", "m0->a6.0.v", "a0.0->m6")]
    for e in dropped:
        assert e in truth.structural and e in truth.live and e not in truth.relevant
        assert lv.why_absent(e, "resample") == "invariant"
    assert np.all(path_patching(patcher, pairs, dropped) == 0.0)


def test_unread_outputs_are_their_own_reason_on_dyck():
    truth, model, pairs, patcher, lv = _setup(FAMILIES["dyck/stack"](), "resample")
    unread = [e for e, why in lv.reasons["read"].items() if why == "unread-output"]
    assert unread and all(e in truth.relevant for e in unread)
    assert np.all(path_patching(patcher, pairs, unread) == 0.0)  # the metric reads the closing brackets only


def test_levels_describe_every_edge_and_refuse_unknown_or_empty_levels():
    truth, model, pairs, patcher, lv = _setup(FAMILIES["ffl"](), "bit")
    d = lv.to_dict()
    assert set(d["edges"]) == {e.name for e in truth.graph.edges}
    for _name, entry in d["edges"].items():
        assert set(entry["in"]) | set(entry["absent"]) == set(LEVEL_NAMES)
        assert all(code in d["reasons"] for code in entry["absent"].values())
    with pytest.raises(LevelError, match="unknown ground-truth level"):
        lv.labels("everything")
    lv.members["mean"] = set()
    with pytest.raises(LevelError, match="has no edge at the 'mean' level"):
        lv.labels("mean")


@pytest.mark.parametrize("family", sorted(NEGATIVE_FAMILIES))
def test_negatives_are_outside_every_level_that_counts(family):
    """The cancelling pair and the distractor are structural only; the constant head is in the zero
    ablation's level (zeroing it shifts the logits) and in no other; patching one head of the pair alone
    moves the output, patching both does not."""
    truth, model, pairs, patcher, lv = _setup(NEGATIVE_FAMILIES[family](), n=32)
    a, b = sorted(truth.flow.cancelled)
    for head in (a, b):
        out = [e for e in truth.graph.edges if e.sender == head and e in truth.structural]
        assert out and all(lv.why_absent(e, level) == "cancelled" for e in out for level in ("resample", "zero"))
    pair_out = {h: [e for e in truth.graph.edges if e.sender == h] for h in (a, b)}
    alone = path_patching(patcher, pairs, pair_out[a])
    assert np.any(np.abs(alone) > 0.01)
    both = patcher.run(pairs.clean, pair_out[a] + pair_out[b], patcher.source(pairs))[0]
    # zero in exact arithmetic; in float32 the two heads' writes are added in some order, leaving rounding of a few
    # ulps of the logits (6.5e-8 seen on one machine, 0 on another): a bound of 64 float32 epsilons
    assert Patcher.effect(pairs, both) == pytest.approx(0.0, abs=64 * float(np.finfo(np.float32).eps))
    nodes = {n.name for n in truth.graph.nodes}
    constant = max(n for n in nodes if n.startswith("a0."))  # added last
    constant_out = [e for e in truth.graph.edges if e.sender == constant]
    assert any(e in lv.members["zero"] for e in constant_out)
    assert not any(e in lv.members[level] for e in constant_out for level in ("relevant", "resample", "mean"))


def test_backup_routes_are_an_or_under_zero_ablation_and_scored_as_one():
    """Either route of `negatives=backup` (the construction's whole token input) suffices under zero ablation:
    zeroing one route's edges leaves the read outputs exact, zeroing both moves them by the construction's own
    logit scale; under resample each route's value and output edges are in the level on their own. The scores
    count the pair as one OR item: path patching misses it (no route has an effect alone), ACDC keeps one route."""
    from sandbox_lens.interp.circuits.analyse import analyse

    spec = build("modular_counter", get_automaton("C3"), 8, negatives="backup")
    truth, model, pairs, patcher, lv = _setup(spec, n=32)
    (group,) = lv.or_items("zero")
    assert not lv.or_items("resample") and [len(r) for r in group] == [4, 4]
    routed = {f"embed->a0.{h}.v" for h in (0, 1)} | {f"a0.{h}->m0" for h in (0, 1)}
    assert routed <= {e.name for e in lv.members["resample"]}
    zero = patcher.source(pairs, "zero")
    with exact_precision():
        clean = patcher.run(pairs.clean, [], zero)[0]
        one = [patcher.run(pairs.clean, route, zero)[0] for route in group]
        both = patcher.run(pairs.clean, group[0] + group[1], zero)[0]
    for logits in one:
        torch.testing.assert_close(_read(logits, pairs), _read(clean, pairs), rtol=0, atol=1e-6)
    moved = float((_read(both, pairs) - _read(clean, pairs)).abs().max())
    assert moved > 0.5 * float(_read(clean, pairs).abs().max())
    path = analyse(model, "path", truth, pairs=32, source="zero")
    assert path["ranking_scores"]["or_groups"] == 1 and path["levels"]["or_groups"]["zero"]
    assert path["edge_recall"] == 5 / 6  # the counter's five zero-level edges found, the OR group (one item) missed
    assert all("no effect alone" in path["missed"][e]["reason"] for e in routed)
    assert analyse(model, "acdc", truth, pairs=32, source="zero")["edge_recall"] == 1.0
