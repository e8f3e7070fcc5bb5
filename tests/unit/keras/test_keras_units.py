"""sparkdl.keras without Spark or TensorFlow: Params, the column layout, the driver's checks,
the run store's state, MLflow's view of a fit. (The estimator on a cluster: test_keras_estimator.py;
``.keras`` saves with TensorFlow: test_keras_saves.py; both in tests/cluster/keras/.)"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from pyspark.ml.linalg import VectorUDT
from pyspark.sql import types as T

from sparkdl.inference.model import TensorInfo
from sparkdl.keras import KerasEstimator, KerasInputError, KerasModel, checks, run_store, tracking
from sparkdl.keras.fitting import FitSettings
from sparkdl.keras.layout import plan_layout
from sparkdl.keras.shipping import ModelInfo

pytestmark = pytest.mark.timeout(60)


def settings(**changes) -> FitSettings:
    estimator = KerasEstimator(model=lambda: None, feature_cols=["x"], label_cols=["y"])
    return replace(FitSettings.of(estimator), **changes)


def info(inputs, outputs, compiled=True) -> ModelInfo:
    return ModelInfo(
        "tf_keras",
        tuple(TensorInfo(n, shape=s) for n, s in inputs),
        tuple(TensorInfo(n, shape=s) for n, s in outputs),
        compiled,
        compiled,
    )


def test_params_have_defaults_setters_and_converters():
    estimator = KerasEstimator(feature_cols="features", label_cols="label", validation=0.25)
    assert estimator.getFeatureCols() == ["features"] and estimator.getLabelCols() == ["label"]
    assert estimator.getBatchSize() == 32 and estimator.getEpochs() == 1 and estimator.getShuffle() is True
    assert estimator.getValidation() == 0.25 and estimator.getNumWorkers() is None and estimator.getMode() == "auto"
    assert estimator.setEpochs(3.0).getEpochs() == 3 and estimator.setValidation("is_val").getValidation() == "is_val"
    assert estimator.setLearningRate(1).getLearningRate() == 1.0 and estimator.getSeed() == KerasEstimator().getSeed()
    with pytest.raises(TypeError, match="validation must be a fraction"):
        estimator.setValidation(True)
    copied = estimator.copy({estimator.learning_rate: 0.5})
    assert copied.getLearningRate() == 0.5 and estimator.getLearningRate() == 1.0
    assert KerasEstimator.getBatchSize.__doc__ and "EACH worker" in estimator.batch_size.doc
    model = KerasModel(model_path="/m.keras", feature_cols=["f"])
    assert model.getPredictionCol() == "prediction" and model.getPredictBatchSize() == 1024 and model.history == {}


def test_settings_that_cannot_work_are_refused_naming_the_param():
    checks.check_settings(settings())
    cases = {
        "model is not set": dict(model=None),
        "feature_cols is empty": dict(feature_cols=[]),
        "batch_size must be at least 1": dict(batch_size=0),
        "epochs must be at least 1": dict(epochs=0),
        "num_workers must be None or at least 0": dict(num_workers=-1),
        "validation must be a fraction": dict(validation=1.5),
        "mode must be one of": dict(mode="best"),
        "monitor='val_loss' needs validation data": dict(monitor="val_loss"),
        "run_id is not set": dict(checkpoint_dir="/tmp/x"),
        "checkpoint_dir is not set": dict(run_id="r1"),
        "run_id must be 1 to 128": dict(checkpoint_dir="/tmp/x", run_id="../up"),
        "seed must be an integer": dict(seed=2**40),
        "verbose must be 0, 1 or 2": dict(verbose=3),
    }
    for message, change in cases.items():
        with pytest.raises(KerasInputError, match=message.replace("(", r"\(")):
            checks.check_settings(settings(**change))


def test_columns_are_checked_against_the_schema_naming_param_and_column():
    schema = T.StructType(
        [
            T.StructField("x", T.ArrayType(T.FloatType())),
            T.StructField("v", VectorUDT()),
            T.StructField("y", T.LongType()),
            T.StructField("w", T.DoubleType()),
            T.StructField("text", T.StringType()),
            T.StructField("is_val", T.BooleanType()),
            T.StructField("n", T.ArrayType(T.ArrayType(T.FloatType()))),
        ]
    )
    kinds = checks.column_kinds(schema, settings(feature_cols=["x", "v"], sample_weight_col="w", validation="is_val"))
    assert kinds == {"x": "array", "v": "vector", "y": "scalar", "w": "scalar"}
    with pytest.raises(KerasInputError, match=r"feature_cols: the DataFrame has no column 'nope'; its columns are"):
        checks.column_kinds(schema, settings(feature_cols=["x", "nope"]))
    with pytest.raises(KerasInputError, match=r"label_cols: column 'text' has type string, which cannot feed"):
        checks.column_kinds(schema, settings(label_cols=["text"]))
    with pytest.raises(KerasInputError, match=r"feature_cols: column 'n' has type array<array<float>>"):
        checks.column_kinds(schema, settings(feature_cols=["n"]))
    with pytest.raises(KerasInputError, match=r"sample_weight_col: column 'x' has type array<float>.*a number"):
        checks.column_kinds(schema, settings(sample_weight_col="x"))
    with pytest.raises(KerasInputError, match=r"validation: column 'y' has type bigint; .* must be boolean"):
        checks.column_kinds(schema, settings(validation="y"))


def test_one_input_takes_every_feature_column_concatenated_and_reshaped():
    model = info([("image", (8, 8, 1))], [("probs", (10,))])
    layout = plan_layout(model, ["a", "b"], ["label"], None, {"a": 60, "b": 4, "label": 1})
    (piece,) = layout.inputs
    assert piece.columns == ("a", "b") and piece.widths == (60, 4) and piece.shape == (8, 8, 1)
    assert layout.labels[0].scalar and not layout.by_name and layout.columns() == ["a", "b", "label"]
    one_hot = plan_layout(model, ["a", "b"], ["onehot"], "w", {"a": 60, "b": 4, "onehot": 10, "w": 1})
    assert one_hot.labels[0].shape == (10,) and one_hot.sample_weight == "w"
    with pytest.raises(ValueError, match=r"feature_cols: the model's input 'image' has shape \(8, 8, 1\) \(64 values"):
        plan_layout(model, ["a"], ["label"], None, {"a": 60, "label": 1})
    with pytest.raises(ValueError, match=r"label_cols: the model's output 'probs' .* hold 3 per row"):
        plan_layout(model, ["a", "b"], ["l3"], None, {"a": 60, "b": 4, "l3": 3})


def test_several_inputs_and_outputs_are_matched_by_name():
    model = info([("pixels", (64,)), ("meta", (2,))], [("digit", (10,)), ("odd", (1,))])
    widths = {"pixels": 64, "meta": 2, "digit": 1, "odd": 1}
    layout = plan_layout(model, ["meta", "pixels"], ["odd", "digit"], None, widths)
    assert layout.by_name and layout.labels_by_name
    assert [(p.name, p.columns) for p in layout.inputs] == [("pixels", ("pixels",)), ("meta", ("meta",))]
    with pytest.raises(ValueError, match=r"feature_cols: the model has 2 inputs, \['pixels', 'meta'\], .* by input"):
        plan_layout(model, ["pixels", "extra"], ["odd", "digit"], None, {**widths, "extra": 2})
    with pytest.raises(ValueError, match=r"label_cols: the model has 2 outputs"):
        plan_layout(model, ["meta", "pixels"], ["digit"], None, widths)


def test_a_model_without_loss_is_refused_and_keras3_models_are_welcome():
    from sparkdl.keras.compiling import CompileSpec

    with pytest.raises(KerasInputError, match="model is not compiled with a loss and the loss Param is not set"):
        checks.check_model(info([("x", (3,))], [("y", (1,))], compiled=False), CompileSpec())
    checks.check_model(info([("x", (3,))], [("y", (1,))], compiled=False), CompileSpec(loss="mse"))
    checks.check_model(replace(info([("x", (3,))], [("y", (1,))]), flavour="keras"), CompileSpec())


def test_a_run_store_state_keeps_history_and_settings():
    document = run_store.state_document({"batch_size": 8}, 2, {"loss": [1.0, 0.5]}, False)
    assert '"epochs_completed": 2' in document and '"finished": false' in document
    assert run_store.truncated({"loss": [1, 2, 3], "acc": [0.1]}, 2) == {"loss": [1, 2], "acc": [0.1]}
    paths = run_store.RunPaths("hdfs://nn/runs/r1")
    assert paths.export_path == "hdfs://nn/runs/r1/model.keras" and paths.backup_dir.endswith("/backup")


def test_mlflow_sees_json_params_and_per_epoch_metrics():
    logged = tracking.params_of(settings(callbacks=[object()], validation=0.2, metrics=["accuracy"]))
    assert "model" not in logged and "callbacks" not in logged
    assert logged["feature_cols"] == '["x"]' and logged["validation"] == "0.2" and logged["mode"] == "auto"
    epochs = tracking._epochs({"loss": [1.0, 0.5], "val_loss": [math.nan, 0.7]})
    assert epochs == [{"loss": 1.0}, {"loss": 0.5, "val_loss": 0.7}]


def test_without_mlflow_nothing_is_logged_and_asking_for_it_says_what_to_install(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "mlflow", None)  # as if the mlflow extra were not installed
    assert tracking.wanted(False) is False
    with pytest.raises(ImportError, match=r"log_to_mlflow=True needs MLflow: pip install 'sparkdl-tf\[mlflow\]'"):
        tracking.wanted(True)
