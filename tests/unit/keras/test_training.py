"""sparkdl.keras.training without TensorFlow: a run's outcome, and who writes its state."""

from __future__ import annotations

import pytest

from sparkdl.keras.compiling import CompileSpec
from sparkdl.keras.run_store import RunPaths
from sparkdl.keras.spec import RunSpec
from sparkdl.keras.training import finish

pytestmark = pytest.mark.timeout(30)


class Keeper:
    """What ``finish`` reads of the run's history keeper."""

    completed = 2
    history = {"loss": [1.0, 0.5]}


def run(tmp_path, backup: bool) -> RunSpec:
    paths = RunPaths(str(tmp_path / "run"))
    return RunSpec(0, 2, 8, CompileSpec(), 1, False, paths, {"batch_size": 8}, backup=backup)


@pytest.mark.parametrize("backup, chief", [(False, True), (True, False), (False, False)])
def test_the_outcome_is_the_run_s_history_and_only_a_chief_with_a_backup_writes_state(tmp_path, backup, chief):
    outcome = finish(run(tmp_path, backup), Keeper(), chief)
    assert outcome == {"index": 0, "epochs_completed": 2, "history": {"loss": [1.0, 0.5]}}
    assert not (tmp_path / "run").exists(), "no state.json from a worker, nor without a backup"
