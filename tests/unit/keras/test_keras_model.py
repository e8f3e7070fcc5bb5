"""sparkdl.keras.model without Spark or TensorFlow: KerasModel's Params, history and the errors it
raises before scoring. (Scoring on a cluster: tests/cluster/keras/test_keras_estimator.py.)"""

from __future__ import annotations

import pytest

from sparkdl.keras import KerasModel
from sparkdl.keras.model import _keras_for_file

pytestmark = pytest.mark.timeout(30)


def test_defaults_and_spark_ml_s_names():
    model = KerasModel(model_path="/m.keras", feature_cols=["x"], predictionCol="p", probabilityCol="prob")
    assert (model.getModelPath(), model.getFeatureCols(), model.getPredictionCol()) == ("/m.keras", ["x"], "p")
    assert model.getProbabilityCol() == "prob" and model.getRawPredictionCol() == "rawPrediction"
    assert model.getPredictBatchSize() == 1024 and model.getOutputKind() is None and model.best_model_path is None


def test_the_history_is_floats_and_a_copy():
    model = KerasModel()
    model.set_history({"loss": [2, 1], "val_loss": (3,)})
    history = model.history
    assert history == {"loss": [2.0, 1.0], "val_loss": [3.0]} and all(type(v) is float for v in history["loss"])
    history["loss"].append(0.0)
    assert model.history["loss"] == [2.0, 1.0]


def test_an_output_kind_that_is_set_needs_no_model_file():
    assert KerasModel(output_kind="softmax").resolved_output_kind() == "softmax"


def test_scoring_without_a_model_path_or_feature_columns_is_refused_naming_the_param():
    with pytest.raises(ValueError, match="KerasModel needs model_path"):
        KerasModel()._path()
    with pytest.raises(ValueError, match="KerasModel needs feature_cols"):
        KerasModel(model_path="/m.keras").transform(None)  # refused before the DataFrame is read


def test_a_file_that_is_not_a_keras_archive_is_named(tmp_path):
    path = tmp_path / "model.h5"
    path.write_bytes(b"\x89HDF\r\n")
    with pytest.raises(ValueError, match=rf"{path} is not a .keras model file"):
        _keras_for_file(str(path))
