"""sparkdl.keras.training without TensorFlow: a run's outcome, and who writes its state."""

from __future__ import annotations

import json
import uuid

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


def test_a_chief_with_a_backup_marks_the_run_finished_in_its_bucket(s3_store):
    from sparkdl.storage import Storage

    run_dir = s3_store.url(f"runs-{uuid.uuid4().hex[:8]}/r1").replace("s3://", "s3a://")
    spec = RunSpec(0, 2, 8, CompileSpec(), 1, False, RunPaths(run_dir), {"batch_size": 8}, backup=True)
    outcome = finish(spec, Keeper(), True, Storage())
    key = f"{run_dir.split('/', 3)[3]}/state.json"
    state = json.loads(s3_store.client.get_object(Bucket=s3_store.bucket, Key=key)["Body"].read())
    assert outcome["epochs_completed"] == 2 and state["finished"] and state["history"] == {"loss": [1.0, 0.5]}
