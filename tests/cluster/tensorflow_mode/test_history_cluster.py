"""A real two-worker MultiWorkerMirroredStrategy tf.keras fit with validation: both workers end with
identical weights, the nodes default to Keras 3 (TensorFlow's tf.keras), and ``cluster.history`` holds the chief's
per-epoch Keras logs at the driver. (The history and its display without a cluster:
tests/unit/driver/test_history.py.)"""

from __future__ import annotations

import math

import numpy as np
import pytest

from sparkdl import TFCluster

import cluster_functions as cluster_fns
from conftest import read_json_files

pytestmark = pytest.mark.timeout(240)


def test_mwms_fit_ends_with_identical_weights_and_its_history_at_the_driver(sc2, tmp_path):
    cluster = TFCluster.run(sc2, cluster_fns.mwms_fit_with_progress, {"out": str(tmp_path)}, num_executors=2)
    cluster.shutdown(timeout=200)
    nodes = read_json_files(tmp_path)
    assert [n["replicas"] for n in nodes.values()] == [2, 2]
    assert all(n["keras"].startswith("keras") for n in nodes.values()), "nodes default to Keras 3, as one machine does"
    first, second = (np.load(tmp_path / f"weights{i}.npz") for i in (0, 1))
    assert len(first.files) == 4
    for name in first.files:
        np.testing.assert_array_equal(first[name], second[name])
    chief = nodes["node0"]
    losses = chief["history"]["loss"]
    assert losses[-1] < losses[0], f"training did not reduce the loss: {losses}"

    history = cluster.history
    assert set(history) >= {"loss", "accuracy", "val_loss", "val_accuracy"}, history
    for name in ("loss", "val_loss"):
        # three finite values: epochs 0, 1 and 2 all completed (a missing one would be NaN)
        assert len(history[name]) == 3 and all(math.isfinite(v) for v in history[name]), history
    assert chief["job_name"] == "chief" and set(chief["history"]) == set(history)
    for name, values in chief["history"].items():
        assert history[name] == pytest.approx(values), name
