"""sandbox-lens: exact transformer constructions for automata, as TransformerLens models.

One import root: ``sandbox_lens.interp`` (tasks, the model, verification, training and the analyses),
``sandbox_lens.constructions`` (the thesis's theorems as weights) and ``sandbox_lens.probes``.
"""

__version__ = "0.1.0"
