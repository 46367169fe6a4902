"""One verification result for every task, and the model a verification runs on."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from sandbox_lens.interp.errors import ConstructionError
from sandbox_lens.interp.model.bare import BareModel
from sandbox_lens.interp.model.card import ModelCard
from sandbox_lens.interp.model.spec import ConstructionSpec

__all__ = ["Verification", "Mismatch", "resolve_model", "SHAPE_KEYS"]

SHAPE_KEYS = ("n_layers", "attention_layers", "d_model", "n_heads", "d_mlp")


@dataclass
class Mismatch:
    """One wrong output: the ``position``-th scored output, read after ``inputs`` (the word, prefix or
    string up to that point, as names), expected vs predicted."""

    position: int
    inputs: list[str]
    expected: str
    predicted: str


@dataclass
class Verification:
    """What :func:`sandbox_lens.interp.verify.verify` measured. The same keys for automata, Dyck and FFL;
    what only one task has lives in ``details``.

    ``checked`` counts the scored outputs (``checked_unit``: positions of automaton words, closing
    brackets of Dyck prefixes, reads of FFL strings) in ``sequences`` inputs.
    """

    construction: str
    kind: str  # automaton | dyck | ffl
    task: str  # the automaton's or the language's name
    length: int
    dtype: str
    accuracy: float
    checked: int
    checked_unit: str
    sequences: int
    exhaustive_upto: int
    samples: int
    seed: int
    n_layers: int
    attention_layers: int
    d_model: int
    n_heads: int
    d_mlp: int
    mismatches: list[Mismatch] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    #: what ran: HookedTransformer (TL 3.9), TransformerBridge (4.x), or "bare" (a spec's weights on the package's
    #: forward, TransformerLens not needed)
    backend: str = "HookedTransformer"

    @property
    def exact(self) -> bool:
        return self.accuracy == 1.0 and self.checked > 0

    @property
    def shape(self) -> dict[str, int]:
        return {k: getattr(self, k) for k in SHAPE_KEYS}

    def to_dict(self) -> dict[str, Any]:
        """The ``--json`` schema: every field, plus ``exact``."""
        return {**asdict(self), "exact": self.exact}


def model_shape(model) -> dict[str, int]:
    cfg = model.cfg
    return {
        "n_layers": cfg.n_layers,
        "attention_layers": model.card.attention_layers,
        "d_model": cfg.d_model,
        "n_heads": cfg.n_heads,
        "d_mlp": cfg.d_mlp,
        "backend": model.backend if isinstance(model, BareModel) else type(model).__name__,
    }


def resolve_model(model_or_spec: Any, dtype: str = "float32") -> tuple[Any, str]:
    """A model to check: a spec's weights in ``dtype`` (a :class:`~sandbox_lens.interp.model.bare.BareModel`), or a
    sandbox-lens model as it is.

    Refuses a dtype the construction is not verified in, so no unverified number is reported.
    """
    if isinstance(model_or_spec, ConstructionSpec):
        spec = model_or_spec
        if dtype not in spec.verified_dtypes:
            raise ConstructionError(
                f"{spec.name} at length {spec.max_length} is not exact in {dtype} "
                f"(supported: {', '.join(spec.verified_dtypes)}); {spec.notes}"
            )
        return BareModel(spec, dtype), dtype  # its weights, TransformerLens built only if it must run
    model = model_or_spec
    if not isinstance(getattr(model, "card", None), ModelCard):
        raise ConstructionError("verify needs a ConstructionSpec or a model built by sandbox-lens (with a .card)")
    dtype = str(next(model.parameters()).dtype).replace("torch.", "")
    if dtype not in model.card.verified_dtypes:
        raise ConstructionError(
            f"{model.card.construction} at length {model.card.max_length} is not exact in {dtype} "
            f"(supported: {', '.join(model.card.verified_dtypes)})"
        )
    return model, dtype
