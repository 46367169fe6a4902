"""length-thresholds: N* from a grid of training lengths, Dyck's two error views, and the rulings on synthetic
thresholds with known answers."""

from __future__ import annotations

import numpy as np
import pytest

from sandbox_lens.interp.experiments.length_thresholds import (
    dyck_errors,
    log_threshold,
    threshold,
    thresholds,
)

LENGTHS = (8, 16, 32, 64)


@pytest.mark.parametrize(
    "ok,expected",
    [
        ({8: False, 16: True, 32: True, 64: True}, 16),
        ({8: True, 16: False, 32: True, 64: True}, 32),  # a dip: only the lengths after it count
        ({8: True, 16: True, 32: True, 64: False}, None),  # the longest fails: above the grid
        ({8: True, 16: True, 32: True, 64: True}, 8),
    ],
)
def test_threshold_is_the_length_from_which_every_longer_one_generalises(ok, expected):
    assert threshold(ok) == expected


def test_log_threshold_counts_above_the_grid_as_twice_its_longest():
    assert log_threshold(16, LENGTHS) == 4.0 and log_threshold(None, LENGTHS) == 7.0


def test_dyck_errors_of_the_exact_construction_are_none_and_a_wrong_model_has_them():
    from sandbox_lens.interp.evaluate import skyline
    from sandbox_lens.interp.tasks.batches import DyckTask
    from sandbox_lens.interp.tasks.dyck import Dyck
    from sandbox_lens.interp.train import ModelShape, random_init

    lang = Dyck(2, 3)
    twin = random_init(DyckTask(lang, 16), ModelShape(n_layers=1, n_heads=1, d_model=16, n_ctx=40), seed=0)
    words = lang.sample(20, 32, seed=0)
    assert dyck_errors(skyline(twin, 32), lang, words) == {"average": 1.0, "linf": 0.0}
    random = dyck_errors(twin, lang, words)
    assert random["average"] < 1.0 and random["linf"] > 0.0


def _twins(errors: dict[tuple[str, int, int, int], float]) -> list[dict]:
    """Twins whose soft and hard errors in both views are ``errors[(task, layers, N, seed)]``."""
    return [
        {
            "task": t,
            "layers": L,
            "N": N,
            "seed": s,
            "errors": {a: {"average": e, "linf": 2 * e} for a in ("soft", "hard")},
        }
        for (t, L, N, s), e in errors.items()
    ]


def test_the_rulings_on_synthetic_thresholds(tmp_path):
    """Dyck_{2,2} generalises from N = 16 on average and Dyck_{2,4} from 64: a log₂ step of +2 per unit (reproduced
    over 10 units). ℓ∞ doubles every error (0.006 → 0.012 fails the 0.01 bar), so it needs the next length: +1."""
    from sandbox_lens.interp.experiments import length_thresholds as lt
    from tests.experiments.test_effects import _ctx

    errors = {}
    for L in (1, 2):
        for s in range(5):
            for N in LENGTHS:
                errors[("dyck2", L, N, s)] = 0.0 if N >= 32 else (0.006 if N == 16 else 0.5)
                errors[("dyck4", L, N, s)] = 0.0 if N >= 64 else 0.5
    found = thresholds(_twins(errors), LENGTHS)
    assert {f["N*"] for f in found if f["task"] == "dyck2" and f["view"] == "average"} == {16}
    assert {f["N*"] for f in found if f["task"] == "dyck2" and f["view"] == "linf"} == {32}
    ctx = _ctx("length-thresholds", tmp_path)
    lt._claims(ctx, found, {"lengths": LENGTHS, "test": 128})
    depth, linf = ctx.claims
    assert depth["estimate"]["values"] == pytest.approx([2.0] * 10) and depth["verdict"] == "reproduced"
    # dyck2 needs one more step in ℓ∞, dyck4 none (0 at 64 either way)
    assert sorted(linf["estimate"]["values"]) == [0.0] * 10 + [1.0] * 10
    assert np.isclose(linf["estimate"]["value"], 0.5) and linf["verdict"] == "reproduced"


def test_length_thresholds_quick(tmp_path_factory):
    from tests.experiments.test_experiments import check_files, quick

    out, r = quick("length-thresholds", tmp_path_factory)
    check_files(out, r)
    shape = r["settings"]["dyck2-L1-N8"]["shape"]
    assert shape["positional"] == "none" and shape["n_layers"] == 1 and shape["n_ctx"] >= 33
    assert {t["task"] for t in r["data"]["twins"]} == {"ffl", "dyck2"}
    assert all(set(t["errors"]) == {"soft", "hard"} for t in r["data"]["twins"])


def test_thresholds_mostly_beyond_the_grid_are_not_tested(tmp_path):
    """Two of ten units with a threshold inside the grid, the rest censored: neither comparison is ruled."""
    from sandbox_lens.interp.experiments import length_thresholds as lt
    from tests.experiments.test_effects import _ctx

    errors = {}
    for L in (1, 2):
        for s in range(5):
            for N in LENGTHS:
                errors[("dyck2", L, N, s)] = 0.0 if (N == 64 and s == 0) else 0.5
                errors[("dyck4", L, N, s)] = 0.5
    ctx = _ctx("length-thresholds", tmp_path)
    lt._claims(ctx, thresholds(_twins(errors), LENGTHS), {"lengths": LENGTHS, "test": 128})
    assert [c["verdict"] for c in ctx.claims] == ["not tested", "not tested"]
    assert "only 2 of 10 units have a threshold within the grid" in ctx.claims[0]["why"]
