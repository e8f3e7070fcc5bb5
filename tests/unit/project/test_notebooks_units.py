"""Every notebook under notebooks/ is committed without outputs. (Each notebook run end to end:
tests/cluster/examples/test_notebooks.py.)"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")

REPO = Path(__file__).resolve().parents[3]
NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))


def _tracked_notebooks() -> list[Path]:
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z", "--", "*.ipynb"], cwd=REPO, check=True, capture_output=True, text=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        out = ""
    tracked = {REPO / name for name in out.split("\0") if name}
    # Notebooks not yet added to git are checked too, so outputs are caught before the commit.
    return sorted(tracked | set(NOTEBOOKS))


@pytest.mark.timeout(60)
def test_notebooks_have_no_outputs():
    notebooks = [p for p in _tracked_notebooks() if p.exists()]
    if not notebooks:
        pytest.skip("no notebooks")
    problems = []
    for path in notebooks:
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            if cell.get("outputs"):
                problems.append(f"{path.relative_to(REPO)} cell {index}: has outputs")
            if cell.get("execution_count") is not None:
                problems.append(f"{path.relative_to(REPO)} cell {index}: execution_count={cell['execution_count']}")
    assert not problems, (
        "notebooks must be committed with outputs stripped "
        "(jupyter nbconvert --clear-output --inplace NOTEBOOK):\n" + "\n".join(problems)
    )
