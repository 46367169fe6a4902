"""sandbox-lens: exact transformer constructions for automata, as TransformerLens models.

The code stands on floors; a module imports only from its own floor and the ones below it
(``tests/contract/test_layers.py`` reads every import and keeps it so)::

    floor 0  ``interp.errors``, ``interp.files``, ``interp.viz`` — no project imports.
    floor 1  ``interp.tasks``  — what is true: automata, the catalogue, groups, cascades, gridworld
                                 facts, Dyck, the flip-flop language, training batches, shifts, and
                                 the task-kind registry (``interp.tasks.kinds``: every per-kind fact)
                                 (numpy; sympy lazily for groups).
             ``interp.model``  — how weights are held and run: the spec (named residual subspaces),
                                 the card (token layout, one task dict with a ``kind`` the registry
                                 knows), the TransformerLens export, saved models, exact forward
                                 helpers. It reads ``interp.tasks``; ``interp.tasks`` never reads it.
    floor 2  ``constructions``, ``probes`` — import ``interp.tasks``, ``interp.model``, ``interp.errors``
                                 only; ``interp.verify`` (one ``verify``, one ``Verification``),
                                 ``interp.train``.
    floor 3  ``interp.compare`` — constructed vs trained; its report is rebuilt from files and never
                                 imports the analysis. ``interp.evaluate`` — models under shift beside
                                 the exact construction. The only parts of ``interp`` that import
                                 constructions (and, for compare, probes).
             ``interp.experiments`` — the thesis's learning claims, one command each: populations,
                                 shifts, probes and the construction, a report from files.
             ``interp.init_from`` — twins started from a construction's weights.
    floor 4  ``interp.demo``, ``interp.cli``.

The same task-kind names everywhere (``automaton``, ``dyck``, ``ffl``), each an object of the registry. Light modules import
without torch or TransformerLens; the heavy imports happen only where a model is built or run.
"""

from interp.errors import SandboxError

__all__ = ["SandboxError"]
__version__ = "0.1.0"
