"""A KerasEstimator's FitSettings and a model's ModelInfo, built without a model, for the keras unit tests."""

from __future__ import annotations

from dataclasses import replace

from sparkdl.inference.model import TensorInfo
from sparkdl.keras import KerasEstimator
from sparkdl.keras.fitting import FitSettings
from sparkdl.keras.shipping import ModelInfo


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
