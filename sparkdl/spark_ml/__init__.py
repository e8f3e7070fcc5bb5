"""Spark ML stages and their Params: TensorFlowOnSpark's ``TFEstimator``/``TFModel``, and every stage's Params.

:mod:`.tf_estimator` (the stages), :mod:`.param_table` (every Param of every stage, sparkdl.keras's
too, written once), :mod:`.shared_params` (the ``Has*`` mixins and each stage's Params, generated
from the table by ``scripts/generate_params.py``), :mod:`.params` (TensorFlowOnSpark's Params
module: its mixins, ``TFParams``, ``Namespace``, ``TFTypeConverters``), :mod:`.tfos_pipeline`
(TensorFlowOnSpark's ``pipeline`` helpers). Users import them from :mod:`sparkdl.ml`,
:mod:`sparkdl.pipeline` and :mod:`sparkdl.params`.
"""
