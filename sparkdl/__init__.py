"""sparkdl: distributed TensorFlow on Apache Spark, compatible with TensorFlowOnSpark's API.

``from sparkdl import TFCluster, TFNode`` works as TensorFlowOnSpark's imports did. Importing
sparkdl never imports TensorFlow: only the node processes do, after their environment
(GPUs, TF_CONFIG, Keras choice) is final.

The package root holds what users import: TensorFlowOnSpark's modules at their import paths
(``TFCluster``, ``TFNode``, ``TFParallel``, ``compat``, ``util``, ``gpu_info``, ``dfutil``,
``pipeline``, ``params``), sparkdl's own (``ml``, ``model_versions``, ``errors``) and what every
room shares (``timeouts``, ``roles``, ``gpus``, ``paths``, ``arrow_numpy``). Everything else is in
a room: ``driver/`` (the cluster as the driver runs it), ``node/`` (a TF node's processes),
``feed/`` (the data plane), ``inference/`` (scoring without a cluster) and ``transport/`` (the
wire). docs/architecture.md is the map.
"""

from . import TFCluster, TFNode, TFParallel
from ._version import __version__
from .driver.arguments import InputMode
from .errors import (
    ClusterError,
    FeedDataError,
    FeedError,
    NodeFailure,
    NodeStalled,
    PreflightError,
    ReservationTimeout,
    ResultsError,
    ShutdownTimeout,
    SparkDLError,
)

# Every error sparkdl raises for users to catch derives from SparkDLError (those that are also a
# ValueError, TypeError or ConnectionError keep that base too).
__all__ = [
    "TFCluster",
    "TFNode",
    "TFParallel",
    "InputMode",
    "ClusterError",
    "NodeFailure",
    "NodeStalled",
    "PreflightError",
    "ReservationTimeout",
    "ShutdownTimeout",
    "SparkDLError",
    "FeedError",
    "FeedDataError",
    "ResultsError",
    "__version__",
]
