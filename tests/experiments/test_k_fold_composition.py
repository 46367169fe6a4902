"""k-fold-composition: hop accuracies, the step each hop is learned, the order statistic, and the look-back reading
checked on the prefix scan (which looks exactly 1, 2, 4, … back)."""

from __future__ import annotations

import numpy as np
import pytest

from sandbox_lens.interp.experiments.k_fold_composition import (
    hop_accuracy,
    learned_steps,
    lookback_weights,
    order_rho,
)


def test_learned_steps_take_the_first_checkpoint_at_the_bar_and_none_when_never():
    timeline = [(10, [0.5, 0.2, 0.1]), (20, [0.95, 0.5, 0.1]), (40, [0.99, 0.9, 0.3]), (80, [1.0, 0.85, 0.4])]
    assert learned_steps(timeline) == [20, 40, None]  # a hop that dips after reaching the bar keeps its first step
    assert learned_steps([]) == []


@pytest.mark.parametrize(
    "steps,rho",
    [
        ([10, 20, 40, 80], 1.0),  # shorter first
        ([80, 40, 20, 10], -1.0),  # longer first
        ([10, None, 20, 40], 1.0),  # an unlearned hop is left out
        ([10, 10, 10, 10], None),  # all at once: no order to read
        ([10, None, None, 20], None),  # fewer than three learned hops
    ],
)
def test_order_rho_reads_the_order_hops_are_learned_in(steps, rho):
    got = order_rho(steps)
    assert got == rho if rho is None else got == pytest.approx(rho)


def test_the_prefix_scan_is_read_as_looking_1_2_4_back_and_exact_at_every_hop():
    from sandbox_lens.constructions import build_model
    from sandbox_lens.interp.tasks.catalogue import get_automaton

    a = get_automaton("S5")
    scan = build_model("prefix_scan", a, 8)
    words = a.sample(40, 8, np.random.default_rng(0))
    assert hop_accuracy(scan, words, a.run(words)) == [1.0] * 8
    weights = lookback_weights(scan, words)
    assert len(weights) == 3 and min(weights) > 1 - 1e-3  # float32 softmax of the scan's margins


def test_k_fold_composition_refuses_a_non_permutation_automaton(tmp_path):
    from sandbox_lens.interp.experiments import ExperimentError, get_experiment, run_experiment

    with pytest.raises(ExperimentError, match="permutations"):
        run_experiment(get_experiment("k-fold-composition"), tmp_path / "o", quick=True, options={"automaton": "grid9"})
    assert not (tmp_path / "o").exists()


def test_k_fold_composition_quick(tmp_path_factory):
    from tests.experiments.test_experiments import check_files, claim, quick

    out, r = quick("k-fold-composition", tmp_path_factory)
    check_files(out, r)
    assert {r["settings"][f"k4-{s}"]["task"].get("supervision", "every") for s in ("final", "powers", "every")} == {
        "final",
        "powers",
        "every",
    }
    assert r["settings"]["k4-every"]["shape"]["n_layers"] == 2  # log₂ k
    twin = r["data"]["twins"]["k4-every 0"]
    assert len(twin["hops"]) == 4 and len(twin["timeline"]) >= 2 and len(twin["learned_steps"]) == 4
    assert claim(r, "The prefix scan composes k permutations exactly")["verdict"] == "reproduced"
    found = twin["identified"]  # every twin of a quick run is identified, learned or not
    assert set(found["candidates"]) == {"scan", "sequential", "parity_first"}  # S5 has a sign but no cascade
    assert set(found["candidates"]["scan"]["variables"]) == {"window1", "state"}  # T = 4: one window level
    row = claim(r, "Twins that compose k permutations run the prefix scan")
    assert (
        row["verdict"] == "not tested"
        and "of 2 learned every-prefix twins identified as the scan or" in row["measured"]
    )
