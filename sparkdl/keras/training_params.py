"""The Params about how ``KerasEstimator`` trains (batch size, epochs, nodes, callbacks, run store, tracking).

Defined once in sparkdl's Params table (:mod:`sparkdl.spark_ml.param_table`) and generated into
:mod:`sparkdl.spark_ml.shared_params`; re-exported here under their earlier import path.
"""

from __future__ import annotations

from ..spark_ml.param_table import DEFAULT_SEED
from ..spark_ml.shared_params import (
    HasBatchSize,
    HasCallbacks,
    HasEpochs,
    HasLogToMlflow,
    HasMaxRestarts,
    HasModelDir,
    HasNumGPUs,
    HasNumWorkers,
    HasRunStore,
    HasSeed,
    HasShuffle,
    HasVerbose,
)

__all__ = [
    "DEFAULT_SEED",
    "HasBatchSize",
    "HasCallbacks",
    "HasEpochs",
    "HasLogToMlflow",
    "HasMaxRestarts",
    "HasModelDir",
    "HasNumGPUs",
    "HasNumWorkers",
    "HasRunStore",
    "HasSeed",
    "HasShuffle",
    "HasVerbose",
]
