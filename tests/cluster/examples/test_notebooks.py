"""Run every notebook under notebooks/ end to end, and keep its committed outputs true.

A notebook runs as its reader runs it: cell after cell in one namespace, with the notebooks
folder as the working directory. It runs in this test process, on the suite's shared Spark
(``local-cluster[2,1,1024]``): the notebook's ``SparkSession.builder...getOrCreate()`` returns
that session, as it returns a running session in a kernel. A kernel of its own would start a
second Spark application and import TensorFlow again, about 40 s of this machine's CPU per
notebook, and prove nothing more about the notebook: its cells are plain Python (the runner
refuses IPython magics), their functions travel to the executors by value as a kernel's
``__main__`` functions do, and a cell's last expression is evaluated and shown as a kernel
shows it. The one call not run as written is the closing ``spark.stop()``: it is recorded
(and must happen) while the shared Spark lives on. A cell that raises fails the test, naming the
notebook and the cell.

Each cell's outputs are captured as Jupyter records them (``support/notebook_outputs.py``).
With ``SPARKDL_WRITE_NOTEBOOK_OUTPUTS=1`` they are written into the notebook; otherwise the
committed outputs must have this run's shape (the same kinds of output in every cell, images
where it plots), so they cannot go stale silently. Their text (timings, ports, accuracies) is
not compared.
"""

from __future__ import annotations

import ast
import sys
import time
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")

from notebook_outputs import WRITE_ENV, NotebookCapture, code_cells, shape, with_outputs, writing  # noqa: E402

pytestmark = [pytest.mark.timeout(600), pytest.mark.cluster]

REPO = Path(__file__).resolve().parents[3]
NOTEBOOKS_DIR = REPO / "notebooks"
NOTEBOOKS = sorted(NOTEBOOKS_DIR.glob("*.ipynb"))


def _run_cell(source: str, namespace: dict, where: str):
    """Execute ``source`` in ``namespace``; returns the value of its last expression (None without one)."""
    for line in source.splitlines():
        assert not line.lstrip().startswith(("%", "!")), f"{where}: an IPython magic is not plain Python: {line!r}"
    tree = ast.parse(source, filename=where)
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    exec(compile(tree, where, "exec"), namespace)
    if last is None:
        return None
    return eval(compile(ast.Expression(last.value), where, "eval"), namespace)


@pytest.fixture
def as_a_reader_runs_it(sc2, spark_holder, monkeypatch):
    """The notebooks folder as working directory, matplotlib without a display, ``sys.path`` put
    back afterwards, and ``SparkSession.stop`` recorded instead of run; yields the stops."""
    import matplotlib
    import matplotlib.pyplot as plt
    from pyspark.sql import SparkSession

    matplotlib.use("Agg")  # figures are drawn to PNGs only (NotebookCapture)
    stops: list = []
    monkeypatch.setattr(SparkSession, "stop", lambda session: stops.append(session))
    monkeypatch.chdir(NOTEBOOKS_DIR)
    monkeypatch.setattr(sys, "path", list(sys.path))  # the notebooks put examples/ folders on it
    yield stops
    plt.close("all")
    sc2.setLogLevel("ERROR")  # the notebooks turn the shared Spark's log level up to WARN


@pytest.mark.skipif(not NOTEBOOKS, reason="no notebooks")
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs(path, as_a_reader_runs_it, spark_holder):
    nb = nbformat.read(path, as_version=4)
    # nbformat gives each cell's source as one string, its lines joined
    cells = [(index, cell.source) for index, cell in enumerate(nb.cells) if cell.cell_type == "code"]
    assert cells, f"{path.name} has no code cells"
    namespace = {"__name__": "__main__"}  # a kernel's namespace: its functions pickle by value
    capture = NotebookCapture()
    seconds = []
    with capture.installed():
        for index, source in cells:
            where = f"{path.name}, cell {index}"
            count = capture.start_cell()
            started = time.perf_counter()
            try:
                value = _run_cell(source, namespace, where)
                if value is not None:
                    capture.add_result(value, count)
                capture.add_figures()  # as Jupyter's inline backend does after each cell
            except Exception as exc:
                pytest.fail(f"{where} raised {type(exc).__name__}: {exc}", pytrace=True)
            seconds.append(f"cell {index}: {time.perf_counter() - started:.1f} s")
    print(f"{path.name}: " + ", ".join(seconds))
    assert as_a_reader_runs_it == [spark_holder.spark], f"{path.name} must end with spark.stop()"
    if writing():
        nbformat.write(with_outputs(nb, capture.cells), path)
        return
    stale = [
        f"cell {index}: committed {shape(cell.outputs)}, this run {shape(outputs)}"
        for (index, _), cell, outputs in zip(cells, code_cells(nb), capture.cells)
        if shape(cell.outputs) != shape(outputs)
    ]
    assert not stale, (
        f"{path.name}: the committed outputs are not what the notebook shows now; write them anew with "
        f"{WRITE_ENV}=1 scripts/test.sh tests/cluster/examples/test_notebooks.py -k {path.stem}\n" + "\n".join(stale)
    )
