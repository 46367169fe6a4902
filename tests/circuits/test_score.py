"""Scores that depend on the ranking: AUROC and average precision (ties, unscored edges), MIB's
faithfulness areas, and ACDC's two modes on a hand-worked example."""

from __future__ import annotations

import numpy as np
import pytest
from circuit_families import FAMILIES
from hypothesis import given, settings
from hypothesis import strategies as st

from sandbox_lens.interp.circuits.acdc import acdc_search, receiver_order
from sandbox_lens.interp.circuits.analyse import analyse
from sandbox_lens.interp.circuits.graph import Graph, Node
from sandbox_lens.interp.circuits.score import (
    TIE_TOLERANCE,
    areas,
    auroc,
    average_precision,
    average_ranks,
    precision_recall,
    ranking_scores,
    tied,
)
from sandbox_lens.interp.circuits.truth import ground_truth
from sandbox_lens.interp.model.hooked import to_hooked


def test_same_edge_set_different_ranking_different_auroc():
    """Two methods choose the same two edges at threshold 0.5 (so the same precision and recall) but
    rank the edges they leave out differently; only the ranking scores tell them apart."""
    labels = [True, True, False, False]
    a, b = [0.9, 0.2, 0.8, 0.1], [0.9, 0.4, 0.8, 0.45]
    chosen_a, chosen_b = [s >= 0.5 for s in a], [s >= 0.5 for s in b]
    assert chosen_a == chosen_b and precision_recall(chosen_a, labels) == (0.5, 0.5)
    assert auroc(a, labels) == 0.75 and auroc(b, labels) == 0.5
    assert average_precision(a, labels) == pytest.approx(0.5 * 1.0 + 0.5 * 2 / 3)
    assert average_precision(b, labels) == pytest.approx(0.5 * 1.0 + 0.5 * 0.5)


def test_unscored_edges_rank_last_and_are_counted():
    labels = [True, False, True, False]
    scores = [0.3, 0.5, np.nan, np.nan]  # a positive never scored ranks below every scored edge
    assert auroc(scores, labels) == auroc([0.3, 0.5, -1.0, -1.0], labels) == 0.375  # (0 + 1 + 0 + ½) / 4
    r = ranking_scores(scores, labels, candidates=[True, True, True, False])
    assert r["unscored"] == 2 and r["candidates"] == 3 and r["positives_outside_candidates"] == 0


def test_ties_count_one_half_and_enter_together():
    assert auroc([1.0, 1.0], [True, False]) == 0.5
    assert average_precision([1.0, 1.0, 0.0], [True, False, True]) == pytest.approx(0.5 * 0.5 + 0.5 * 2 / 3)


def test_scores_equal_up_to_float32_rounding_are_ties():
    """Node patching on the counter with a cancelling pair at gain 200 (pair seed 0): the embedding and the counting
    head have the same effect, 1 up to rounding, and so do the two cancelling heads; a seed where rounding made them
    exactly equal gave average precision 0.375, this one 0.569. As ties, both give the same."""
    labels = [True, False, True, False, False, False, True, False]
    rounded_apart = [1.0000003337859311, 1.0000002861022268, 1.0000002861022268, 0.09260180172877275]
    rounded_apart += [0.09260046658504817, 5.7e-07, 0.0, 0.0]
    exactly_equal = [0.999999713897705] * 3 + [0.8300495624542237, 0.8300490617752075, 5.7e-07, 0.0, 0.0]
    plain = [1, 1, 1, 0.09, 0.09, 5.7e-07, 0, 0]
    assert average_precision(rounded_apart, labels) == average_precision(plain, labels)
    assert average_precision(exactly_equal, labels) == average_precision(plain, labels)
    assert auroc(rounded_apart, labels) == auroc(plain, labels)
    step = TIE_TOLERANCE * 0.6  # anchored: two steps of 0.6 tolerance are one tie and then another, not a chain
    assert list(tied([1.0, 1 - step, 1 - 2 * step, np.nan])[:3]) == [1.0, 1.0, 1 - 2 * step]
    assert np.isnan(tied([1.0, np.nan])[1])
    assert list(tied([np.inf, 1.0, 0.0, -np.inf])) == [np.inf, 1.0, 0.0, -np.inf]  # infinities tie with nothing
    # relative: a small score (a saturated softmax's gradient) is small, not rounded — it ties only with itself
    assert list(tied([1.0, 3e-10, 1e-10, 0.0, 0.0, -1e-10])) == [1.0, 3e-10, 1e-10, 0.0, 0.0, -1e-10]
    assert auroc([1.0, 1e-9, 0.0], [True, True, False]) == 1.0
    # beyond the tolerance, an order: a difference of 10⁻⁴ of the effect still ranks
    assert auroc([1.0, 1.0 - 1e-4], [True, False]) == 1.0


def _ap_by_thresholds(scores, labels):
    """The definition: Σ over distinct thresholds t (high to low) of (R(t) − R(previous)) · P(t)."""
    s, y = np.asarray(scores), np.asarray(labels)
    total, last_recall = 0.0, 0.0
    for t in sorted(set(s), reverse=True):
        chosen = s >= t
        precision, recall = (y & chosen).sum() / chosen.sum(), (y & chosen).sum() / y.sum()
        total += (recall - last_recall) * precision
        last_recall = recall
    return total


@settings(max_examples=60)
@given(st.lists(st.tuples(st.integers(0, 5), st.booleans()), min_size=2, max_size=30))
def test_average_precision_matches_its_definition(items):
    scores, labels = [float(s) for s, _ in items], [y for _, y in items]
    if not any(labels):
        assert average_precision(scores, labels) is None
        return
    assert average_precision(scores, labels) == pytest.approx(_ap_by_thresholds(scores, labels))
    assert average_precision(scores, [True] * len(labels)) == pytest.approx(1.0)


@settings(max_examples=80)
@given(st.lists(st.sampled_from([-1.5, 0.0, 0.25, 0.25000001, 3.0, 1e9, float("nan")]), min_size=1, max_size=40))
def test_average_ranks_are_scipys_and_auroc_is_mann_whitneys(values):
    """Tied values share the mean of their ranks, as scipy.stats.rankdata says; AUROC is Mann–Whitney's U / n₊n₋."""
    from scipy.stats import mannwhitneyu, rankdata

    finite = np.array([v for v in values if not np.isnan(v)])
    if len(finite):
        assert np.array_equal(average_ranks(finite), rankdata(finite))
    labels = np.arange(len(values)) % 2 == 0
    scored = np.where(np.isnan(values), -1e12, tied(values))  # unscored ranks last; equal up to rounding, tied
    if labels.any() and (~labels).any():
        u = mannwhitneyu(scored[labels], scored[~labels]).statistic
        assert auroc(values, labels) == pytest.approx(u / (labels.sum() * (~labels).sum()), abs=1e-12)


def test_mib_areas():
    x = [0.001, 0.01, 0.1, 1.0]
    assert areas(x, [1, 1, 1, 1]) == pytest.approx({"cpr": 0.999, "cmd": 0.0})
    assert areas(x, [0, 0, 0, 1])["cpr"] == pytest.approx(0.9 / 2)
    assert areas(x, [0, 0, 0, 1])["cmd"] == pytest.approx(0.009 + 0.09 + 0.9 / 2)
    assert areas(x, [1.5, 1, 1, 1])["cmd"] == pytest.approx(0.009 * 0.5 / 2)  # over 1 counts as far as under
    with pytest.raises(ValueError):
        areas([0.1, 0.1], [1, 1])


def _toy_graph() -> Graph:
    return Graph(
        [
            Node("embed", "embed", -1),
            Node("pos", "pos", -1),
            Node("a0.0", "head", 0, 0),
            Node("a0.1", "head", 0, 1),
            Node("logits", "logits", 1),
        ]
    )


def test_acdc_reference_mode_reproduces_a_hand_worked_example():
    """The KL of a circuit (by hand): removing a0.0 → logits costs 0.5; removing pos → logits *lowers* it
    by 0.2 (a distracting path); removing embed → logits costs 0.02 while pos → logits is there and 0.08
    once it is gone; removing embed → a0.0.v costs 0.3; a0.1 → logits costs nothing. τ = 0.05.

    Visiting the logits first, senders latest first: a0.1 (Δ 0: goes), a0.0 (Δ 0.5: stays), pos (Δ −0.2:
    the signed test removes it, |Δ| keeps it), embed (reference: Δ 0.08 after pos went, stays; normalised:
    Δ 0.02 with pos still there, goes). Then a0.1 has no way out: its inputs go untested (NaN). In a0.0 only
    embed → a0.0.v stays."""
    g = _toy_graph()
    e = {x.name: x for x in g.edges}

    def kl(removed):
        names = {x.name for x in removed}
        cost = 0.5 * ("a0.0->logits" in names) - 0.2 * ("pos->logits" in names) + 0.3 * ("embed->a0.0.v" in names)
        if "embed->logits" in names:
            cost += 0.08 if "pos->logits" in names else 0.02
        return cost

    assert [r for r, _ in receiver_order(g)][:4] == ["logits", "a0.1", "a0.1", "a0.1"]
    removed, effects, tried, order = acdc_search(g, kl, 0.05, signed=True)
    kept = {x.name for x in g.edges if x not in removed}
    assert kept == {"a0.0->logits", "embed->logits", "embed->a0.0.v"}
    assert order[:2] == ["a0.1->logits", "pos->logits"]
    assert effects[g.index[e["pos->logits"]]] == pytest.approx(-0.2)
    assert effects[g.index[e["embed->logits"]]] == pytest.approx(0.08)
    assert all(np.isnan(effects[g.index[x]]) for x in g.incoming("a0.1")) and tried == 4 + 6
    removed, effects, _, _ = acdc_search(g, kl, 0.05, signed=False)
    assert {x.name for x in g.edges if x not in removed} == {"a0.0->logits", "pos->logits", "embed->a0.0.v"}
    assert effects[g.index[e["embed->logits"]]] == pytest.approx(0.02)


def test_both_acdc_modes_recover_the_counter_and_name_themselves():
    spec = FAMILIES["modular_counter/C3"]()
    truth, model = ground_truth(spec), to_hooked(spec)
    for mode in ("normalised", "reference"):
        r = analyse(model, "acdc", truth, pairs=32, acdc_mode=mode)
        assert r["acdc"]["mode"] == mode and r["acdc"]["metric"] == ("kl_full" if mode == "reference" else "kl")
        assert sorted(r["circuit"]["edges"]) == r["ground_truth_edges"] and r["average_precision"] == 1.0


def test_every_ablation_is_scored_against_its_own_level():
    spec = FAMILIES["prefix_scan/S5"]()
    truth, model = ground_truth(spec), to_hooked(spec)
    for source, level in (("resample", "resample"), ("zero", "zero"), ("mean", "mean")):
        r = analyse(model, "path", truth, pairs=24, source=source)
        assert r["ground_truth_level"] == level and r["source"] == source
        assert r["auroc"] == 1.0 and r["edge_precision"] == 1.0
        assert set(r["scores_by_level"]) >= {"structural", "relevant", level}
        c = r["curve"]
        assert c["signed"]["faithfulness"][-1] == pytest.approx(1.0) == c["absolute"]["faithfulness"][-1]
        assert c["cpr"] > 0 and c["complete_edges"] >= len(r["graph"]["edges"]) - sum(
            e.startswith("pos->") for e in r["graph"]["edges"]
        )
        below = areas(c["percentages"], c["absolute"]["faithfulness"])["cpr"]
        assert c["cmd"] >= 0.999 - below - 1e-9  # |1 − f| ≥ 1 − f, equal where f never passes 1
    zero = analyse(model, "path", truth, pairs=24, source="zero")
    assert any(e.startswith("pos->") for e in zero["ground_truth_edges"])  # a position code matters when zeroed


def test_misses_carry_a_reason():
    spec = FAMILIES["modular_counter/C3"]()
    r = analyse(to_hooked(spec), "attribution", ground_truth(spec), pairs=32)
    assert set(r["missed"]) == {"embed->a0.0.v", "a0.0->m0"}  # the ReLU staircase is flat: gradient 0
    for miss in r["missed"].values():
        assert miss["score"] == 0.0 and abs(miss["effect_alone"]) > 0.3 and "did not reflect" in miss["reason"]


def test_only_as_many_misses_as_asked_are_patched_alone():
    spec = FAMILIES["modular_counter/C3"]()
    model, truth = to_hooked(spec), ground_truth(spec)
    every = analyse(model, "attribution", truth, pairs=32)["missed"]
    one = analyse(model, "attribution", truth, pairs=32, why_missed=1)["missed"]
    none = analyse(model, "attribution", truth, pairs=32, why_missed=0)["missed"]
    assert set(one) == set(none) == set(every)  # the same misses, told apart or not
    first = next(iter(every))
    assert one[first] == every[first]  # the first scored miss is patched as before
    assert all(m["effect_alone"] is None and "not patched alone" in m["reason"] for k, m in one.items() if k != first)
    assert all(m["effect_alone"] is None for m in none.values())
