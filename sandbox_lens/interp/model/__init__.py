"""Floor 1 — how weights are held and run: the framework-neutral spec, the model card (whose task
kind the registry in :mod:`sandbox_lens.interp.tasks.kinds` knows), the TransformerLens export, saved models and the
exact-precision forward helpers."""
