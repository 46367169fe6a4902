"""Cascade products of semiautomata (thesis Definition 6), their JSON format, and known cascades.

A cascade has levels A^{(1)}, …, A^{(k)}. On input σ_t, level i receives the symbol
σ^{(i)}_t = φ^{(i)}(q^{(1)}_{t−1}, …, q^{(i−1)}_{t−1}, σ_t) — a function of the earlier levels'
states **before** σ_t and of σ_t — and moves to q^{(i)}_t = δ^{(i)}(q^{(i)}_{t−1}, σ^{(i)}_t).
The cascade's state is the tuple of level states. Optionally a cascade *simulates* a target
automaton through an output map h (product state → target state) with
h(δ_cascade(p, σ)) = δ_target(h(p), σ) on every reachable p; loading checks this.

JSON format (docs/constructions.md)::

    {"name": "...", "alphabet": ["L", "R"],
     "levels": [
       {"name": "f1", "automaton": "flipflop", "initial": "0",
        "input": [{"symbol": "L", "then": "w0"}, {"symbol": "R", "then": "w1"}]},
       {"name": "f2", "automaton": "flipflop", "initial": "0", "default": "noop",
        "input": [{"symbol": "L", "f1": "0", "then": "w0"}, {"symbol": ["R"], "f1": "1", "then": "w1"}]}],
     "simulates": "grid3", "output": {"0,0": "0", "1,0": "1", "0,1": "1", "1,1": "2"}}

``automaton`` is a catalogue name or an inline automaton object; ``input`` rules are tried in
order (conditions: ``symbol`` and earlier levels' states by level name, each a name or a list of
names) and the first match gives the level's symbol; ``default`` applies when none matches.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sandbox_lens.interp.errors import AutomatonError
from sandbox_lens.interp.files import read_text_limited
from sandbox_lens.interp.jsonfile import parse_json
from sandbox_lens.interp.tasks.automata import Semiautomaton, parse_automaton_json
from sandbox_lens.interp.tasks.catalogue import get_automaton, grid

__all__ = ["Cascade", "CascadeLevel", "parse_cascade_json", "load_cascade_file", "grid_cascade", "known_cascade"]

#: The product automaton is tabulated; keep it small.
MAX_PRODUCT_STATES = 4096


@dataclass(frozen=True, eq=False)
class CascadeLevel:
    """One level: its automaton and the wiring φ as a table (earlier states..., σ) -> symbol."""

    name: str
    automaton: Semiautomaton
    wiring: dict[tuple[tuple[int, ...], int], int]


@dataclass(frozen=True, eq=False)
class Cascade:
    """A Krohn–Rhodes cascade: levels of permutation-reset components, each reading the input and the levels above
    (thesis Definition 10)."""

    name: str
    alphabet: tuple[str, ...]
    levels: tuple[CascadeLevel, ...]
    target: Semiautomaton | None = None
    output: dict[tuple[int, ...], int] | None = None  # product state -> target state index

    @property
    def initial(self) -> tuple[int, ...]:
        return tuple(lv.automaton.initial for lv in self.levels)

    def step(self, p: tuple[int, ...], sigma: int) -> tuple[int, ...]:
        """Definition 6: every level reads the earlier levels' states before σ."""
        out = []
        for i, lv in enumerate(self.levels):
            a = lv.wiring[(p[:i], sigma)]
            out.append(int(lv.automaton.delta[a, p[i]]))
        return tuple(out)

    def product_states(self) -> list[tuple[int, ...]]:
        return list(itertools.product(*(range(lv.automaton.n_states) for lv in self.levels)))

    def reachable(self) -> list[tuple[int, ...]]:
        seen, frontier = {self.initial}, [self.initial]
        while frontier:
            nxt = []
            for p in frontier:
                for s in range(len(self.alphabet)):
                    q = self.step(p, s)
                    if q not in seen:
                        seen.add(q)
                        nxt.append(q)
            frontier = nxt
        return sorted(seen)

    def product_name(self, p: Sequence[int]) -> str:
        return ",".join(lv.automaton.states[q] for lv, q in zip(self.levels, p))

    def automaton(self) -> Semiautomaton:
        """What a simulator of this cascade outputs: the target if there is one, else the product."""
        if self.target is not None:
            return self.target
        states = self.product_states()
        index = {p: i for i, p in enumerate(states)}
        delta = np.array([[index[self.step(p, s)] for p in states] for s in range(len(self.alphabet))])
        return Semiautomaton(
            self.name,
            tuple(self.product_name(p) for p in states),
            self.alphabet,
            delta,
            index[self.initial],
            f"cascade of {', '.join(lv.name for lv in self.levels)}",
        )

    def to_dict(self) -> dict[str, Any]:
        levels = []
        for _i, lv in enumerate(self.levels):
            rules = []
            for (prev, s), a in sorted(lv.wiring.items()):
                rule: dict[str, Any] = {"symbol": self.alphabet[s]}
                for j, q in enumerate(prev):
                    rule[self.levels[j].name] = self.levels[j].automaton.states[q]
                rule["then"] = lv.automaton.alphabet[a]
                rules.append(rule)
            levels.append(
                {
                    "name": lv.name,
                    "automaton": lv.automaton.to_dict(),
                    "initial": lv.automaton.states[lv.automaton.initial],
                    "input": rules,
                }
            )
        d: dict[str, Any] = {"name": self.name, "alphabet": list(self.alphabet), "levels": levels}
        if self.target is not None and self.output is not None:
            d["simulates"] = self.target.to_dict()
            d["output"] = {self.product_name(p): self.target.states[y] for p, y in self.output.items()}
        return d


def _as_list(x: Any) -> list[str]:
    return [str(v) for v in x] if isinstance(x, list) else [str(x)]


def _load_level_automaton(spec: Any, where: str) -> Semiautomaton:
    if isinstance(spec, str):
        return get_automaton(spec)
    if isinstance(spec, dict):
        return parse_automaton_json(json.dumps(spec), where)
    raise AutomatonError(f"{where}: 'automaton' must be a catalogue name or an automaton object")


def parse_cascade_json(text: str, source: str = "<json>") -> Cascade:
    """Parse and check a cascade (see the module docstring); every problem is an AutomatonError."""
    d = parse_json(text, source, error=AutomatonError, what="a cascade")
    if not isinstance(d, dict):
        raise AutomatonError(f"{source}: a cascade must be a JSON object")
    unknown = set(d) - {"name", "alphabet", "levels", "simulates", "output", "description"}
    if unknown:
        raise AutomatonError(f"{source}: unknown key(s) {', '.join(sorted(unknown))}")
    for key in ("alphabet", "levels"):
        if key not in d:
            raise AutomatonError(f"{source}: missing {key!r}")
    alphabet = tuple(_as_list(d["alphabet"]))
    if not alphabet or len(set(alphabet)) != len(alphabet):
        raise AutomatonError(f"{source}: 'alphabet' must be a non-empty list of distinct symbols")
    if not isinstance(d["levels"], list) or not d["levels"]:
        raise AutomatonError(f"{source}: 'levels' must be a non-empty list")
    levels: list[CascadeLevel] = []
    for i, ld in enumerate(d["levels"]):
        where = f"{source}: level {i + 1}"
        if not isinstance(ld, dict) or "automaton" not in ld:
            raise AutomatonError(f"{where}: each level is an object with an 'automaton'")
        extra = set(ld) - {"name", "automaton", "initial", "input", "default"}
        if extra:
            raise AutomatonError(f"{where}: unknown key(s) {', '.join(sorted(extra))}")
        name = str(ld.get("name", f"level{i + 1}"))
        if name in {lv.name for lv in levels} or name in ("symbol", "then"):
            raise AutomatonError(f"{where}: level name {name!r} is used twice or reserved")
        a = _load_level_automaton(ld["automaton"], where)
        if "initial" in ld:
            if str(ld["initial"]) not in a.states:
                raise AutomatonError(f"{where}: initial state {ld['initial']!r} is not a state of {a.name}")
            a = a.with_initial(str(ld["initial"]))
        wiring = _parse_wiring(ld, levels, alphabet, a, where)
        levels.append(CascadeLevel(name, a, wiring))
    cascade = Cascade(str(d.get("name", "cascade")), alphabet, tuple(levels))
    if _product_size(cascade) > MAX_PRODUCT_STATES:
        raise AutomatonError(f"{source}: the cascade has more than {MAX_PRODUCT_STATES} product states")
    if ("simulates" in d) != ("output" in d):
        raise AutomatonError(f"{source}: 'simulates' and 'output' go together")
    if "simulates" in d:
        target = _load_level_automaton(d["simulates"], f"{source}: simulates")
        if not isinstance(d["output"], dict):
            raise AutomatonError(f"{source}: 'output' maps product states (comma-joined level states) to target states")
        names = {cascade.product_name(p): p for p in cascade.product_states()}
        output = {}
        for key, value in d["output"].items():
            if key not in names:
                raise AutomatonError(
                    f"{source}: output key {key!r} is not a product state (e.g. {next(iter(names))!r})"
                )
            if str(value) not in target.states:
                raise AutomatonError(f"{source}: output value {value!r} is not a state of {target.name}")
            output[names[key]] = target.states.index(str(value))
        cascade = with_target(cascade, target, output, source)
    return cascade


def with_target(cascade: Cascade, target: Semiautomaton, output: dict[tuple[int, ...], int], source: str) -> Cascade:
    """Attach a target automaton and check that ``output`` is a covering on reachable states."""
    if tuple(target.alphabet) != cascade.alphabet:
        raise AutomatonError(
            f"{source}: the cascade's alphabet {list(cascade.alphabet)} differs from "
            f"{target.name}'s {list(target.alphabet)}"
        )
    reach = cascade.reachable()
    for p in reach:
        if p not in output:
            raise AutomatonError(f"{source}: reachable product state {cascade.product_name(p)!r} has no output")
    if output[cascade.initial] != target.initial:
        raise AutomatonError(
            f"{source}: the initial product state maps to {target.states[output[cascade.initial]]!r}, "
            f"not to {target.name}'s initial state {target.states[target.initial]!r}"
        )
    for p in reach:
        for s in range(len(cascade.alphabet)):
            if output[cascade.step(p, s)] != target.delta[s, output[p]]:
                raise AutomatonError(
                    f"{source}: the output map is not a covering of {target.name}: from "
                    f"{cascade.product_name(p)!r} on {cascade.alphabet[s]!r} the cascade reaches "
                    f"{cascade.product_name(cascade.step(p, s))!r} ({target.states[output[cascade.step(p, s)]]!r}) "
                    f"but {target.name} goes to {target.states[target.delta[s, output[p]]]!r}"
                )
    return Cascade(cascade.name, cascade.alphabet, cascade.levels, target, dict(output))


def _product_size(c: Cascade) -> int:
    return int(np.prod([lv.automaton.n_states for lv in c.levels]))


def _parse_wiring(
    ld: dict, earlier: list[CascadeLevel], alphabet: tuple[str, ...], a: Semiautomaton, where: str
) -> dict[tuple[tuple[int, ...], int], int]:
    rules = ld.get("input", [])
    if not isinstance(rules, list):
        raise AutomatonError(f"{where}: 'input' must be a list of rules")
    known = {lv.name: lv for lv in earlier}
    parsed = []
    for r in rules:
        if not isinstance(r, dict) or "then" not in r:
            raise AutomatonError(f"{where}: each input rule is an object with 'then' (the level's symbol)")
        if str(r["then"]) not in a.alphabet:
            raise AutomatonError(f"{where}: rule symbol {r['then']!r} is not in {a.name}'s alphabet {list(a.alphabet)}")
        conds = {}
        for key, value in r.items():
            if key == "then":
                continue
            if key == "symbol":
                bad = [v for v in _as_list(value) if v not in alphabet]
                if bad:
                    raise AutomatonError(f"{where}: rule symbol(s) {bad} are not in the cascade alphabet")
            elif key not in known:
                raise AutomatonError(
                    f"{where}: rule condition {key!r} is neither 'symbol' nor an earlier level "
                    f"({', '.join(known) or 'none'}); a level reads only the levels above it"
                )
            else:
                bad = [v for v in _as_list(value) if v not in known[key].automaton.states]
                if bad:
                    raise AutomatonError(f"{where}: {bad} are not states of level {key!r}")
            conds[key] = set(_as_list(value))
        parsed.append((conds, a.alphabet.index(str(r["then"]))))
    default = ld.get("default")
    if default is not None and str(default) not in a.alphabet:
        raise AutomatonError(f"{where}: default {default!r} is not in {a.name}'s alphabet")
    wiring = {}
    for prev in itertools.product(*(range(lv.automaton.n_states) for lv in earlier)):
        for s, sym in enumerate(alphabet):
            for conds, out in parsed:
                ok = "symbol" not in conds or sym in conds["symbol"]
                ok = ok and all(
                    earlier[j].automaton.states[q] in conds.get(earlier[j].name, {earlier[j].automaton.states[q]})
                    for j, q in enumerate(prev)
                )
                if ok:
                    wiring[(prev, s)] = out
                    break
            else:
                if default is None:
                    state = ", ".join(f"{lv.name}={lv.automaton.states[q]}" for lv, q in zip(earlier, prev))
                    raise AutomatonError(
                        f"{where}: no input rule matches symbol {sym!r}"
                        + (f" with {state}" if state else "")
                        + "; add a rule or a 'default'"
                    )
                wiring[(prev, s)] = a.alphabet.index(str(default))
    return wiring


def load_cascade_file(path: str | Path) -> Cascade:
    """Load a cascade from its JSON file (``--cascade-file``), with a one-line error for every defect."""
    p = Path(path)
    try:
        text = read_text_limited(p)
    except OSError as e:
        raise AutomatonError(f"cannot read cascade file {str(p)!r}: {e.strerror or e}") from None
    except (UnicodeDecodeError, ValueError) as e:
        raise AutomatonError(f"cannot read cascade file {str(p)!r}: {e}") from None
    return parse_cascade_json(text, str(p))


# -- known cascades ------------------------------------------------------------------------------
def grid_cascade(n: int, noop: bool = False) -> Cascade:
    """The 1-D gridworld ``grid<n>`` as a cascade of S = n − 1 flip-flops (krohn-rhodes.md §2.8).

    Flip-flop k remembers the direction (0 = L, 1 = R) of the last move that reached level k;
    the first level sees every move, level k + 1 sees a move only when level k's previous
    direction equals it (then the position inside level k's interval changes), and sees a no-op
    otherwise. The grid state is the number of flip-flops holding R.
    """

    target = grid(n, noop)
    S = n - 1
    flipflop = get_automaton("flipflop")
    w = {"L": flipflop.alphabet.index("w0"), "R": flipflop.alphabet.index("w1")}
    nop = flipflop.alphabet.index("noop")
    moves = {s: target.alphabet[s] for s in range(target.n_symbols)}

    def level_input(prev: tuple[int, ...], move: str) -> str | None:
        """The move level len(prev)+1 sees (None for a no-op), from the earlier levels' previous states."""
        for _k, direction in enumerate(prev):  # level k+2 sees the move iff level k+1 saw it and held it
            if move not in ("L", "R") or direction != (move == "R"):
                return None
        return move if move in ("L", "R") else None

    levels = []
    for k in range(S):
        wiring = {}
        for prev in itertools.product(range(2), repeat=k):
            for s, move in moves.items():
                m = level_input(prev, move)
                wiring[(prev, s)] = nop if m is None else w[m]
        levels.append(CascadeLevel(f"f{k + 1}", flipflop.with_initial("1" if k < target.initial else "0"), wiring))
    cascade = Cascade(f"{target.name} cascade", tuple(target.alphabet), tuple(levels))
    output = {p: sum(p) for p in cascade.product_states()}
    return with_target(cascade, target, output, cascade.name)


def known_cascade(automaton: Semiautomaton) -> Cascade | None:
    """A built-in cascade for ``automaton`` when there is one (the 1-D gridworlds)."""

    n = automaton.n_states
    if n < 2:
        return None
    for noop in (False, True):
        g = grid(n, noop)
        if g.alphabet == automaton.alphabet and np.array_equal(g.delta, automaton.delta) and automaton.initial == 0:
            c = grid_cascade(n, noop)
            return Cascade(f"{automaton.name} cascade", c.alphabet, c.levels, automaton, c.output)
    return None
