"""Named residual-stream subspaces: a :class:`Layout` places each name (``"R"``, ``"pos"``, ...) in
its own coordinates, and a :data:`Direction` names a direction in them — what a construction writes its
weights against (:mod:`sandbox_lens.interp.model.spec`), never raw indices."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeAlias

import numpy as np

from sandbox_lens.interp.errors import ConstructionError

__all__ = ["Layout", "Direction"]

#: A direction in the residual stream: a subspace name (its first coordinate), a
#: ``(name, index)`` pair, or a mapping of such keys to weights (a linear combination).
Direction: TypeAlias = str | tuple[str, int] | Mapping[str | tuple[str, int], float]


class Layout:
    """Named residual-stream subspaces, laid out one after another.

    >>> L = Layout(); _ = L.add("R", 3, labels=["q0", "q1", "q2"]); _ = L.add("pos", 2)
    >>> L["R"], L.index("R", 2), L.d_model, L.labels()[2]
    (slice(0, 3, None), 2, 5, 'R:q2')
    """

    def __init__(self) -> None:
        self._spaces: dict[str, tuple[int, int, tuple[str, ...]]] = {}
        self._d = 0

    def add(self, name: str, size: int = 1, labels: Sequence[str] | None = None) -> slice:
        if name in self._spaces:
            raise ConstructionError(f"residual subspace {name!r} defined twice")
        if size < 0:
            raise ConstructionError(f"subspace {name!r} has negative size")
        labs = tuple(str(x) for x in labels) if labels is not None else tuple(str(i) for i in range(size))
        if len(labs) != size:
            raise ConstructionError(f"subspace {name!r}: {len(labs)} labels for {size} dimensions")
        self._spaces[name] = (self._d, size, labs)
        self._d += size
        return self[name]

    def __contains__(self, name: str) -> bool:
        return name in self._spaces

    def __getitem__(self, name: str) -> slice:
        start, size, _ = self._get(name)
        return slice(start, start + size)

    def size(self, name: str) -> int:
        return self._get(name)[1]

    def index(self, name: str, i: int = 0) -> int:
        start, size, _ = self._get(name)
        if not 0 <= i < size:
            raise ConstructionError(f"index {i} out of range for subspace {name!r} of size {size}")
        return start + i

    def locate(self, index: int) -> tuple[str, int]:
        """The (subspace, offset) of residual coordinate ``index``."""
        for name, (start, size, _) in self._spaces.items():
            if start <= index < start + size:
                return name, index - start
        raise ConstructionError(f"residual coordinate {index} is in no subspace (d_model {self._d})")

    def _get(self, name: str) -> tuple[int, int, tuple[str, ...]]:
        try:
            return self._spaces[name]
        except KeyError:
            raise ConstructionError(f"unknown residual subspace {name!r} (have {', '.join(self._spaces)})") from None

    @property
    def d_model(self) -> int:
        return self._d

    @property
    def names(self) -> list[str]:
        return list(self._spaces)

    def labels(self) -> list[str]:
        """One label per residual dimension, ``"<subspace>:<label>"``."""
        out: list[str] = []
        for name, (_, size, labs) in self._spaces.items():
            out.extend(f"{name}:{lab}" if size > 1 or lab != "0" else name for lab in labs)
        return out

    def vector(self, direction: Direction) -> np.ndarray:
        """A direction (see :data:`Direction`) as a length-d_model vector."""
        return self.dense(self.sparse(direction))

    def sparse(self, direction: Direction) -> dict[int, float]:
        """A direction as {residual index: weight}; stays valid when subspaces are added later."""
        out: dict[int, float] = {}
        items = direction.items() if isinstance(direction, Mapping) else [(direction, 1.0)]
        for key, w in items:
            i = self._key(key)
            out[i] = out.get(i, 0.0) + float(w)
        return out

    def dense(self, sparse: Mapping[int, float]) -> np.ndarray:
        v = np.zeros(self._d)
        for i, w in sparse.items():
            v[i] += w
        return v

    def _key(self, key: str | tuple[str, int]) -> int:
        if isinstance(key, tuple):
            return self.index(*key)
        return self.index(key, 0)
