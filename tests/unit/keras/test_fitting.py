"""sparkdl.keras.fitting without Spark or TensorFlow: one param map's settings, which param maps
share a cluster, what a run store records, and the fitted KerasModel's Params."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from sparkdl.inference.model import TensorInfo
from sparkdl.keras import KerasEstimator, fitting
from sparkdl.keras.compiling import CompileSpec
from sparkdl.keras.fitting import FitSettings
from sparkdl.keras.run_store import RunPaths
from sparkdl.keras.shipping import KERAS3, ModelInfo

from keras_settings import settings

pytestmark = pytest.mark.timeout(30)


def test_the_settings_are_every_param_of_the_estimator():
    def build():
        return None

    estimator = KerasEstimator(model=build, feature_cols=["a", "b"], label_cols=["y"], epochs=3, predictionCol="p")
    fit = FitSettings.of(estimator)
    assert (fit.model, fit.feature_cols, fit.label_cols, fit.epochs, fit.prediction_col) == (
        build,
        ["a", "b"],
        ["y"],
        3,
        "p",
    )
    assert fit.batch_size == estimator.getOrDefault("batch_size")  # a default is read like a set value


def test_param_maps_share_a_cluster_unless_the_data_or_the_cluster_differ():
    first = settings(epochs=2, batch_size=8, optimizer="adam", learning_rate=0.1)
    same_cluster = replace(first, epochs=5, batch_size=64, optimizer="sgd", learning_rate=None, verbose=1)
    assert same_cluster.shared_key() == first.shared_key()  # trained one after the other on one cluster
    for change in ({"feature_cols": ["z"]}, {"validation": 0.2}, {"seed": 7}, {"num_workers": 3}, {"model": len}):
        assert replace(first, **change).shared_key() != first.shared_key(), change


def test_the_compile_spec_is_json_like_and_names_a_param_that_cannot_travel():
    spec = settings(optimizer="adam", loss=("mse",), metrics=None, learning_rate=0.5).compile_spec()
    assert spec == CompileSpec("adam", ["mse"], None, 0.5)
    with pytest.raises(ValueError, match="^loss: function is not a Keras loss"):
        settings(loss=lambda y, p: y - p).compile_spec()


def test_a_run_store_records_the_settings_that_must_match_to_resume():
    info = ModelInfo(KERAS3, (TensorInfo("x", shape=(2,)),), (TensorInfo("y", shape=(1,)),), True, True)
    config = fitting._config(settings(batch_size=16, validation=0.25), CompileSpec(loss="mse"), info)
    assert json.loads(json.dumps(config)) == config  # what state.json holds, as it reads back
    assert config["batch_size"] == 16 and config["validation"] == 0.25 and config["compile"]["loss"] == "mse"
    assert config["model"] == {"inputs": [["x", [2]]], "outputs": [["y", [1]]]}
    assert "epochs" not in config, "a resumed run may be given more epochs"


def test_the_fitted_model_gets_the_run_s_file_and_the_estimator_s_output_params():
    info = ModelInfo(
        KERAS3, (TensorInfo("a", shape=(1,)), TensorInfo("b", shape=(1,))), (TensorInfo("y", shape=(1,)),), True, True
    )
    paths = RunPaths("/runs/r1")
    model = fitting._model(settings(monitor="val_loss", prediction_col="p"), paths, {"loss": [2, 1]}, info)
    assert model.getModelPath() == "/runs/r1/model.keras" and model.best_model_path == "/runs/r1/best.keras"
    assert model.getInputCols() == {"a": ["a"], "b": ["b"]}  # several inputs: each fed by its own column
    assert model.getOutputNames() is None and model.getPredictionCol() == "p"
    assert model.history == {"loss": [2.0, 1.0]}
    single = fitting._model(settings(), paths, {}, replace(info, inputs=info.inputs[:1]))
    assert single.getInputCols() is None and single.best_model_path is None


def test_a_set_number_of_workers_is_used_as_given():
    assert fitting._nodes(None, 3) == 3 and fitting._nodes(None, 0) == 0  # 0: local mode
