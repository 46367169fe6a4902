"""Named random streams: two purposes never share a generator within a run, and no project code
numbers a stream or seeds a generator by hand outside ``sandbox_lens.interp.streams``."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sandbox_lens.interp.streams import Stream, entropy, rng, torch_seed
from sandbox_lens.interp.tasks.batches import step_rng

ROOT = Path(__file__).resolve().parents[2]


@given(seed=st.integers(0, 2**31), step=st.integers(0, 10**6))
def test_two_streams_never_share_a_seed(seed, step):
    seen = {tuple(entropy(seed, p, step)) for p in Stream}
    assert len(seen) == len(Stream)


def test_the_numbers_and_offsets_are_unique_and_keep_the_old_bits():
    assert len({p.value for p in Stream}) == len(Stream)
    # the training streams are what they were before they were named: resumed runs keep their bits
    old = np.random.default_rng([3, 7, 0]).integers(1 << 30, size=4)
    assert (step_rng(3, 7).integers(1 << 30, size=4) == old).all()
    assert (
        rng(3, Stream.HELD_OUT).integers(1 << 30, size=4) == np.random.default_rng([3, 0, 1]).integers(1 << 30, size=4)
    ).all()
    assert (
        rng(3, Stream.MASK_BATCHES, 2).integers(9, size=3) == np.random.default_rng([1003, 2, 3]).integers(9, size=3)
    ).all()
    assert torch_seed(2, Stream.DROPOUT, 5) == 2 * 1_000_003 + 5


def test_a_stream_is_named():
    with pytest.raises(TypeError, match="named by a Stream"):
        entropy(0, 5)  # type: ignore[arg-type]


def _package_nodes():
    """(file, AST node) for every node of the package's modules, ``sandbox_lens.interp.streams`` (the tables) left out."""
    for pkg in ("sandbox_lens/interp", "sandbox_lens/constructions", "sandbox_lens/probes"):
        for path in sorted((ROOT / pkg).rglob("*.py")):
            if path.name != "streams.py":
                for node in ast.walk(ast.parse(path.read_text())):
                    yield path.relative_to(ROOT), node


def test_no_code_numbers_a_stream_outside_the_table():
    """No ``stream=<number>`` and no literal ``default_rng([...])`` sequence in the package: a draw that
    must reproduce names its purpose."""
    offenders = []
    for path, node in _package_nodes():
        if isinstance(node, ast.keyword) and node.arg == "stream" and isinstance(node.value, ast.Constant):
            offenders.append(f"{path}:{node.value.lineno}")
        if (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", None) == "default_rng"
            and node.args
            and isinstance(node.args[0], ast.List)
        ):
            offenders.append(f"{path}:{node.lineno}")
    assert offenders == []


def _numbered(node: ast.AST) -> bool:
    """A literal number, or arithmetic with one (``seed + 1000 * b``); an index (``seeds[0]``) is not."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, int) and not isinstance(node.value, bool)
    if isinstance(node, ast.BinOp):
        return _numbered(node.left) or _numbered(node.right)
    return False


def test_no_hard_coded_seeds_outside_the_tables():
    """A call that seeds something with a number (``seed=4000``, ``step_rng(7, ...)``) names it in
    ``sandbox_lens.interp.streams`` instead (``ExperimentSeed``, ``Stream``)."""
    offenders = []
    for path, node in _package_nodes():
        if not isinstance(node, ast.Call):
            continue
        seeds = [kw.value for kw in node.keywords if kw.arg == "seed"]
        if ast.unparse(node.func).endswith(("step_rng", "default_rng", "manual_seed", "rng")) and node.args:
            seeds.append(node.args[0])
        if any(_numbered(s) for s in seeds):
            offenders.append(f"{path}:{node.lineno}: {ast.unparse(node)[:60]}")
    assert offenders == []
