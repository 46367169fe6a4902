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
    assert {"A circuit method", "A rival algorithm for alignment"} <= set(_recipes())
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
