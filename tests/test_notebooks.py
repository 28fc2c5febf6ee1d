"""Every numbered notebook executes headless on CPU without errors or network, and is committed stripped."""

import json
import shutil

import nbformat
import pytest
from nbclient import NotebookClient

from conftest import ROOT

NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def test_the_five_notebooks_exist_in_order():
    assert [p.stem[:2] for p in NOTEBOOKS] == ["01", "02", "03", "04", "05"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_committed_without_outputs_and_follows_the_template(path):
    nb = json.loads(path.read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert all(not c.get("outputs") and c.get("execution_count") is None for c in code), "strip outputs (nbstripout)"
    markdown = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
    for heading in ("## Overview", "## Prerequisites", "## Summary", "## What's next"):
        assert heading in markdown, heading
    assert any("parameters" in c.get("metadata", {}).get("tags", []) for c in code), "needs a papermill parameters cell"


def inject_parameters(nb, **overrides):
    """Papermill's convention: an 'injected-parameters' cell right after the 'parameters' cell."""
    index = next(i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", []))
    cell = nbformat.v4.new_code_cell("\n".join(f"{k} = {v!r}" for k, v in overrides.items()))
    cell.metadata["tags"] = ["injected-parameters"]
    nb.cells.insert(index + 1, cell)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_executes_headless_on_cpu(path, tmp_path):
    work = tmp_path / "notebooks"
    work.mkdir()
    nb = nbformat.read(path, as_version=4)
    if path.stem.startswith("01"):
        inject_parameters(nb, RESULTS=str(tmp_path / "results"))
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(work)}}).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    # each notebook leaves something a reader can see: a table, a plot or printed text
    kinds = {k for o in outputs for k in o.get("data", {})} | {o.output_type for o in outputs}
    assert kinds & {"text/html", "image/png", "stream"}
    shutil.rmtree(work, ignore_errors=True)
