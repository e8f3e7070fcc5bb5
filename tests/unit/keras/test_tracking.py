"""sparkdl/keras/tracking.py against a real MLflow file store under tmp, without Spark or TensorFlow:
the chief's per-epoch logger (steps, chief only, a store out of reach), the URI a node is given,
the epochs the driver fills in after the fit, the model's signature. (A fit logged by a cluster,
and the logged model scored by ``mlflow.pyfunc.spark_udf``: tests/cluster/keras/test_keras_estimator.py.)"""

from __future__ import annotations

import logging
import math
import os

import numpy as np
import pytest

from sparkdl.inference.model import TensorInfo
from sparkdl.keras import tracking
from sparkdl.keras.shipping import ModelInfo

from keras_settings import settings

mlflow = pytest.importorskip("mlflow")
pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def store(tmp_path, monkeypatch):
    """A file store (MLflow 3 asks for MLFLOW_ALLOW_FILE_STORE) and a client of it."""
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    uri = f"file:{tmp_path / 'mlruns'}"
    return uri, mlflow.tracking.MlflowClient(uri)


def _run(store) -> tracking.TrackingTarget:
    uri, client = store
    return tracking.TrackingTarget(uri, client.create_run("0").info.run_id)


def test_the_chief_logs_each_epoch_with_its_step_as_it_ends(store):
    target = _run(store)
    logger = tracking.EpochLogger(target, chief=True)
    epochs = [{"loss": np.float32(1.0 / (e + 1)), "val_loss": 2.0 - e, "note": "not a number"} for e in range(3)]
    history = store[1].get_metric_history
    for epoch, logs in enumerate(epochs):
        logger.log_epoch(epoch, logs)
        assert [m.step for m in history(target.run_id, "loss")] == list(range(epoch + 1))  # logged as it ends
    assert [m.value for m in history(target.run_id, "val_loss")] == [2.0, 1.0, 0.0]
    assert set(store[1].get_run(target.run_id).data.metrics) == {"loss", "val_loss"}
    assert logger.logged_epochs == [0, 1, 2]


def test_a_non_chief_node_logs_nothing(store):
    target = _run(store)
    logger = tracking.EpochLogger(target, chief=False)
    for epoch in range(2):
        logger.log_epoch(epoch, {"loss": 1.0})
    assert store[1].get_run(target.run_id).data.metrics == {} and logger.logged_epochs == []


def test_a_store_out_of_reach_is_warned_about_once_and_logging_goes_on_quietly(tmp_path, caplog, monkeypatch):
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    blocker = tmp_path / "a-file"
    blocker.write_text("")  # the store's directory cannot be made under a file
    logger = tracking.EpochLogger(tracking.TrackingTarget(f"file:{blocker}/mlruns", "r1"), chief=True)
    with caplog.at_level(logging.WARNING, logger=tracking.__name__):
        for epoch in range(3):
            logger.log_epoch(epoch, {"loss": 1.0})  # raises nothing: training goes on
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "MLflow run r1" in warnings[0] and "out of this chief's reach" in warnings[0]
    assert logger.logged_epochs == []


def test_a_node_is_given_an_absolute_tracking_uri():
    here = os.getcwd()
    assert tracking.reachable_uri("mlruns") == f"file:{here}/mlruns"
    assert tracking.reachable_uri("file:/shared/mlruns") == "file:/shared/mlruns"
    assert tracking.reachable_uri("sqlite:///mlflow.db") == f"sqlite:///{here}/mlflow.db"
    assert tracking.reachable_uri("sqlite:////shared/mlflow.db") == "sqlite:////shared/mlflow.db"
    assert tracking.reachable_uri("http://tracking:5000") == "http://tracking:5000"


def test_the_driver_fills_in_only_the_epochs_the_run_lacks():
    history = {"loss": [1.0, 0.5, 0.25], "val_loss": [math.nan, 0.7, 0.6]}
    missing = tracking.missing_epochs(history, {"loss": {0, 1, 2}, "val_loss": {1}})
    assert [(m.key, m.step, m.value) for m in missing] == [("val_loss", 2, 0.6)]
    assert len(tracking.missing_epochs(history, {})) == 5  # nothing logged: every finite value


def test_the_signature_names_tensors_only_where_the_model_has_several():
    one = ModelInfo("keras", (TensorInfo("x", shape=(8, 8)),), (TensorInfo("y", shape=(10,)),), True, True)
    schema = tracking.signature(one).to_dict()
    assert '"shape": [-1, 8, 8]' in schema["inputs"] and '"name"' not in schema["inputs"]
    two = ModelInfo(
        "keras",
        (TensorInfo("a", shape=(3,)), TensorInfo("b", shape=(None,))),
        (TensorInfo("y", shape=(1,)),),
        True,
        True,
    )
    inputs = tracking.signature(two).inputs
    assert inputs.input_names() == ["a", "b"] and [t.shape for t in inputs.inputs] == [(-1, 3), (-1, -1)]


def test_the_signature_gives_each_tensor_the_dtype_the_model_declares():
    ids = ModelInfo(
        "keras",
        (TensorInfo("item", "int64", (1,)), TensorInfo("x", "bfloat16", (2,)), TensorInfo("z", shape=(2,))),
        (TensorInfo("y", "float32", (1,)),),
        True,
        True,
    )
    inputs = tracking.signature(ids).inputs.inputs
    assert [str(t.type) for t in inputs] == ["int64", "float32", "float32"]  # numpy has no bfloat16


def test_mlflow_sees_json_params_and_numbers_only():
    logged = tracking.params_of(settings(callbacks=[object()], validation=0.2, metrics=["accuracy"]))
    assert "model" not in logged and "callbacks" not in logged
    assert logged["feature_cols"] == '["x"]' and logged["validation"] == "0.2" and logged["mode"] == "auto"
    assert tracking.numbers({"loss": 0.5, "val_loss": math.nan, "note": "text"}) == {"loss": 0.5}


def test_without_mlflow_nothing_is_logged_and_asking_for_it_says_what_to_install(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "mlflow", None)  # as if the mlflow extra were not installed
    assert tracking.wanted(False) is False
    with pytest.raises(
        ImportError,
        match=r"log_to_mlflow=True needs MLflow: sparkdl-tf's mlflow extra \(pip install 'mlflow-skinny>=3,<4'\)",
    ):
        tracking.wanted(True)


def test_a_model_mlflow_cannot_log_leaves_the_fit_standing(store, tmp_path, monkeypatch, caplog):
    """The fit trained: a model file the driver cannot load (here not a .keras archive at all) costs
    the run its model, with a warning naming where the model is, not the fit."""
    from sparkdl.keras import KerasModel

    uri, client = store
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    broken = tmp_path / "model.keras"
    broken.write_text("not a zip archive")
    model = KerasModel(model_path=str(broken), feature_cols=["x"]).set_history({"loss": [1.0, 0.5]})
    info = ModelInfo("keras", (TensorInfo("x", shape=(8,)),), (TensorInfo("y", shape=(1,)),), True, True)
    with caplog.at_level(logging.WARNING, logger="sparkdl.keras.tracking"):
        with tracking.FitRuns([0], log_to_mlflow=True) as runs:
            runs.log_fit(0, settings(), model, info)
            run_id = runs.target(0).run_id
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED" and run.data.params["feature_cols"] == '["x"]'
    assert [m.value for m in client.get_metric_history(run_id, "loss")] == [1.0, 0.5]
    assert "not the model" in caplog.text and str(broken) in caplog.text
