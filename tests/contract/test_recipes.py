"""docs/recipes.md, followed literally: each recipe's code blocks run in order and do what the page says."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "recipes.md"


def _recipes() -> dict[str, list[str]]:
    """{recipe heading: its python code blocks, in order}."""
    out: dict[str, list[str]] = {}
    for section in re.split(r"^## ", PAGE.read_text(), flags=re.M)[1:]:
        heading = section.splitlines()[0].strip()
        out[heading] = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    return out


def test_the_page_has_the_recipes_the_registries_need():
    assert {
        "A circuit method",
        "A rival algorithm for alignment",
        "A construction",
        "An experiment",
        "A task kind",
    } <= set(_recipes())
    assert all(_recipes().values())


def test_the_circuit_method_recipe_adds_a_method_that_runs_and_is_scored():
    from sandbox_lens.interp.circuits.methods import METHODS

    namespace: dict = {}
    try:
        for block in _recipes()["A circuit method"]:
            exec(compile(block, str(PAGE), "exec"), namespace)
        assert "toy-depth" in METHODS and namespace["result"]["method"] == "toy-depth"
        assert 0.0 <= namespace["result"]["auroc"] <= 1.0 and namespace["result"]["circuit"]["edges"]
    finally:
        METHODS.pop("toy-depth", None)


def test_the_rival_algorithm_recipe_adds_a_candidate_that_identify_tests():
    from sandbox_lens.interp.causal.algorithms import ALGORITHMS

    namespace: dict = {}
    try:
        for block in _recipes()["A rival algorithm for alignment"]:
            exec(compile(block, str(PAGE), "exec"), namespace)
        r = namespace["r"]
        status = {c["algorithm"]: c["status"] for c in r["candidates"]}
        assert status == {"scan": "passes", "state_only": "passes"} and r["identified"] == "scan"
    finally:
        ALGORITHMS.pop("state_only", None)


def test_the_construction_recipe_adds_a_construction_that_verifies_exactly():
    from sandbox_lens.constructions.registry import REGISTRY

    namespace: dict = {}
    try:
        for block in _recipes()["A construction"]:
            exec(compile(block, str(PAGE), "exec"), namespace)
        result = namespace["result"]
        assert "reset" in REGISTRY and result.accuracy == 1.0 and result.exhaustive_upto >= 3
        assert result.construction == "reset" and result.attention_layers == 0
    finally:
        REGISTRY.pop("reset", None)


def test_the_experiment_recipe_adds_an_experiment_that_runs_and_rules(tmp_path, monkeypatch):
    from sandbox_lens.interp.experiments import EXPERIMENTS

    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    try:
        for block in _recipes()["An experiment"]:
            exec(compile(block, str(PAGE), "exec"), namespace)
        claims = namespace["results"]["claims"]
        assert [c["verdict"] for c in claims] == ["not tested"]  # 2 quick seeds, the rule needs 5
        assert (tmp_path / "runs" / "toy-parity" / "report.html").is_file()
    finally:
        EXPERIMENTS.pop("toy-parity", None)


def test_the_task_kind_recipe_adds_a_kind_that_trains_and_verifies(tmp_path, monkeypatch):
    from sandbox_lens.interp.tasks import kinds

    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    try:
        for block in _recipes()["A task kind"]:
            exec(compile(block, str(PAGE), "exec"), namespace)
        result = namespace["result"]
        assert result.kind == "copy" and result.accuracy == 1.0
    finally:
        if "copy" in kinds.kind_names():
            kinds.unregister("copy")
