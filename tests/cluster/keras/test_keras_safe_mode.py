"""KerasModel's safe_mode Param (issue 53): a model KerasEstimator trained with a named-function ``Lambda``
(Keras 3's own safe mode loads it, sparkdl's allowlist refuses it) is refused by ``transform`` and by
``keras_model`` in safe mode, each naming the Param; with the Param off the executors score it and the
driver loads it. (The allowlist itself: tests/unit/inference/test_model_safety.py.)"""

from __future__ import annotations

import numpy as np
import pytest

from sparkdl.inference import ModelLoadError
from sparkdl.keras import KerasEstimator, KerasModel

pytestmark = [pytest.mark.timeout(300), pytest.mark.cluster]  # TensorFlow's Keras saves and loads models

REFUSED = r"Lambda layer.*set the KerasModel's safe_mode Param to False"


def lambda_model():
    """A Keras 3 regressor whose Lambda layer calls a function by name (keras.activations.relu)."""
    import keras

    keras.utils.set_random_seed(3)
    model = keras.Sequential(
        [
            keras.Input((3,), name="x"),
            keras.layers.Dense(4, name="hidden"),
            keras.layers.Lambda(keras.activations.relu, name="relu_by_name"),
            keras.layers.Dense(1, name="y"),
        ]
    )
    model.compile("adam", "mse")
    return model


def test_keras_model_goes_through_sparkdl_s_allowlist_not_only_keras_safe_mode(tmp_path):
    import keras

    path = str(tmp_path / "lambda.keras")
    lambda_model().save(path)
    keras.models.load_model(path, safe_mode=True)  # Keras' own safe mode takes the named function
    with pytest.raises(ModelLoadError, match=REFUSED):
        _ = KerasModel(model_path=path).keras_model
    trusted = KerasModel(model_path=path, safe_mode=False).keras_model
    assert [layer.name for layer in trusted.layers] == ["hidden", "relu_by_name", "y"]
    assert trusted.optimizer is not None  # trusted: loaded compiled


def test_keras_model_in_safe_mode_leaves_the_compile_config_unread(tmp_path):
    """What sparkdl's check does not read (the losses, metrics and optimizer the compile config names)
    is never built in safe mode: the model comes back uncompiled, as scoring loads it."""
    import keras

    path = str(tmp_path / "plain.keras")
    model = keras.Sequential([keras.Input((3,), name="x"), keras.layers.Dense(1, name="y")])
    model.compile("adam", "mse")
    model.save(path)
    loaded = KerasModel(model_path=path).keras_model
    assert not loaded.compiled and [layer.name for layer in loaded.layers] == ["y"]


def test_a_fitted_lambda_model_is_refused_by_transform_naming_the_param_and_scores_with_it_off(sc2, spark_holder):
    spark = spark_holder.spark
    rows = [([float(i % 5), float(i % 3), 1.0], float(i % 5)) for i in range(40)]
    data = spark.createDataFrame(rows, "x array<float>, y double")
    # num_workers=0: trained in the driver process (the nodes' safe mode is not this test's subject)
    estimator = KerasEstimator(model=lambda_model(), feature_cols="x", label_cols="y", epochs=1, num_workers=0)
    trusted = estimator.setSafeMode(False).fit(data)  # the estimator gives its safe_mode to the models it fits
    assert trusted.getSafeMode() is False
    scored = trusted.transform(data).select("x", "prediction").toPandas()  # on the executors, safe mode off
    expected = trusted.keras_model.predict(np.stack(scored["x"]).astype("float32"), verbose=0)[:, 0]
    np.testing.assert_allclose(scored["prediction"].to_numpy(), expected, rtol=1e-5, atol=1e-5)

    model = trusted.copy({trusted.safe_mode: True})  # safe mode, the default
    with pytest.raises(ModelLoadError, match=REFUSED) as refused:
        model.transform(data)
    assert "pass safe_mode=False" not in str(refused.value)
    with pytest.raises(ModelLoadError, match=REFUSED):
        _ = model.keras_model
