"""Every notebook under notebooks/ is committed with the outputs of its last run, readable on
GitHub: valid, from the code as it is now, plots as images, no machine's paths or hosts.
(tests/cluster/examples/test_notebooks.py runs each notebook, writes these outputs with
SPARKDL_WRITE_NOTEBOOK_OUTPUTS=1, and otherwise checks they still have the run's shape.)"""

from __future__ import annotations

import base64
import re
import subprocess
import sysconfig
import tempfile
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")

from notebook_outputs import WRITE_ENV, code_cells, code_digest, recorded_digest, scrub, shape  # noqa: E402

REPO = Path(__file__).resolve().parents[3]
NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))
#: A code cell that draws with matplotlib's pyplot.
PLOTS = re.compile(r"\bplt\.\w+\(")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
REGENERATE = f"write them anew: {WRITE_ENV}=1 scripts/test.sh tests/cluster/examples/test_notebooks.py"


def _tracked_notebooks() -> list[Path]:
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z", "--", "*.ipynb"], cwd=REPO, check=True, capture_output=True, text=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        out = ""
    tracked = {REPO / name for name in out.split("\0") if name}
    # Notebooks not yet added to git are checked too, before the commit.
    return sorted(path for path in tracked | set(NOTEBOOKS) if path.exists())


def _texts(output) -> list[str]:
    if output.output_type == "stream":
        return [output.text]
    return [output.data[mime] for mime in ("text/plain", "text/html") if mime in output.get("data", {})]


def _problems(path: Path) -> list[str]:
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    name = path.relative_to(REPO)
    cells = code_cells(nb)
    if recorded_digest(nb) != code_digest(nb):
        return [f"{name}: its outputs are not from its code as it is now; {REGENERATE}"]
    problems = []
    if not any(cell.outputs for cell in cells):
        problems.append(f"{name}: no outputs")
    counts = [cell.execution_count for cell in cells]
    if counts != list(range(1, len(cells) + 1)):
        problems.append(f"{name}: execution counts {counts}, not one run from the top")
    for cell in cells:
        where = f"{name} cell {nb.cells.index(cell)}"
        images = [output.data["image/png"] for output in cell.outputs if "image/png" in output.get("data", {})]
        if PLOTS.search(cell.source) and not images:
            problems.append(f"{where}: plots, but has no image/png output")
        if any(not base64.b64decode(image).startswith(PNG_SIGNATURE) for image in images):
            problems.append(f"{where}: an image/png output is not a PNG")
        for output in cell.outputs:
            if output.output_type == "error":
                problems.append(f"{where}: an error output")
            if any(scrub(text) != text for text in _texts(output)):
                problems.append(f"{where}: outputs show this machine's paths or host names")
    return problems


@pytest.mark.timeout(60)
def test_notebooks_have_outputs():
    notebooks = _tracked_notebooks()
    if not notebooks:
        pytest.skip("no notebooks")
    problems = [problem for path in notebooks for problem in _problems(path)]
    assert not problems, "notebooks are committed with the outputs of a run:\n" + "\n".join(problems)


@pytest.mark.timeout(60)
def test_shape_leaves_out_what_varies_from_run_to_run():
    def stream(text, name="stdout"):
        return nbformat.v4.new_output("stream", name=name, text=text)

    node_lines = "[chief:0] Epoch 1/5\n[worker:0] a warning\nsparkdl train [40%]: 10/25 rows fed · 9 s\n"
    figure = nbformat.v4.new_output("display_data", data={"image/png": "", "text/plain": "<Figure>"})
    assert shape([stream(node_lines), stream("a log line\n", "stderr")]) == []
    assert shape([stream(node_lines + "trained in 3.1 s\n"), stream("x", "stderr"), stream("more\n"), figure]) == [
        "stdout",
        "display_data:image/png+text/plain",
    ]
    result = nbformat.v4.new_output("execute_result", data={"text/plain": "{}"}, execution_count=1)
    assert shape([result, figure, figure]) == ["execute_result:text/plain", *["display_data:image/png+text/plain"] * 2]


@pytest.mark.timeout(60)
def test_scrub_takes_out_this_machines_paths_and_addresses():
    temp = Path(tempfile.gettempdir())
    site = sysconfig.get_paths()["purelib"]
    text = (
        f"saved to {temp / 'sparkdl-spark-mode-f1jqy_rq' / 'export'}; {site}/keras/x.py:74: UserWarning\n"
        f"cluster: {{'chief': ['10.1.2.3:41234']}} {REPO / 'notebooks'} 127.0.0.1:80 version 2.21.0"
    )
    assert scrub(text) == (
        "saved to /tmp/sparkdl-spark-mode-XXXXXXXX/export; .../site-packages/keras/x.py:74: UserWarning\n"
        "cluster: {'chief': ['localhost:41234']} notebooks 127.0.0.1:80 version 2.21.0"
    )
    assert scrub(scrub(text)) == scrub(text)
