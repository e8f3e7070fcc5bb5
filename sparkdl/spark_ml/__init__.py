"""Spark ML stages and their Params: TensorFlowOnSpark's ``TFEstimator``/``TFModel``.

:mod:`.tf_estimator` (the stages), :mod:`.params` (the ``Has*`` Params), :mod:`.tfos_pipeline`
(TensorFlowOnSpark's ``pipeline`` helpers). Users import them from :mod:`sparkdl.ml`,
:mod:`sparkdl.pipeline` and :mod:`sparkdl.params`.
"""
