"""TensorFlowOnSpark's Spark ML Params: the ``Has*`` mixins, ``TFTypeConverters``, ``Namespace``, ``TFParams``.

``HasBatchSize`` gives a stage ``batch_size`` with ``setBatchSize(value)`` and ``getBatchSize()``;
a custom stage mixes them in as :class:`sparkdl.ml.TFEstimator` does. They are defined in
:mod:`sparkdl.spark_ml.params`.
"""

from .spark_ml.params import *  # noqa: F401,F403 - the public names, under TensorFlowOnSpark's module
from .spark_ml.params import __all__ as __all__
