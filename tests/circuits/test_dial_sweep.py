"""The dial sweep: the failure matrix and the order reversals on synthetic rows with a known answer, and a small
real sweep whose dial reaches the construction (and is refused where the family lacks the dialled gadget)."""

from __future__ import annotations

import pytest

from sandbox_lens.constructions.registry import build
from sandbox_lens.interp.circuits.dials import (
    dial_markdown,
    failure_matrix,
    failure_matrix_png,
    reversals,
    robustness_png,
    run_dial_sweep,
)
from sandbox_lens.interp.circuits.leaderboard import Setting
from sandbox_lens.interp.errors import ConstructionError
from sandbox_lens.interp.stats import t_interval
from sandbox_lens.interp.tasks.catalogue import get_automaton


def _stat(values):
    return {"mean": sum(values) / len(values), "interval": t_interval(values), "values": list(values)}


def _row(method, value, ap, precision=(1.0, 1.0, 1.0), recall=(1.0, 1.0, 1.0), why=None):
    return {
        "construction": "fam",
        "negatives": True,
        "setting": "default/resample",
        "method": method,
        "dial": "negative_gain",
        "value": value,
        "average_precision": _stat(ap),
        "precision": _stat(precision),
        "recall": _stat(recall),
        "why": why or {"spurious": {}, "missed": {}},
    }


def test_the_failure_matrix_scores_f1_per_seed_and_names_the_costliest_reasons():
    why = {"spurious": {"cancelled": 4, "not-connected": 1}, "missed": {"no effect alone": 2}}
    rows = [
        _row("path", 2.0, (0.9, 0.9, 0.9)),
        _row("path", 20.0, (0.5, 0.6, 0.7), precision=(1.0, 0.5, 1.0), recall=(1.0, 1.0, 0.0), why=why),
    ]
    m = failure_matrix({"rows": rows})
    assert m["columns"] == ["fam · gain=2", "fam · gain=20"]
    clean, failing = m["cells"]["path"]["fam · gain=2"], m["cells"]["path"]["fam · gain=20"]
    assert clean == {"f1": clean["f1"], "fails": False, "cause": "", "normaliser": None} and clean["f1"]["mean"] == 1.0
    assert failing["fails"] and failing["cause"] == "+cancel −no effect alone"
    assert failing["f1"]["values"] == pytest.approx([1.0, 2 / 3, 0.0])  # a seed that found nothing right scores 0


def test_a_reversal_needs_disjoint_intervals_both_ways():
    flip = [
        _row("a", 2.0, (0.90, 0.91, 0.92)),
        _row("b", 2.0, (0.50, 0.51, 0.52)),
        _row("a", 20.0, (0.30, 0.31, 0.32), why={"spurious": {"cancelled": 9}, "missed": {}}),
        _row("b", 20.0, (0.60, 0.61, 0.62)),
    ]
    (r,) = reversals({"rows": flip})
    assert r["leads"] == ["a", "b"] and r["values"] == [2.0, 20.0] and r["cause"] == "+cancel"
    assert r["average_precision"]["a"] == pytest.approx([0.91, 0.31])
    tied = [dict(x) for x in flip]
    tied[3] = _row("b", 20.0, (0.0, 0.3, 0.9))  # its interval overlaps a's: a tie, not a reversal
    assert reversals({"rows": tied}) == []
    same = flip[:2] + [_row("a", 20.0, (0.8, 0.81, 0.82)), _row("b", 20.0, (0.6, 0.61, 0.62))]
    assert reversals({"rows": same}) == []


def test_a_small_sweep_dials_the_construction_and_renders():
    def counter(**kw):
        return build("modular_counter", get_automaton("C3"), 8, **kw)

    dials = {"negative_gain": [2.0, 20.0, 200.0], "negative_sharpness": [8.0]}
    sweep = run_dial_sweep([("C3", counter)], dials, ["path", "random"], [Setting()], [0], "cancel", pairs=8)
    assert [(r["dial"], r["value"], r["method"]) for r in sweep["rows"]] == [
        (d, v, m) for d, vs in dials.items() for v in vs for m in ("path", "random")
    ]
    # gain 20 and sharpness 8 are both defaults: one construction, run once, its rows at both
    at_default = [
        {k: v for k, v in r.items() if k not in ("dial", "value")} for r in sweep["rows"] if r["value"] in (8.0, 20.0)
    ]
    assert at_default[:2] == at_default[2:]
    path = {r["value"]: r for r in sweep["rows"] if r["method"] == "path"}
    # a stronger read-out makes each cancelling head's effect alone larger: path patching keeps the pair
    assert path[200.0]["why"]["spurious"].get("cancelled", 0) >= path[2.0]["why"]["spurious"].get("cancelled", 0)
    assert path[200.0]["why"]["spurious"].get("cancelled", 0) > 0
    text = dial_markdown(sweep)
    assert "| path |" in text and "C3 · gain=200" in text
    for png in (failure_matrix_png(failure_matrix(sweep)), robustness_png(sweep)):
        assert png.startswith(b"\x89PNG")
    with pytest.raises(ConstructionError, match="add negatives=cancel"):
        run_dial_sweep([("C3", counter)], {"negative_gain": [2.0]}, ["path"], [Setting()], [0], "distractor", pairs=8)


def test_the_backup_dial_adds_the_redundant_routes_and_path_patching_misses_them_under_zero_ablation():
    def counter(**kw):
        return build("modular_counter", get_automaton("C3"), 8, **kw)

    sweep = run_dial_sweep(
        [("C3", counter)], {"backup": [0.0, 1.0]}, ["path", "acdc"], [Setting(None, "zero")], [0], "cancel", pairs=8
    )
    rows = {(r["value"], r["method"]): r for r in sweep["rows"]}
    assert rows[(1.0, "path")]["why"]["missed"].get("no effect alone", 0) >= 4  # both routes' value and output edges
    assert rows[(0.0, "path")]["why"]["missed"].get("no effect alone", 0) == 0
    assert rows[(1.0, "acdc")]["recall"]["mean"] == 1.0  # greedy removal keeps one route whole
    assert "C3 · backup=1" in dial_markdown(sweep) and robustness_png(sweep, setting="default/zero").startswith(
        b"\x89PNG"
    )
    with pytest.raises(ConstructionError, match="takes 0 .without. or 1"):
        run_dial_sweep([("C3", counter)], {"backup": [2.0]}, ["path"], [Setting()], [0], "cancel", pairs=8)
