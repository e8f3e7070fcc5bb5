"""``cluster.history`` of a real MultiWorkerMirroredStrategy fit with validation: the chief's
per-epoch Keras logs at the driver. (The history and its display without a cluster:
tests/unit/driver/test_history.py.)"""

from __future__ import annotations

import math

import pytest

from sparkdl import TFCluster

import cluster_functions as cluster_fns
from conftest import read_json_files

pytestmark = pytest.mark.timeout(240)


def test_cluster_history_of_a_mwms_fit_with_validation(sc2, tmp_path):
    cluster = TFCluster.run(sc2, cluster_fns.mwms_fit_with_progress, {"out": str(tmp_path)}, num_executors=2)
    cluster.shutdown(timeout=200)
    history = cluster.history
    assert set(history) >= {"loss", "accuracy", "val_loss", "val_accuracy"}, history
    for name in ("loss", "val_loss"):
        # three finite values: epochs 0, 1 and 2 all completed (a missing one would be NaN)
        assert len(history[name]) == 3 and all(math.isfinite(v) for v in history[name]), history
    chief = read_json_files(tmp_path)["node0"]
    assert chief["job_name"] == "chief" and set(chief["history"]) == set(history)
    for name, values in chief["history"].items():
        assert history[name] == pytest.approx(values), name
