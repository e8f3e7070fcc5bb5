"""sparkdl: distributed TensorFlow on Apache Spark, compatible with TensorFlowOnSpark's API.

``from sparkdl import TFCluster, TFNode`` works as TensorFlowOnSpark's imports did. Importing
sparkdl never imports TensorFlow: only the node processes do, after their environment
(GPUs, TF_CONFIG, Keras choice) is final.

The package root holds only faces, the import paths users write: TensorFlowOnSpark's modules
(``TFCluster``, ``TFNode``, ``TFParallel``, ``compat``, ``util``, ``gpu_info``, ``dfutil``,
``pipeline``, ``params``) and sparkdl's own (``ml``, ``model_versions``); each re-exports a room.
The rooms: ``driver/`` (the cluster as the driver runs it), ``node/`` (a TF node's processes),
``feed/`` (the data plane), ``inference/`` (scoring without a cluster), ``transport/`` (the wire),
``keras/`` (Keras on Spark ML), ``spark_ml/`` (TensorFlowOnSpark's stages and the Params),
``columns/`` (one column from Arrow to a tensor and back) and ``common/`` (errors, time limits,
roles, paths, GPUs: what every room may use). docs/architecture.md is the map.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from .common.errors import (
    ClusterError,
    ClusterStateError,
    FeedDataError,
    FeedError,
    InputModeError,
    NodeFailure,
    NodeStalled,
    PreflightError,
    ReservationTimeout,
    ResultsError,
    ShutdownTimeout,
    SparkDLError,
    TrainingStopped,
)

#: The single place sparkdl's version is written (pyproject.toml reads it from here).
__version__ = "0.1.0"
#: The name sparkdl is published under (``pip install sparkdl-tf``): PyPI's ``sparkdl`` is another
#: project. The import name stays ``sparkdl``.
__distribution__ = "sparkdl-tf"

if TYPE_CHECKING:
    from . import TFCluster, TFNode, TFParallel
    from .driver.arguments import InputMode

#: The driver-side faces, imported when first used (PEP 562): a node's processes import this
#: package for ``sparkdl.node`` alone, and so never load the driver side, PySpark or pandas.
_LAZY = {
    "TFCluster": (".TFCluster", None),
    "TFNode": (".TFNode", None),
    "TFParallel": (".TFParallel", None),
    "InputMode": (".driver.arguments", "InputMode"),
}


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module_name, attribute = _LAZY[name]
    module = importlib.import_module(module_name, __name__)
    value = module if attribute is None else getattr(module, attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


# Every error sparkdl raises for users to catch derives from SparkDLError (those that are also a
# ValueError, TypeError or ConnectionError keep that base too).
__all__ = [
    "TFCluster",
    "TFNode",
    "TFParallel",
    "InputMode",
    "ClusterError",
    "ClusterStateError",
    "InputModeError",
    "NodeFailure",
    "NodeStalled",
    "PreflightError",
    "ReservationTimeout",
    "ShutdownTimeout",
    "TrainingStopped",
    "SparkDLError",
    "FeedError",
    "FeedDataError",
    "ResultsError",
    "__version__",
]
