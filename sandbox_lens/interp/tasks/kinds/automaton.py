"""The automaton kind: predict the state after every symbol (thesis §3.4.2)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from sandbox_lens.interp.errors import AutomatonError, ConstructionError, OptionError, SandboxError
from sandbox_lens.interp.streams import Stream
from sandbox_lens.interp.tasks.kinds.base import NO_SOURCE, CommandLineOption, TaskKind, checked

if TYPE_CHECKING:
    import numpy as np

__all__ = ["AutomatonKind", "ScratchpadKind", "corrupt_symbol", "parse_periodic"]


class AutomatonKind(TaskKind):
    """Predict q_t at every position of BOS + σ_1..σ_T (thesis §3.4.2)."""

    name = "automaton"
    summary = "predict the state of a semiautomaton after every symbol"
    default_length, compare_length = 32, 16
    train_defaults = {"steps": 3000, "lr": 1e-3, "target_accuracy": 0.99}
    train_options = (
        CommandLineOption(("--automaton",), "automaton", "automaton task: catalogue name", "NAME", group="automaton"),
        CommandLineOption(
            ("--automaton-file",), "automaton_file", "automaton task: JSON automaton file", "PATH", group="automaton"
        ),
        CommandLineOption(
            ("--supervision",),
            "supervision",
            "automaton task: the loss reads the state after every symbol (every, the default), after the last "
            "one only (final), or after 1, 2, 4, … symbols and the last (powers: a mixture of k-fold compositions)",
            "{every,final,powers}",
            choices=("every", "final", "powers"),
            default="every",
        ),
        CommandLineOption(
            ("--symbol-probs",),
            "symbol_probs",
            "automaton task: the training words' symbol distribution, comma-separated over the alphabet (e.g. "
            "0.05,0.05,0.9 for the flip-flop automaton with p(⊥) = 0.9; default uniform)",
            "P",
        ),
        CommandLineOption(
            ("--observe",),
            "observe",
            "automaton task: train on a label of the state, not the state: one label per state, comma-separated "
            "(e.g. 1,0,0,0 for C4's 'count ≡ 0 mod 4'; the thesis's indirect supervision)",
            "LABELS",
        ),
        CommandLineOption(
            ("--periodic",),
            "periodic",
            "automaton task: with probability SHARE (default 1) a training word is WORD repeated, otherwise drawn "
            "from the symbol law; WORD's symbols comma-separated (e.g. a,b:0.5 on the abab automaton, the thesis's "
            "(abab)* law (2))",
            "WORD[:SHARE]",
        ),
    )
    shift_options = (
        CommandLineOption(
            ("--probs",),
            "probs",
            "automata: symbol distributions, each comma-separated over the alphabet (e.g. 0.95,0.05)",
            "P",
            nargs="+",
            default=[],
        ),
        CommandLineOption(
            ("--counts",),
            "counts",
            "automata: words with exactly N occurrences of --count-symbol (e.g. 0 2 14 16)",
            "N",
            type=int,
            nargs="+",
            default=[],
        ),
        CommandLineOption(
            ("--count-symbol",), "count_symbol", "automata: the symbol --counts counts (default: the second)", "SYM"
        ),
    )
    verify_samples = 1000
    verify_accepts = frozenset({"automaton", "length", "batch_size", "progress"})
    verifier = "sandbox_lens.interp.verify.automaton:verify_automaton"
    evaluator = "sandbox_lens.interp.evaluate:score_automaton"
    comparison = "sandbox_lens.interp.compare.automaton:AutomatonComparison"
    high_level = "sandbox_lens.interp.tasks.highlevel:StateModel"
    constructions = ("modular_counter", "memory", "gridworld", "krohn_rhodes", "prefix_scan")
    corruptions = ("symbol", "resample")

    def task_from_dict(self, d: Mapping[str, Any]) -> Any:
        import json

        from sandbox_lens.interp.tasks.automata import parse_automaton_json
        from sandbox_lens.interp.tasks.batches import AutomatonTask

        return checked(
            self,
            lambda: AutomatonTask(
                parse_automaton_json(json.dumps(d["automaton"]), "<checkpoint>"),
                d["length"],
                d.get("supervision", "every"),
                d.get("probs"),
                d.get("observe"),
                None if d.get("periodic") is None else (d["periodic"]["word"], d["periodic"]["share"]),
            ),
        )

    def source(self, task: Mapping[str, Any]) -> Any:
        import json

        from sandbox_lens.interp.tasks.automata import parse_automaton_json

        return checked(self, lambda: parse_automaton_json(json.dumps(task["automaton"]), "<model card>"))

    def automaton(self, values: Mapping[str, Any]) -> Any:
        """The automaton ``--automaton-file PATH`` or ``--automaton NAME`` names (None when neither is given)."""
        if values.get("automaton_file"):
            from sandbox_lens.interp.tasks.automata import load_automaton_file

            return load_automaton_file(values["automaton_file"])
        if values.get("automaton"):
            from sandbox_lens.interp.tasks.catalogue import get_automaton

            return get_automaton(values["automaton"])
        return None

    def task_from_options(self, values: Mapping[str, Any], length: int | None) -> Any:
        from sandbox_lens.interp.tasks.batches import AutomatonTask

        automaton = self.automaton(values)
        if automaton is None:
            raise SandboxError("train automaton needs --automaton NAME or --automaton-file PATH")
        probs = None
        if values.get("symbol_probs"):
            from sandbox_lens.interp.tasks.shifts import parse_probs

            try:
                probs = parse_probs(values["symbol_probs"], automaton.n_symbols, "--symbol-probs")
            except SandboxError as e:
                raise OptionError(str(e)) from None
        observe = None
        if values.get("observe"):
            from sandbox_lens.interp.tasks.batches import check_observation

            try:
                observe = check_observation([int(x) for x in values["observe"].split(",")], automaton)
            except ValueError as e:  # not integers, or not an observation of this automaton
                raise OptionError(f"--observe {values['observe']!r}: {e}") from None
        periodic = parse_periodic(values["periodic"], automaton) if values.get("periodic") else None
        try:
            return AutomatonTask(
                automaton, length or self.default_length, values.get("supervision") or "every", probs, observe, periodic
            )
        except AutomatonError as e:
            raise OptionError(str(e)) from None

    def check_source(self, construction: str, source: Any) -> None:
        from sandbox_lens.interp.tasks.automata import Semiautomaton

        if not isinstance(source, Semiautomaton):
            what = "a Dyck language" if type(source).__name__ == "Dyck" else type(source).__name__
            raise ConstructionError(f"{construction} needs an automaton, not {what}")

    def construction_source(self, construction: str, values: Mapping[str, Any], options: dict[str, Any]) -> Any:
        if values.get("dyck"):
            raise SandboxError("the dyck construction needs --dyck K,D (and --dyck goes only with dyck)")
        if values.get("cascade_file"):
            from sandbox_lens.interp.tasks.cascade import load_cascade_file

            options["cascade"] = load_cascade_file(values["cascade_file"])
            return options["cascade"].automaton()
        automaton = self.automaton(values)
        if automaton is None:
            raise SandboxError(NO_SOURCE + values.get("_source_hint", ""))
        return automaton

    def shifts(self, source: Any, length: int, values: Mapping[str, Any]) -> list[Any]:
        from sandbox_lens.interp.tasks.shifts import automaton_shifts, parse_probs

        sym = 1 if source.n_symbols > 1 else 0
        if values.get("count_symbol") is not None:
            if values["count_symbol"] not in source.alphabet:
                raise OptionError(
                    f"--count-symbol {values['count_symbol']!r} is not a symbol of {source.name} "
                    f"({', '.join(source.alphabet)})"
                )
            sym = source.alphabet.index(values["count_symbol"])
        return automaton_shifts(
            source,
            length,
            [parse_probs(p, source.n_symbols) for p in values.get("probs") or ()],
            values.get("counts") or (),
            sym,
        )

    def draw(self, task: Mapping[str, Any], shift: Any, n: int, seed: int) -> Any:
        from sandbox_lens.interp.tasks.batches import step_rng
        from sandbox_lens.interp.tasks.shifts import automaton_words

        return automaton_words(self.source(task), shift, n, step_rng(seed, 0, Stream.EVALUATION))

    def pair_words(self, source: Any, n: int, length: int, corruption: str, rng: np.random.Generator):
        import numpy as np

        clean = source.sample(n, length, rng)
        corrupt = (
            corrupt_symbol(clean, source.n_symbols, rng) if corruption == "symbol" else source.sample(n, length, rng)
        )
        read = np.ones(clean.shape, dtype=bool)
        return clean, corrupt, read, read, None


def parse_periodic(text: str, automaton: Any) -> tuple[list[int], float]:
    """``"a,b:0.5"`` → (symbol indices, share) for ``--periodic`` (the share defaults to 1; one-line errors)."""
    word, _, share = text.rpartition(":") if ":" in text else (text, "", "1")
    names = [x.strip() for x in word.split(",")]
    unknown = [x for x in names if x not in automaton.alphabet]
    if unknown:
        raise OptionError(
            f"--periodic {text!r}: {', '.join(repr(x) for x in unknown)} not in {automaton.name}'s alphabet "
            f"({', '.join(automaton.alphabet)}); WORD is its symbols, comma-separated"
        )
    try:
        p = float(share)
    except ValueError:
        raise OptionError(f"--periodic {text!r}: the share after ':' must be a number in (0, 1]") from None
    if not 0 < p <= 1:
        raise OptionError(f"--periodic {text!r}: the share after ':' must be in (0, 1]")
    return [automaton.alphabet.index(x) for x in names], p


def corrupt_symbol(words: np.ndarray, n_symbols: int, rng: np.random.Generator) -> np.ndarray:
    """One symbol of each word replaced by another (position and new symbol uniform)."""
    import numpy as np

    if n_symbols < 2:
        raise AutomatonError("the automaton has one symbol: no word differs from another in one symbol")
    out = words.copy()
    rows = np.arange(len(words))
    pos = rng.integers(words.shape[1], size=len(words))
    out[rows, pos] = (words[rows, pos] + rng.integers(1, n_symbols, size=len(words))) % n_symbols
    return out


class ScratchpadKind(TaskKind):
    """An automaton with a scratchpad: BOS σ_1 q_1 σ_2 q_2 … σ_T, q_t predicted at σ_t (thesis §3.4.5.2, D10).

    Trained teacher-forced, and evaluated and verified here on its own teacher-forced batches; filling the
    scratchpad from the model's own predictions is the ``scratchpad`` experiment's."""

    name = "scratchpad"
    summary = "an automaton's states written between its symbols, predicted one at a time (thesis §3.4.5.2)"
    default_length = 16
    train_defaults = AutomatonKind.train_defaults
    train_options = tuple(
        o for o in AutomatonKind.train_options if o.dest in ("automaton", "automaton_file", "symbol_probs")
    )

    def task_from_dict(self, d: Mapping[str, Any]) -> Any:
        import json

        from sandbox_lens.interp.tasks.automata import parse_automaton_json
        from sandbox_lens.interp.tasks.variants import ScratchpadTask

        return checked(
            self,
            lambda: ScratchpadTask(
                parse_automaton_json(json.dumps(d["automaton"]), "<checkpoint>"), d["length"], d.get("probs")
            ),
        )

    def task_from_options(self, values: Mapping[str, Any], length: int | None) -> Any:
        from sandbox_lens.interp.tasks.variants import ScratchpadTask

        plain = AutomatonKind().task_from_options(values, length or self.default_length)
        return ScratchpadTask(plain.automaton, plain.length, plain.probs)
