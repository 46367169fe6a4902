"""Names shared by the analysis and the report (the report imports nothing else of the comparison)."""

from __future__ import annotations

__all__ = ["TWIN", "head_name", "PATTERNS_FILE"]

TWIN = "trained twin"
PATTERNS_FILE = "patterns.npz"  # the example word's attention, in canonical coordinates, for the report


def head_name(head: tuple[int, int]) -> str:
    """``L1H0`` for block 1, head 0."""
    return f"L{head[0]}H{head[1]}"
