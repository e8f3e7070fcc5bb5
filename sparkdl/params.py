"""TensorFlowOnSpark's Spark ML Params: the ``Has*`` mixins, ``TFTypeConverters``, ``Namespace``, ``TFParams``.

Each ``HasX`` mixin is a ``pyspark.ml.param.Params`` subclass holding one Param (``HasNumPS``
holds two) with TensorFlowOnSpark's name and camel-case accessors, e.g. ``HasBatchSize`` gives
``batch_size`` with ``setBatchSize(value)`` (returns self) and ``getBatchSize()``.
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


def _optional(converter: Callable) -> Callable:
    def convert(value: Any) -> Any:
        return None if value is None else converter(value)

    convert.__name__ = f"optional_{converter.__name__}"
    return convert


_int, _float = TypeConverters.toInt, TypeConverters.toFloat
_bool, _str = TypeConverters.toBoolean, TypeConverters.toString
_CAMEL = {"num_ps": "NumPS", "tfrecord_dir": "TFRecordDir", "driver_ps_nodes": "DriverPSNodes", "num_gpus": "NumGPUs"}


def _mixin(class_name: str, *params: tuple[str, str, Callable]) -> type:
    """A Params mixin holding ``params`` (name, doc, converter), with ``setX``/``getX`` for each."""
    namespace: dict[str, Any] = {
        "__module__": __name__,
        "__qualname__": class_name,
        "__doc__": "Mixin for Param(s) " + ", ".join(f"``{n}`` ({d})" for n, d, _ in params) + ".",
    }
    for name, doc, converter in params:
        camel = _CAMEL.get(name) or "".join(part.capitalize() for part in name.split("_"))

        def setter(self, value, _name=name):
            return self._set(**{_name: value})

        def getter(self, _name=name):
            return self.getOrDefault(_name)

        setter.__name__, getter.__name__ = f"set{camel}", f"get{camel}"
        setter.__doc__ = f"Set ``{name}``: {doc}. Returns self."
        getter.__doc__ = f"The value of ``{name}``: {doc}."
        namespace[name] = Param(Params._dummy(), name, doc, typeConverter=converter)
        namespace[setter.__name__], namespace[getter.__name__] = setter, getter
    return type(class_name, (Params,), namespace)


HasBatchSize = _mixin("HasBatchSize", ("batch_size", "Number of records per batch", _int))
HasClusterSize = _mixin("HasClusterSize", ("cluster_size", "Number of nodes in the cluster", _int))
HasEpochs = _mixin("HasEpochs", ("epochs", "Number of epochs to train", _int))
HasGraceSecs = _mixin(
    "HasGraceSecs",
    ("grace_secs", "Seconds ps/evaluator nodes may keep running once the training nodes are done", _float),
)
HasInputMapping = _mixin(
    "HasInputMapping", ("input_mapping", "Mapping of input DataFrame column to input tensor", TFTypeConverters.toDict)
)
HasInputMode = _mixin("HasInputMode", ("input_mode", "Input data feeding mode (0=TENSORFLOW, 1=SPARK)", _int))
HasMasterNode = _mixin(
    "HasMasterNode", ("master_node", "Job name of the master/chief node ('chief', 'master' or None)", _optional(_str))
)
HasModelDir = _mixin("HasModelDir", ("model_dir", "Path to save/load model checkpoints", _optional(_str)))
HasNumPS = _mixin(
    "HasNumPS",
    ("num_ps", "Number of PS nodes in cluster", _int),
    ("driver_ps_nodes", "Run the PS nodes on the driver", _bool),
)
HasOutputMapping = _mixin(
    "HasOutputMapping",
    ("output_mapping", "Mapping of output tensor to output DataFrame column", TFTypeConverters.toDict),
)
HasProtocol = _mixin("HasProtocol", ("protocol", "Network protocol for Tensorflow (grpc only)", _str))
HasReaders = _mixin(
    "HasReaders", ("readers", "Number of reader threads (accepted for TFoS compatibility; unused)", _int)
)
HasSteps = _mixin("HasSteps", ("steps", "Maximum number of steps to train (passed to train_fn as args.steps)", _int))
HasTensorboard = _mixin("HasTensorboard", ("tensorboard", "Launch tensorboard process", _bool))
HasTFRecordDir = _mixin(
    "HasTFRecordDir",
    ("tfrecord_dir", "Not supported by sparkdl (TFoS exported the DataFrame as TFRecords)", _optional(_str)),
)
HasExportDir = _mixin(
    "HasExportDir", ("export_dir", "Directory (or .keras file) of the exported model", _optional(_str))
)
HasSignatureDefKey = _mixin(
    "HasSignatureDefKey", ("signature_def_key", "Identifier for a specific saved_model signature", _optional(_str))
)
HasTagSet = _mixin(
    "HasTagSet", ("tag_set", "Comma-delimited list of tags identifying a saved_model metagraph", _optional(_str))
)
# sparkdl's additions: TFCluster.run / cluster.train arguments settable from an estimator.
HasFeedTimeout = _mixin(
    "HasFeedTimeout",
    ("feed_timeout", "Seconds a node may go without reading its feed before cluster.train fails", _float),
)
HasStallTimeout = _mixin(
    "HasStallTimeout",
    ("stall_timeout", "Seconds a node may report no progress before it is stopped (None: never)", _optional(_float)),
)
HasMaxRestarts = _mixin(
    "HasMaxRestarts", ("max_restarts", "How many times a failed cluster is relaunched (0: never)", _int)
)
HasNumGPUs = _mixin(
    "HasNumGPUs",
    ("num_gpus", "GPUs per node (None: Spark's GPU resources, else one if the host has GPUs)", _optional(_int)),
)
HasValidationIndicatorCol = _mixin(
    "HasValidationIndicatorCol",
    (
        "validation_indicator_col",
        "Name of a boolean column marking the rows fed as validation data (read "
        "with feed.as_dataset(..., split='validation')); the other rows are the training data",
        _optional(_str),
    ),
)


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
