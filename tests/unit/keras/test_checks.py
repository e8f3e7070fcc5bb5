"""sparkdl.keras.checks without Spark or TensorFlow: the driver's checks of settings, columns and
model. (The estimator on a cluster: test_keras_estimator.py; ``.keras`` saves with TensorFlow:
test_keras_saves.py; both in tests/cluster/keras/.)"""

from __future__ import annotations

from dataclasses import replace

import pytest
from pyspark.ml.linalg import VectorUDT
from pyspark.sql import types as T

from sparkdl.keras import KerasInputError, checks

from keras_settings import info, settings

pytestmark = pytest.mark.timeout(60)


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
        "min_workers must be None or from 1 to num_workers=2": dict(num_workers=2, min_workers=3),
        "min_workers is for a cluster": dict(num_workers=0, min_workers=1),
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


def test_a_model_without_loss_is_refused_and_keras3_models_are_welcome():
    from sparkdl.keras.compiling import CompileSpec

    with pytest.raises(KerasInputError, match="model is not compiled with a loss and the loss Param is not set"):
        checks.check_model(info([("x", (3,))], [("y", (1,))], compiled=False), CompileSpec())
    checks.check_model(info([("x", (3,))], [("y", (1,))], compiled=False), CompileSpec(loss="mse"))
    checks.check_model(replace(info([("x", (3,))], [("y", (1,))]), flavour="keras"), CompileSpec())
