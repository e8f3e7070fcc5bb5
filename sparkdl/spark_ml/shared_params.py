"""sparkdl's Spark ML Params as classes: a ``HasX`` mixin per Param or group, ``<Stage>Params`` per stage.

DO NOT EDIT: written by ``scripts/generate_params.py`` from :mod:`sparkdl.spark_ml.param_table`,
where each Param is defined once (edit the table, run the script; a unit test fails while this
file is stale).

A mixin holds its Params (TensorFlowOnSpark's snake_case names) with Spark ML's camel-case
accessors: ``HasBatchSize`` gives ``batch_size``, ``setBatchSize(value)`` (returns self) and
``getBatchSize()``. The mixins set no defaults, so a custom stage mixes them in and chooses its
own; ``TFEstimatorParams`` and the other stage classes hold a stage's mixins and set its defaults.
"""

from __future__ import annotations

from typing import Any

from pyspark.ml.param import Param, Params, TypeConverters

from .param_table import (
    as_is,
    optional_as_is,
    optional_float,
    optional_int,
    optional_list_string,
    optional_string,
    to_callbacks,
    to_columns,
    to_dict,
    to_output_kind,
    to_validation,
)


class HasInputMapping(Params):
    """Mixin for Param ``input_mapping``: Mapping of input DataFrame column to input tensor."""

    input_mapping: Param[dict] = Param(
        Params._dummy(),
        "input_mapping",
        "Mapping of input DataFrame column to input tensor",
        typeConverter=to_dict,
    )

    def setInputMapping(self, value):
        """Set ``input_mapping``. Returns self."""
        return self._set(input_mapping=value)

    def getInputMapping(self) -> dict:
        """The value of ``input_mapping``."""
        return self.getOrDefault(self.input_mapping)


class HasOutputMapping(Params):
    """Mixin for Param ``output_mapping``: Mapping of output tensor to output DataFrame column."""

    output_mapping: Param[dict] = Param(
        Params._dummy(),
        "output_mapping",
        "Mapping of output tensor to output DataFrame column",
        typeConverter=to_dict,
    )

    def setOutputMapping(self, value):
        """Set ``output_mapping``. Returns self."""
        return self._set(output_mapping=value)

    def getOutputMapping(self) -> dict:
        """The value of ``output_mapping``."""
        return self.getOrDefault(self.output_mapping)


class HasBatchSize(Params):
    """Mixin for Param ``batch_size``: Rows per batch. KerasEstimator: rows per training step on EACH worker
    (per-worker batch): one step trains batch_size x num_workers rows in all, the global batch Keras sees under
    MultiWorkerMirroredStrategy; TFEstimator: passed to train_fn as args.batch_size; TFModel: rows per model call
    when scoring."""

    batch_size: Param[int] = Param(
        Params._dummy(),
        "batch_size",
        "Rows per batch. KerasEstimator: rows per training step on EACH worker (per-worker batch): one step trains "
        "batch_size x num_workers rows in all, the global batch Keras sees under MultiWorkerMirroredStrategy; "
        "TFEstimator: passed to train_fn as args.batch_size; TFModel: rows per model call when scoring",
        typeConverter=TypeConverters.toInt,
    )

    def setBatchSize(self, value):
        """Set ``batch_size``. Returns self."""
        return self._set(batch_size=value)

    def getBatchSize(self) -> int:
        """The value of ``batch_size``."""
        return self.getOrDefault(self.batch_size)


class HasClusterSize(Params):
    """Mixin for Param ``cluster_size``: Number of nodes in the cluster."""

    cluster_size: Param[int] = Param(
        Params._dummy(),
        "cluster_size",
        "Number of nodes in the cluster",
        typeConverter=TypeConverters.toInt,
    )

    def setClusterSize(self, value):
        """Set ``cluster_size``. Returns self."""
        return self._set(cluster_size=value)

    def getClusterSize(self) -> int:
        """The value of ``cluster_size``."""
        return self.getOrDefault(self.cluster_size)


class HasNumPS(Params):
    """Mixin for Params ``num_ps`` (number of PS nodes) and ``driver_ps_nodes`` (run them on the driver)."""

    num_ps: Param[int] = Param(
        Params._dummy(),
        "num_ps",
        "Number of PS nodes in cluster",
        typeConverter=TypeConverters.toInt,
    )
    driver_ps_nodes: Param[bool] = Param(
        Params._dummy(),
        "driver_ps_nodes",
        "Run the PS nodes on the driver",
        typeConverter=TypeConverters.toBoolean,
    )

    def setNumPS(self, value):
        """Set ``num_ps``. Returns self."""
        return self._set(num_ps=value)

    def getNumPS(self) -> int:
        """The value of ``num_ps``."""
        return self.getOrDefault(self.num_ps)

    def setDriverPSNodes(self, value):
        """Set ``driver_ps_nodes``. Returns self."""
        return self._set(driver_ps_nodes=value)

    def getDriverPSNodes(self) -> bool:
        """The value of ``driver_ps_nodes``."""
        return self.getOrDefault(self.driver_ps_nodes)


class HasInputMode(Params):
    """Mixin for Param ``input_mode``: Input data feeding mode (0=TENSORFLOW, 1=SPARK)."""

    input_mode: Param[int] = Param(
        Params._dummy(),
        "input_mode",
        "Input data feeding mode (0=TENSORFLOW, 1=SPARK)",
        typeConverter=TypeConverters.toInt,
    )

    def setInputMode(self, value):
        """Set ``input_mode``. Returns self."""
        return self._set(input_mode=value)

    def getInputMode(self) -> int:
        """The value of ``input_mode``."""
        return self.getOrDefault(self.input_mode)


class HasMasterNode(Params):
    """Mixin for Param ``master_node``: Job name of the master/chief node ('chief', 'master' or None)."""

    master_node: Param[str | None] = Param(
        Params._dummy(),
        "master_node",
        "Job name of the master/chief node ('chief', 'master' or None)",
        typeConverter=optional_string,
    )

    def setMasterNode(self, value):
        """Set ``master_node``. Returns self."""
        return self._set(master_node=value)

    def getMasterNode(self) -> str | None:
        """The value of ``master_node``."""
        return self.getOrDefault(self.master_node)


class HasProtocol(Params):
    """Mixin for Param ``protocol``: Network protocol for Tensorflow (grpc only)."""

    protocol: Param[str] = Param(
        Params._dummy(),
        "protocol",
        "Network protocol for Tensorflow (grpc only)",
        typeConverter=TypeConverters.toString,
    )

    def setProtocol(self, value):
        """Set ``protocol``. Returns self."""
        return self._set(protocol=value)

    def getProtocol(self) -> str:
        """The value of ``protocol``."""
        return self.getOrDefault(self.protocol)


class HasGraceSecs(Params):
    """Mixin for Param ``grace_secs``: Seconds ps/evaluator nodes may keep running once the training nodes are done."""

    grace_secs: Param[float] = Param(
        Params._dummy(),
        "grace_secs",
        "Seconds ps/evaluator nodes may keep running once the training nodes are done",
        typeConverter=TypeConverters.toFloat,
    )

    def setGraceSecs(self, value):
        """Set ``grace_secs``. Returns self."""
        return self._set(grace_secs=value)

    def getGraceSecs(self) -> float:
        """The value of ``grace_secs``."""
        return self.getOrDefault(self.grace_secs)


class HasTensorboard(Params):
    """Mixin for Param ``tensorboard``: Launch tensorboard process."""

    tensorboard: Param[bool] = Param(
        Params._dummy(),
        "tensorboard",
        "Launch tensorboard process",
        typeConverter=TypeConverters.toBoolean,
    )

    def setTensorboard(self, value):
        """Set ``tensorboard``. Returns self."""
        return self._set(tensorboard=value)

    def getTensorboard(self) -> bool:
        """The value of ``tensorboard``."""
        return self.getOrDefault(self.tensorboard)


class HasTFRecordDir(Params):
    """Mixin for Param ``tfrecord_dir``: Not supported by sparkdl (TFoS exported the DataFrame as TFRecords)."""

    tfrecord_dir: Param[str | None] = Param(
        Params._dummy(),
        "tfrecord_dir",
        "Not supported by sparkdl (TFoS exported the DataFrame as TFRecords)",
        typeConverter=optional_string,
    )

    def setTFRecordDir(self, value):
        """Set ``tfrecord_dir``. Returns self."""
        return self._set(tfrecord_dir=value)

    def getTFRecordDir(self) -> str | None:
        """The value of ``tfrecord_dir``."""
        return self.getOrDefault(self.tfrecord_dir)


class HasEpochs(Params):
    """Mixin for Param ``epochs``: Passes over the training data (TFEstimator also passes it to train_fn as
    args.epochs)."""

    epochs: Param[int] = Param(
        Params._dummy(),
        "epochs",
        "Passes over the training data (TFEstimator also passes it to train_fn as args.epochs)",
        typeConverter=TypeConverters.toInt,
    )

    def setEpochs(self, value):
        """Set ``epochs``. Returns self."""
        return self._set(epochs=value)

    def getEpochs(self) -> int:
        """The value of ``epochs``."""
        return self.getOrDefault(self.epochs)


class HasReaders(Params):
    """Mixin for Param ``readers``: Number of reader threads (accepted for TFoS compatibility; unused)."""

    readers: Param[int] = Param(
        Params._dummy(),
        "readers",
        "Number of reader threads (accepted for TFoS compatibility; unused)",
        typeConverter=TypeConverters.toInt,
    )

    def setReaders(self, value):
        """Set ``readers``. Returns self."""
        return self._set(readers=value)

    def getReaders(self) -> int:
        """The value of ``readers``."""
        return self.getOrDefault(self.readers)


class HasSteps(Params):
    """Mixin for Param ``steps``: Maximum number of steps to train (passed to train_fn as args.steps)."""

    steps: Param[int] = Param(
        Params._dummy(),
        "steps",
        "Maximum number of steps to train (passed to train_fn as args.steps)",
        typeConverter=TypeConverters.toInt,
    )

    def setSteps(self, value):
        """Set ``steps``. Returns self."""
        return self._set(steps=value)

    def getSteps(self) -> int:
        """The value of ``steps``."""
        return self.getOrDefault(self.steps)


class HasModelDir(Params):
    """Mixin for Param ``model_dir``: Where the model is saved, a path every node and the driver reach. TFEstimator:
    passed to train_fn as args.model_dir (checkpoints), and TFModel scores from it when export_dir is not set;
    KerasEstimator: where fits without checkpoint_dir write their models (None: a directory of the Spark
    application's temporary files, local masters only)."""

    model_dir: Param[str | None] = Param(
        Params._dummy(),
        "model_dir",
        "Where the model is saved, a path every node and the driver reach. TFEstimator: passed to train_fn as "
        "args.model_dir (checkpoints), and TFModel scores from it when export_dir is not set; KerasEstimator: where "
        "fits without checkpoint_dir write their models (None: a directory of the Spark application's temporary "
        "files, local masters only)",
        typeConverter=optional_string,
    )

    def setModelDir(self, value):
        """Set ``model_dir``. Returns self."""
        return self._set(model_dir=value)

    def getModelDir(self) -> str | None:
        """The value of ``model_dir``."""
        return self.getOrDefault(self.model_dir)


class HasExportDir(Params):
    """Mixin for Param ``export_dir``: Directory (or .keras file) of the exported model."""

    export_dir: Param[str | None] = Param(
        Params._dummy(),
        "export_dir",
        "Directory (or .keras file) of the exported model",
        typeConverter=optional_string,
    )

    def setExportDir(self, value):
        """Set ``export_dir``. Returns self."""
        return self._set(export_dir=value)

    def getExportDir(self) -> str | None:
        """The value of ``export_dir``."""
        return self.getOrDefault(self.export_dir)


class HasSignatureDefKey(Params):
    """Mixin for Param ``signature_def_key``: Identifier for a specific saved_model signature."""

    signature_def_key: Param[str | None] = Param(
        Params._dummy(),
        "signature_def_key",
        "Identifier for a specific saved_model signature",
        typeConverter=optional_string,
    )

    def setSignatureDefKey(self, value):
        """Set ``signature_def_key``. Returns self."""
        return self._set(signature_def_key=value)

    def getSignatureDefKey(self) -> str | None:
        """The value of ``signature_def_key``."""
        return self.getOrDefault(self.signature_def_key)


class HasTagSet(Params):
    """Mixin for Param ``tag_set``: Comma-delimited list of tags identifying a saved_model metagraph."""

    tag_set: Param[str | None] = Param(
        Params._dummy(),
        "tag_set",
        "Comma-delimited list of tags identifying a saved_model metagraph",
        typeConverter=optional_string,
    )

    def setTagSet(self, value):
        """Set ``tag_set``. Returns self."""
        return self._set(tag_set=value)

    def getTagSet(self) -> str | None:
        """The value of ``tag_set``."""
        return self.getOrDefault(self.tag_set)


class HasFeedTimeout(Params):
    """Mixin for Param ``feed_timeout``: Seconds a node may go without reading its feed before cluster.train fails."""

    feed_timeout: Param[float] = Param(
        Params._dummy(),
        "feed_timeout",
        "Seconds a node may go without reading its feed before cluster.train fails",
        typeConverter=TypeConverters.toFloat,
    )

    def setFeedTimeout(self, value):
        """Set ``feed_timeout``. Returns self."""
        return self._set(feed_timeout=value)

    def getFeedTimeout(self) -> float:
        """The value of ``feed_timeout``."""
        return self.getOrDefault(self.feed_timeout)


class HasStallTimeout(Params):
    """Mixin for Param ``stall_timeout``: Seconds a node may report no progress before it is stopped (None: never)."""

    stall_timeout: Param[float | None] = Param(
        Params._dummy(),
        "stall_timeout",
        "Seconds a node may report no progress before it is stopped (None: never)",
        typeConverter=optional_float,
    )

    def setStallTimeout(self, value):
        """Set ``stall_timeout``. Returns self."""
        return self._set(stall_timeout=value)

    def getStallTimeout(self) -> float | None:
        """The value of ``stall_timeout``."""
        return self.getOrDefault(self.stall_timeout)


class HasMaxRestarts(Params):
    """Mixin for Param ``max_restarts``: How many times a failed cluster is relaunched within one fit (0: never);
    KerasEstimator resumes from the last completed epoch."""

    max_restarts: Param[int] = Param(
        Params._dummy(),
        "max_restarts",
        "How many times a failed cluster is relaunched within one fit (0: never); KerasEstimator resumes from the "
        "last completed epoch",
        typeConverter=TypeConverters.toInt,
    )

    def setMaxRestarts(self, value):
        """Set ``max_restarts``. Returns self."""
        return self._set(max_restarts=value)

    def getMaxRestarts(self) -> int:
        """The value of ``max_restarts``."""
        return self.getOrDefault(self.max_restarts)


class HasNumGPUs(Params):
    """Mixin for Param ``num_gpus``: GPUs per node (None: Spark's GPU resources, else one if the host has GPUs; 0:
    CPU)."""

    num_gpus: Param[int | None] = Param(
        Params._dummy(),
        "num_gpus",
        "GPUs per node (None: Spark's GPU resources, else one if the host has GPUs; 0: CPU)",
        typeConverter=optional_int,
    )

    def setNumGPUs(self, value):
        """Set ``num_gpus``. Returns self."""
        return self._set(num_gpus=value)

    def getNumGPUs(self) -> int | None:
        """The value of ``num_gpus``."""
        return self.getOrDefault(self.num_gpus)


class HasValidationIndicatorCol(Params):
    """Mixin for Param ``validation_indicator_col``: Name of a boolean column marking the rows fed as validation
    data (read with feed.as_dataset(..., split='validation')); the other rows are the training data."""

    validation_indicator_col: Param[str | None] = Param(
        Params._dummy(),
        "validation_indicator_col",
        "Name of a boolean column marking the rows fed as validation data (read with feed.as_dataset(..., "
        "split='validation')); the other rows are the training data",
        typeConverter=optional_string,
    )

    def setValidationIndicatorCol(self, value):
        """Set ``validation_indicator_col``. Returns self."""
        return self._set(validation_indicator_col=value)

    def getValidationIndicatorCol(self) -> str | None:
        """The value of ``validation_indicator_col``."""
        return self.getOrDefault(self.validation_indicator_col)


class HasModelVersions(Params):
    """Mixin for Params ``refresh_seconds`` and ``version_column``: scoring a versioned model directory."""

    refresh_seconds: Param[float | None] = Param(
        Params._dummy(),
        "refresh_seconds",
        "When set, export_dir is a versioned model directory (base/<integer version>/): score with its newest "
        "version, looking for a newer one at most this often (seconds)",
        typeConverter=optional_float,
    )
    version_column: Param[str | None] = Param(
        Params._dummy(),
        "version_column",
        "With refresh_seconds: a column naming the version that scored each row",
        typeConverter=optional_string,
    )

    def setRefreshSeconds(self, value):
        """Set ``refresh_seconds``. Returns self."""
        return self._set(refresh_seconds=value)

    def getRefreshSeconds(self) -> float | None:
        """The value of ``refresh_seconds``."""
        return self.getOrDefault(self.refresh_seconds)

    def setVersionColumn(self, value):
        """Set ``version_column``. Returns self."""
        return self._set(version_column=value)

    def getVersionColumn(self) -> str | None:
        """The value of ``version_column``."""
        return self.getOrDefault(self.version_column)


class HasModel(Params):
    """Mixin for Param ``model``: A compiled Keras model (Keras 3 or tf-keras), or a function of no arguments
    returning one (built inside the distribution strategy's scope on every node)."""

    model: Param[Any] = Param(
        Params._dummy(),
        "model",
        "A compiled Keras model (Keras 3 or tf-keras), or a function of no arguments returning one (built inside the "
        "distribution strategy's scope on every node)",
        typeConverter=as_is,
    )

    def setModel(self, value):
        """Set ``model``. Returns self."""
        return self._set(model=value)

    def getModel(self) -> Any:
        """The value of ``model``."""
        return self.getOrDefault(self.model)


class HasOptimizer(Params):
    """Mixin for Param ``optimizer``: Overrides the compiled optimizer: a Keras optimizer name ('adam'), its
    serialized config (a dict), or an optimizer object (its config is shipped)."""

    optimizer: Param[Any] = Param(
        Params._dummy(),
        "optimizer",
        "Overrides the compiled optimizer: a Keras optimizer name ('adam'), its serialized config (a dict), or an "
        "optimizer object (its config is shipped)",
        typeConverter=as_is,
    )

    def setOptimizer(self, value):
        """Set ``optimizer``. Returns self."""
        return self._set(optimizer=value)

    def getOptimizer(self) -> Any:
        """The value of ``optimizer``."""
        return self.getOrDefault(self.optimizer)


class HasLearningRate(Params):
    """Mixin for Param ``learning_rate``: Overrides the optimizer's learning rate (None: the optimizer's own)."""

    learning_rate: Param[float | None] = Param(
        Params._dummy(),
        "learning_rate",
        "Overrides the optimizer's learning rate (None: the optimizer's own)",
        typeConverter=optional_float,
    )

    def setLearningRate(self, value):
        """Set ``learning_rate``. Returns self."""
        return self._set(learning_rate=value)

    def getLearningRate(self) -> float | None:
        """The value of ``learning_rate``."""
        return self.getOrDefault(self.learning_rate)


class HasLoss(Params):
    """Mixin for Param ``loss``: Overrides the compiled loss: a Keras loss name, a serialized config, a loss object,
    or a dict of them by output name (needed when the model is not compiled)."""

    loss: Param[Any] = Param(
        Params._dummy(),
        "loss",
        "Overrides the compiled loss: a Keras loss name, a serialized config, a loss object, or a dict of them by "
        "output name (needed when the model is not compiled)",
        typeConverter=as_is,
    )

    def setLoss(self, value):
        """Set ``loss``. Returns self."""
        return self._set(loss=value)

    def getLoss(self) -> Any:
        """The value of ``loss``."""
        return self.getOrDefault(self.loss)


class HasMetrics(Params):
    """Mixin for Param ``metrics``: Overrides the compiled metrics: a list of Keras metric names or configs (or a
    dict by output name)."""

    metrics: Param[Any] = Param(
        Params._dummy(),
        "metrics",
        "Overrides the compiled metrics: a list of Keras metric names or configs (or a dict by output name)",
        typeConverter=as_is,
    )

    def setMetrics(self, value):
        """Set ``metrics``. Returns self."""
        return self._set(metrics=value)

    def getMetrics(self) -> Any:
        """The value of ``metrics``."""
        return self.getOrDefault(self.metrics)


class HasFeatureCols(Params):
    """Mixin for Param ``feature_cols``: Feature columns (numbers, arrays of numbers, or pyspark.ml Vectors):
    concatenated into the model's one input, or one column per input when the model has several, matched by input
    name."""

    feature_cols: Param[list[str]] = Param(
        Params._dummy(),
        "feature_cols",
        "Feature columns (numbers, arrays of numbers, or pyspark.ml Vectors): concatenated into the model's one "
        "input, or one column per input when the model has several, matched by input name",
        typeConverter=to_columns,
    )

    def setFeatureCols(self, value):
        """Set ``feature_cols``. Returns self."""
        return self._set(feature_cols=value)

    def getFeatureCols(self) -> list[str]:
        """The value of ``feature_cols``."""
        return self.getOrDefault(self.feature_cols)


class HasLabelCols(Params):
    """Mixin for Param ``label_cols``: Label columns: concatenated for a model with one output, or one per output of
    a multi-output model, matched by output name."""

    label_cols: Param[list[str]] = Param(
        Params._dummy(),
        "label_cols",
        "Label columns: concatenated for a model with one output, or one per output of a multi-output model, matched "
        "by output name",
        typeConverter=to_columns,
    )

    def setLabelCols(self, value):
        """Set ``label_cols``. Returns self."""
        return self._set(label_cols=value)

    def getLabelCols(self) -> list[str]:
        """The value of ``label_cols``."""
        return self.getOrDefault(self.label_cols)


class HasSampleWeightCol(Params):
    """Mixin for Param ``sample_weight_col``: A numeric column of per-row weights for the loss (None: every row
    weighs 1)."""

    sample_weight_col: Param[str | None] = Param(
        Params._dummy(),
        "sample_weight_col",
        "A numeric column of per-row weights for the loss (None: every row weighs 1)",
        typeConverter=optional_string,
    )

    def setSampleWeightCol(self, value):
        """Set ``sample_weight_col``. Returns self."""
        return self._set(sample_weight_col=value)

    def getSampleWeightCol(self) -> str | None:
        """The value of ``sample_weight_col``."""
        return self.getOrDefault(self.sample_weight_col)


class HasValidation(Params):
    """Mixin for Param ``validation``: Validation data: a fraction of the rows (0 < f < 1, split with seed) or the
    name of a boolean column marking validation rows (Spark ML's validationIndicatorCol); None: no validation."""

    validation: Param[float | str | None] = Param(
        Params._dummy(),
        "validation",
        "Validation data: a fraction of the rows (0 < f < 1, split with seed) or the name of a boolean column marking "
        "validation rows (Spark ML's validationIndicatorCol); None: no validation",
        typeConverter=to_validation,
    )

    def setValidation(self, value):
        """Set ``validation``. Returns self."""
        return self._set(validation=value)

    def getValidation(self) -> float | str | None:
        """The value of ``validation``."""
        return self.getOrDefault(self.validation)


class HasPredictionCols(Params):
    """Mixin for the output-column Params of transform, Spark ML's names and conventions (``keras/outputs.py``)."""

    prediction_col: Param[str] = Param(
        Params._dummy(),
        "prediction_col",
        "Spark ML's predictionCol: a classifier's class index (a double), a regressor's value (a double, a Vector for "
        "several values); a multi-output model appends prediction_col + '_' + output name per output, as the model "
        "writes it",
        typeConverter=TypeConverters.toString,
    )
    probability_col: Param[str] = Param(
        Params._dummy(),
        "probability_col",
        "Spark ML's probabilityCol: a classifier's class probabilities (a Vector); '' for none",
        typeConverter=TypeConverters.toString,
    )
    raw_prediction_col: Param[str] = Param(
        Params._dummy(),
        "raw_prediction_col",
        "Spark ML's rawPredictionCol: a classifier's raw scores (a Vector: logits, or log-probabilities of a softmax "
        "output, [-logit, logit] for a binary one); '' for none",
        typeConverter=TypeConverters.toString,
    )
    output_kind: Param[str | None] = Param(
        Params._dummy(),
        "output_kind",
        "What the model's one output is: 'softmax', 'softmax_logits', 'sigmoid', 'sigmoid_logits' or 'regression'; "
        "None reads it from the model's Keras config (its last activation and loss)",
        typeConverter=to_output_kind,
    )
    predicted_class_col: Param[str | None] = Param(
        Params._dummy(),
        "predicted_class_col",
        "When set, transform also appends the predicted class as a double (the index of the largest output value, or "
        "1.0 when a single output value is over 0.5); kept from before prediction_col followed Spark ML's conventions",
        typeConverter=optional_string,
    )
    predict_batch_size: Param[int] = Param(
        Params._dummy(),
        "predict_batch_size",
        "Rows per model call when transform scores a DataFrame",
        typeConverter=TypeConverters.toInt,
    )
    packed_outputs: Param[bool] = Param(
        Params._dummy(),
        "packed_outputs",
        "Write the columns that carry the model's values as they are (a multi-output model's columns, a regressor's "
        "several values a row) as binary columns of packed rows of the output's dtype (float32 unless the model says "
        "otherwise), which Packed(shape, dtype) reads back, instead of arrays or Vectors: cheaper for Spark to take "
        "from Python and to write out. A classifier's Spark ML columns stay as Spark ML writes them",
        typeConverter=TypeConverters.toBoolean,
    )

    def setPredictionCol(self, value):
        """Set ``prediction_col``. Returns self."""
        return self._set(prediction_col=value)

    def getPredictionCol(self) -> str:
        """The value of ``prediction_col``."""
        return self.getOrDefault(self.prediction_col)

    def setProbabilityCol(self, value):
        """Set ``probability_col``. Returns self."""
        return self._set(probability_col=value)

    def getProbabilityCol(self) -> str:
        """The value of ``probability_col``."""
        return self.getOrDefault(self.probability_col)

    def setRawPredictionCol(self, value):
        """Set ``raw_prediction_col``. Returns self."""
        return self._set(raw_prediction_col=value)

    def getRawPredictionCol(self) -> str:
        """The value of ``raw_prediction_col``."""
        return self.getOrDefault(self.raw_prediction_col)

    def setOutputKind(self, value):
        """Set ``output_kind``. Returns self."""
        return self._set(output_kind=value)

    def getOutputKind(self) -> str | None:
        """The value of ``output_kind``."""
        return self.getOrDefault(self.output_kind)

    def setPredictedClassCol(self, value):
        """Set ``predicted_class_col``. Returns self."""
        return self._set(predicted_class_col=value)

    def getPredictedClassCol(self) -> str | None:
        """The value of ``predicted_class_col``."""
        return self.getOrDefault(self.predicted_class_col)

    def setPredictBatchSize(self, value):
        """Set ``predict_batch_size``. Returns self."""
        return self._set(predict_batch_size=value)

    def getPredictBatchSize(self) -> int:
        """The value of ``predict_batch_size``."""
        return self.getOrDefault(self.predict_batch_size)

    def setPackedOutputs(self, value):
        """Set ``packed_outputs``. Returns self."""
        return self._set(packed_outputs=value)

    def getPackedOutputs(self) -> bool:
        """The value of ``packed_outputs``."""
        return self.getOrDefault(self.packed_outputs)


class HasModelPath(Params):
    """Mixin for Param ``model_path``: The trained model's .keras file, on a path every executor reads (set by fit,
    and by load)."""

    model_path: Param[str | None] = Param(
        Params._dummy(),
        "model_path",
        "The trained model's .keras file, on a path every executor reads (set by fit, and by load)",
        typeConverter=optional_string,
    )

    def setModelPath(self, value):
        """Set ``model_path``. Returns self."""
        return self._set(model_path=value)

    def getModelPath(self) -> str | None:
        """The value of ``model_path``."""
        return self.getOrDefault(self.model_path)


class HasSafeMode(Params):
    """Mixin for Param ``safe_mode``: Safe mode for the model file when transform scores with it and keras_model
    loads it: its Keras config may name only Keras' own classes and functions known to run no code of the file's
    (sparkdl's allowlist, sparkdl/inference/keras_allowlist.py, then Keras' own safe mode), so a Lambda layer or
    a custom layer is refused. False loads a file you trust (a model path is code). KerasEstimator gives its
    value to the models it fits."""

    safe_mode: Param[bool] = Param(
        Params._dummy(),
        "safe_mode",
        "Safe mode for the model file when transform scores with it and keras_model loads it: its Keras config may "
        "name only Keras' own classes and functions known to run no code of the file's (sparkdl's allowlist, "
        "sparkdl/inference/keras_allowlist.py, then Keras' own safe mode), so a Lambda layer or a custom layer is "
        "refused. False loads a file you trust (a model path is code). KerasEstimator gives its value to the models "
        "it fits",
        typeConverter=TypeConverters.toBoolean,
    )

    def setSafeMode(self, value):
        """Set ``safe_mode``. Returns self."""
        return self._set(safe_mode=value)

    def getSafeMode(self) -> bool:
        """The value of ``safe_mode``."""
        return self.getOrDefault(self.safe_mode)


class HasModelStructure(Params):
    """Mixin for Params ``input_cols`` and ``output_names``: how a fitted model's columns meet its tensors."""

    input_cols: Param[Any] = Param(
        Params._dummy(),
        "input_cols",
        "{model input name: [feature columns]} for a model with several inputs (None: every feature column, "
        "concatenated, feeds the model's one input); set by fit",
        typeConverter=optional_as_is,
    )
    output_names: Param[list[str] | None] = Param(
        Params._dummy(),
        "output_names",
        "The model's output names when it has several (None: one output); set by fit",
        typeConverter=optional_list_string,
    )

    def setInputCols(self, value):
        """Set ``input_cols``. Returns self."""
        return self._set(input_cols=value)

    def getInputCols(self) -> Any:
        """The value of ``input_cols``."""
        return self.getOrDefault(self.input_cols)

    def setOutputNames(self, value):
        """Set ``output_names``. Returns self."""
        return self._set(output_names=value)

    def getOutputNames(self) -> list[str] | None:
        """The value of ``output_names``."""
        return self.getOrDefault(self.output_names)


class HasShuffle(Params):
    """Mixin for Param ``shuffle``: Give each worker its rows in a new order every epoch (seeded by seed)."""

    shuffle: Param[bool] = Param(
        Params._dummy(),
        "shuffle",
        "Give each worker its rows in a new order every epoch (seeded by seed)",
        typeConverter=TypeConverters.toBoolean,
    )

    def setShuffle(self, value):
        """Set ``shuffle``. Returns self."""
        return self._set(shuffle=value)

    def getShuffle(self) -> bool:
        """The value of ``shuffle``."""
        return self.getOrDefault(self.shuffle)


class HasSeed(Params):
    """Mixin for Param ``seed``: Seed of the validation split, the shuffle and TensorFlow's random numbers (weights'
    initial values)."""

    seed: Param[int] = Param(
        Params._dummy(),
        "seed",
        "Seed of the validation split, the shuffle and TensorFlow's random numbers (weights' initial values)",
        typeConverter=TypeConverters.toInt,
    )

    def setSeed(self, value):
        """Set ``seed``. Returns self."""
        return self._set(seed=value)

    def getSeed(self) -> int:
        """The value of ``seed``."""
        return self.getOrDefault(self.seed)


class HasNumWorkers(Params):
    """Mixin for Param ``num_workers``: TF nodes to train on, one per executor (None: every executor; 0: train in
    the driver process, local mode, for debugging before paying for a cluster)."""

    num_workers: Param[int | None] = Param(
        Params._dummy(),
        "num_workers",
        "TF nodes to train on, one per executor (None: every executor; 0: train in the driver process, local mode, "
        "for debugging before paying for a cluster)",
        typeConverter=optional_int,
    )

    def setNumWorkers(self, value):
        """Set ``num_workers``. Returns self."""
        return self._set(num_workers=value)

    def getNumWorkers(self) -> int | None:
        """The value of ``num_workers``."""
        return self.getOrDefault(self.num_workers)


class HasMinWorkers(Params):
    """Mixin for Param ``min_workers``: Elastic training: the fewest TF nodes the fit may go on with when executors
    are lost (None: num_workers, a fixed cluster); it grows back to num_workers at an epoch boundary when Spark
    adds executors (TFCluster.run's min_executors; docs/reliability.md)."""

    min_workers: Param[int | None] = Param(
        Params._dummy(),
        "min_workers",
        "Elastic training: the fewest TF nodes the fit may go on with when executors are lost (None: num_workers, a "
        "fixed cluster); it grows back to num_workers at an epoch boundary when Spark adds executors (TFCluster.run's "
        "min_executors; docs/reliability.md)",
        typeConverter=optional_int,
    )

    def setMinWorkers(self, value):
        """Set ``min_workers``. Returns self."""
        return self._set(min_workers=value)

    def getMinWorkers(self) -> int | None:
        """The value of ``min_workers``."""
        return self.getOrDefault(self.min_workers)


class HasCallbacks(Params):
    """Mixin for Param ``callbacks``: Keras callbacks for fit (they must pickle: they travel to every node)."""

    callbacks: Param[list] = Param(
        Params._dummy(),
        "callbacks",
        "Keras callbacks for fit (they must pickle: they travel to every node)",
        typeConverter=to_callbacks,
    )

    def setCallbacks(self, value):
        """Set ``callbacks``. Returns self."""
        return self._set(callbacks=value)

    def getCallbacks(self) -> list:
        """The value of ``callbacks``."""
        return self.getOrDefault(self.callbacks)


class HasRunStore(Params):
    """Mixin for Params ``checkpoint_dir``, ``run_id``, ``monitor`` and ``mode``: the run store."""

    checkpoint_dir: Param[str | None] = Param(
        Params._dummy(),
        "checkpoint_dir",
        "A path every node and the driver reach (s3://, gs://, abfss://, hdfs://, a shared or local directory; "
        "docs/deployment.md#storage): with run_id, every epoch is checkpointed there and a fit with the same run_id "
        "resumes",
        typeConverter=optional_string,
    )
    run_id: Param[str | None] = Param(
        Params._dummy(),
        "run_id",
        "Names a run under checkpoint_dir: fitting again with the same run_id (in any application) resumes after its "
        "last completed epoch; a finished run returns its model without training",
        typeConverter=optional_string,
    )
    monitor: Param[str | None] = Param(
        Params._dummy(),
        "monitor",
        "A metric (e.g. 'val_loss') whose best epoch's model is also kept, as best.keras in the run's directory",
        typeConverter=optional_string,
    )
    mode: Param[str] = Param(
        Params._dummy(),
        "mode",
        "Whether the monitored metric is best when 'min', 'max', or 'auto' (from its name)",
        typeConverter=TypeConverters.toString,
    )

    def setCheckpointDir(self, value):
        """Set ``checkpoint_dir``. Returns self."""
        return self._set(checkpoint_dir=value)

    def getCheckpointDir(self) -> str | None:
        """The value of ``checkpoint_dir``."""
        return self.getOrDefault(self.checkpoint_dir)

    def setRunId(self, value):
        """Set ``run_id``. Returns self."""
        return self._set(run_id=value)

    def getRunId(self) -> str | None:
        """The value of ``run_id``."""
        return self.getOrDefault(self.run_id)

    def setMonitor(self, value):
        """Set ``monitor``. Returns self."""
        return self._set(monitor=value)

    def getMonitor(self) -> str | None:
        """The value of ``monitor``."""
        return self.getOrDefault(self.monitor)

    def setMode(self, value):
        """Set ``mode``. Returns self."""
        return self._set(mode=value)

    def getMode(self) -> str:
        """The value of ``mode``."""
        return self.getOrDefault(self.mode)


class HasVerbose(Params):
    """Mixin for Param ``verbose``: Keras' fit verbosity on the chief (0 silent, 1 progress bar, 2 one line per
    epoch)."""

    verbose: Param[int] = Param(
        Params._dummy(),
        "verbose",
        "Keras' fit verbosity on the chief (0 silent, 1 progress bar, 2 one line per epoch)",
        typeConverter=TypeConverters.toInt,
    )

    def setVerbose(self, value):
        """Set ``verbose``. Returns self."""
        return self._set(verbose=value)

    def getVerbose(self) -> int:
        """The value of ``verbose``."""
        return self.getOrDefault(self.verbose)


class HasLogToMlflow(Params):
    """Mixin for Param ``log_to_mlflow``: Log Params, per-epoch metrics and the model to MLflow (also done whenever
    an MLflow run is active); needs the mlflow extra."""

    log_to_mlflow: Param[bool] = Param(
        Params._dummy(),
        "log_to_mlflow",
        "Log Params, per-epoch metrics and the model to MLflow (also done whenever an MLflow run is active); needs "
        "the mlflow extra",
        typeConverter=TypeConverters.toBoolean,
    )

    def setLogToMlflow(self, value):
        """Set ``log_to_mlflow``. Returns self."""
        return self._set(log_to_mlflow=value)

    def getLogToMlflow(self) -> bool:
        """The value of ``log_to_mlflow``."""
        return self.getOrDefault(self.log_to_mlflow)


class TFEstimatorParams(
    HasInputMapping,
    HasOutputMapping,
    HasBatchSize,
    HasModelDir,
    HasExportDir,
    HasClusterSize,
    HasNumPS,
    HasInputMode,
    HasMasterNode,
    HasProtocol,
    HasGraceSecs,
    HasTensorboard,
    HasTFRecordDir,
    HasEpochs,
    HasReaders,
    HasSteps,
    HasFeedTimeout,
    HasStallTimeout,
    HasMaxRestarts,
    HasNumGPUs,
    HasValidationIndicatorCol,
):
    """The Params of :class:`sparkdl.ml.TFEstimator`, with its defaults."""

    def __init__(self) -> None:
        super().__init__()
        self._setDefault(
            batch_size=100,
            cluster_size=1,
            driver_ps_nodes=False,
            epochs=1,
            export_dir=None,
            feed_timeout=600.0,
            grace_secs=0.0,
            input_mapping={},
            input_mode=1,
            master_node="chief",
            max_restarts=0,
            model_dir=None,
            num_gpus=None,
            num_ps=0,
            output_mapping={},
            protocol="grpc",
            readers=1,
            stall_timeout=None,
            steps=1000,
            tensorboard=False,
            tfrecord_dir=None,
            validation_indicator_col=None,
        )


class TFModelParams(
    HasInputMapping,
    HasOutputMapping,
    HasBatchSize,
    HasModelDir,
    HasExportDir,
    HasSignatureDefKey,
    HasTagSet,
    HasModelVersions,
):
    """The Params of :class:`sparkdl.ml.TFModel`, with its defaults."""

    def __init__(self) -> None:
        super().__init__()
        self._setDefault(
            batch_size=100,
            export_dir=None,
            input_mapping={},
            model_dir=None,
            output_mapping={},
            refresh_seconds=None,
            signature_def_key=None,
            tag_set=None,
            version_column=None,
        )


class KerasEstimatorParams(
    HasModel,
    HasOptimizer,
    HasLearningRate,
    HasLoss,
    HasMetrics,
    HasFeatureCols,
    HasLabelCols,
    HasSampleWeightCol,
    HasValidation,
    HasPredictionCols,
    HasSafeMode,
    HasBatchSize,
    HasEpochs,
    HasShuffle,
    HasSeed,
    HasNumWorkers,
    HasMinWorkers,
    HasNumGPUs,
    HasCallbacks,
    HasMaxRestarts,
    HasRunStore,
    HasModelDir,
    HasVerbose,
    HasLogToMlflow,
):
    """The Params of :class:`sparkdl.keras.KerasEstimator`, with its defaults."""

    def __init__(self) -> None:
        super().__init__()
        self._setDefault(
            batch_size=32,
            callbacks=[],
            checkpoint_dir=None,
            epochs=1,
            feature_cols=[],
            label_cols=[],
            learning_rate=None,
            log_to_mlflow=False,
            loss=None,
            max_restarts=0,
            metrics=None,
            min_workers=None,
            mode="auto",
            model=None,
            model_dir=None,
            monitor=None,
            num_gpus=None,
            num_workers=None,
            optimizer=None,
            output_kind=None,
            packed_outputs=False,
            predict_batch_size=1024,
            predicted_class_col=None,
            prediction_col="prediction",
            probability_col="probability",
            raw_prediction_col="rawPrediction",
            run_id=None,
            safe_mode=True,
            sample_weight_col=None,
            seed=2366026698,
            shuffle=True,
            validation=None,
            verbose=0,
        )


class KerasModelParams(
    HasFeatureCols,
    HasLabelCols,
    HasPredictionCols,
    HasSafeMode,
    HasModelPath,
    HasModelStructure,
):
    """The Params of :class:`sparkdl.keras.KerasModel`, with its defaults."""

    def __init__(self) -> None:
        super().__init__()
        self._setDefault(
            feature_cols=[],
            input_cols=None,
            label_cols=[],
            model_path=None,
            output_kind=None,
            output_names=None,
            packed_outputs=False,
            predict_batch_size=1024,
            predicted_class_col=None,
            prediction_col="prediction",
            probability_col="probability",
            raw_prediction_col="rawPrediction",
            safe_mode=True,
        )


__all__ = [
    "HasInputMapping",
    "HasOutputMapping",
    "HasBatchSize",
    "HasClusterSize",
    "HasNumPS",
    "HasInputMode",
    "HasMasterNode",
    "HasProtocol",
    "HasGraceSecs",
    "HasTensorboard",
    "HasTFRecordDir",
    "HasEpochs",
    "HasReaders",
    "HasSteps",
    "HasModelDir",
    "HasExportDir",
    "HasSignatureDefKey",
    "HasTagSet",
    "HasFeedTimeout",
    "HasStallTimeout",
    "HasMaxRestarts",
    "HasNumGPUs",
    "HasValidationIndicatorCol",
    "HasModelVersions",
    "HasModel",
    "HasOptimizer",
    "HasLearningRate",
    "HasLoss",
    "HasMetrics",
    "HasFeatureCols",
    "HasLabelCols",
    "HasSampleWeightCol",
    "HasValidation",
    "HasPredictionCols",
    "HasModelPath",
    "HasSafeMode",
    "HasModelStructure",
    "HasShuffle",
    "HasSeed",
    "HasNumWorkers",
    "HasMinWorkers",
    "HasCallbacks",
    "HasRunStore",
    "HasVerbose",
    "HasLogToMlflow",
    "TFEstimatorParams",
    "TFModelParams",
    "KerasEstimatorParams",
    "KerasModelParams",
]
