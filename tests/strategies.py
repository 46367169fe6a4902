"""Hypothesis strategies shared by the test packages."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from sandbox_lens.interp.tasks.automata import Semiautomaton


@st.composite
def semiautomata(draw, max_states: int = 5, max_symbols: int = 4, any_initial: bool = False) -> Semiautomaton:
    """A random semiautomaton: 1..max_states states, 1..max_symbols symbols, a uniform transition table; the
    initial state drawn too with ``any_initial`` (else state 0)."""
    n = draw(st.integers(1, max_states))
    m = draw(st.integers(1, max_symbols))
    delta = draw(st.lists(st.lists(st.integers(0, n - 1), min_size=n, max_size=n), min_size=m, max_size=m))
    q0 = draw(st.integers(0, n - 1)) if any_initial else 0
    return Semiautomaton(
        "random", tuple(f"s{i}" for i in range(n)), tuple(f"a{i}" for i in range(m)), np.array(delta), q0
    )
