"""The causal section of `interp population`: every twin of a sweep aligned beside its seeded null and the
exact construction, summarised over seeds with intervals; the population verdict's rule on synthetic
numbers."""

from __future__ import annotations

import json

import pytest

from sandbox_lens.interp.compare.population import SHARE, population, population_verdict
from sandbox_lens.interp.tasks.batches import AutomatonTask
from sandbox_lens.interp.tasks.catalogue import get_automaton
from sandbox_lens.interp.train import ModelShape, TrainConfig
from sandbox_lens.interp.train.sweep import run_sweep


def _summary(seeds, of, null=0.4, blind=0):
    from sandbox_lens.interp.stats import wilson_interval

    return {
        "implements": {"seeds": seeds, "of": of, "interval": wilson_interval(seeds, of)},
        "null_das_iia": {"value": null},
        "blind": blind,
    }


def test_the_population_verdicts_rule():
    assert population_verdict(_summary(5, 5))["implements"] is True  # Wilson lower bound 0.57 > 0.5
    assert population_verdict(_summary(4, 5))["implements"] is None  # [0.38, 0.96] straddles 0.5: seeds differ
    assert "seeds differ: 4 of 5" in population_verdict(_summary(4, 5))["verdict"]
    assert population_verdict(_summary(0, 5))["implements"] is False
    blind = population_verdict(_summary(0, 5, blind=4), "depth")
    assert blind["implements"] is None and "misses the construction's own" in blind["verdict"]
    assert population_verdict(_summary(5, 5, null=0.96))["implements"] is None  # the nulls reach it
    assert SHARE == 0.5 and "0.5" in population_verdict(_summary(5, 5))["rule"]


# slow: a sweep, five nulls and a report (~2 min on 2 cores)
@pytest.mark.slow
def test_a_population_aligned_causally(tmp_path, capsys):
    from sandbox_lens.interp.cli import main

    task = AutomatonTask(get_automaton("C3"), 6)
    run_sweep(
        task,
        ModelShape(n_layers=2, d_model=16, n_heads=1),
        TrainConfig(steps=150, batch=32, eval_every=50),
        tmp_path,
        [0, 1],
        workers=1,
        progress=False,
    )
    result = population(tmp_path, samples=16, causal_pairs=32, das_steps=20, ks=(1, 2))
    causal = result["cells"]["(all)"]["causal"]
    assert causal["seeds"] == [0, 1] and causal["construction"] == "modular_counter"
    state = causal["variables"]["state"]
    assert [r["seed"] for r in state["per_seed"]] == [0, 1]
    s = state["summary"]
    assert s["das_iia"]["n"] == 2 and s["das_iia"]["interval"] is not None
    assert s["null_das_iia"]["value"] < 0.95  # the random-init nulls stay below the threshold
    assert s["construction_median_first_block"] == pytest.approx(1 / 3)  # Lemma 15: after its one attention layer
    assert [x["iia"] for x in s["construction_named_sites"]] == [1.0, 1.0, 0.0]
    assert s["verdict"]["verdict"] and s["implements"]["of"] == 2
    json.dumps(result)  # all of it is JSON
    assert main(["population", str(tmp_path), "--causal-pairs", "3"]) == 2
    assert "--causal-pairs must be 0 or ≥ 8" in capsys.readouterr().err

    # the same population in the compare report, beside one of its twins
    from sandbox_lens.interp.compare.analyse import compare, comparison_for

    compare(
        comparison_for("C3", length=6),
        tmp_path / "cmp",
        constructions=["modular_counter"],
        trained=tmp_path / "seed_0",
        population=str(tmp_path),
        causal_pairs=32,
        samples=16,
        examples=2,
        mask_steps=0,
        circuit_pairs=0,
        progress=False,
    )
    m = json.loads((tmp_path / "cmp" / "metrics.json").read_text())
    assert m["causal_population"]["cells"]["(all)"]["seeds"] == [0, 1]
    assert "Causal alignment of a population" in (tmp_path / "cmp" / "report.html").read_text()
    assert main(["compare", "C3", "--length", "8", "--population", str(tmp_path), "--out", str(tmp_path / "x")]) == 2
    assert "not on the requested task" in capsys.readouterr().err and not (tmp_path / "x").exists()
