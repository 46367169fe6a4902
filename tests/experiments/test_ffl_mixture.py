"""ffl-mixture: the gate on each twin's own training law, error counts per law, and the rulings on synthetic rows."""

from __future__ import annotations

import numpy as np
import pytest

from sandbox_lens.interp.experiments.ffl_mixture import LEARNED, error_free, errors_by_population, log_rates

LAWS = [0.8, 0.98]


def _rows(errors: dict[str, tuple[int, int]], reads: dict[float, int]) -> list[dict]:
    """One evaluation row per (model, law): ``errors[model]`` gives its read errors at each law of LAWS."""
    return [
        {"model": m, "p": p, "read_errors": e[i], "strings_with_error": min(e[i], 1), "scored": reads[p]}
        for m, e in errors.items()
        for i, p in enumerate(LAWS)
    ]


def test_errors_by_population_gates_each_twin_on_its_own_law_and_keeps_the_construction():
    rows = _rows(
        {"twin 0": (0, 5), "twin 1": (3, 9), "mixture 0": (0, 0), "mixture 1": (1, 0), "construction": (0, 0)},
        {0.8: 100, 0.98: 40},
    )
    gate = {"twin 0": 0.995, "twin 1": 0.9, "mixture 0": 0.999, "mixture 1": LEARNED}
    per = errors_by_population(rows, gate, LAWS)
    assert per["twin"]["models"] == ["twin 0", "twin 1"] and per["twin"]["learned"] == ["twin 0"]
    assert per["mixture"]["learned"] == ["mixture 0", "mixture 1"]  # the gate is inclusive
    assert per["construction"]["learned"] == ["construction"]
    assert per["twin"]["0.98"] == {
        "read_errors": {"twin 0": 5, "twin 1": 9},
        "strings_with_error": {"twin 0": 1, "twin 1": 1},
        "reads": 40,
    }
    assert error_free(per["mixture"], LAWS) == [True, False] and error_free(per["twin"], LAWS) == [False]
    # ½ error added: an error-free twin has a finite log rate, below any twin with one error
    assert log_rates(per["mixture"], 0.98) == pytest.approx([np.log10(0.5 / 41)] * 2)
    assert log_rates(per["twin"], 0.98) == pytest.approx([np.log10(5.5 / 41)])
    assert errors_by_population(rows, gate, LAWS, learned=0.0)["twin"]["learned"] == ["twin 0", "twin 1"]


def test_ffl_mixture_quick(tmp_path_factory):
    from tests.experiments.test_experiments import check_files, claim, quick

    out, r = quick("ffl-mixture", tmp_path_factory)
    check_files(out, r)
    assert r["settings"]["mixture"]["task"]["p"] == [0.9, 0.98, 0.1]
    assert claim(r, "Proposition 3's construction")["verdict"] == "reproduced"
    for p in (0.9, 0.98, 0.1):
        row = claim(r, f"Mixture twins make far fewer read errors on FFL({p:g})")
        assert row["p_holm"] is not None and row["threshold"] == -1.0  # one claim, three laws: Holm-adjusted
