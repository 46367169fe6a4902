"""Every tutorial runs top to bottom (jupytext percent files executed with nbclient), draws every
figure it makes inline, and prints no warnings."""

import re
from pathlib import Path

import jupytext
import pytest
from nbclient import NotebookClient

TUTORIALS = sorted((Path(__file__).resolve().parents[2] / "tutorials").glob("[0-9]*.py"))
# a cell that makes a figure: pyplot, an Image of PNG bytes, or an axes method that draws
FIGURE = re.compile(r"\bplt\.|\bImage\(|\.imshow\(|\.subplots\(")


@pytest.mark.parametrize("path", TUTORIALS, ids=[p.stem for p in TUTORIALS])
def test_tutorial_executes(path, tmp_path):
    nb = jupytext.read(path)
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    code = [c for c in nb.cells if c.cell_type == "code"]
    errors = [o for c in code for o in c.get("outputs", []) if o.output_type == "error"]
    assert not errors
    # the library draws on Figure objects and never switches the backend: inline plots survive
    blank = [c.source.splitlines()[0] for c in code if FIGURE.search(c.source)
             and not any("image/png" in o.get("data", {}) for o in c.get("outputs", []))]
    assert not blank, f"figure cells without an image: {blank}"
    warned = [o["text"].strip().splitlines()[0] for c in code for o in c.get("outputs", [])
              if o.output_type == "stream" and o.get("name") == "stderr" and "Warning" in o.get("text", "")]
    assert not warned, warned


def test_there_is_a_tutorial():
    assert TUTORIALS
