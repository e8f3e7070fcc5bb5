"""The Params of ``KerasEstimator`` and ``KerasModel``, and Spark ML's camel-case names for them.

Each Param is defined once in sparkdl's Params table (:mod:`sparkdl.spark_ml.param_table`), with
the Params of TensorFlowOnSpark's stages (``batch_size``, ``epochs``, ``num_gpus``,
``max_restarts`` and ``model_dir`` are shared with ``TFEstimator``); the ``HasX`` mixins and the
stages' ``KerasEstimatorParams``/``KerasModelParams`` (which set the defaults) are generated from
it into :mod:`sparkdl.spark_ml.shared_params` and re-exported here. Values are only converted
there (a single column name becomes a list, numbers become numbers); whether they make sense
together is checked by ``checks.py`` when ``fit`` starts.
"""

from __future__ import annotations

from ..spark_ml.param_table import optional
from ..spark_ml.shared_params import (
    HasFeatureCols,
    HasLabelCols,
    HasLearningRate,
    HasLoss,
    HasMetrics,
    HasModel,
    HasModelPath,
    HasModelStructure,
    HasOptimizer,
    HasPredictionCols,
    HasSampleWeightCol,
    HasValidation,
    KerasEstimatorParams,
    KerasModelParams,
)

#: Spark ML's camel-case names of the output-column Params, accepted by the constructors.
SPARK_ML_ALIASES = {
    "predictionCol": "prediction_col",
    "probabilityCol": "probability_col",
    "rawPredictionCol": "raw_prediction_col",
}


def spark_ml_names(params: dict) -> dict:
    """Constructor keyword arguments with Spark ML's names (``predictionCol``...) renamed to ours."""
    return {SPARK_ML_ALIASES.get(name, name): value for name, value in params.items()}


__all__ = [
    "HasFeatureCols",
    "HasLabelCols",
    "HasLearningRate",
    "HasLoss",
    "HasMetrics",
    "HasModel",
    "HasModelPath",
    "HasModelStructure",
    "HasOptimizer",
    "HasPredictionCols",
    "HasSampleWeightCol",
    "HasValidation",
    "KerasEstimatorParams",
    "KerasModelParams",
    "SPARK_ML_ALIASES",
    "optional",
    "spark_ml_names",
]
