"""sandbox-lens: exact transformer constructions for automata, as TransformerLens models.

The flow is one-way: automaton/task -> construction (a framework-neutral
:class:`~interp.model.spec.ConstructionSpec`) -> ``HookedTransformer`` -> analyses -> report.

Light modules (automata, groups, spec) import without torch or TransformerLens; the
heavy imports happen only where a model is built.
"""

from interp.errors import SandboxError

__all__ = ["SandboxError"]
__version__ = "0.1.0"
