"""The task-kind registry: one object per kind of task, the one home of every per-kind fact.

A *task kind* (automaton, Dyck, the flip-flop language, ...) is what a model card's ``task["kind"]``
names. Its :class:`TaskKind` knows

* what a card's task dict means: the task's *source* (the automaton, the Dyck language, ...) and the
  training task it describes (:meth:`TaskKind.task_from_dict`), with the kind's older names;
* its training task at a length, from command-line values (:attr:`TaskKind.train_options`,
  :meth:`TaskKind.task_from_options`), its default length and training defaults (steps, learning
  rate, target accuracy) and the twin's default shape;
* the constructions that model it (in the order the exact "skyline" is chosen) and how a
  construction is built for a training task (:meth:`TaskKind.construction_input`);
* how a model of it is verified (:attr:`TaskKind.verifier`) and how many random inputs a check takes;
* its evaluation shifts (:attr:`TaskKind.shift_options`, :meth:`TaskKind.shifts`), the inputs a
  shift draws (:meth:`TaskKind.draw`) and how outputs are scored (:attr:`TaskKind.evaluator`);
* its corruptions for circuit discovery (:attr:`TaskKind.corruptions`, :meth:`TaskKind.pair_words`);
* the ``interp compare`` adapter (:attr:`TaskKind.comparison`).

What runs a model lives on higher floors; a kind names it by ``"module:function"`` (resolved with
:func:`resolve`), so this floor imports nothing above it. A kind that names none gets the generic
paths: verification and evaluation on its training task's own batches (argmax at the scored
positions), so a new kind needs only an entry here (:func:`register`) to be trained, evaluated and
verified.

Every dispatch on a kind outside ``sandbox_lens.interp.tasks`` is a lookup here (``tests/tasks/test_kinds.py``
counts the comparisons with a kind's name that remain outside this floor: none).
"""

from sandbox_lens.interp.tasks.kinds.automaton import AutomatonKind, ScratchpadKind
from sandbox_lens.interp.tasks.kinds.base import (
    NO_SOURCE,
    SOURCE_OPTIONS,
    CommandLineOption,
    TaskKind,
    TaskKindError,
    all_kinds,
    canonical_name,
    checked,
    kind_names,
    kinds_help,
    register,
    resolve,
    task_from_dict,
    task_kind,
    unregister,
)
from sandbox_lens.interp.tasks.kinds.dyck import DyckCopyKind, DyckKind, StackTopKind
from sandbox_lens.interp.tasks.kinds.ffl import FFLKind

__all__ = [
    "TaskKind",
    "CommandLineOption",
    "TaskKindError",
    "register",
    "unregister",
    "task_kind",
    "task_from_dict",
    "kind_names",
    "all_kinds",
    "canonical_name",
    "resolve",
    "kinds_help",
    "checked",
    "SOURCE_OPTIONS",
    "NO_SOURCE",
    "AUTOMATON",
    "DYCK",
    "FFL",
    "DYCK_COPY",
    "SCRATCHPAD",
    "STACK_TOP",
]

AUTOMATON = register(AutomatonKind())
DYCK = register(DyckKind())
FFL = register(FFLKind())
DYCK_COPY = register(DyckCopyKind())
SCRATCHPAD = register(ScratchpadKind())
STACK_TOP = register(StackTopKind())
