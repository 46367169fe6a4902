"""sandbox-lens: exact transformer constructions for automata, as TransformerLens models.

The code stands on floors; a module imports only from its own floor and the ones below it
(``tests/contract/test_layers.py`` reads every import and keeps it so)::

    floor 0  ``sandbox_lens.interp.errors``, ``sandbox_lens.interp.files``, ``sandbox_lens.interp.viz`` — no project imports.
    floor 1  ``sandbox_lens.interp.tasks``  — what is true: automata, the catalogue, groups, cascades, gridworld
                                 facts, Dyck, the flip-flop language, training batches, shifts, and
                                 the task-kind registry (``sandbox_lens.interp.tasks.kinds``: every per-kind fact)
                                 (numpy; sympy lazily for groups).
             ``sandbox_lens.interp.model``  — how weights are held and run: the spec (named residual subspaces),
                                 the card (token layout, one task dict with a ``kind`` the registry
                                 knows), the TransformerLens export, saved models, exact forward
                                 helpers. It reads ``sandbox_lens.interp.tasks``; ``sandbox_lens.interp.tasks`` never reads it.
    floor 2  ``constructions``, ``probes`` — import ``sandbox_lens.interp.tasks``, ``sandbox_lens.interp.model``, ``sandbox_lens.interp.errors``
                                 only; ``sandbox_lens.interp.verify`` (one ``verify``, one ``Verification``),
                                 ``sandbox_lens.interp.train``.
    floor 3  ``sandbox_lens.interp.compare`` — constructed vs trained; its report is rebuilt from files and never
                                 imports the analysis. ``sandbox_lens.interp.evaluate`` — models under shift beside
                                 the exact construction. The only parts of ``interp`` that import
                                 constructions (and, for compare, probes).
             ``sandbox_lens.interp.experiments`` — the thesis's learning claims, one command each: populations,
                                 shifts, probes and the construction, a report from files.
             ``sandbox_lens.interp.init_from`` — twins started from a construction's weights.
    floor 4  ``sandbox_lens.interp.demo``, ``sandbox_lens.interp.cli``.

The same task-kind names everywhere (``automaton``, ``dyck``, ``ffl``), each an object of the registry. Light modules import
without torch or TransformerLens; the heavy imports happen only where a model is built or run.
"""

from sandbox_lens.interp.errors import SandboxError

__all__ = ["SandboxError"]
__version__ = "0.1.0"
