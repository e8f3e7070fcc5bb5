"""sparkdl.keras.run_store: a run's stored state keeps its history and settings, in a local directory or a
bucket (``s3_store``: an S3-protocol server reached by the standard AWS environment)."""

from __future__ import annotations

import json
import uuid

import pytest

from sparkdl.keras import run_store

pytestmark = pytest.mark.timeout(60)


def test_a_run_store_state_keeps_history_and_settings():
    document = run_store.state_document({"batch_size": 8}, 2, {"loss": [1.0, 0.5]}, False)
    assert '"epochs_completed": 2' in document and '"finished": false' in document
    assert run_store.truncated({"loss": [1, 2, 3], "acc": [0.1]}, 2) == {"loss": [1, 2], "acc": [0.1]}
    paths = run_store.RunPaths("hdfs://nn/runs/r1")
    assert paths.export_path == "hdfs://nn/runs/r1/model.keras" and paths.backup_dir.endswith("/backup")


def test_a_run_state_in_a_bucket_is_written_whole_and_read_back_by_the_nodes_and_the_driver(s3_store):
    from sparkdl.storage import Storage

    storage = Storage()  # the standard AWS environment alone (s3_store put it in os.environ)
    paths = run_store.RunPaths(s3_store.url(f"runs-{uuid.uuid4().hex[:8]}/r1").replace("s3://", "s3a://"))
    config = {"batch_size": 8, "seed": 1}
    assert run_store.read_stored_run(storage, paths, "r1", config) is None  # never completed an epoch
    assert run_store.read_history(storage, paths.state_path) == {}
    run_store.write_state(storage, paths.state_path, run_store.state_document(config, 2, {"loss": [1.0, 0.5]}, False))
    key = paths.state_path.split("/", 3)[3]
    assert (
        json.loads(s3_store.client.get_object(Bucket=s3_store.bucket, Key=key)["Body"].read())["epochs_completed"] == 2
    )
    assert run_store.read_history(storage, paths.state_path) == {"loss": [1.0, 0.5]}
    stored = run_store.read_stored_run(storage, paths, "r1", config)
    assert stored == run_store.StoredRun(2, {"loss": [1.0, 0.5]}, False)
    with pytest.raises(ValueError, match=r"batch_size: stored 8, now 16"):
        run_store.read_stored_run(storage, paths, "r1", {**config, "batch_size": 16})


def test_a_local_run_state_is_replaced_whole(tmp_path):
    from sparkdl.storage import Storage

    paths = run_store.RunPaths(str(tmp_path / "r1"))
    for done in (1, 2):
        run_store.write_state(
            Storage(), paths.state_path, run_store.state_document({}, done, {"loss": [1.0] * done}, False)
        )
    assert run_store.read_history(Storage(), paths.state_path) == {"loss": [1.0, 1.0]}
    assert sorted(p.name for p in (tmp_path / "r1").iterdir()) == ["state.json"]  # no partial file left
