"""Every Spark ML Param of sparkdl's stages, written once: name, doc, type converter, default.

This table is the one place a Param is defined. ``scripts/generate_params.py`` writes from it
:mod:`sparkdl.spark_ml.shared_params` (a ``HasX`` mixin class per Param or group, with Spark ML's
camel-case accessors, and a ``<Stage>Params`` class per stage that sets the defaults) and the
documentation's ``docs/params.md`` (every Param of every stage with its default), as PySpark's
``_shared_params_code_gen.py`` writes ``pyspark/ml/param/shared.py``. To add or change a Param:
edit the table, run ``.venv/bin/python scripts/generate_params.py``, commit the three files (a
unit test fails while a generated file is stale).

Plain data, plus the type converters Spark does not provide, each written once.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Any, Callable

from pyspark.ml.param import TypeConverters

from ..common.timeouts import FEED_TIMEOUT_S
from ..driver.arguments import InputMode

# -- the converters: a Param's setter turns a value into the Param's type or raises TypeError --


def optional(converter: Callable) -> Callable:
    """``converter``, letting None through (a Param whose value may be None)."""

    def convert(value: Any) -> Any:
        return None if value is None else converter(value)

    convert.__name__ = f"optional_{converter.__name__}"
    convert.__wrapped__ = converter  # what scripts/generate_params.py reads the Param's type from
    convert.__doc__ = f"None, or ``{converter.__name__}(value)``."
    return convert


def as_is(value: Any) -> Any:
    """``value`` unchanged (a model, a function, a Keras config: checked when ``fit`` starts)."""
    return value


def to_dict(value: Any) -> dict:
    """A copy of ``value`` if it is a dict; TypeError otherwise."""
    if isinstance(value, dict):
        return dict(value)
    raise TypeError(f"expected a dict, got {type(value).__name__}: {value!r}")


def to_columns(value: Any) -> list[str]:
    """One column name, or a list of them, as a list."""
    if isinstance(value, str):
        return [value]
    return TypeConverters.toListString(value)


def to_validation(value: Any) -> float | str | None:
    """A fraction of the rows (a number strictly between 0 and 1) or a boolean column's name."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        raise TypeError("validation must be a fraction of the rows (0 < f < 1) or a boolean column's name, got a bool")
    return TypeConverters.toFloat(value)


def to_callbacks(value: Any) -> list:
    """A list of callbacks: None is none, one callback a list of one."""
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return list(value)
    return [value]


#: What a Keras model's one output can be (``sparkdl/keras/outputs.py`` says what each means).
OUTPUT_KINDS = ("regression", "softmax", "softmax_logits", "sigmoid", "sigmoid_logits")


def to_output_kind(value: Any) -> str | None:
    """None (read from the model's config) or one of :data:`OUTPUT_KINDS`."""
    if value is None:
        return None
    value = TypeConverters.toString(value)
    if value not in OUTPUT_KINDS:
        raise TypeError(f"output_kind must be None or one of {OUTPUT_KINDS}, got {value!r}")
    return value


optional_int = optional(TypeConverters.toInt)
optional_float = optional(TypeConverters.toFloat)
optional_string = optional(TypeConverters.toString)
optional_list_string = optional(TypeConverters.toListString)
optional_as_is = optional(as_is)

# -- the table --


class _NoDefault:
    def __repr__(self) -> str:
        return "NO_DEFAULT"


NO_DEFAULT = _NoDefault()  #: ``ParamSpec.default`` of a Param that has none: a stage declaring it leaves it unset

#: ``seed``'s default: fixed (Spark ML's own default hashes the class name per process), so a
#: validation split and a resumed run see the same rows in every application.
DEFAULT_SEED = zlib.crc32(b"sparkdl.keras.KerasEstimator")


@dataclass(frozen=True)
class ParamSpec:
    """One Param: its name (snake_case, TensorFlowOnSpark's), doc, type converter and default.

    ``accessor`` is the camel-case part of ``setX``/``getX``, when it is not the name's parts
    capitalised (``num_ps``: ``NumPS``, not ``NumPs``).
    """

    name: str
    doc: str
    converter: Callable[[Any], Any]
    default: Any = NO_DEFAULT
    accessor: str | None = None

    @property
    def camel(self) -> str:
        """The camel-case part of the setter's and getter's names (``BatchSize``)."""
        return self.accessor or "".join(part.capitalize() for part in self.name.split("_"))


@dataclass(frozen=True)
class MixinSpec:
    """One ``HasX`` mixin: its class name and Params (several for a group that belongs together)."""

    name: str
    params: tuple[str, ...]
    doc: str | None = None  #: a group's docstring; one Param's mixin says "Mixin for Param ``x``: <its doc>"


@dataclass(frozen=True)
class StageSpec:
    """One Spark ML stage: its mixins and where its defaults differ from the table's."""

    name: str
    import_path: str  #: where users import it from
    summary: str
    mixins: tuple[str, ...]
    defaults: dict[str, Any] = field(default_factory=dict)  #: this stage's defaults that are not the table's


PARAMS = (
    # -- TensorFlowOnSpark's Params (TFEstimator, TFModel) --
    ParamSpec("input_mapping", "Mapping of input DataFrame column to input tensor", to_dict, {}),
    ParamSpec("output_mapping", "Mapping of output tensor to output DataFrame column", to_dict, {}),
    ParamSpec(
        "batch_size",
        "Rows per batch. KerasEstimator: rows per training step on EACH worker (per-worker batch): one step "
        "trains batch_size x num_workers rows in all, the global batch Keras sees under "
        "MultiWorkerMirroredStrategy; TFEstimator: passed to train_fn as args.batch_size; TFModel: rows per "
        "model call when scoring",
        TypeConverters.toInt,
        100,
    ),
    ParamSpec("cluster_size", "Number of nodes in the cluster", TypeConverters.toInt, 1),
    ParamSpec("num_ps", "Number of PS nodes in cluster", TypeConverters.toInt, 0, accessor="NumPS"),
    ParamSpec(
        "driver_ps_nodes", "Run the PS nodes on the driver", TypeConverters.toBoolean, False, accessor="DriverPSNodes"
    ),
    ParamSpec("input_mode", "Input data feeding mode (0=TENSORFLOW, 1=SPARK)", TypeConverters.toInt, InputMode.SPARK),
    ParamSpec("master_node", "Job name of the master/chief node ('chief', 'master' or None)", optional_string, "chief"),
    ParamSpec("protocol", "Network protocol for Tensorflow (grpc only)", TypeConverters.toString, "grpc"),
    ParamSpec(
        "grace_secs",
        "Seconds ps/evaluator nodes may keep running once the training nodes are done",
        TypeConverters.toFloat,
        0.0,
    ),
    ParamSpec("tensorboard", "Launch tensorboard process", TypeConverters.toBoolean, False),
    ParamSpec(
        "tfrecord_dir",
        "Not supported by sparkdl (TFoS exported the DataFrame as TFRecords)",
        optional_string,
        None,
        accessor="TFRecordDir",
    ),
    ParamSpec(
        "epochs",
        "Passes over the training data (TFEstimator also passes it to train_fn as args.epochs)",
        TypeConverters.toInt,
        1,
    ),
    ParamSpec("readers", "Number of reader threads (accepted for TFoS compatibility; unused)", TypeConverters.toInt, 1),
    ParamSpec(
        "steps", "Maximum number of steps to train (passed to train_fn as args.steps)", TypeConverters.toInt, 1000
    ),
    ParamSpec(
        "model_dir",
        "Where the model is saved, a path every node and the driver reach. TFEstimator: passed to train_fn as "
        "args.model_dir (checkpoints), and TFModel scores from it when export_dir is not set; KerasEstimator: "
        "where fits without checkpoint_dir write their models (None: a directory of the Spark application's "
        "temporary files, local masters only)",
        optional_string,
        None,
    ),
    ParamSpec("export_dir", "Directory (or .keras file) of the exported model", optional_string, None),
    ParamSpec("signature_def_key", "Identifier for a specific saved_model signature", optional_string, None),
    ParamSpec("tag_set", "Comma-delimited list of tags identifying a saved_model metagraph", optional_string, None),
    # -- sparkdl's additions: TFCluster.run / cluster.train / TFModel settings --
    ParamSpec(
        "feed_timeout",
        "Seconds a node may go without reading its feed before cluster.train fails",
        TypeConverters.toFloat,
        FEED_TIMEOUT_S,
    ),
    ParamSpec(
        "stall_timeout",
        "Seconds a node may report no progress before it is stopped (None: never)",
        optional_float,
        None,
    ),
    ParamSpec(
        "max_restarts",
        "How many times a failed cluster is relaunched within one fit (0: never); KerasEstimator resumes "
        "from the last completed epoch",
        TypeConverters.toInt,
        0,
    ),
    ParamSpec(
        "num_gpus",
        "GPUs per node (None: Spark's GPU resources, else one if the host has GPUs; 0: CPU)",
        optional_int,
        None,
        accessor="NumGPUs",
    ),
    ParamSpec(
        "validation_indicator_col",
        "Name of a boolean column marking the rows fed as validation data (read with "
        "feed.as_dataset(..., split='validation')); the other rows are the training data",
        optional_string,
        None,
    ),
    ParamSpec(
        "refresh_seconds",
        "When set, export_dir is a versioned model directory (base/<integer version>/): score with its "
        "newest version, looking for a newer one at most this often (seconds)",
        optional_float,
        None,
    ),
    ParamSpec(
        "version_column",
        "With refresh_seconds: a column naming the version that scored each row",
        optional_string,
        None,
    ),
    # -- KerasEstimator and KerasModel: the model and the columns --
    ParamSpec(
        "model",
        "A compiled Keras model (Keras 3 or tf-keras), or a function of no arguments returning one (built inside "
        "the distribution strategy's scope on every node)",
        as_is,
        None,
    ),
    ParamSpec(
        "optimizer",
        "Overrides the compiled optimizer: a Keras optimizer name ('adam'), its serialized config (a dict), or "
        "an optimizer object (its config is shipped)",
        as_is,
        None,
    ),
    ParamSpec(
        "learning_rate", "Overrides the optimizer's learning rate (None: the optimizer's own)", optional_float, None
    ),
    ParamSpec(
        "loss",
        "Overrides the compiled loss: a Keras loss name, a serialized config, a loss object, or a dict of them "
        "by output name (needed when the model is not compiled)",
        as_is,
        None,
    ),
    ParamSpec(
        "metrics",
        "Overrides the compiled metrics: a list of Keras metric names or configs (or a dict by output name)",
        as_is,
        None,
    ),
    ParamSpec(
        "feature_cols",
        "Feature columns (numbers, arrays of numbers, or pyspark.ml Vectors): concatenated into the model's one "
        "input, or one column per input when the model has several, matched by input name",
        to_columns,
        [],
    ),
    ParamSpec(
        "label_cols",
        "Label columns: concatenated for a model with one output, or one per output of a multi-output model, "
        "matched by output name",
        to_columns,
        [],
    ),
    ParamSpec(
        "sample_weight_col",
        "A numeric column of per-row weights for the loss (None: every row weighs 1)",
        optional_string,
        None,
    ),
    ParamSpec(
        "validation",
        "Validation data: a fraction of the rows (0 < f < 1, split with seed) or the name of a boolean column "
        "marking validation rows (Spark ML's validationIndicatorCol); None: no validation",
        to_validation,
        None,
    ),
    ParamSpec(
        "prediction_col",
        "Spark ML's predictionCol: a classifier's class index (a double), a regressor's value (a double, a "
        "Vector for several values); a multi-output model appends prediction_col + '_' + output name per "
        "output, as the model writes it",
        TypeConverters.toString,
        "prediction",
    ),
    ParamSpec(
        "probability_col",
        "Spark ML's probabilityCol: a classifier's class probabilities (a Vector); '' for none",
        TypeConverters.toString,
        "probability",
    ),
    ParamSpec(
        "raw_prediction_col",
        "Spark ML's rawPredictionCol: a classifier's raw scores (a Vector: logits, or log-probabilities of a "
        "softmax output, [-logit, logit] for a binary one); '' for none",
        TypeConverters.toString,
        "rawPrediction",
    ),
    ParamSpec(
        "output_kind",
        "What the model's one output is: 'softmax', 'softmax_logits', 'sigmoid', 'sigmoid_logits' or "
        "'regression'; None reads it from the model's Keras config (its last activation and loss)",
        to_output_kind,
        None,
    ),
    ParamSpec(
        "predicted_class_col",
        "When set, transform also appends the predicted class as a double (the index of the largest output "
        "value, or 1.0 when a single output value is over 0.5); kept from before prediction_col followed "
        "Spark ML's conventions",
        optional_string,
        None,
    ),
    ParamSpec(
        "predict_batch_size", "Rows per model call when transform scores a DataFrame", TypeConverters.toInt, 1024
    ),
    ParamSpec(
        "packed_outputs",
        "Write the columns that carry the model's values as they are (a multi-output model's columns, a "
        "regressor's several values a row) as binary columns of packed rows of the output's dtype (float32 unless "
        "the model says otherwise), which Packed(shape, dtype) reads "
        "back, instead of arrays or Vectors: cheaper for Spark to take from Python and to write out. "
        "A classifier's Spark ML columns stay as Spark ML writes them",
        TypeConverters.toBoolean,
        False,
    ),
    ParamSpec(
        "safe_mode",
        "Safe mode for the model file when transform scores with it and keras_model loads it: its Keras config "
        "may name only Keras' own classes and functions known to run no code of the file's (sparkdl's allowlist, "
        "sparkdl/inference/keras_allowlist.py, then Keras' own safe mode), so a Lambda layer or a custom layer is "
        "refused. False loads a file you trust (a model path is code). KerasEstimator gives its value to the "
        "models it fits",
        TypeConverters.toBoolean,
        True,
    ),
    ParamSpec(
        "model_path",
        "The trained model's .keras file, on a path every executor reads (set by fit, and by load)",
        optional_string,
        None,
    ),
    ParamSpec(
        "input_cols",
        "{model input name: [feature columns]} for a model with several inputs (None: every feature column, "
        "concatenated, feeds the model's one input); set by fit",
        optional_as_is,
        None,
    ),
    ParamSpec(
        "output_names",
        "The model's output names when it has several (None: one output); set by fit",
        optional_list_string,
        None,
    ),
    # -- KerasEstimator: how training runs --
    ParamSpec(
        "shuffle",
        "Give each worker its rows in a new order every epoch (seeded by seed)",
        TypeConverters.toBoolean,
        True,
    ),
    ParamSpec(
        "seed",
        "Seed of the validation split, the shuffle and TensorFlow's random numbers (weights' initial values)",
        TypeConverters.toInt,
        DEFAULT_SEED,
    ),
    ParamSpec(
        "num_workers",
        "TF nodes to train on, one per executor (None: every executor; 0: train in the driver process, local "
        "mode, for debugging before paying for a cluster)",
        optional_int,
        None,
    ),
    ParamSpec(
        "min_workers",
        "Elastic training: the fewest TF nodes the fit may go on with when executors are lost (None: "
        "num_workers, a fixed cluster); it grows back to num_workers at an epoch boundary when Spark adds "
        "executors (TFCluster.run's min_executors; docs/reliability.md)",
        optional_int,
        None,
    ),
    ParamSpec("callbacks", "Keras callbacks for fit (they must pickle: they travel to every node)", to_callbacks, []),
    ParamSpec(
        "checkpoint_dir",
        "A path every node and the driver reach (s3://, gs://, abfss://, hdfs://, a shared or local directory; "
        "docs/deployment.md#storage): with run_id, every epoch is checkpointed there and a fit with the same "
        "run_id resumes",
        optional_string,
        None,
    ),
    ParamSpec(
        "run_id",
        "Names a run under checkpoint_dir: fitting again with the same run_id (in any application) resumes "
        "after its last completed epoch; a finished run returns its model without training",
        optional_string,
        None,
    ),
    ParamSpec(
        "monitor",
        "A metric (e.g. 'val_loss') whose best epoch's model is also kept, as best.keras in the run's directory",
        optional_string,
        None,
    ),
    ParamSpec(
        "mode",
        "Whether the monitored metric is best when 'min', 'max', or 'auto' (from its name)",
        TypeConverters.toString,
        "auto",
    ),
    ParamSpec(
        "verbose",
        "Keras' fit verbosity on the chief (0 silent, 1 progress bar, 2 one line per epoch)",
        TypeConverters.toInt,
        0,
    ),
    ParamSpec(
        "log_to_mlflow",
        "Log Params, per-epoch metrics and the model to MLflow (also done whenever an MLflow run is active); "
        "needs the mlflow extra",
        TypeConverters.toBoolean,
        False,
    ),
)


def _one(name: str) -> MixinSpec:
    """The mixin of one Param, named after its accessors (``batch_size``: ``HasBatchSize``)."""
    return MixinSpec("Has" + next(p.camel for p in PARAMS if p.name == name), (name,))


MIXINS = (
    # TensorFlowOnSpark's mixins, by its names
    _one("input_mapping"),
    _one("output_mapping"),
    _one("batch_size"),
    _one("cluster_size"),
    MixinSpec(
        "HasNumPS",
        ("num_ps", "driver_ps_nodes"),
        "Mixin for Params ``num_ps`` (number of PS nodes) and ``driver_ps_nodes`` (run them on the driver).",
    ),
    _one("input_mode"),
    _one("master_node"),
    _one("protocol"),
    _one("grace_secs"),
    _one("tensorboard"),
    _one("tfrecord_dir"),
    _one("epochs"),
    _one("readers"),
    _one("steps"),
    _one("model_dir"),
    _one("export_dir"),
    _one("signature_def_key"),
    _one("tag_set"),
    _one("feed_timeout"),
    _one("stall_timeout"),
    _one("max_restarts"),
    _one("num_gpus"),
    _one("validation_indicator_col"),
    MixinSpec(
        "HasModelVersions",
        ("refresh_seconds", "version_column"),
        "Mixin for Params ``refresh_seconds`` and ``version_column``: scoring a versioned model directory.",
    ),
    # the Keras stages' mixins
    _one("model"),
    _one("optimizer"),
    _one("learning_rate"),
    _one("loss"),
    _one("metrics"),
    _one("feature_cols"),
    _one("label_cols"),
    _one("sample_weight_col"),
    _one("validation"),
    MixinSpec(
        "HasPredictionCols",
        (
            "prediction_col",
            "probability_col",
            "raw_prediction_col",
            "output_kind",
            "predicted_class_col",
            "predict_batch_size",
            "packed_outputs",
        ),
        "Mixin for the output-column Params of transform, Spark ML's names and conventions (``keras/outputs.py``).",
    ),
    _one("model_path"),
    _one("safe_mode"),
    MixinSpec(
        "HasModelStructure",
        ("input_cols", "output_names"),
        "Mixin for Params ``input_cols`` and ``output_names``: how a fitted model's columns meet its tensors.",
    ),
    _one("shuffle"),
    _one("seed"),
    _one("num_workers"),
    _one("min_workers"),
    _one("callbacks"),
    MixinSpec(
        "HasRunStore",
        ("checkpoint_dir", "run_id", "monitor", "mode"),
        "Mixin for Params ``checkpoint_dir``, ``run_id``, ``monitor`` and ``mode``: the run store.",
    ),
    _one("verbose"),
    _one("log_to_mlflow"),
)

#: The Params a fitted TFEstimator copies to its TFModel.
_TFOS_SHARED = ("HasInputMapping", "HasOutputMapping", "HasBatchSize", "HasModelDir", "HasExportDir")

STAGES = (
    StageSpec(
        "TFEstimator",
        "sparkdl.ml",
        "TensorFlowOnSpark's Estimator: trains train_fn(args, ctx) on a TFCluster (every Param is also set on args).",
        (
            *_TFOS_SHARED,
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
            "HasFeedTimeout",
            "HasStallTimeout",
            "HasMaxRestarts",
            "HasNumGPUs",
            "HasValidationIndicatorCol",
        ),
    ),
    StageSpec(
        "TFModel",
        "sparkdl.ml",
        "TensorFlowOnSpark's Model: scores a DataFrame with an exported TensorFlow model.",
        (*_TFOS_SHARED, "HasSignatureDefKey", "HasTagSet", "HasModelVersions"),
    ),
    StageSpec(
        "KerasEstimator",
        "sparkdl.keras",
        "Trains a Keras model on a DataFrame, one TF node per executor.",
        (
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
            "HasSafeMode",
            "HasBatchSize",
            "HasEpochs",
            "HasShuffle",
            "HasSeed",
            "HasNumWorkers",
            "HasMinWorkers",
            "HasNumGPUs",
            "HasCallbacks",
            "HasMaxRestarts",
            "HasRunStore",
            "HasModelDir",
            "HasVerbose",
            "HasLogToMlflow",
        ),
        defaults={"batch_size": 32},
    ),
    StageSpec(
        "KerasModel",
        "sparkdl.keras",
        "What KerasEstimator.fit returns: scores a DataFrame with the trained Keras model.",
        ("HasFeatureCols", "HasLabelCols", "HasPredictionCols", "HasSafeMode", "HasModelPath", "HasModelStructure"),
    ),
)
