"""Run every notebook under notebooks/ end to end. (That none is committed with outputs:
tests/unit/project/test_notebooks_units.py.)

Each notebook runs in its own ipykernel process (this venv's interpreter), with the notebooks
folder as its working directory; it starts its own Spark (local-cluster by default), so these
tests use none of conftest's Spark fixtures. Any cell that raises fails the test.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

pytestmark = pytest.mark.timeout(900)

REPO = Path(__file__).resolve().parents[3]
NOTEBOOKS_DIR = REPO / "notebooks"
NOTEBOOKS = sorted(NOTEBOOKS_DIR.glob("*.ipynb"))
CELL_TIMEOUT_S = 600


def _kernel_manager(kernels_dir: Path):
    """A KernelManager whose only 'python3' kernel is this interpreter's ipykernel."""
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager

    spec_dir = kernels_dir / "python3"
    spec_dir.mkdir(parents=True, exist_ok=True)
    (spec_dir / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "Python 3 (sparkdl venv)",
                "language": "python",
            }
        )
    )
    specs = KernelSpecManager(kernel_dirs=[str(kernels_dir)], ensure_native_kernel=False)
    return KernelManager(kernel_name="python3", kernel_spec_manager=specs)


def _cell_source(cell) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


@pytest.mark.skipif(not NOTEBOOKS, reason="no notebooks")
@pytest.mark.cluster  # the notebook starts its own Spark
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs(path, tmp_path):
    nb = nbformat.read(path, as_version=4)
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    client = nbclient.NotebookClient(
        nb,
        km=_kernel_manager(tmp_path / "kernels"),
        kernel_name="python3",
        timeout=CELL_TIMEOUT_S,
        startup_timeout=120,
        allow_errors=False,
        resources={"metadata": {"path": str(NOTEBOOKS_DIR)}},
    )
    try:
        client.execute(env=env)
    except nbclient.exceptions.CellExecutionError as exc:
        pytest.fail(f"{path.name}: a cell raised:\n{exc}", pytrace=False)
    finally:
        # nbclient leaves a kernel it was given running: end it, and with it the notebook's Spark
        # (its JVM exits when its Python parent does), or it idles on for the rest of the suite.
        if client.km.has_kernel:
            client.km.shutdown_kernel(now=False)
        # Keep the executed copy for debugging; never write back into the repository.
        nbformat.write(nb, tmp_path / path.name)
    code_cells = [c for c in nb.cells if c.cell_type == "code"]
    assert code_cells and all(c.get("execution_count") for c in code_cells), "not every code cell ran"
