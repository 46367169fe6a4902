"""depth-sweep: the first sufficient depth and the contrast, fed
numbers with a known answer; the groups act on themselves; the constructions' depths; the quick run end to end."""

from __future__ import annotations

import pytest

from sandbox_lens.interp.experiments import EXPERIMENTS
from sandbox_lens.interp.experiments import depth_sweep as ds
from sandbox_lens.interp.experiments.base import run_experiment
from sandbox_lens.interp.experiments.rules import VERDICTS, rule_on
from sandbox_lens.interp.tasks.catalogue import get_automaton


def test_the_first_sufficient_depth_and_the_contrast_on_synthetic_numbers():
    easier = {1: [0.5, 0.6, 0.55, 0.5, 0.52], 2: [0.98, 0.995, 0.97, 0.96, 0.99], 3: [1.0] * 5}
    harder = {1: [0.3, 0.35, 0.32, 0.3, 0.31], 2: [0.6, 0.62, 0.65, 0.61, 0.6], 3: [0.9, 0.999, 0.95, 0.9, 0.92]}
    assert ds.first_sufficient(easier) == 2 and ds.first_sufficient(harder) == 3
    d, e = ds.contrast(easier, harder)
    assert d == 2 and e.value == pytest.approx(sum(easier[2]) / 5 - sum(harder[2]) / 5) and e.n == 5
    assert rule_on(ds.RULES["harder"], e)["verdict"] == "reproduced"
    level = {k: list(v) for k, v in easier.items()}
    assert rule_on(ds.RULES["harder"], ds.contrast(easier, level)[1])["verdict"] == "not reproduced"
    assert ds.contrast({1: [0.5] * 5}, harder) == (None, None)  # the easier group never learned
    assert ds.first_sufficient({}) is None


def test_the_groups_act_on_themselves_as_the_thesis_s_do():
    orders = {g: get_automaton(ds.CATALOGUE[g]).n_states for g in ds.GROUPS}
    assert orders == {"D8": 8, "Q8": 8, "A5": 60, "A4": 12}
    assert get_automaton(ds.CATALOGUE["A5"]).n_symbols == 3 and get_automaton(ds.CATALOGUE["A4"]).n_symbols == 2
    built = ds.construction_depths("A5", 8)
    assert built["krohn_rhodes"] is None and "not solvable" in built["krohn_rhodes_why"]
    assert ds.construction_depths("Q8", 8)["krohn_rhodes"] >= 1


def test_depth_sweep_quick(tmp_path):
    r = run_experiment(EXPERIMENTS["depth-sweep"], tmp_path / "out", quick=True)
    runs = r["data"]["runs"]
    assert {(x["group"], x["depth"]) for x in runs} == {(g, d) for g in ds.GROUPS for d in (1, 2)}
    assert r["settings"]["Q8/L2"]["shape"]["n_layers"] == 2
    assert [c["claim"] for c in r["claims"]] == ["Q8 needs more depth than D8", "A4 needs more depth than A5"]
    assert all(c["verdict"] in VERDICTS for c in r["claims"])
