"""Every tutorial runs top to bottom (jupytext percent files executed with nbclient), draws every
figure it makes inline, and prints no warnings. With ``SANDBOX_LENS_EXECUTED_TUTORIALS=DIR`` (`make
test` sets it) each executed notebook is kept in DIR, tagged with its source's hash, and the docs
site renders it instead of executing the tutorial again (docs/conf.py)."""

import hashlib
import os
import re
import time
from pathlib import Path

import jupytext
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellTimeoutError

TUTORIALS = sorted((Path(__file__).resolve().parents[2] / "tutorials").glob("[0-9]*.py"))
# a cell that makes a figure: pyplot, an Image of PNG bytes, or an axes method that draws
FIGURE = re.compile(r"\bplt\.|\bImage\(|\.imshow\(|\.subplots\(")


#: The tutorials that train twins and align them (one to nine minutes each on 2 cores): in `make test-slow`, and executed
#: by `make docs` too (errors fail the site: nb_execution_raise_on_error), so CI still runs every tutorial once.
HEAVY = {
    "06_constructed_vs_trained",
    "07_populations_and_shifts",
    "08_circuits_with_proofs",
    "09_causal_alignment",
    "11_which_algorithm",
}


#: The most one whole tutorial may take (seconds), light and heavy: each cell waits only for what is left of it, and
#: past it nbclient stops the cell and shuts the kernel down, so a stuck tutorial fails instead of holding the
#: suite. On 2 idle cores the light ones take 10-17 s and the heavy ones 1-9 minutes.
BUDGET = {"light": 300, "heavy": 1500}


def remaining(deadline: float) -> int:
    """Seconds a cell may wait: what is left until ``deadline``, at least 1 (nbclient reads 0 as no limit)."""
    return max(1, int(deadline - time.monotonic()))


def budgeted(nb, seconds: float, directory) -> NotebookClient:
    """A client that runs ``nb`` in ``directory`` with every cell waiting only for what is left of ``seconds`` (from
    now); past it ``execute()`` raises ``CellTimeoutError`` after shutting the kernel down."""
    deadline = time.monotonic() + seconds
    return NotebookClient(
        nb,
        timeout_func=lambda cell: remaining(deadline),
        kernel_name="python3",
        resources={"metadata": {"path": str(directory)}},
    )


def test_a_tutorial_past_its_budget_is_stopped_and_its_kernel_shut_down(tmp_path):
    """Two cells of 2 s each would pass a per-cell limit of 3 s; a whole budget of 3 s stops the run."""
    import nbformat

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import time; time.sleep(2)")] * 2)
    client = budgeted(nb, 3, tmp_path)
    t0 = time.monotonic()
    with pytest.raises(CellTimeoutError):
        client.execute()
    assert time.monotonic() - t0 < 30 and client.kc is None  # cleaned up: no kernel left running
    assert remaining(time.monotonic() - 5) == 1


@pytest.mark.parametrize(
    "path",
    [pytest.param(p, marks=pytest.mark.slow) if p.stem in HEAVY else p for p in TUTORIALS],
    ids=[p.stem for p in TUTORIALS],
)
def test_tutorial_executes(path, tmp_path):
    nb = jupytext.read(path)
    budget = BUDGET["heavy" if path.stem in HEAVY else "light"]
    try:
        budgeted(nb, budget, tmp_path).execute()
    except CellTimeoutError:
        pytest.fail(f"{path.stem} ran past its budget of {budget} s as a whole; its kernel was shut down")
    keep = os.environ.get("SANDBOX_LENS_EXECUTED_TUTORIALS")
    code = [c for c in nb.cells if c.cell_type == "code"]
    errors = [o for c in code for o in c.get("outputs", []) if o.output_type == "error"]
    assert not errors
    # the library draws on Figure objects and never switches the backend: inline plots survive
    blank = [
        c.source.splitlines()[0]
        for c in code
        if FIGURE.search(c.source) and not any("image/png" in o.get("data", {}) for o in c.get("outputs", []))
    ]
    assert not blank, f"figure cells without an image: {blank}"
    warned = [
        o["text"].strip().splitlines()[0]
        for c in code
        for o in c.get("outputs", [])
        if o.output_type == "stream" and o.get("name") == "stderr" and "Warning" in o.get("text", "")
    ]
    assert not warned, warned
    if keep:  # only a notebook that passed every check above is kept for the docs
        import nbformat

        nb.metadata["sandbox_lens"] = {"source_sha256": hashlib.sha256(path.read_text().encode()).hexdigest()}
        Path(keep).mkdir(parents=True, exist_ok=True)
        target = Path(keep) / f"{path.stem}.ipynb"
        temporary = target.with_suffix(".ipynb.tmp")
        nbformat.write(nb, temporary)
        temporary.replace(target)


def test_there_is_a_tutorial():
    assert TUTORIALS
