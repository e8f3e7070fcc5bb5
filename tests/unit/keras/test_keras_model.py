"""sparkdl.keras.model without Spark or TensorFlow: KerasModel's Params, history and the errors it
raises before scoring; its model file and metadata in a bucket (``s3_store``). (Scoring on a cluster:
tests/cluster/keras/test_keras_estimator.py, from a bucket: test_keras_store.py.)"""

from __future__ import annotations

import json
import os
import uuid
import zipfile

import pytest

from sparkdl.inference import ModelLoadError
from sparkdl.inference.loaders import private_copy
from sparkdl.keras import KerasEstimator, KerasModel, outputs
from sparkdl.keras.model import MODEL_FILE, _copy, _read_metadata, _write_metadata, qualified_path

from model_files import KERAS_VERSION, keras_archive

pytestmark = pytest.mark.timeout(30)


def test_defaults_and_spark_ml_s_names():
    model = KerasModel(model_path="/m.keras", feature_cols=["x"], predictionCol="p", probabilityCol="prob")
    assert (model.getModelPath(), model.getFeatureCols(), model.getPredictionCol()) == ("/m.keras", ["x"], "p")
    assert model.getProbabilityCol() == "prob" and model.getRawPredictionCol() == "rawPrediction"
    assert model.getPredictBatchSize() == 1024 and model.getOutputKind() is None and model.best_model_path is None


def test_safe_mode_is_a_param_on_by_default_on_the_model_and_the_estimator():
    assert KerasModel().getSafeMode() is True and KerasEstimator().getSafeMode() is True
    model = KerasModel(model_path="/m.keras", safe_mode=False)
    assert model.getSafeMode() is False and model.copy({model.safe_mode: True}).getSafeMode() is True
    assert KerasEstimator(safe_mode=False).getSafeMode() is False and model.setSafeMode(True).getSafeMode() is True


# A Keras 3 Sequential model with a Lambda layer calling a function by name (keras.activations.relu), as
# Keras 3.15 saves it (trimmed): Keras' own safe mode loads it (it refuses marshalled lambdas only), sparkdl's
# allowlist does not (a Lambda calls whatever function its config names).
NAMED_FUNCTION_LAMBDA = {
    "module": "keras",
    "class_name": "Sequential",
    "registered_name": None,
    "config": {
        "name": "sequential",
        "trainable": True,
        "layers": [
            {
                "module": "keras.layers",
                "class_name": "InputLayer",
                "registered_name": None,
                "config": {"batch_shape": [None, 3], "dtype": "float32", "name": "x"},
            },
            {
                "module": "keras.layers",
                "class_name": "Lambda",
                "registered_name": None,
                "config": {
                    "name": "lam",
                    "trainable": True,
                    "function": {"module": "builtins", "class_name": "function", "config": "relu",
                                 "registered_name": "function"},
                    "arguments": {},
                },
                "build_config": {"input_shape": [None, 3]},
            },
        ],
    },
}  # fmt: skip


def test_keras_model_checks_the_file_with_sparkdl_s_allowlist_before_keras_reads_it(tmp_path):
    path = keras_archive(tmp_path / "lambda.keras", NAMED_FUNCTION_LAMBDA, KERAS_VERSION)
    with pytest.raises(ModelLoadError, match=r"Lambda layer.*set the KerasModel's safe_mode Param to False") as refused:
        _ = KerasModel(model_path=path).keras_model
    assert "pass safe_mode=False" not in str(refused.value)  # named as this stage takes it


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


def test_paths_are_qualified_as_spark_would_without_a_spark():
    assert qualified_path(None, "models/m") == os.path.abspath("models/m")
    assert qualified_path(None, "file:/tmp/m/") == "/tmp/m"
    assert qualified_path(None, "s3a://b/runs/r1/") == "s3a://b/runs/r1"


def test_a_model_in_a_bucket_is_read_copied_and_its_metadata_kept_in_spark_ml_s_layout(s3_store, tmp_path):
    from pyspark.ml.util import DefaultParamsReader, DefaultParamsWriter

    from sparkdl.storage import Storage

    config = {"config": {"layers": [{"class_name": "Dense", "config": {"activation": "softmax"}}]}}
    archive = tmp_path / "model.keras"
    with zipfile.ZipFile(archive, "w") as out:
        out.writestr("config.json", json.dumps(config))
    root = s3_store.url(f"models-{uuid.uuid4().hex[:8]}").replace("s3://", "s3a://")
    storage = Storage()
    _copy(storage, str(archive), f"{root}/m.keras")  # local -> bucket
    _copy(storage, f"{root}/m.keras", f"{root}/saved/{MODEL_FILE}")  # bucket -> bucket
    model = KerasModel(model_path=f"{root}/saved/{MODEL_FILE}", feature_cols=["x"])
    assert model.resolved_output_kind() == outputs.output_kind(config)  # read from the bucket, no Spark
    with private_copy(model.getModelPath(), storage) as local:
        assert open(local, "rb").read() == archive.read_bytes()

    metadata = DefaultParamsWriter._get_metadata_to_save(model, _Version(), {"history": {"loss": [1.0]}})
    _write_metadata(storage, f"{root}/saved", metadata)
    assert storage.exists(f"{root}/saved/metadata/_SUCCESS")
    loaded = DefaultParamsReader._parseMetaData(_read_metadata(storage, f"{root}/saved"))
    assert loaded["uid"] == model.uid and loaded["history"] == {"loss": [1.0]}
    assert loaded["paramMap"]["feature_cols"] == ["x"]
    with pytest.raises(FileNotFoundError, match="holds no saved KerasModel"):
        _read_metadata(storage, f"{root}/nothing")


class _Version:
    version = "4.x"
