"""Spark ML pipeline stages: ``TFEstimator``/``TFModel`` (TensorFlowOnSpark's) and ``KerasEstimator``/``KerasModel``.

``from sparkdl.ml import TFEstimator, TFModel`` (or TensorFlowOnSpark's ``sparkdl.pipeline``)::

    estimator = (TFEstimator(train_fn, {"lr": 0.01}).setInputMapping({"pixels": "image", "label": "label"})
                 .setClusterSize(2).setEpochs(5).setBatchSize(64).setExportDir("/models/digits"))
    model = estimator.fit(train_df)                  # InputMode.SPARK: the DataFrame is fed to the nodes
    scored = model.setOutputMapping({"output_0": "probabilities"}).transform(test_df)

The stages live in :mod:`sparkdl.spark_ml.tf_estimator` and :mod:`sparkdl.keras`.
"""

from .keras import KerasEstimator, KerasInputError, KerasModel
from .spark_ml.tf_estimator import TFEstimator, TFModel

__all__ = ["TFEstimator", "TFModel", "KerasEstimator", "KerasModel", "KerasInputError"]
