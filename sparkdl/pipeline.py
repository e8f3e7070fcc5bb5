"""TensorFlowOnSpark's ``pipeline`` module: ``from sparkdl.pipeline import TFEstimator, TFModel`` works.

The stages are :class:`sparkdl.ml.TFEstimator` and :class:`sparkdl.ml.TFModel`; the ``Has*``
Param mixins, ``TFTypeConverters``, ``Namespace`` and ``TFParams`` come from
:mod:`sparkdl.params`. TensorFlowOnSpark's helpers ``single_node_env(args)`` and
``yield_batch(iterable, batch_size, num_tensors)`` are here too; ``get_meta_graph_def`` (TF 1
only) is not.
"""

from .spark_ml.params import *  # noqa: F401,F403 - TensorFlowOnSpark's names, under its module
from .spark_ml.params import __all__ as _PARAMS
from .spark_ml.tf_estimator import TFEstimator, TFModel
from .spark_ml.tfos_pipeline import single_node_env, yield_batch

__all__ = ["TFEstimator", "TFModel", *_PARAMS, "single_node_env", "yield_batch"]
