"""sparkdl.spark_ml.tf_estimator without Spark: a TFEstimator's Params reach the cluster it runs."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.timeout(120)


class _FakeCluster:
    def __init__(self, record):
        self.record = record

    def train(self, data, num_epochs, **kwargs):
        self.record["train"] = (num_epochs, kwargs)
        return {}

    def shutdown(self, **kwargs):
        self.record["shutdown"] = kwargs


class _FakeFrame:
    """Just enough of a DataFrame for TFEstimator.fit in InputMode.SPARK."""

    columns = ["x", "y"]
    sparkSession = type("S", (), {"sparkContext": None})()

    def select(self, *columns):
        return self


def test_estimator_params_reach_tfcluster(monkeypatch):
    from sparkdl.driver import run as run_module
    from sparkdl.ml import TFEstimator

    record = {}

    def fake_run(sc, map_fun, tf_args, num_executors, num_ps, tensorboard, input_mode, **kwargs):
        record["run"] = (tf_args, num_executors, kwargs)
        return _FakeCluster(record)

    monkeypatch.setattr(run_module, "run", fake_run)
    estimator = (
        TFEstimator(lambda args, ctx: None, {"lr": 0.5})
        .setInputMapping({"x": "x"})
        .setClusterSize(3)
        .setFeedTimeout(30)
        .setStallTimeout(120)
        .setMaxRestarts(2)
        .setNumGPUs(0)
        .setMasterNode("master")
        .setGraceSecs(5)
        .setEpochs(4)
    )
    estimator.fit(_FakeFrame())
    tf_args, size, kwargs = record["run"]
    assert size == 3 and tf_args.lr == 0.5 and tf_args.feed_timeout == 30.0
    assert kwargs == {
        "master_node": "master",
        "driver_ps_nodes": False,
        "num_gpus": 0,
        "stall_timeout": 120.0,
        "max_restarts": 2,
    }
    assert record["train"] == (4, {"feed_timeout": 30.0, "validation_data": None})
    assert record["shutdown"] == {"grace_secs": 5.0}
    defaults = TFEstimator(lambda args, ctx: None, ["--lr", "0.5"]).setInputMapping({"x": "x"})
    defaults.fit(_FakeFrame())
    tf_args, _, kwargs = record["run"]
    assert tf_args == ["--lr", "0.5"]  # an argv list reaches train_fn as is, as in TFoS
    assert kwargs == {
        "master_node": "chief",
        "driver_ps_nodes": False,
        "num_gpus": None,
        "stall_timeout": None,
        "max_restarts": 0,
    }
    assert record["train"][1]["feed_timeout"] == 600.0 and record["shutdown"] == {"grace_secs": 0.0}
