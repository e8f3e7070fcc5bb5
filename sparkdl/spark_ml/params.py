"""TensorFlowOnSpark's Spark ML Params: the ``Has*`` mixins, ``TFTypeConverters``, ``Namespace``, ``TFParams``.

Each ``HasX`` mixin is a ``pyspark.ml.param.Params`` subclass holding one Param (``HasNumPS``
and ``HasModelVersions`` hold two) with TensorFlowOnSpark's name and camel-case accessors, e.g.
``HasBatchSize`` gives ``batch_size`` with ``setBatchSize(value)`` (returns self) and
``getBatchSize()``, written out as PySpark writes its own shared Params.
:class:`sparkdl.ml.TFEstimator` and :class:`sparkdl.ml.TFModel` are built from them; a
custom stage can mix them in the same way. ``sparkdl.pipeline`` re-exports everything here
under TensorFlowOnSpark's import path.
"""

from __future__ import annotations

import argparse
import copy
from typing import Any, Callable

from pyspark.ml.param import Param, Params, TypeConverters


class TFTypeConverters:
    """Param type converters Spark does not provide."""

    @staticmethod
    def toDict(value: Any) -> dict:  # noqa: N802 - TensorFlowOnSpark's name
        """A copy of ``value`` if it is a dict; TypeError otherwise."""
        if isinstance(value, dict):
            return dict(value)
        raise TypeError(f"expected a dict, got {type(value).__name__}: {value!r}")


def _param(name: str, doc: str, converter: Callable) -> Param:
    """A mixin's Param (declared as PySpark declares its own shared Params)."""
    return Param(Params._dummy(), name, doc, typeConverter=converter)


def _optional(converter: Callable) -> Callable:
    """``converter``, letting None through (a Param whose value may be None)."""

    def convert(value: Any) -> Any:
        return None if value is None else converter(value)

    convert.__name__ = f"optional_{converter.__name__}"
    return convert


_int, _float = TypeConverters.toInt, TypeConverters.toFloat
_bool, _str = TypeConverters.toBoolean, TypeConverters.toString

# -- TensorFlowOnSpark's Params --


class HasBatchSize(Params):
    """Mixin for Param ``batch_size``: number of records per batch."""

    batch_size = _param("batch_size", "Number of records per batch", _int)

    def setBatchSize(self, value):
        """Set ``batch_size``. Returns self."""
        return self._set(batch_size=value)

    def getBatchSize(self):
        """The value of ``batch_size``."""
        return self.getOrDefault(self.batch_size)


class HasClusterSize(Params):
    """Mixin for Param ``cluster_size``: number of nodes in the cluster."""

    cluster_size = _param("cluster_size", "Number of nodes in the cluster", _int)

    def setClusterSize(self, value):
        """Set ``cluster_size``. Returns self."""
        return self._set(cluster_size=value)

    def getClusterSize(self):
        """The value of ``cluster_size``."""
        return self.getOrDefault(self.cluster_size)


class HasEpochs(Params):
    """Mixin for Param ``epochs``: number of epochs to train."""

    epochs = _param("epochs", "Number of epochs to train", _int)

    def setEpochs(self, value):
        """Set ``epochs``. Returns self."""
        return self._set(epochs=value)

    def getEpochs(self):
        """The value of ``epochs``."""
        return self.getOrDefault(self.epochs)


class HasGraceSecs(Params):
    """Mixin for Param ``grace_secs``: seconds ps/evaluator nodes may keep running once the training nodes are done."""

    grace_secs = _param(
        "grace_secs", "Seconds ps/evaluator nodes may keep running once the training nodes are done", _float
    )

    def setGraceSecs(self, value):
        """Set ``grace_secs``. Returns self."""
        return self._set(grace_secs=value)

    def getGraceSecs(self):
        """The value of ``grace_secs``."""
        return self.getOrDefault(self.grace_secs)


class HasInputMapping(Params):
    """Mixin for Param ``input_mapping``: mapping of input DataFrame column to input tensor."""

    input_mapping = _param(
        "input_mapping", "Mapping of input DataFrame column to input tensor", TFTypeConverters.toDict
    )

    def setInputMapping(self, value):
        """Set ``input_mapping``. Returns self."""
        return self._set(input_mapping=value)

    def getInputMapping(self):
        """The value of ``input_mapping``."""
        return self.getOrDefault(self.input_mapping)


class HasInputMode(Params):
    """Mixin for Param ``input_mode``: input data feeding mode (0=TENSORFLOW, 1=SPARK)."""

    input_mode = _param("input_mode", "Input data feeding mode (0=TENSORFLOW, 1=SPARK)", _int)

    def setInputMode(self, value):
        """Set ``input_mode``. Returns self."""
        return self._set(input_mode=value)

    def getInputMode(self):
        """The value of ``input_mode``."""
        return self.getOrDefault(self.input_mode)


class HasMasterNode(Params):
    """Mixin for Param ``master_node``: job name of the master/chief node ('chief', 'master' or None)."""

    master_node = _param(
        "master_node", "Job name of the master/chief node ('chief', 'master' or None)", _optional(_str)
    )

    def setMasterNode(self, value):
        """Set ``master_node``. Returns self."""
        return self._set(master_node=value)

    def getMasterNode(self):
        """The value of ``master_node``."""
        return self.getOrDefault(self.master_node)


class HasModelDir(Params):
    """Mixin for Param ``model_dir``: path to save/load model checkpoints."""

    model_dir = _param("model_dir", "Path to save/load model checkpoints", _optional(_str))

    def setModelDir(self, value):
        """Set ``model_dir``. Returns self."""
        return self._set(model_dir=value)

    def getModelDir(self):
        """The value of ``model_dir``."""
        return self.getOrDefault(self.model_dir)


class HasNumPS(Params):
    """Mixin for Params ``num_ps`` (number of PS nodes) and ``driver_ps_nodes`` (run them on the driver)."""

    num_ps = _param("num_ps", "Number of PS nodes in cluster", _int)
    driver_ps_nodes = _param("driver_ps_nodes", "Run the PS nodes on the driver", _bool)

    def setNumPS(self, value):
        """Set ``num_ps``. Returns self."""
        return self._set(num_ps=value)

    def getNumPS(self):
        """The value of ``num_ps``."""
        return self.getOrDefault(self.num_ps)

    def setDriverPSNodes(self, value):
        """Set ``driver_ps_nodes``. Returns self."""
        return self._set(driver_ps_nodes=value)

    def getDriverPSNodes(self):
        """The value of ``driver_ps_nodes``."""
        return self.getOrDefault(self.driver_ps_nodes)


class HasOutputMapping(Params):
    """Mixin for Param ``output_mapping``: mapping of output tensor to output DataFrame column."""

    output_mapping = _param(
        "output_mapping", "Mapping of output tensor to output DataFrame column", TFTypeConverters.toDict
    )

    def setOutputMapping(self, value):
        """Set ``output_mapping``. Returns self."""
        return self._set(output_mapping=value)

    def getOutputMapping(self):
        """The value of ``output_mapping``."""
        return self.getOrDefault(self.output_mapping)


class HasProtocol(Params):
    """Mixin for Param ``protocol``: network protocol for Tensorflow (grpc only)."""

    protocol = _param("protocol", "Network protocol for Tensorflow (grpc only)", _str)

    def setProtocol(self, value):
        """Set ``protocol``. Returns self."""
        return self._set(protocol=value)

    def getProtocol(self):
        """The value of ``protocol``."""
        return self.getOrDefault(self.protocol)


class HasReaders(Params):
    """Mixin for Param ``readers``: number of reader threads (accepted for TFoS compatibility; unused)."""

    readers = _param("readers", "Number of reader threads (accepted for TFoS compatibility; unused)", _int)

    def setReaders(self, value):
        """Set ``readers``. Returns self."""
        return self._set(readers=value)

    def getReaders(self):
        """The value of ``readers``."""
        return self.getOrDefault(self.readers)


class HasSteps(Params):
    """Mixin for Param ``steps``: maximum number of steps to train (passed to train_fn as args.steps)."""

    steps = _param("steps", "Maximum number of steps to train (passed to train_fn as args.steps)", _int)

    def setSteps(self, value):
        """Set ``steps``. Returns self."""
        return self._set(steps=value)

    def getSteps(self):
        """The value of ``steps``."""
        return self.getOrDefault(self.steps)


class HasTensorboard(Params):
    """Mixin for Param ``tensorboard``: launch tensorboard process."""

    tensorboard = _param("tensorboard", "Launch tensorboard process", _bool)

    def setTensorboard(self, value):
        """Set ``tensorboard``. Returns self."""
        return self._set(tensorboard=value)

    def getTensorboard(self):
        """The value of ``tensorboard``."""
        return self.getOrDefault(self.tensorboard)


class HasTFRecordDir(Params):
    """Mixin for Param ``tfrecord_dir``: not supported by sparkdl (TFoS exported the DataFrame as TFRecords)."""

    tfrecord_dir = _param(
        "tfrecord_dir", "Not supported by sparkdl (TFoS exported the DataFrame as TFRecords)", _optional(_str)
    )

    def setTFRecordDir(self, value):
        """Set ``tfrecord_dir``. Returns self."""
        return self._set(tfrecord_dir=value)

    def getTFRecordDir(self):
        """The value of ``tfrecord_dir``."""
        return self.getOrDefault(self.tfrecord_dir)


class HasExportDir(Params):
    """Mixin for Param ``export_dir``: directory (or .keras file) of the exported model."""

    export_dir = _param("export_dir", "Directory (or .keras file) of the exported model", _optional(_str))

    def setExportDir(self, value):
        """Set ``export_dir``. Returns self."""
        return self._set(export_dir=value)

    def getExportDir(self):
        """The value of ``export_dir``."""
        return self.getOrDefault(self.export_dir)


class HasSignatureDefKey(Params):
    """Mixin for Param ``signature_def_key``: identifier for a specific saved_model signature."""

    signature_def_key = _param("signature_def_key", "Identifier for a specific saved_model signature", _optional(_str))

    def setSignatureDefKey(self, value):
        """Set ``signature_def_key``. Returns self."""
        return self._set(signature_def_key=value)

    def getSignatureDefKey(self):
        """The value of ``signature_def_key``."""
        return self.getOrDefault(self.signature_def_key)


class HasTagSet(Params):
    """Mixin for Param ``tag_set``: comma-delimited list of tags identifying a saved_model metagraph."""

    tag_set = _param("tag_set", "Comma-delimited list of tags identifying a saved_model metagraph", _optional(_str))

    def setTagSet(self, value):
        """Set ``tag_set``. Returns self."""
        return self._set(tag_set=value)

    def getTagSet(self):
        """The value of ``tag_set``."""
        return self.getOrDefault(self.tag_set)


# -- sparkdl's additions: TFCluster.run / cluster.train / TFModel settings --


class HasFeedTimeout(Params):
    """Mixin for Param ``feed_timeout``: seconds a node may go without reading its feed before cluster.train fails."""

    feed_timeout = _param(
        "feed_timeout", "Seconds a node may go without reading its feed before cluster.train fails", _float
    )

    def setFeedTimeout(self, value):
        """Set ``feed_timeout``. Returns self."""
        return self._set(feed_timeout=value)

    def getFeedTimeout(self):
        """The value of ``feed_timeout``."""
        return self.getOrDefault(self.feed_timeout)


class HasStallTimeout(Params):
    """Mixin for Param ``stall_timeout``: seconds a node may report no progress before it is stopped (None: never)."""

    stall_timeout = _param(
        "stall_timeout", "Seconds a node may report no progress before it is stopped (None: never)", _optional(_float)
    )

    def setStallTimeout(self, value):
        """Set ``stall_timeout``. Returns self."""
        return self._set(stall_timeout=value)

    def getStallTimeout(self):
        """The value of ``stall_timeout``."""
        return self.getOrDefault(self.stall_timeout)


class HasMaxRestarts(Params):
    """Mixin for Param ``max_restarts``: how many times a failed cluster is relaunched (0: never)."""

    max_restarts = _param("max_restarts", "How many times a failed cluster is relaunched (0: never)", _int)

    def setMaxRestarts(self, value):
        """Set ``max_restarts``. Returns self."""
        return self._set(max_restarts=value)

    def getMaxRestarts(self):
        """The value of ``max_restarts``."""
        return self.getOrDefault(self.max_restarts)


class HasNumGPUs(Params):
    """Mixin for Param ``num_gpus``: gPUs per node (None: Spark's GPU resources, else one if the host has GPUs)."""

    num_gpus = _param(
        "num_gpus", "GPUs per node (None: Spark's GPU resources, else one if the host has GPUs)", _optional(_int)
    )

    def setNumGPUs(self, value):
        """Set ``num_gpus``. Returns self."""
        return self._set(num_gpus=value)

    def getNumGPUs(self):
        """The value of ``num_gpus``."""
        return self.getOrDefault(self.num_gpus)


class HasValidationIndicatorCol(Params):
    """Mixin for Param ``validation_indicator_col``: a boolean column marking the validation rows."""

    validation_indicator_col = _param(
        "validation_indicator_col",
        "Name of a boolean column marking the rows fed as validation data (read "
        "with feed.as_dataset(..., split='validation')); the other rows are the training data",
        _optional(_str),
    )

    def setValidationIndicatorCol(self, value):
        """Set ``validation_indicator_col``. Returns self."""
        return self._set(validation_indicator_col=value)

    def getValidationIndicatorCol(self):
        """The value of ``validation_indicator_col``."""
        return self.getOrDefault(self.validation_indicator_col)


class HasModelVersions(Params):
    """Mixin for Params ``refresh_seconds`` and ``version_column``: scoring a versioned model directory."""

    refresh_seconds = _param(
        "refresh_seconds",
        "When set, export_dir is a versioned model directory (base/<integer version>/): score with its "
        "newest version, looking for a newer one at most this often (seconds)",
        _optional(_float),
    )
    version_column = _param(
        "version_column", "With refresh_seconds: a column naming the version that scored each row", _optional(_str)
    )

    def setRefreshSeconds(self, value):
        """Set ``refresh_seconds``. Returns self."""
        return self._set(refresh_seconds=value)

    def getRefreshSeconds(self):
        """The value of ``refresh_seconds``."""
        return self.getOrDefault(self.refresh_seconds)

    def setVersionColumn(self, value):
        """Set ``version_column``. Returns self."""
        return self._set(version_column=value)

    def getVersionColumn(self):
        """The value of ``version_column``."""
        return self.getOrDefault(self.version_column)


class Namespace:
    """An argparse-style namespace built from a dict, an ``argparse.Namespace``, another
    ``Namespace`` or an argv list (kept as ``argv``; iterating gives its items, else the names)."""

    argv: list | None = None

    def __init__(self, d: Any):
        if isinstance(d, list):
            self.argv = d
        elif isinstance(d, dict):
            self.__dict__.update(d)
        elif isinstance(d, (argparse.Namespace, Namespace)):
            self.__dict__.update(vars(d))
        else:
            raise TypeError(f"Namespace needs a dict, a list, or a namespace, got {type(d).__name__}: {d!r}")

    def __iter__(self):
        return iter(self.argv) if self.argv else iter(list(self.__dict__))

    def __contains__(self, item: Any) -> bool:
        return item in (self.argv if self.argv else self.__dict__)

    def __repr__(self) -> str:
        if self.argv:
            return repr(self.argv)
        return f"{type(self).__name__}(" + ", ".join(f"{k}={self.__dict__[k]!r}" for k in sorted(self.__dict__)) + ")"

    def __eq__(self, other: Any) -> bool:
        if self.argv:
            return self.argv == other
        return isinstance(other, (Namespace, argparse.Namespace)) and vars(self) == vars(other)

    __hash__ = None  # mutable, like argparse.Namespace


class TFParams(Params):
    """Mixin that merges a stage's ``tf_args`` (``args``) with its Param values."""

    args: Any = None  #: the stage's ``tf_args``, which ``merge_args_params`` merges with its Params

    def merge_args_params(self) -> argparse.Namespace | Namespace:
        """A copy of ``self.args`` with every Param's value set on it (``args.batch_size``, ...)."""
        return self._merge_args(self.args)

    def _merge_args(self, tf_args: Any) -> argparse.Namespace | Namespace:
        """``tf_args`` (dict or namespace) copied, with every Param's value set on it (as TFoS did)."""
        if tf_args is None or isinstance(tf_args, list):
            merged = argparse.Namespace()
        elif isinstance(tf_args, dict):
            merged = argparse.Namespace(**tf_args)
        else:
            merged = copy.copy(tf_args)
        for param in self.params:
            setattr(merged, param.name, self.getOrDefault(param))
        return merged


__all__ = ["TFTypeConverters", "Namespace", "TFParams"] + sorted(n for n in dir() if n.startswith("Has"))
