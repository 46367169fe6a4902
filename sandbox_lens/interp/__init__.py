"""sandbox-lens: exact transformer constructions for automata, as TransformerLens models.

The code stands on floors: a module imports only from lower floors and the groups its floor may use. The
floors are declared once, in ``tests/contract/test_layers.py``, which reads every import and keeps them;
``docs/architecture.md`` shows them as a table rendered from that declaration, with the flow of data from a
word to a report.

The same task-kind names everywhere (``automaton``, ``dyck``, ``ffl``), each an object of the registry. Light modules import
without torch or TransformerLens; the heavy imports happen only where a model is built or run.
"""

from sandbox_lens.interp.errors import SandboxError

__all__ = ["SandboxError"]
__version__ = "0.1.0"
