"""Floor 3 — constructed vs trained circuits on one task (`interp compare`).

* :mod:`sandbox_lens.interp.compare.canonical` — what every comparison shares: inputs, canonical attention
  coordinates, reference patterns, head names;
* one adapter per task kind: :mod:`~sandbox_lens.interp.compare.automaton`, :mod:`~sandbox_lens.interp.compare.dyck`,
  :mod:`~sandbox_lens.interp.compare.ffl`;
* :mod:`sandbox_lens.interp.compare.analyse` — runs the models and writes ``metrics.json`` + ``patterns.npz``;
* :mod:`sandbox_lens.interp.compare.report` — ``report.html`` as a pure function of those files (it never imports
  the analysis, so ``interp report DIR`` runs no model).

The names below load their module on first use, so importing the report does not import the analysis.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["compare", "comparison_for", "write_report", "TWIN"]

_WHERE = {
    "compare": "analyse",
    "comparison_for": "analyse",
    "write_report": "report",
    "TWIN": "names",
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(f"sandbox_lens.interp.compare.{_WHERE[name]}"), name)
    raise AttributeError(f"module 'sandbox_lens.interp.compare' has no attribute {name!r}")
