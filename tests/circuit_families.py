"""The construction families the circuit tests run on (small lengths: every test builds them)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from sandbox_lens.constructions.registry import build
from sandbox_lens.interp.tasks.automata import Semiautomaton
from sandbox_lens.interp.tasks.cascade import load_cascade_file
from sandbox_lens.interp.tasks.catalogue import get_automaton
from sandbox_lens.interp.tasks.dyck import Dyck

ROOT = Path(__file__).resolve().parents[1]
CASCADE = ROOT / "examples" / "cascades" / "parity_flipflop_counter.json"
ALL_NEGATIVES = "distractor,cancel,constant"


def random_automaton(n_states: int = 4, n_symbols: int = 3, seed: int = 7) -> Semiautomaton:
    """A random semiautomaton (its transition table uniform over states)."""
    rng = np.random.default_rng(seed)
    return Semiautomaton(
        f"random{n_states}x{n_symbols}",
        tuple(f"q{i}" for i in range(n_states)),
        tuple(f"s{i}" for i in range(n_symbols)),
        rng.integers(n_states, size=(n_symbols, n_states)),
    )


FAMILIES = {
    "prefix_scan/S5": lambda: build("prefix_scan", get_automaton("S5"), 8),
    "prefix_scan/random": lambda: build("prefix_scan", random_automaton(), 8),
    "modular_counter/C3": lambda: build("modular_counter", get_automaton("C3"), 8),
    "memory/flipflop": lambda: build("memory", get_automaton("flipflop"), 8),
    "krohn_rhodes/S4": lambda: build("krohn_rhodes", get_automaton("S4"), 8),
    "krohn_rhodes/cascade": lambda: build(
        "krohn_rhodes", load_cascade_file(CASCADE).automaton(), 8, cascade=load_cascade_file(CASCADE)
    ),
    "gridworld/grid4": lambda: build("gridworld", get_automaton("grid4"), 8),
    "dyck/stack": lambda: build("dyck", Dyck(2, 3), 12, variant="stack"),
    "dyck/uniform": lambda: build("dyck", Dyck(2, 3), 12, variant="uniform"),
    "dyck/balanced": lambda: build("dyck", Dyck(2, 3), 12, variant="balanced"),
    "ffl": lambda: build("ffl", None, 16),
}

#: Families with every informative negative (sandbox_lens.constructions.negatives): parts outside the circuit.
NEGATIVE_FAMILIES = {
    "prefix_scan/S5+negatives": lambda: build("prefix_scan", get_automaton("S5"), 8, negatives=ALL_NEGATIVES),
    "modular_counter/C3+negatives": lambda: build("modular_counter", get_automaton("C3"), 8, negatives=ALL_NEGATIVES),
    "gridworld/grid4+negatives": lambda: build("gridworld", get_automaton("grid4"), 8, negatives=ALL_NEGATIVES),
    "dyck/stack+negatives": lambda: build("dyck", Dyck(2, 3), 12, variant="stack", negatives=ALL_NEGATIVES),
    "ffl+negatives": lambda: build("ffl", None, 16, negatives=ALL_NEGATIVES),
}

#: The backup gadget (sandbox_lens.constructions.backup): the construction's input through two redundant routes.
BACKUP_FAMILIES = {
    "modular_counter/C3+backup": lambda: build("modular_counter", get_automaton("C3"), 8, negatives="backup"),
    "gridworld/grid4+backup": lambda: build("gridworld", get_automaton("grid4"), 8, negatives="backup"),
}


def layernorm_twin(directory: Path):
    """A small trained twin with LayerNorm and two heads a block (C3, T = 8, 60 steps), saved under ``directory``
    and loaded back: the constructions have no LayerNorm, so the engines' normalised inputs are tested on it."""
    from sandbox_lens.interp.tasks.batches import AutomatonTask
    from sandbox_lens.interp.train import ModelShape, TrainConfig, load_trained, train

    train(
        AutomatonTask(get_automaton("C3"), 8),
        ModelShape(n_layers=2, d_model=32, n_heads=2),
        TrainConfig(steps=60, seed=0),
        directory,
        progress=False,
    )
    return load_trained(directory)
