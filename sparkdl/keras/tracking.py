"""MLflow tracking of a fit, when MLflow is installed (the optional ``mlflow`` extra) and wanted.

A fit is logged when ``log_to_mlflow=True`` (which then needs MLflow) or whenever an MLflow run is
active: its Params (the JSON-able ones: not the model, not the callbacks), every epoch's metrics
(``step`` = epoch) and the trained model file as an artifact (``model/model.keras``). ``fit``
logs into the active run (or a run of its own); ``fitMultiple`` logs each param map into a
nested run. Without MLflow nothing here runs, and nothing else needs it.
"""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
import tempfile
from typing import Any

from ..common import hadoop_files

logger = logging.getLogger(__name__)

#: Params that are code or objects, not settings a tracking server can show.
UNLOGGED = frozenset({"model", "callbacks"})


def _mlflow():
    try:
        import mlflow
    except ImportError:
        return None
    return mlflow


def wanted(log_to_mlflow: bool) -> bool:
    """Whether to log: asked for (ImportError without MLflow), or an MLflow run is active."""
    mlflow = _mlflow()
    if log_to_mlflow and mlflow is None:
        raise ImportError("log_to_mlflow=True needs MLflow: pip install 'sparkdl-tf[mlflow]' (mlflow-skinny)")
    return mlflow is not None and (log_to_mlflow or mlflow.active_run() is not None)


def log_fit(settings, model, nested: bool) -> None:
    """Log one fitted param map (``settings``: a ``FitSettings``) and its ``KerasModel``, if wanted."""
    if not wanted(settings.log_to_mlflow):
        return
    mlflow = _mlflow()
    own_run = nested or mlflow.active_run() is None
    run = mlflow.start_run(nested=nested and mlflow.active_run() is not None) if own_run else mlflow.active_run()
    try:
        mlflow.log_params(params_of(settings))
        for epoch, metrics in enumerate(_epochs(model.history)):
            if metrics:
                mlflow.log_metrics(metrics, step=epoch)
        _log_model_file(mlflow, model)
        logger.info("sparkdl KerasEstimator: logged to MLflow run %s", run.info.run_id)
    finally:
        if own_run:
            mlflow.end_run()


def params_of(settings) -> dict[str, str]:
    """The Params worth logging, as MLflow's strings."""
    logged = {}
    for name, value in vars(settings).items():
        if name in UNLOGGED or value is None:
            continue
        logged[name] = value if isinstance(value, str) else json.dumps(value, default=str)
    return logged


def _epochs(history: dict[str, list[float]]) -> list[dict[str, float]]:
    """``history`` per epoch (NaN entries, for metrics an epoch did not report, left out)."""
    count = max((len(values) for values in history.values()), default=0)
    return [
        {name: v for name, values in history.items() if epoch < len(values) and not math.isnan(v := values[epoch])}
        for epoch in range(count)
    ]


def _log_model_file(mlflow: Any, model) -> None:
    from pyspark.sql import SparkSession

    sc = SparkSession.active().sparkContext
    scratch = tempfile.mkdtemp(prefix="sparkdl-mlflow-")
    try:
        local = os.path.join(scratch, "model.keras")
        hadoop_files.copy_to_local(sc, hadoop_files.from_tensorflow(model.getModelPath()), local)
        mlflow.log_artifact(local, artifact_path="model")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
