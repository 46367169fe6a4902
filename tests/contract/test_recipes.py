"""docs/recipes.md, followed literally: each recipe's code blocks run in order and do what the page says."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator
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


@contextlib.contextmanager
def _followed(heading: str, undo: Callable[[], object]) -> Iterator[dict]:
    """The namespace after running the recipe's code blocks in order; ``undo`` takes its registration back."""
    namespace: dict = {}
    try:
        for block in _recipes()[heading]:
            exec(compile(block, str(PAGE), "exec"), namespace)
        yield namespace
    finally:
        undo()


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

    with _followed("A circuit method", lambda: METHODS.pop("toy-depth", None)) as namespace:
        assert "toy-depth" in METHODS and namespace["result"]["method"] == "toy-depth"
        assert 0.0 <= namespace["result"]["auroc"] <= 1.0 and namespace["result"]["circuit"]["edges"]


def test_the_rival_algorithm_recipe_adds_a_candidate_that_identify_tests():
    from sandbox_lens.interp.causal.algorithms import ALGORITHMS

    with _followed("A rival algorithm for alignment", lambda: ALGORITHMS.pop("state_only", None)) as namespace:
        r = namespace["r"]
        status = {c["algorithm"]: c["status"] for c in r["candidates"]}
        assert status == {"scan": "passes", "state_only": "passes"} and r["identified"] == "scan"


def test_the_construction_recipe_adds_a_construction_that_verifies_exactly():
    from sandbox_lens.constructions.registry import REGISTRY

    with _followed("A construction", lambda: REGISTRY.pop("reset", None)) as namespace:
        result = namespace["result"]
        assert "reset" in REGISTRY and result.accuracy == 1.0 and result.exhaustive_upto >= 3
        assert result.construction == "reset" and result.attention_layers == 0


def test_the_experiment_recipe_adds_an_experiment_that_runs_and_rules(tmp_path, monkeypatch):
    from sandbox_lens.interp.experiments import EXPERIMENTS

    monkeypatch.chdir(tmp_path)
    with _followed("An experiment", lambda: EXPERIMENTS.pop("toy-parity", None)) as namespace:
        claims = namespace["results"]["claims"]
        assert [c["verdict"] for c in claims] == ["not tested"]  # 2 quick seeds, the rule needs 5
        assert (tmp_path / "runs" / "toy-parity" / "report.html").is_file()


def test_the_task_kind_recipe_adds_a_kind_that_trains_and_verifies(tmp_path, monkeypatch):
    from sandbox_lens.interp.tasks import kinds

    monkeypatch.chdir(tmp_path)
    with _followed(
        "A task kind", lambda: kinds.unregister("copy") if "copy" in kinds.kind_names() else None
    ) as namespace:
        result = namespace["result"]
        assert result.kind == "copy" and result.accuracy == 1.0
