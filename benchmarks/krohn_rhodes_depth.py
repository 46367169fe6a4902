"""Depth and width of the Krohn–Rhodes constructions next to the thesis's bounds (``make bench``).

For each automaton it builds ``krohn_rhodes`` at T = 16, 64 and 256, checks that the depth
(TL blocks and attention layers) is the same at every T, and prints one Markdown row:
the decomposition, measured depth, width at T = 256, the thesis's depth bound for the path
taken (Theorem 16: 3·log₂|G|; Lemma 20: 3·log₂|G| + 2; Lemma 21: levels·(max level depth + 1) − 1)
and, for contrast, the prefix scan's depth at T = 256 (⌈log₂ T⌉ attention layers; it grows
with T). Writes ``reports/bench/krohn_rhodes_depth.md`` too.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sandbox_lens.constructions import build  # noqa: E402
from sandbox_lens.constructions.krohn_rhodes import classify  # noqa: E402
from sandbox_lens.constructions.solvable import plan_solvable_group  # noqa: E402
from sandbox_lens.interp.files import atomic_write  # noqa: E402
from sandbox_lens.interp.tasks.cascade import known_cascade, load_cascade_file  # noqa: E402
from sandbox_lens.interp.tasks.catalogue import get_automaton  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
NAMES = [
    "C2",
    "C3",
    "C5",
    "C2^3",
    "D8",
    "S3",
    "A4",
    "S4",
    "Q8",
    "flipflop",
    "C3+resets",
    "S3+resets",
    "car_on_a_circle.json",
    "grid3",
    "grid5",
    "grid9",
]
LENGTHS = (16, 64, 256)


def _target(name: str):
    if name.endswith(".json"):
        cascade = load_cascade_file(ROOT / "examples" / "cascades" / name)
        return cascade.automaton(), cascade
    a = get_automaton(name)
    return a, known_cascade(a)


def _group_summary(a) -> tuple[int, str, float]:
    perms, resets = classify(a)
    plan = plan_solvable_group([a.transition_map(s) for s in perms], a.n_states)
    factors = " ⊳ ".join("×".join(f"Z{n}" for n in lv.orders) for lv in plan.levels) or "1"
    bound = 3 * math.log2(plan.order) if plan.order > 1 else 1
    if resets:
        return plan.order, f"perm-reset, G: {factors}", bound + 2
    return plan.order, f"group: {factors}", bound


def main() -> None:
    rows = [
        "| automaton | path (derived-series quotients) | \\|G\\| | TL blocks | attention layers | d_model | n_heads | d_mlp (T=256) | thesis depth bound (layers) | prefix scan at T=256 (blocks / attention) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    scan = build("prefix_scan", get_automaton("C2"), 256)
    for name in NAMES:
        a, cascade = _target(name)
        specs = [build("krohn_rhodes", a, T, **({"cascade": cascade} if cascade else {})) for T in LENGTHS]
        depths = {(s.n_layers, s.attention_layers) for s in specs}
        if len(depths) != 1:
            raise SystemExit(f"{name}: depth changes with T: {depths}")
        spec = specs[-1]
        if cascade is not None:
            level_depths = []
            for lv in cascade.levels:
                level_depths.append(build("krohn_rhodes", lv.automaton, 16).n_layers)
            k = len(cascade.levels)
            order, path, bound = (
                "—",
                f"cascade of {k}: " + ", ".join(lv.automaton.name for lv in cascade.levels),
                k * (max(level_depths) + 1) - 1,
            )
        else:
            order, path, bound = _group_summary(a)
        rows.append(
            f"| {name.removesuffix('.json')} | {path} | {order} | {spec.n_layers} | {spec.attention_layers} | "
            f"{spec.d_model} | {spec.n_heads} | {spec.d_mlp} | {bound:.3g} | {scan.n_layers} / {scan.attention_layers} |"
        )
    table = "\n".join(rows)
    print(table)
    out = ROOT / "reports" / "bench" / "krohn_rhodes_depth.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(out, (table + "\n").encode())
    print(f"\nwritten: {out.relative_to(ROOT)} (depth identical at T = {', '.join(map(str, LENGTHS))} for every row)")


if __name__ == "__main__":
    main()
