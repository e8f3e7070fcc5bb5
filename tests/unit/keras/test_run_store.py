"""sparkdl.keras.run_store: a run's stored state keeps its history and settings."""

from __future__ import annotations

import pytest

from sparkdl.keras import run_store

pytestmark = pytest.mark.timeout(60)


def test_a_run_store_state_keeps_history_and_settings():
    document = run_store.state_document({"batch_size": 8}, 2, {"loss": [1.0, 0.5]}, False)
    assert '"epochs_completed": 2' in document and '"finished": false' in document
    assert run_store.truncated({"loss": [1, 2, 3], "acc": [0.1]}, 2) == {"loss": [1, 2], "acc": [0.1]}
    paths = run_store.RunPaths("hdfs://nn/runs/r1")
    assert paths.export_path == "hdfs://nn/runs/r1/model.keras" and paths.backup_dir.endswith("/backup")
