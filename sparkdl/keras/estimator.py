"""``KerasEstimator``: a Keras model and a DataFrame in, a fitted Spark ML ``KerasModel`` out.

::

    from sparkdl.keras import KerasEstimator

    estimator = KerasEstimator(model=build_model, feature_cols=["features"], label_cols=["label"],
                               validation=0.1, batch_size=32, epochs=10)
    model = Pipeline(stages=[assembler, scaler, estimator]).fit(train_df).stages[-1]
    model.history["val_loss"]; model.transform(test_df)

``fit`` checks everything it can on the driver (Params, columns and their types, nulls, ragged
arrays, model shapes, compile state, callbacks), prepares the rows once (select, split, persist),
starts one TF node per executor (``num_workers``; 0 trains in the driver process) running
``node_program.main_fun`` with MultiWorkerMirroredStrategy, feeds the rows with
``cluster.train`` and returns a ``KerasModel`` whose file the chief saved where the driver chose
(``model_dir``, or the run store ``checkpoint_dir/run_id``, which makes a fit resumable across
applications). ``fitMultiple`` (what ``CrossValidator`` and ``TrainValidationSplit`` call) trains
every param map that shares data and cluster settings on one cluster, from one preparation of
the rows. The estimator is not ``MLWritable``: its model and callbacks are code and objects.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from pyspark.ml import Estimator

from . import tracking
from .fitting import FitSettings, fit_group
from .lanes import ParallelFits
from .model import KerasModel
from .params import KerasEstimatorParams, spark_ml_names

logger = logging.getLogger(__name__)


class KerasEstimator(Estimator, KerasEstimatorParams):
    """Train a Keras model on a Spark DataFrame, on one TF node per executor (see the module docstring).

    Every Param (each with its default in ``docs/params.md``) can be given as a keyword
    (``KerasEstimator(model=..., epochs=5)``), set with its setter (``setEpochs(5)``) or varied by a
    param map (``ParamGridBuilder().addGrid(estimator.learning_rate, [0.01, 0.001])``).
    ``batch_size`` is **per worker**: each step trains ``batch_size * num_workers`` rows in all. The
    model is Keras 3 (``import keras``) or tf-keras, an object or a function building it; the nodes
    train with the model's Keras. ``transform`` writes Spark ML's output columns (``prediction``,
    ``probability``, ``rawPrediction``; ``outputs.py``), and Spark ML's camel-case names of those
    Params (``predictionCol``...) are accepted too. Raises ``KerasInputError`` (a ``ValueError``)
    naming the Param and column for bad input, before any node starts; ``ClusterError`` with the
    node's traceback when training fails.
    """

    def __init__(self, **params: Any):
        super().__init__()
        if params:
            self._set(**spark_ml_names(params))

    def setParams(self, **params: Any) -> "KerasEstimator":  # noqa: N802 - Spark ML's name
        """Set several Params by keyword. Returns self."""
        return self._set(**spark_ml_names(params))

    def _fit(self, dataset) -> KerasModel:
        return fit_group(dataset, [(0, FitSettings.of(self))], use_run_store=True)[0]

    def fitMultiple(self, dataset, paramMaps):  # noqa: N802,N803 - Spark ML's names
        """Fit one model per param map; an iterator of ``(index, model)``, as Spark ML's contract says.

        Param maps that share the data and cluster settings (columns, validation, seed, workers,
        GPUs, restarts, model) train on one TF cluster, one after another, from one preparation of
        the rows; the first ``next()`` trains them all, then the models are handed out. Called from
        several threads (``CrossValidator(parallelism=k)``), each thread's ``next()`` trains the param
        maps it claims on a cluster of its own, k at once, the clusters on separate executors
        (``lanes.py``); not in local mode (``num_workers=0``) nor with MLflow tracking. The run store
        (``run_id``) is not used here: tuning fits are not resumed (``CrossValidator``'s final
        fit of the best param map, a plain ``fit``, is). Tune the estimator itself to share a
        cluster: a ``Pipeline``'s ``fitMultiple`` (Spark's default) fits its param maps one by one.
        """
        estimator, maps = self, list(paramMaps)
        if self.getRunId() is not None:
            logger.info("sparkdl KerasEstimator: fitMultiple trains each param map afresh; run_id applies to fit()")

        grouped: dict[tuple, list[tuple[int, FitSettings]]] = {}
        for index, param_map in enumerate(maps):
            settings = FitSettings.of(estimator.copy(param_map))
            grouped.setdefault(settings.shared_key(), []).append((index, settings))
        groups = list(grouped.values())
        if _in_lanes(groups):
            return ParallelFits(groups, lambda group, lane: fit_group(dataset, group, use_run_store=False, lane=lane))

        def fit_all() -> dict[int, KerasModel]:
            models: dict[int, KerasModel] = {}
            for group in groups:
                models.update(fit_group(dataset, group, use_run_store=False))
            return models

        return _FitAllIterator(fit_all, len(maps))


def _in_lanes(groups: list[list[tuple[int, FitSettings]]]) -> bool:
    """Whether ``fitMultiple`` trains in lanes: every fit on TF nodes, none tracked by MLflow (its
    runs are opened per group, before training)."""
    settings = [s for group in groups for _, s in group]
    if not settings or any(s.num_workers == 0 for s in settings):
        return False
    try:
        return not tracking.wanted(any(s.log_to_mlflow for s in settings))
    except ImportError:  # log_to_mlflow without MLflow: the fit says so
        return False


class _FitAllIterator:
    """Spark ML's fitMultiple iterator: trains every param map at the first ``next()``, then yields them."""

    def __init__(self, fit_all, count: int):
        self._fit_all = fit_all
        self._count = count
        self._models: dict[int, KerasModel] | None = None
        self._next = 0
        self._lock = threading.Lock()

    def __iter__(self):
        return self

    def __next__(self) -> tuple[int, KerasModel]:
        with self._lock:
            if self._next >= self._count:
                raise StopIteration
            if self._models is None:
                self._models = self._fit_all()
            index = self._next
            self._next += 1
            return index, self._models[index]
