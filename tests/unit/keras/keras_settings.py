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
    """A model's description from ``(name, shape)`` pairs, or ``(name, shape, dtype)`` for a declared dtype."""
    return ModelInfo(
        "tf_keras",
        tuple(TensorInfo(t[0], shape=t[1], dtype=t[2] if len(t) > 2 else None) for t in inputs),
        tuple(TensorInfo(t[0], shape=t[1], dtype=t[2] if len(t) > 2 else None) for t in outputs),
        compiled,
        compiled,
    )
