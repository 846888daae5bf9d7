"""The tour notebook executes top to bottom without errors (each section ends in a cell that asserts its own check
against an independent computation), in a temporary working folder, and shows its plots."""
from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "tour.ipynb"


def test_notebook_is_stored_without_outputs():
    nbformat = pytest.importorskip("nbformat", reason="nbformat (test extra) is not installed")
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(notebook)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert code and all(not cell.outputs and cell.execution_count is None for cell in code)


def test_tour_notebook_runs(tmp_path):
    nbformat = pytest.importorskip("nbformat", reason="nbformat (test extra) is not installed")
    nbclient = pytest.importorskip("nbclient", reason="nbclient (test extra) is not installed")
    pytest.importorskip("ipykernel", reason="ipykernel (test extra) is not installed")
    pytest.importorskip("matplotlib", reason="matplotlib (test extra) is not installed")
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    beside = sorted(NOTEBOOK.parent.rglob("*"))
    client = nbclient.NotebookClient(notebook, timeout=240, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    # raises CellExecutionError, with the cell and its traceback, on any failing cell. One thread: the notebook's
    # tensors are too small to gain from more, and on a busy 2-core machine OpenMP's default pool spins (measured
    # there: 111 s against 28 s)
    client.execute(env={**os.environ, "OMP_NUM_THREADS": "1"})

    outputs = [output for cell in notebook.cells if cell.cell_type == "code" for output in cell.outputs]
    assert not [output for output in outputs if output.output_type == "error"]
    text = "".join(output.get("text", "") for output in outputs if output.output_type == "stream")
    assert "def forward(self, image)" in text  # the generated code of the imported model
    assert "re-imported vs in-memory: max |diff| 0\n" in text
    assert "re-imported QAT export vs QAT model: max |diff| 0;" in text
    pngs = [base64.b64decode(output.data["image/png"]) for output in outputs
            if output.output_type in ("display_data", "execute_result") and "image/png" in output.get("data", {})]
    assert len(pngs) >= 3  # sample images, the loss curve, the quantization error per layer
    assert all(png.startswith(b"\x89PNG") for png in pngs)
    assert sorted(NOTEBOOK.parent.rglob("*")) == beside  # it wrote nothing into the repository
