"""Spark ML pipeline stages: ``TFEstimator`` trains on a TFCluster, ``TFModel`` scores with it.

The Params keep TensorFlowOnSpark's names (``input_mapping``, ``output_mapping``,
``cluster_size``, ``num_ps``, ``batch_size``, ``epochs``, ``model_dir``, ``export_dir``,
``signature_def_key``, ``tag_set``, ...), with TensorFlowOnSpark's camel-case setters and getters
(``setInputMapping``, ``getBatchSize``...), built from the ``Has*`` mixins of ``sparkdl.params``
(their defaults: ``docs/params.md``, both from the Params table ``param_table.py``),
so pipelines port with a change of import::

    from sparkdl.ml import TFEstimator, TFModel      # or, as before: from sparkdl.pipeline import ...

    estimator = (TFEstimator(train_fn, {"lr": 0.01}).setInputMapping({"pixels": "image", "label": "label"})
                 .setClusterSize(2).setEpochs(5).setBatchSize(64).setExportDir("/models/digits"))
    model = estimator.fit(train_df)                  # InputMode.SPARK: the DataFrame is fed to the nodes
    scored = model.setOutputMapping({"output_0": "probabilities"}).transform(test_df)

``TFModel.transform`` appends the prediction columns to the DataFrame (Spark ML's convention;
TensorFlowOnSpark returned only the outputs) with sparkdl's inference UDF: one model per Python
worker, vectorised Arrow batches. It does not need a TFCluster, so a ``TFModel`` pointing at any
exported model is useful on its own. ``TFModel`` is ``DefaultParamsWritable``/``Readable``, so a
``PipelineModel`` holding it can be saved and loaded (its Params are saved; the model files stay
where ``export_dir`` points; ``tf_args`` are not saved). ``TFEstimator`` is not writable: its
``train_fn`` is code, not a Param.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

from pyspark.ml import Estimator, Model
from pyspark.ml.util import DefaultParamsReadable, DefaultParamsWritable

from ..inference import ModelVersions, Predictor
from ..storage import Storage, spark_conf
from .params import Namespace, TFParams
from .shared_params import TFEstimatorParams, TFModelParams

logger = logging.getLogger(__name__)


class TFModel(Model, TFParams, TFModelParams, DefaultParamsReadable, DefaultParamsWritable):
    """A Spark ML Model scoring DataFrames with an exported TensorFlow model.

    ``export_dir`` (else ``model_dir``) names a SavedModel directory or a ``.keras`` file readable
    by every executor. ``input_mapping`` is ``{column: model input}``, ``output_mapping``
    ``{model output: column}`` (empty: every output, a single one as ``prediction``);
    ``signature_def_key`` picks the SavedModel signature (default ``serving_default``) and
    ``tag_set`` its comma-separated tags. ``transform`` appends the output columns.

    Train and serve: with ``refresh_seconds`` set, ``export_dir`` is a versioned model directory
    (``base/<integer version>/``, see :mod:`sparkdl.model_versions`) and ``transform`` scores with
    its newest version, looking for a newer one at most every ``refresh_seconds`` per Python
    worker (also inside a running streaming query); ``version_column`` then appends a ``long``
    column naming the version that scored each row.
    """

    def __init__(self, tf_args: Any = None, tf_argv: list[str] | None = None, **params: Any):
        super().__init__()
        self.args = tf_args
        self.argv = tf_argv
        if params:
            self._set(**params)

    def predictor(self) -> Predictor:
        """The :class:`sparkdl.inference.Predictor` this model's Params describe."""
        location = self.getOrDefault("export_dir") or self.getOrDefault("model_dir")
        if not location:
            raise ValueError("TFModel needs export_dir (a SavedModel directory or .keras file) or model_dir")
        mapping = self.getOrDefault("input_mapping")
        if not mapping:
            raise ValueError("TFModel needs input_mapping: {DataFrame column: model input name}")
        tags = self.getOrDefault("tag_set")
        refresh = self.getOrDefault("refresh_seconds")
        return Predictor(
            ModelVersions(location, refresh) if refresh is not None else location,
            input_mapping=dict(sorted(mapping.items())),
            output_mapping=dict(self.getOrDefault("output_mapping")) or None,
            batch_size=self.getOrDefault("batch_size"),
            signature=self.getOrDefault("signature_def_key") or "serving_default",
            tags=[t.strip() for t in tags.split(",")] if tags else None,
            version_column=self.getOrDefault("version_column"),
        )

    def _transform(self, dataset):
        return self.predictor().with_predictions(dataset)


class TFEstimator(Estimator, TFParams, TFEstimatorParams):
    """A Spark ML Estimator that trains ``train_fn(args, ctx)`` on a TFCluster.

    ``fit(df)`` starts ``cluster_size`` nodes (``num_ps`` of them parameter servers) with
    ``TFCluster.run``; in ``InputMode.SPARK`` (the default) it feeds the ``input_mapping``
    columns of ``df`` (sorted by name, as TensorFlowOnSpark did) for ``epochs`` epochs with
    ``cluster.train``, and ``train_fn`` reads them with ``ctx.get_data_feed()``; in
    ``InputMode.TENSORFLOW`` ``train_fn`` reads its own data and ``df`` is not used. ``args``
    given to ``train_fn`` are ``tf_args`` with every Param set on them (``args.batch_size``,
    ``args.export_dir``...), or ``tf_argv`` when given. After ``shutdown``, the optional
    ``export_fn(args, argv)`` runs once on an executor. Returns a :class:`TFModel` carrying the
    shared Params (``input_mapping``, ``output_mapping``, ``batch_size``, ``model_dir``,
    ``export_dir``); ``train_fn`` should save the model there (chief only). With
    ``validation_indicator_col`` (Spark ML's convention), rows where that boolean column is true
    are fed as ``cluster.train``'s ``validation_data`` instead of training rows; the returned
    model's ``history`` holds the chief's metrics per epoch. ``master_node``,
    ``driver_ps_nodes``, ``num_gpus``, ``stall_timeout`` and ``max_restarts`` go to
    ``TFCluster.run``, ``feed_timeout`` to ``cluster.train`` and ``grace_secs`` to
    ``cluster.shutdown``. ``tf_args`` may also be an argv list (or a ``Namespace`` of one), which
    ``train_fn`` then receives as is, as with ``tf_argv``. Unlike ``TFModel``, the estimator is not
    saved with a pipeline: ``train_fn`` is code, not a Param.
    """

    def __init__(
        self,
        train_fn: Callable | None = None,
        tf_args: Any = None,
        tf_argv: list[str] | None = None,
        export_fn: Callable | None = None,
        **params: Any,
    ):
        super().__init__()
        self.train_fn = train_fn
        self.export_fn = export_fn
        self.args = tf_args
        self.argv = tf_argv
        if params:
            self._set(**params)

    def _fit(self, dataset):
        from ..driver import run as run_module

        if self.train_fn is None:
            raise ValueError("TFEstimator needs train_fn (a function train_fn(args, ctx))")
        args = self._merge_args(self.args)
        if args.protocol != "grpc":
            raise ValueError(f"protocol {args.protocol!r} is not supported; sparkdl uses grpc")
        if args.tfrecord_dir:
            raise ValueError(
                "tfrecord_dir is not supported: use InputMode.SPARK (the DataFrame is fed to the "
                "nodes) or let train_fn read files itself in InputMode.TENSORFLOW"
            )
        spark_mode = args.input_mode == run_module.InputMode.SPARK
        columns = sorted(self.getOrDefault("input_mapping"))
        if spark_mode:
            if not columns:
                raise ValueError(
                    "InputMode.SPARK needs input_mapping: {DataFrame column: model input} for the columns to feed"
                )
            missing = [c for c in columns if c not in dataset.columns]
            if missing:
                raise ValueError(
                    f"input_mapping names columns {missing} that the DataFrame does not have; its "
                    f"columns are {dataset.columns}"
                )
        spark = dataset.sparkSession  # classic or Spark Connect: TFCluster.run takes either
        logger.info("sparkdl TFEstimator: training with %s", args)
        argv = self._argv()
        cluster = run_module.run(
            spark,
            self.train_fn,
            argv or args,
            args.cluster_size,
            args.num_ps,
            args.tensorboard,
            args.input_mode,
            master_node=args.master_node,
            driver_ps_nodes=args.driver_ps_nodes,
            num_gpus=args.num_gpus,
            stall_timeout=args.stall_timeout,
            max_restarts=args.max_restarts,
        )
        history: dict = {}
        try:
            if spark_mode:
                train, validation = self._split(dataset, columns)
                history = cluster.train(train, args.epochs, feed_timeout=args.feed_timeout, validation_data=validation)
        finally:
            cluster.shutdown(grace_secs=args.grace_secs)
        if self.export_fn is not None:
            if not args.export_dir:
                raise ValueError("export_fn needs export_dir")
            export_fn = self.export_fn

            def export(_batches):  # one task on an executor, through DataFrame operations only
                export_fn(args, argv)
                yield from ()

            spark.range(0, 1, 1, numPartitions=1).mapInArrow(export, "done long").collect()
        location = args.export_dir or args.model_dir
        if location and not _exists(spark, location):
            logger.warning(
                "sparkdl TFEstimator: %s does not exist after training; train_fn (chief) or export_fn "
                "should save the model there for TFModel to use",
                location,
            )
        model = self._copyValues(TFModel(self.args, self.argv))
        model.history = history  # the chief's metrics per epoch (with ctx.progress_callback()); not saved
        return model

    def _argv(self) -> list | None:
        """The argv ``train_fn`` gets instead of merged args: ``tf_argv``, or ``tf_args`` given as a
        list (or a ``Namespace`` of one), as TensorFlowOnSpark took it."""
        if self.argv:
            return self.argv
        if isinstance(self.args, list):
            return self.args
        return getattr(self.args, "argv", None) if isinstance(self.args, Namespace) else None

    def _split(self, dataset, columns: list[str]):
        """The fed columns of the training rows, and of the validation rows (or None)."""
        indicator = self.getOrDefault("validation_indicator_col")
        if not indicator:
            return dataset.select(*columns), None
        if indicator not in dataset.columns:
            raise ValueError(
                f"validation_indicator_col names a column {indicator!r} that the DataFrame does not "
                f"have; its columns are {dataset.columns}"
            )
        from pyspark.sql import functions as F

        marked = F.coalesce(F.col(indicator).cast("boolean"), F.lit(False))
        return dataset.where(~marked).select(*columns), dataset.where(marked).select(*columns)


__all__ = ["TFEstimator", "TFModel"]


def _exists(spark, path: str) -> bool:
    """Whether the model path exists, as the driver sees it through the storage layer (any store);
    True when the store cannot be asked (the warning it feeds is advice, not a check)."""
    try:
        return Storage(spark_conf.from_spark(spark)).exists(path)
    except OSError:
        return True
