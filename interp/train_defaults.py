"""What a twin trains with unless told otherwise, per task kind: `interp train` and `interp compare`'s
twin share it. A module of its own (no imports) so the CLI can show it in ``--help`` cheaply."""

from __future__ import annotations

from typing import Any

__all__ = ["TASK_DEFAULTS", "task_defaults"]

TASK_DEFAULTS: dict[str, dict[str, Any]] = {
    "automaton": {"steps": 3000, "lr": 1e-3, "target_accuracy": 0.99},
    "dyck": {"steps": 1500, "lr": 3e-3, "target_accuracy": 0.97},
    "ffl": {"steps": 3000, "lr": 1e-3, "target_accuracy": 0.999},
}


def task_defaults(task: Any) -> dict[str, Any]:
    """Steps, learning rate and target accuracy of :data:`TASK_DEFAULTS` for ``task``'s kind."""
    return dict(TASK_DEFAULTS[task.kind])
