"""copying: pattern labels on hand-made patterns, the effect code on synthetic twins with known answers, the quick
run, and the refusals."""

from __future__ import annotations

import numpy as np
import pytest

from sandbox_lens.interp.experiments import get_experiment, run_experiment
from sandbox_lens.interp.experiments.base import Context, ExperimentError
from sandbox_lens.interp.experiments.copying import (
    CURRENT,
    DIFFUSE,
    _report,
    ablation_effect,
    common_effect,
    mask_effect,
    pattern_label,
    token_classes,
)
from sandbox_lens.interp.tasks.dyck import Dyck
from tests.experiments.test_experiments import check_files, claim, quick

LANG = Dyck(2, 4)
# BOS ( ( ) [ ] ) — tokens 0, 1 + bracket index: ( = 0, ) = 1, [ = 2, ] = 3
TOKENS = np.array([[0, 1, 1, 2, 3, 4, 2]])


def _pattern(rows: list[list[float]]) -> np.ndarray:
    return np.array(rows, dtype=float)[None]


def test_a_head_on_its_own_position_is_labelled_current():
    n = TOKENS.shape[1]
    assert pattern_label(np.eye(n)[None], TOKENS, token_classes(LANG)) == (CURRENT, 1.0)


def test_a_head_on_the_closing_brackets_gets_the_narrowest_class_that_holds_its_mass():
    """All mass on the latest closing bracket (BOS while there is none): every query that sees a ')' or ']' puts
    1.0 on the class 'closing brackets'; the narrower 'bracket )' holds it only where ')' is the latest close."""
    n, tok = TOKENS.shape[1], TOKENS[0]
    rows = []
    for q in range(n):
        closes = [k for k in range(q + 1) if tok[k] in (2, 4)]
        row = [0.0] * n
        row[closes[-1] if closes else 0] = 1.0
        rows.append(row)
    label, mass = pattern_label(_pattern(rows), TOKENS, token_classes(LANG))
    assert (label, mass) == ("closing brackets", 1.0)


def test_a_uniform_head_is_diffuse():
    n = TOKENS.shape[1]
    uniform = np.tril(np.ones((n, n))) / np.arange(1, n + 1)[:, None]
    label, mass = pattern_label(uniform[None], TOKENS, token_classes(LANG))
    assert label == DIFFUSE and 0 < mass < 0.8


def _twin(acc: float, heads: list[tuple[str, float]], kept: list[str] = ()) -> dict:
    return {
        "accuracy": acc,
        "heads": {f"L{i}H0": {"label": lab, "mass": 0.9, "drop": d} for i, (lab, d) in enumerate(heads)},
        "all_heads_ablated": acc,
        "looking_ablated": acc,
        "kept": list(kept),
        "masked_accuracy": acc,
    }


def test_effects_on_synthetic_twins():
    twins = {
        0: _twin(1.0, [("closing brackets", 0.01), (CURRENT, 0.3), ("BOS", 0.0), (DIFFUSE, 0.0)], ["L0H0"]),
        1: _twin(1.0, [("bracket (", 0.004), ("type ()", 0.008), (CURRENT, 0.2), (DIFFUSE, 0.0)], ["L2H0"]),
        2: _twin(1.0, [(DIFFUSE, 0.0)] * 4),  # no interpretable-looking head: not in the ablation effect
    }
    e = ablation_effect(twins)
    assert e.n == 2 and e.values == pytest.approx([0.01, 0.008])
    assert common_effect(twins).value == pytest.approx(2 / 3)
    # twin 0 keeps its one readable head (1 − 1/4); twin 1 keeps the current-position head (0 − 2/4); twin 2 none
    m = mask_effect(twins)
    assert m.n == 2 and m.values == pytest.approx([0.75, -0.5])


@pytest.mark.parametrize(
    "drops, verdict",
    [
        ([0.001, 0.004, 0.0, 0.002, 0.003], "reproduced"),
        ([0.2, 0.3, 0.25, 0.35, 0.28], "not reproduced"),
        ([0.001, 0.004, 0.0], "inconclusive"),  # three twins: a reproduction needs five
    ],
)
def test_the_ablation_rule_on_synthetic_drops(tmp_path, drops, verdict):
    per = {
        n: {
            s: _twin(1.0, [("closing brackets", d)] + [(DIFFUSE, 0.0)] * (n - 1), ["L0H0"]) for s, d in enumerate(drops)
        }
        for n in (1, 4)
    }
    ctx = Context(get_experiment("copying"), tmp_path, quick=False, seeds=list(range(len(drops))))
    _report(ctx, per, LANG)
    assert (
        claim({"claims": ctx.claims}, "Ablating an interpretable-looking head barely changes copying (4")["verdict"]
        == verdict
    )
    assert claim({"claims": ctx.claims}, "4-layer twins learn")["verdict"] == (
        "reproduced" if len(drops) >= 5 else "inconclusive"
    )


def test_copying_quick(tmp_path_factory):
    out, r = quick("copying", tmp_path_factory)
    check_files(out, r)
    twins = r["data"]["twins"]
    assert set(twins) == {"1", "4"} and all(len(t["heads"]) == int(n) for n, p in twins.items() for t in p.values())
    assert (out / "figures" / "copying-ablation.png").is_file()


def test_copying_refuses_a_language_that_is_not_dyck(tmp_path):
    with pytest.raises(ExperimentError):
        run_experiment(get_experiment("copying"), tmp_path / "o", quick=True, options={"automaton": "parity"})
    assert not (tmp_path / "o").exists()
