"""TensorFlowOnSpark's Spark ML Params: the ``Has*`` mixins, ``TFTypeConverters``, ``Namespace``, ``TFParams``.

Each ``HasX`` mixin is a ``pyspark.ml.param.Params`` subclass holding one Param (``HasNumPS``
and ``HasModelVersions`` hold two) with TensorFlowOnSpark's name and camel-case accessors, e.g.
``HasBatchSize`` gives ``batch_size`` with ``setBatchSize(value)`` (returns self) and
``getBatchSize()``. The mixins are written out as classes in :mod:`.shared_params`, from the one
Params table (:mod:`.param_table`), as PySpark writes its own shared Params.
:class:`sparkdl.ml.TFEstimator` and :class:`sparkdl.ml.TFModel` are built from them; a
custom stage can mix them in the same way. ``sparkdl.pipeline`` re-exports everything here
under TensorFlowOnSpark's import path.
"""

from __future__ import annotations

import argparse
import copy
from typing import Any

from pyspark.ml.param import Params

from .param_table import to_dict
from .shared_params import (  # TensorFlowOnSpark's mixins, made from the Params table
    HasBatchSize,
    HasClusterSize,
    HasEpochs,
    HasExportDir,
    HasFeedTimeout,
    HasGraceSecs,
    HasInputMapping,
    HasInputMode,
    HasMasterNode,
    HasMaxRestarts,
    HasModelDir,
    HasModelVersions,
    HasNumGPUs,
    HasNumPS,
    HasOutputMapping,
    HasProtocol,
    HasReaders,
    HasSignatureDefKey,
    HasStallTimeout,
    HasSteps,
    HasTagSet,
    HasTensorboard,
    HasTFRecordDir,
    HasValidationIndicatorCol,
)


class TFTypeConverters:
    """Param type converters Spark does not provide."""

    toDict = staticmethod(to_dict)  #: a copy of the value if it is a dict; TypeError otherwise


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


__all__ = [
    "TFTypeConverters",
    "Namespace",
    "TFParams",
    "HasBatchSize",
    "HasClusterSize",
    "HasEpochs",
    "HasExportDir",
    "HasFeedTimeout",
    "HasGraceSecs",
    "HasInputMapping",
    "HasInputMode",
    "HasMasterNode",
    "HasMaxRestarts",
    "HasModelDir",
    "HasModelVersions",
    "HasNumGPUs",
    "HasNumPS",
    "HasOutputMapping",
    "HasProtocol",
    "HasReaders",
    "HasSignatureDefKey",
    "HasStallTimeout",
    "HasSteps",
    "HasTFRecordDir",
    "HasTagSet",
    "HasTensorboard",
    "HasValidationIndicatorCol",
]
