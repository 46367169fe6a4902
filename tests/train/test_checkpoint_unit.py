"""The checkpoint unit: several runs' checkpoints move in together or not at all."""

import json

import pytest

from sandbox_lens.interp.errors import CheckpointError
from sandbox_lens.interp.train import checkpoint_unit
from sandbox_lens.interp.train.checkpoint import CKPT_META, CKPT_WEIGHTS
from sandbox_lens.interp.train.checkpoint_unit import STAGE, commit_unit, settle


def test_a_checkpoint_unit_cut_short_is_finished_or_undone(tmp_path, monkeypatch):
    """The members' checkpoints of one evaluation move in together: a kill while staging leaves the old ones, a kill
    while moving in is finished by :func:`settle`."""
    outs = [tmp_path / f"seed_{s}" for s in (0, 1, 2)]
    lead = str(outs[0].resolve())

    def unit(tag: str, fail_at: int | None = None):
        def write(i, directory):
            if fail_at is not None and i == fail_at:
                raise KeyboardInterrupt  # killed while staging
            (directory / CKPT_WEIGHTS).write_text(tag)
            (directory / CKPT_META).write_text(json.dumps({"stack_lead": lead, "tag": tag}))

        return write

    def tags() -> list[str]:
        return [(out / CKPT_WEIGHTS).read_text() for out in outs]

    for out in outs:
        out.mkdir()
    commit_unit(outs, unit("old"))
    assert tags() == ["old"] * 3 and not any((out / STAGE).exists() for out in outs)
    with pytest.raises(KeyboardInterrupt):
        commit_unit(outs, unit("new", fail_at=2))
    settle(outs)
    assert tags() == ["old"] * 3 and not any((out / STAGE).exists() for out in outs)

    moved = []
    real_replace = checkpoint_unit.os.replace

    def replace_then_die(a, b):
        if len(moved) == 4:  # the commit mark (written by a rename too), the first member's files, the second's weights
            raise KeyboardInterrupt
        moved.append(b)
        real_replace(a, b)

    monkeypatch.setattr(checkpoint_unit.os, "replace", replace_then_die)
    with pytest.raises(KeyboardInterrupt):
        commit_unit(outs, unit("new"))
    monkeypatch.setattr(checkpoint_unit.os, "replace", real_replace)
    assert tags() == ["new", "new", "old"]
    settle(outs)
    assert tags() == ["new"] * 3 and not any((out / STAGE).exists() for out in outs)
    assert all(json.loads((out / CKPT_META).read_text())["tag"] == "new" for out in outs)

    outside = tmp_path / "outside"
    outside.mkdir()
    (outs[1] / STAGE).symlink_to(outside)  # a staging directory that leads out of the run
    with pytest.raises(CheckpointError, match="not a directory the run made"):
        commit_unit(outs, unit("newer"))
    assert not list(outside.iterdir()) and tags() == ["new"] * 3
