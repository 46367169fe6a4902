"""Checkpoints of several run directories written as one unit, so that a kill never leaves them at different steps.

A stack's members (:mod:`~sandbox_lens.interp.train.stacked`) checkpoint together: each member's checkpoint is staged
in its own run directory, a commit mark is written in the first member's stage (the unit's commit point), then every
staged checkpoint is moved in by renames and the mark goes last. :func:`settle`, run before a stack resumes, moves in
the staged checkpoints of a unit whose mark exists and drops those of a unit without one.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

from sandbox_lens.interp.errors import CheckpointError
from sandbox_lens.interp.files import atomic_write
from sandbox_lens.interp.jsonfile import read_json
from sandbox_lens.interp.train.checkpoint import CKPT_META, CKPT_WEIGHTS

__all__ = ["COMMIT", "STAGE", "commit_unit", "settle"]

#: A run directory's staging directory: a stack's next checkpoint of that run, until every member's is written.
STAGE = ".stacked-checkpoint"
#: In the first member's staging directory: every member's next checkpoint is written (the unit's commit point).
COMMIT = "commit"


def commit_unit(outs: list[Path], write: Callable[[int, Path], None]) -> None:
    """Checkpoints of several run directories as one unit: ``write(i, directory)`` stages run ``i``'s in
    ``outs[i]/STAGE``; a commit mark goes in the first run's stage; then each moves into place and the mark goes
    last. A staged checkpoint's metadata names the first run (``stack_lead``) so that :func:`settle` finds the mark."""
    lead = outs[0]
    for i, out in enumerate(outs):
        stage = out / STAGE
        if stage.is_symlink() or (stage.exists() and not stage.is_dir()):  # writes stay inside the run directory
            raise CheckpointError(f"{stage} is not a directory the run made; remove it to go on")
        stage.mkdir(exist_ok=True)
        write(i, stage)
    atomic_write(lead / STAGE / COMMIT, str(lead.resolve()).encode())
    for out in outs:
        _promote(out)
    (lead / STAGE / COMMIT).unlink()
    for out in outs:
        shutil.rmtree(out / STAGE, ignore_errors=True)


def _promote(out: Path) -> None:
    """Move a staged checkpoint into its run directory (the weights first: they carry the metadata too)."""
    for name in (CKPT_WEIGHTS, CKPT_META):
        if (out / STAGE / name).is_file():
            os.replace(out / STAGE / name, out / name)


def settle(directories: list[Path]) -> None:
    """Finish or undo the checkpoint unit a kill interrupted in these run directories (all of a stack's unfinished
    runs): a staged checkpoint moves in when its unit's commit mark exists, and is dropped otherwise."""
    leads = set()
    known = {Path(d).resolve() for d in directories}  # a lead named outside these is not followed (nor written)
    for out in directories:
        stage = Path(out) / STAGE
        if not stage.is_dir() or stage.is_symlink():
            continue
        try:
            lead = Path(read_json(stage / CKPT_META, error=CheckpointError, what="a staged checkpoint")["stack_lead"])
        except (CheckpointError, FileNotFoundError, KeyError, TypeError):
            lead = Path(out)  # the lead's own stage after its files moved in, or a write cut short
        if lead.resolve() not in known:
            lead = Path(out)
        if (lead / STAGE / COMMIT).is_file():
            _promote(Path(out))
            leads.add(lead)
    for lead in leads:
        (lead / STAGE / COMMIT).unlink(missing_ok=True)
    for out in directories:
        if (Path(out) / STAGE).is_dir() and not (Path(out) / STAGE).is_symlink():
            shutil.rmtree(Path(out) / STAGE, ignore_errors=True)
