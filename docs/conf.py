"""Sphinx configuration of the sandbox-lens documentation site (``make docs``).

The pages are the Markdown files beside this one (MyST); the tutorials are the repository's jupytext
files, copied here at build time, executed with a cache (jupyter-cache under ``_build``) and offered
as ``.ipynb`` downloads; the API pages come from the docstrings (autosummary), the CLI page from the
argparse parsers (sphinx-argparse). The build is offline and the site loads nothing from the network.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from sandbox_lens.interp import __version__  # noqa: E402

project = "sandbox-lens"
author = "the sandbox-lens authors"
copyright = "2026, the sandbox-lens authors (MIT licence)"
release = version = __version__

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinxarg.ext",
]

# -- sources ---------------------------------------------------------------------------------------
root_doc = "index"
exclude_patterns = ["_build", "README.md", "tutorials/notebooks", "**/*.json", "conf.py"]
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3
# pages start at "#" and some skip a level in their sections; ref.python: a name such as ``Option`` that two
# packages define is linked to the first (the API pages list both)
suppress_warnings = ["myst.header", "ref.python"]

# -- the tutorials: jupytext percent files, executed with a cache ----------------------------------
TUTORIALS = ROOT / "tutorials"
BUILT_TUTORIALS = HERE / "tutorials"
nb_execution_mode = os.environ.get("SANDBOX_LENS_DOCS_EXECUTE", "cache")  # "off" for a quick look at the prose
nb_execution_cache_path = str(HERE / "_build" / ".jupyter_cache")
nb_execution_timeout = 900
nb_execution_raise_on_error = True
nb_merge_streams = True

# -- HTML ------------------------------------------------------------------------------------------
html_theme = "furo"
html_title = f"sandbox-lens {release}"
html_static_path: list[str] = []
html_show_sourcelink = False

# -- API -------------------------------------------------------------------------------------------
autosummary_generate = True
autosummary_imported_members = False
autodoc_default_options = {"members": True, "show-inheritance": False}
autodoc_typehints = "description"
autodoc_member_order = "bysource"
napoleon_google_docstring = True
napoleon_numpy_docstring = False


#: executed copies of the tutorials that `make test` leaves (tests/contract/test_tutorials.py): a page whose
#: source is unchanged since is rendered from them instead of being executed a second time
EXECUTED = HERE / "_build" / "executed"
DOWNLOAD = ("{{download}}`Download this tutorial as a notebook <notebooks/{stem}.ipynb>` · to run it in Colab or a "
            "fresh Jupyter, first install the package from a clone of the repository (`pip install .`) or from a "
            "wheel built there (`make dist`, then `%pip install sandbox_lens-*.whl`).")


def source_hash(text: str) -> str:
    """What ties an executed notebook to the tutorial source it was executed from."""
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()


def _copy_tutorials(app) -> None:
    """Each ``tutorials/NN_*.py`` becomes a page ``tutorials/NN_*.ipynb`` (with a download line after its
    introduction): the suite's executed copy when its source is unchanged, else the bare notebook, which
    myst-nb executes (cached). The bare notebook is also offered for download."""
    import jupytext
    import nbformat

    BUILT_TUTORIALS.mkdir(exist_ok=True)
    (BUILT_TUTORIALS / "notebooks").mkdir(exist_ok=True)
    for path in sorted(TUTORIALS.glob("[0-9]*.py")):
        text = path.read_text()
        bare = jupytext.reads(text, fmt="py:percent")
        jupytext.write(bare, BUILT_TUTORIALS / "notebooks" / f"{path.stem}.ipynb")
        executed = EXECUTED / f"{path.stem}.ipynb"
        page = None
        if executed.is_file():
            done = nbformat.read(executed, as_version=4)
            if done.metadata.get("sandbox_lens", {}).get("source_sha256") == source_hash(text):
                page = done
                page.metadata["mystnb"] = {"execution_mode": "off"}
        if page is None:
            page = bare
        page.cells.insert(1, nbformat.v4.new_markdown_cell(DOWNLOAD.format(stem=path.stem)))
        for i, cell in enumerate(page.cells):  # fixed ids: an unchanged tutorial gives the same page (and cache key)
            cell["id"] = f"cell-{i}"
        target = BUILT_TUTORIALS / f"{path.stem}.ipynb"
        body = nbformat.writes(page)
        if not target.exists() or target.read_text() != body:  # an unchanged page keeps its cache entry
            target.write_text(body)
        stale = BUILT_TUTORIALS / path.name
        if stale.exists():
            stale.unlink()


def _write_schemas(app) -> None:
    """The circuit file's JSON Schema, from the code, for the formats page."""
    import json

    from sandbox_lens.interp.circuits.exchange import SCHEMA

    out = HERE / "reference" / "_generated"
    out.mkdir(exist_ok=True)
    text = json.dumps(SCHEMA, indent=2, ensure_ascii=False) + "\n"
    path = out / "circuit-schema.json"
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


def _escape_bars(app, what, name, obj, options, lines) -> None:
    """The docstrings write |Q| for a size and never use reStructuredText substitutions: escape the bars
    (a line that starts with one is a table row and is left alone)."""
    import re

    for i, line in enumerate(lines):
        if "|" in line and not line.lstrip().startswith(("|", "+")):
            parts = re.split(r"(``.*?``)", line)  # inline literals keep their bars
            lines[i] = "".join(p if p.startswith("``") else p.replace("|", "\\|") for p in parts)


def setup(app):
    app.connect("autodoc-process-docstring", _escape_bars)
    app.connect("builder-inited", _copy_tutorials)
    app.connect("builder-inited", _write_schemas)
    return {"parallel_read_safe": True}
