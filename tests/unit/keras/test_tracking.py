"""sparkdl.keras.tracking: what MLflow is given, and what happens without it."""

from __future__ import annotations

import math

import pytest

from sparkdl.keras import tracking

from keras_settings import settings

pytestmark = pytest.mark.timeout(60)


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
