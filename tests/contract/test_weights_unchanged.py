"""Every construction's weights, bit for bit, against the hashes recorded in tests/data.

The hashes were recorded before the package was given floors (and after the Krohn–Rhodes plan was
made canonical, see test_plan_is_canonical): a refactor that changes any weight of any construction
at these lengths and options fails here.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
CASES = json.loads((ROOT / "tests/data/construction_weights.json").read_text())["cases"]


def _spec(case: dict):
    from sandbox_lens.constructions import build
    from sandbox_lens.interp.tasks.cascade import load_cascade_file
    from sandbox_lens.interp.tasks.catalogue import get_automaton
    from sandbox_lens.interp.tasks.dyck import Dyck

    src, opts, T = case["source"], dict(case["options"]), case["length"]
    if "automaton" in src:
        return build(case["construction"], get_automaton(src["automaton"]), T, **opts)
    if "dyck" in src:
        return build("dyck", Dyck(*src["dyck"]), T, **opts)
    if "cascade_file" in src:
        cascade = load_cascade_file(ROOT / src["cascade_file"])
        return build("krohn_rhodes", cascade.automaton(), T, cascade=cascade, **opts)
    return build("ffl", None, T, **opts)


def _digest(spec) -> str:
    from sandbox_lens.interp.model.hooked import state_dict_arrays

    h = hashlib.sha256()
    for name, arr in sorted(state_dict_arrays(spec).items()):
        a = np.ascontiguousarray(np.asarray(arr, dtype=np.float64))
        h.update(name.encode())
        h.update(str(a.shape).encode())
        h.update(a.tobytes())
    return h.hexdigest()


@pytest.mark.parametrize(
    "case",
    CASES,
    ids=lambda c: (
        f"{c['construction']}-{'-'.join(map(str, c['source'].values()))}"
        f"-T{c['length']}-{'-'.join(f'{k}={v}' for k, v in c['options'].items())}"
    ),
)
def test_weights_match_the_recorded_hashes(case: dict) -> None:
    assert _digest(_spec(case)) == case["sha256"]


def test_plan_is_canonical() -> None:
    """sympy draws derived-subgroup generators at random; the Krohn–Rhodes plan must not depend on them."""
    from sympy.core import random as sympy_random

    from sandbox_lens.constructions.solvable import plan_solvable_group
    from sandbox_lens.interp.tasks.catalogue import get_automaton

    a = get_automaton("S4")
    gens = [tuple(int(x) for x in a.delta[s]) for s in range(a.n_symbols)]
    plans = []
    for seed in range(4):
        sympy_random.seed(seed)
        plan = plan_solvable_group(gens, a.n_states)
        plans.append([(lv.elements, lv.orders, lv.lifts) for lv in plan.levels])
    sympy_random.seed()
    assert all(p == plans[0] for p in plans)


@pytest.mark.parametrize(
    "old, new, construction, source",
    [
        ({"control": "zeroed", "variant": "uniform"}, {"as_printed": "zeroed", "variant": "uniform"}, "dyck", "dyck"),
        ({"wiring": "current"}, {"as_printed": "wiring"}, "krohn_rhodes", "grid4"),
        ({"wiring": "previous"}, {}, "krohn_rhodes", "grid4"),
    ],
)
def test_old_option_spellings_build_the_same_weights_with_a_warning(old, new, construction, source):
    from sandbox_lens.constructions import build
    from sandbox_lens.interp.tasks.catalogue import get_automaton
    from sandbox_lens.interp.tasks.dyck import Dyck

    src = Dyck(2, 4) if source == "dyck" else get_automaton(source)
    with pytest.warns(FutureWarning, match="deprecated"):
        before = build(construction, src, 16, **old)
    assert _digest(before) == _digest(build(construction, src, 16, **new))
