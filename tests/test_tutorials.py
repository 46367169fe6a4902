"""Every tutorial runs top to bottom (jupytext percent files executed with nbclient)."""

from pathlib import Path

import jupytext
import pytest
from nbclient import NotebookClient

TUTORIALS = sorted((Path(__file__).parent.parent / "tutorials").glob("[0-9]*.py"))


@pytest.mark.parametrize("path", TUTORIALS, ids=[p.stem for p in TUTORIALS])
def test_tutorial_executes(path, tmp_path):
    nb = jupytext.read(path)
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type == "error"]
    assert not errors


def test_there_is_a_tutorial():
    assert TUTORIALS
