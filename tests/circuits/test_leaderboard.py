"""The committed circuit leaderboard: rendered from its JSON, with every number's interval, and showing
what the issue asked of it — precision below 1 on families with negatives, method orders that differ."""

from __future__ import annotations

import json
from pathlib import Path

from circuit_families import FAMILIES, NEGATIVE_FAMILIES

from sandbox_lens.interp.circuits.leaderboard import (
    METRICS,
    Family,
    Setting,
    _order_text,
    markdown,
    method_orders,
    run_leaderboard,
)

BOARD = Path(__file__).resolve().parents[2] / "docs" / "circuits"


def test_the_committed_table_is_rendered_from_the_committed_json():
    board = json.loads((BOARD / "leaderboard.json").read_text())
    assert (BOARD / "leaderboard.md").read_text() == "# Circuit leaderboard\n\n" + markdown(board)
    assert board["provenance"]["commit"] and len(board["settings"]["seeds"]) >= 10


def test_the_committed_board_separates_the_methods():
    board = json.loads((BOARD / "leaderboard.json").read_text())
    main = [r for r in board["rows"] if r["setting"] == "default/resample"]
    below_one = {
        r["construction"]
        for r in main
        if r["negatives"]
        and r["method"] != "patching"
        and r["precision"]["mean"] is not None
        and r["precision"]["mean"] < 1
    }
    assert len(below_one) >= 3, below_one
    orders = method_orders(board)
    assert len({tuple(v) for v in orders.values()}) >= 3  # no one order of the methods fits every family
    assert not [r for r in board["rows"] if "skipped" in r]  # every family has something to explain
    for r in board["rows"]:
        for m in METRICS:
            assert len(r[m]["values"]) == len(board["settings"]["seeds"])
        if r["precision"]["mean"] is not None and r["precision"]["mean"] < 1:
            assert r["why"]["spurious"], r  # a low precision says why


def test_a_small_board_runs_and_reports_intervals():
    families = [
        Family("modular_counter C3", FAMILIES["modular_counter/C3"]),
        Family("modular_counter C3", NEGATIVE_FAMILIES["modular_counter/C3+negatives"], negatives=True),
    ]
    board = run_leaderboard(
        families, ["path", "random"], [Setting(None, "resample"), Setting(None, "zero")], [0, 1], pairs=12
    )
    assert len(board["rows"]) == 2 * 2 * 2
    random = [r for r in board["rows"] if r["method"] == "random" and r["setting"] == "default/resample"]
    assert all(r["auroc"]["interval"] is not None for r in random)  # two seeds, two different draws
    text = markdown(board)
    assert "### Corruption default, ablation zero" in text and "modular_counter C3 + negatives" in text


def test_an_unseen_automaton_drawn_per_seed_is_a_family():
    """A per-seed family builds a fresh random automaton's prefix scan for each pair seed: the rows pool over
    automata, and each seed's construction is another (its ground truth differs)."""
    from sandbox_lens.constructions.registry import build
    from sandbox_lens.interp.tasks.catalogue import get_automaton

    built = []

    def unseen(seed):
        built.append(seed)
        return build("prefix_scan", get_automaton(f"random4-2-{seed}"), 8)

    family = Family("prefix_scan random4-2-<seed>", unseen, per_seed=True)
    board = run_leaderboard([family], ["path", "attribution"], [Setting(None, "resample")], [0, 1], pairs=8)
    assert built == [0, 1]  # one construction per seed, built once for every method
    assert all(r["per_seed"] and len(r["auroc"]["values"]) == 2 for r in board["rows"])
    plain = run_leaderboard([Family("C3", FAMILIES["modular_counter/C3"])], ["path"], [Setting()], [0], pairs=8)
    assert "per_seed" not in plain["rows"][0]


def test_a_method_that_cannot_take_a_family_is_listed_as_not_run_and_left_out_of_the_orders():
    families = [Family("modular_counter C3", FAMILIES["modular_counter/C3"])]
    board = run_leaderboard(families, ["random", "path"], [Setting(None, "resample")], [0, 1], pairs=8)
    board["rows"].append(
        {
            "construction": "ffl",
            "negatives": False,
            "setting": "default/resample",
            "method": "auto-circuit:acdc",
            "skipped": "the task scores no output at the last position",
        }
    )
    text = markdown(board)
    assert "Not run (the method cannot take the family's words):" in text
    assert "- ffl, auto-circuit:acdc: the task scores no output at the last position" in text
    assert set(method_orders(board)) == {"modular_counter C3"}
    # a refusal inside a cell becomes such a row instead of stopping the board
    refused = run_leaderboard(families, ["path"], [Setting("no-such-corruption", "resample")], [0], pairs=8)
    assert "skipped" in refused["rows"][0] and "cannot produce the corruption" in refused["rows"][0]["skipped"]


def test_the_committed_auto_circuit_board_is_rendered_from_its_json_and_covers_its_six_methods():
    from sandbox_lens.interp.circuits.autocircuit import METHODS as AUTO

    board = json.loads((BOARD / "auto-circuit.json").read_text())
    assert (BOARD / "auto-circuit.md").read_text() == "# auto-circuit beside sandbox-lens\n\n" + markdown(board)
    assert board["settings"]["auto_circuit"] == "1.0.1" and board["provenance"]["commit"]
    scored = {(r["construction"], r["negatives"], r["method"]) for r in board["rows"] if "skipped" not in r}
    for family in {(r["construction"], r["negatives"]) for r in board["rows"] if r["construction"] != "ffl"}:
        assert {m for c, n, m in scored if (c, n) == family} >= set(AUTO), family
    skipped = [r for r in board["rows"] if "skipped" in r]
    assert skipped and all(r["construction"] == "ffl" and "last position" in r["skipped"] for r in skipped)


def test_the_methods_order_ties_methods_whose_intervals_overlap():
    def row(method, mean, interval):
        return {
            "construction": "c",
            "negatives": False,
            "setting": "default/resample",
            "method": method,
            "average_precision": {"mean": mean, "interval": interval},
        }

    board = {
        "rows": [
            row("a", 0.9, (0.85, 0.95)),
            row("b", 0.84, (0.80, 0.88)),
            row("c", 0.5, (0.45, 0.55)),
            row("d", 0.5, None),
            row("e", 0.2, (0.1, 0.3)),
        ]
    }
    assert _order_text(board, "c") == "a ≈ b > c ≈ d > e"


def test_the_committed_twins_board_is_rendered_from_its_json():
    from sandbox_lens.interp.circuits.imposed import twins_markdown

    board = json.loads((BOARD / "twins.json").read_text())
    assert (BOARD / "twins.md").read_text() == twins_markdown(board)
    assert board["provenance"]["commit"] and board["twins"]
    counted = {t["population"] for t in board["twins"] if t["counted"]}
    assert {r["construction"] for r in board["rows"]} == counted
    assert all(r["twin"] and r["level"] == "resample" for r in board["rows"])


def test_the_committed_dial_sweep_is_rendered_from_its_json_and_every_method_fails_a_dial():
    """docs/circuits/dials.md from dials.json; the figures beside it; no method keeps F1 1 at every dial value —
    the failure matrix names where each one fails."""
    from sandbox_lens.interp.circuits.dials import dial_markdown, failure_matrix

    sweep = json.loads((BOARD / "dials.json").read_text())
    assert (BOARD / "dials.md").read_text() == "# Failure dials\n\n" + dial_markdown(sweep)
    assert sweep["provenance"]["commit"] and len(sweep["settings"]["seeds"]) >= 3
    for name in ("failure-matrix-resample.png", "failure-matrix-zero.png", "robustness.png"):
        assert (BOARD / name).read_bytes().startswith(b"\x89PNG")
    matrix = failure_matrix(sweep)
    for method, cells in matrix["cells"].items():
        if method in ("random", "magnitude"):
            continue
        assert any(c["fails"] for c in cells.values()), method


def test_a_far_normaliser_is_said_in_why():
    """A row whose normalising run is more than twice the corrupted word's distance says so first, with the factor
    by which the threshold acts higher; a row without one (resample, or a board written before) says nothing."""
    from sandbox_lens.interp.circuits.leaderboard import _why

    row = {"why": {"spurious": {"cancelled": 3}, "missed": {}}}
    assert _why(row) == "3 spurious: cancelled"
    assert _why({**row, "normaliser_ratio": 1.5}) == "3 spurious: cancelled"
    said = _why({**row, "normaliser_ratio": 9.8})
    assert said.startswith("m(∅) 9.8× the corrupted word's distance: the threshold acts 9.8× higher; 3 spurious")


def test_the_cpu_minutes_the_docs_quote_are_the_committed_boards():
    """docs/circuits/README.md and the Makefile quote what the boards' own JSON recorded, rounded down to minutes."""
    import re

    text = (BOARD / "README.md").read_text()
    board = json.loads((BOARD / "leaderboard.json").read_text())
    dials = json.loads((BOARD / "dials.json").read_text())
    seconds = {}
    for r in board["rows"]:
        if "seconds" in r:
            seconds[r["method"]] = seconds.get(r["method"], 0.0) + sum(r["seconds"]["values"])
    total, masks = int(board["cpu_seconds"] // 60), int(seconds["masks"] // 60)
    around = int((board["cpu_seconds"] - sum(seconds.values())) // 60)
    assert f"board took {total} CPU-minutes in one run" in text
    assert f"{masks} of them the learned masks' own training" in text and f"and {around} the analysis around" in text
    assert re.search(rf"part of `make leaderboard`; {int(dials['cpu_seconds'] // 60)} CPU-minutes", text)
    makefile = (BOARD.parents[1] / "Makefile").read_text()
    assert f"the families in two processes ({total} CPU-minutes measured" in makefile
    assert f"three pair seeds; {int(dials['cpu_seconds'] // 60)} CPU-minutes)" in makefile
    twins = json.loads((BOARD / "twins.json").read_text())
    assert f"reused; {int(twins['provenance']['cpu_seconds'] // 60)} CPU-minutes the" in makefile


def test_a_method_that_scores_positions_gets_the_per_position_table():
    families = [Family("krohn_rhodes cascade", FAMILIES["krohn_rhodes/cascade"])]
    board = run_leaderboard(families, ["peap", "attribution"], [Setting(None, "resample")], [0, 1], pairs=12)
    peap, attribution = board["rows"]
    assert "position_ap" not in attribution
    assert len(peap["position_ap"]["values"]) == 2 and 0 <= peap["position_auroc"]["mean"] <= 1
    assert peap["position_items"]["positives"] > 0
    assert len(peap["crossing_ap"]["values"]) == 2 and "crossing_ap" not in attribution
    text = markdown(board)
    assert "### Per position" in text and text.count("| krohn_rhodes cascade | default/resample | peap |") == 1
    assert "(edge, query, key) AP" in text
    assert all(k > 0 for k in attribution["kinks"]["at_kink"])  # the cascade's hand-set units at 0 (circuits/kinks.py)
    assert "### Where rounding decides the gradient methods" in text


def test_a_gradient_method_on_units_at_the_kink_says_so():
    """A family whose ReLU inputs sit at the kink gets a row in the kink table and a note in its gradient methods'
    *why*; a family without (or a method without gradients) gets neither (synthetic rows)."""
    from sandbox_lens.interp.circuits.leaderboard import _kink_table, _why

    stat = {"mean": 0.5, "interval": None, "values": [0.5, 0.5]}
    row = {"construction": "c", "negatives": False, "setting": "default/resample", "average_precision": stat}
    why = {"why": {"spurious": {}, "missed": {"never scored": 2}}}
    kinked = {**row, **why, "method": "attribution", "kinks": {"at_kink": [10, 20], "units": [100, 100]}}
    flat = {**row, **why, "method": "attribution", "construction": "d", "kinks": {"at_kink": [0, 0], "units": [9, 9]}}
    plain = {**row, **why, "method": "path"}
    assert _why(kinked).startswith("rounding decides the gradient at 15 ReLU inputs") and _why(flat) == _why(plain)
    table = _kink_table({"rows": [kinked, flat, plain]})
    assert table[0] == "### Where rounding decides the gradient methods" and "2^-12" in table[2]
    assert [line for line in table if line.startswith("| c |")] == ["| c | 15 / 100 | attribution 0.50 |"]
    assert not [line for line in table if line.startswith("| d |")]
    assert _kink_table({"rows": [flat, plain]}) == []
