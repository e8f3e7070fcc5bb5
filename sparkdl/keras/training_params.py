"""The Params about how ``KerasEstimator`` trains: batch size, epochs, nodes, callbacks, run store, tracking.

One ``HasX`` mixin per Param (or per group: ``HasRunStore``), with Spark ML's camel-case
accessors; the Params about the model and the columns are in ``params.py``.
"""

from __future__ import annotations

import zlib
from typing import Any

from pyspark.ml.param import Param, Params, TypeConverters

from .params import optional

#: The default ``seed``: fixed (Spark ML's own default hashes the class name per process), so a
#: validation split and a resumed run see the same rows in every application.
DEFAULT_SEED = zlib.crc32(b"sparkdl.keras.KerasEstimator")


def _callbacks(value: Any) -> list:
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return list(value)
    return [value]


class HasBatchSize(Params):
    """Mixin for Param ``batch_size``."""

    batch_size = Param(
        Params._dummy(),
        "batch_size",
        "Rows per training step on EACH worker (per-worker batch): one step trains batch_size x "
        "num_workers rows in all, the global batch Keras sees under MultiWorkerMirroredStrategy",
        typeConverter=TypeConverters.toInt,
    )

    def setBatchSize(self, value):
        """Set ``batch_size``. Returns self."""
        return self._set(batch_size=value)

    def getBatchSize(self):
        """The value of ``batch_size``."""
        return self.getOrDefault(self.batch_size)


class HasEpochs(Params):
    """Mixin for Param ``epochs``."""

    epochs = Param(Params._dummy(), "epochs", "Passes over the training data", typeConverter=TypeConverters.toInt)

    def setEpochs(self, value):
        """Set ``epochs``. Returns self."""
        return self._set(epochs=value)

    def getEpochs(self):
        """The value of ``epochs``."""
        return self.getOrDefault(self.epochs)


class HasShuffle(Params):
    """Mixin for Param ``shuffle``."""

    shuffle = Param(
        Params._dummy(),
        "shuffle",
        "Give each worker its rows in a new order every epoch (seeded by seed)",
        typeConverter=TypeConverters.toBoolean,
    )

    def setShuffle(self, value):
        """Set ``shuffle``. Returns self."""
        return self._set(shuffle=value)

    def getShuffle(self):
        """The value of ``shuffle``."""
        return self.getOrDefault(self.shuffle)


class HasSeed(Params):
    """Mixin for Param ``seed``."""

    seed = Param(
        Params._dummy(),
        "seed",
        "Seed of the validation split, the shuffle and TensorFlow's random numbers (weights' initial values)",
        typeConverter=TypeConverters.toInt,
    )

    def setSeed(self, value):
        """Set ``seed``. Returns self."""
        return self._set(seed=value)

    def getSeed(self):
        """The value of ``seed``."""
        return self.getOrDefault(self.seed)


class HasNumWorkers(Params):
    """Mixin for Param ``num_workers``."""

    num_workers = Param(
        Params._dummy(),
        "num_workers",
        "TF nodes to train on, one per executor (None: every executor; 0: train in the driver "
        "process, local mode, for debugging before paying for a cluster)",
        typeConverter=optional(TypeConverters.toInt),
    )

    def setNumWorkers(self, value):
        """Set ``num_workers``. Returns self."""
        return self._set(num_workers=value)

    def getNumWorkers(self):
        """The value of ``num_workers``."""
        return self.getOrDefault(self.num_workers)


class HasNumGPUs(Params):
    """Mixin for Param ``num_gpus``."""

    num_gpus = Param(
        Params._dummy(),
        "num_gpus",
        "GPUs per node (None: Spark's GPU resources, else one if the host has GPUs; 0: CPU)",
        typeConverter=optional(TypeConverters.toInt),
    )

    def setNumGPUs(self, value):
        """Set ``num_gpus``. Returns self."""
        return self._set(num_gpus=value)

    def getNumGPUs(self):
        """The value of ``num_gpus``."""
        return self.getOrDefault(self.num_gpus)


class HasCallbacks(Params):
    """Mixin for Param ``callbacks``."""

    callbacks = Param(
        Params._dummy(),
        "callbacks",
        "Keras callbacks for fit (they must pickle: they travel to every node)",
        typeConverter=_callbacks,
    )

    def setCallbacks(self, value):
        """Set ``callbacks``. Returns self."""
        return self._set(callbacks=value)

    def getCallbacks(self):
        """The value of ``callbacks``."""
        return self.getOrDefault(self.callbacks)


class HasMaxRestarts(Params):
    """Mixin for Param ``max_restarts``."""

    max_restarts = Param(
        Params._dummy(),
        "max_restarts",
        "How often a failed cluster is relaunched within one fit, resuming from the last epoch (0: never)",
        typeConverter=TypeConverters.toInt,
    )

    def setMaxRestarts(self, value):
        """Set ``max_restarts``. Returns self."""
        return self._set(max_restarts=value)

    def getMaxRestarts(self):
        """The value of ``max_restarts``."""
        return self.getOrDefault(self.max_restarts)


class HasRunStore(Params):
    """Mixin for Params ``checkpoint_dir``, ``run_id``, ``monitor`` and ``mode``: the run store."""

    checkpoint_dir = Param(
        Params._dummy(),
        "checkpoint_dir",
        "Any Hadoop path every node and the driver reach (HDFS, S3, a shared or local directory): "
        "with run_id, every epoch is checkpointed there and a fit with the same run_id resumes",
        typeConverter=optional(TypeConverters.toString),
    )
    run_id = Param(
        Params._dummy(),
        "run_id",
        "Names a run under checkpoint_dir: fitting again with the same run_id (in any application) "
        "resumes after its last completed epoch; a finished run returns its model without training",
        typeConverter=optional(TypeConverters.toString),
    )
    monitor = Param(
        Params._dummy(),
        "monitor",
        "A metric (e.g. 'val_loss') whose best epoch's model is also kept, as best.keras in the run's directory",
        typeConverter=optional(TypeConverters.toString),
    )
    mode = Param(
        Params._dummy(),
        "mode",
        "Whether the monitored metric is best when 'min', 'max', or 'auto' (from its name)",
        typeConverter=TypeConverters.toString,
    )

    def setCheckpointDir(self, value):
        """Set ``checkpoint_dir``. Returns self."""
        return self._set(checkpoint_dir=value)

    def getCheckpointDir(self):
        """The value of ``checkpoint_dir``."""
        return self.getOrDefault(self.checkpoint_dir)

    def setRunId(self, value):
        """Set ``run_id``. Returns self."""
        return self._set(run_id=value)

    def getRunId(self):
        """The value of ``run_id``."""
        return self.getOrDefault(self.run_id)

    def setMonitor(self, value):
        """Set ``monitor``. Returns self."""
        return self._set(monitor=value)

    def getMonitor(self):
        """The value of ``monitor``."""
        return self.getOrDefault(self.monitor)

    def setMode(self, value):
        """Set ``mode``. Returns self."""
        return self._set(mode=value)

    def getMode(self):
        """The value of ``mode``."""
        return self.getOrDefault(self.mode)


class HasModelDir(Params):
    """Mixin for Param ``model_dir``."""

    model_dir = Param(
        Params._dummy(),
        "model_dir",
        "Where fits without checkpoint_dir write their models (a path every node and the driver "
        "reach; None: a directory of the Spark application's temporary files, local masters only)",
        typeConverter=optional(TypeConverters.toString),
    )

    def setModelDir(self, value):
        """Set ``model_dir``. Returns self."""
        return self._set(model_dir=value)

    def getModelDir(self):
        """The value of ``model_dir``."""
        return self.getOrDefault(self.model_dir)


class HasVerbose(Params):
    """Mixin for Param ``verbose``."""

    verbose = Param(
        Params._dummy(),
        "verbose",
        "Keras' fit verbosity on the chief (0 silent, 1 progress bar, 2 one line per epoch)",
        typeConverter=TypeConverters.toInt,
    )

    def setVerbose(self, value):
        """Set ``verbose``. Returns self."""
        return self._set(verbose=value)

    def getVerbose(self):
        """The value of ``verbose``."""
        return self.getOrDefault(self.verbose)


class HasLogToMlflow(Params):
    """Mixin for Param ``log_to_mlflow``."""

    log_to_mlflow = Param(
        Params._dummy(),
        "log_to_mlflow",
        "Log Params, per-epoch metrics and the model to MLflow (also done whenever an MLflow run is "
        "active); needs the mlflow extra",
        typeConverter=TypeConverters.toBoolean,
    )

    def setLogToMlflow(self, value):
        """Set ``log_to_mlflow``. Returns self."""
        return self._set(log_to_mlflow=value)

    def getLogToMlflow(self):
        """The value of ``log_to_mlflow``."""
        return self.getOrDefault(self.log_to_mlflow)
