"""``KerasModel``: what ``KerasEstimator.fit`` returns, a Spark ML ``Model`` that scores with sparkdl's inference.

``transform(df)`` appends the model's output column(s) (``prediction_col``; one per output,
``prediction_col + "_" + name``, for a multi-output model) and, with ``predicted_class_col``,
the predicted class as a double for Spark ML's evaluators. The feature columns feed the model's
inputs as during training: one column an input as it is, several (or a Vector) concatenated by
Spark SQL into an array of the input's dtype (``array<float>`` for a float input, integers kept for
an integer one, so an int64 id reaches an ``Embedding`` exactly); they are scored by
:class:`sparkdl.inference.Predictor` (one cached model per Python worker, Arrow batches).
``history`` holds the per-epoch metrics of the fit; ``keras_model`` loads the trained model on the
driver. ``write()``/``read()`` save the model file and every Param, so a ``PipelineModel`` holding
a ``KerasModel`` saves, loads and predicts the same.

**Safe mode** (the ``safe_mode`` Param, on by default; ``KerasEstimator(safe_mode=...)`` sets it on
the models it fits): ``transform`` (on the executors) and ``keras_model`` (on the driver) load the
model file by one rule, sparkdl's inference's: its Keras config may name only Keras' own classes and
functions known to run no code of the file's (:mod:`sparkdl.inference.model_safety`), checked before
any Keras code runs, then Keras' own safe mode. A ``Lambda`` layer (even one calling a function by
name, which Keras' own safe mode lets through) or a custom layer is refused, naming the Param:
``setSafeMode(False)`` loads a file you trust.

The model file is read and copied through :class:`sparkdl.storage.Storage` with the active
application's store settings: local paths, ``s3a://``, ``gs://``, ``abfss://``, ``hdfs://`` alike. A
``KerasModel`` saved to an object store (``s3a://``, ``gs://``, ``abfss://``) writes its metadata there
too, in Spark ML's layout (``metadata/part-00000``), so it saves and loads without the JVM's file
system for that store (hadoop-aws...). A ``PipelineModel``'s own metadata is written by Spark ML
through the JVM, so saving a pipeline to ``s3a://`` needs Spark's S3A (``hadoop-aws``) as clusters
such as EMR and Databricks have; its ``KerasModel`` stage's files still go through the storage layer.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import zipfile
from dataclasses import dataclass
from typing import Any

import numpy as np
from pyspark.ml import Model
from pyspark.ml.util import DefaultParamsReader, DefaultParamsWriter, MLReadable, MLReader, MLWritable, MLWriter

from ..columns.arrow_numpy import castable, numpy_dtype, spark_name
from ..common.errors import InferenceInputError, ModelLoadError
from ..inference import loaders
from ..inference.model import TensorInfo
from ..storage import Storage, is_remote, locations, parse, spark_conf
from . import outputs
from .checks import KerasInputError, column_dtypes
from .params import KerasModelParams, spark_ml_names
from .shipping import keras_module

MODEL_FILE = "model/model.keras"  #: where ``write()`` keeps the model file inside the saved directory
_INPUT = "__sparkdl_input_"
_OUTPUT = "__sparkdl_output"
#: How model_safety and the inference loaders say to load a refused file anyway (their keyword).
_LOADERS_OPT_OUT = "pass safe_mode=False"
#: How this stage takes it: its Param.
_PARAM_OPT_OUT = (
    "set the KerasModel's safe_mode Param to False (model.setSafeMode(False); KerasEstimator(safe_mode=False) "
    "for the models it fits)"
)


class KerasModel(Model, KerasModelParams, MLReadable, MLWritable):
    """A trained Keras model as a Spark ML ``Model`` (see the module docstring).

    Made by ``KerasEstimator.fit``; also usable on its own for any ``.keras`` file:
    ``KerasModel(model_path="/models/m.keras", feature_cols=["features"]).transform(df)``.
    ``model_path`` must be readable by every executor (and the driver, for ``keras_model`` and
    ``write()``).
    """

    def __init__(self, **params: Any):
        super().__init__()
        self._history: dict[str, list[float]] = {}
        self._keras_model = None
        self._loaded_as: tuple | None = None  # (model_path, safe_mode) that _keras_model was loaded with
        self._output_kind: str | None = None  # output_kind read from the model file, once
        self.best_model_path: str | None = None  #: with ``monitor``: the best epoch's model (best.keras)
        if params:
            self._set(**spark_ml_names(params))

    @property
    def history(self) -> dict[str, list[float]]:
        """The fit's metrics per epoch, Keras' ``History.history`` shape (``{"loss": [...], "val_loss": [...]}``)."""
        return {name: list(values) for name, values in self._history.items()}

    def set_history(self, history: dict) -> KerasModel:
        """Record the fit's per-epoch metrics (the fit and ``load`` call it); returns this model."""
        self._history = {str(name): [float(v) for v in values] for name, values in (history or {}).items()}
        return self

    @property
    def keras_model(self):
        """The trained model, loaded on the driver (once), by ``transform``'s rule (see the module
        docstring): in safe mode (the ``safe_mode`` Param) the file is checked against sparkdl's
        allowlist before Keras reads it, then loaded with Keras' own safe mode; ModelLoadError naming
        the Param if it may run code of its own. In safe mode the model comes back uncompiled (its
        compile config names losses, metrics and an optimizer that sparkdl's check, like its scoring,
        leaves unread): compile it again to train it further."""
        safe = self.getSafeMode()
        # A copy (Params.copy) shares the cache: a model loaded with other settings is not this one's.
        if self._keras_model is None or self._loaded_as != (self._path(), safe):
            self._keras_model, self._loaded_as = None, None
            # One private copy, checked and loaded: the bytes checked are the bytes loaded (scoring's rule).
            with loaders.private_copy(self._path(), _storage(None)) as local:
                try:
                    flavour = loaders.check_keras_file(self._path(), local, safe)
                except ModelLoadError as exc:
                    raise _named_for_this_stage(exc) from None
                keras = keras_module(flavour)
                try:  # safe mode: uncompiled, as scoring loads it (no check reads the compile config)
                    self._keras_model = keras.models.load_model(local, compile=not safe, safe_mode=safe)
                    self._loaded_as = (self._path(), safe)
                except ValueError as exc:
                    if safe and "safe_mode" in str(exc):  # Keras' own safe mode refused code of the file
                        raise ModelLoadError(
                            f"model {self._path()!r}: {exc}; to load it anyway, {_PARAM_OPT_OUT}"
                        ) from exc
                    raise
        return self._keras_model

    def _path(self) -> str:
        path = self.getModelPath()
        if not path:
            raise ValueError("KerasModel needs model_path: the trained model's .keras file")
        return path

    def _transform(self, dataset):

        from ..inference import Predictor

        groups = self.getInputCols() or {None: list(self.getFeatureCols())}
        if not any(groups.values()):
            raise ValueError("KerasModel needs feature_cols: the columns that feed the model")
        prediction = self.getPredictionCol()
        output_names = self.getOutputNames()
        class_col = self.getPredictedClassCol()
        if class_col and output_names:
            raise ValueError("predicted_class_col needs a model with one output")
        output_mapping = {name: f"{prediction}_{name}" for name in output_names} if output_names else _OUTPUT
        packed = self.getPackedOutputs() and bool(output_names or self.resolved_output_kind() == outputs.REGRESSION)
        if packed and class_col:
            raise ValueError(
                "predicted_class_col reads the output's values as numbers: it cannot be set with packed_outputs"
            )
        feeds = [_Feed.of(dataset.schema, i, name, cols) for i, (name, cols) in enumerate(groups.items())]
        names = [feed.column for feed in feeds]
        mapping = names if list(groups) == [None] else {feed.column: feed.input for feed in feeds}
        predictor = Predictor(
            self._path(),
            input_mapping=mapping,
            output_mapping=output_mapping,
            batch_size=self.getPredictBatchSize(),
            packed_outputs=packed,  # True: array outputs only (a one-value regressor stays a double)
            safe_mode=self.getSafeMode(),
        )
        try:
            signature = predictor.model_signature(dataset.sparkSession)
        except ModelLoadError as exc:
            raise _named_for_this_stage(exc) from None
        inputs = [TensorInfo.from_dict(t) for t in (signature or {}).get("inputs") or []]
        built = {
            feed.column: feed.expression(dataset.schema, _declared(inputs, feed, len(feeds)))
            for feed in feeds
            if feed.built
        }
        try:
            scored = predictor.with_predictions(dataset.withColumns(built)).drop(*built)
        except InferenceInputError as exc:  # a built column is named as the user's columns
            raise InferenceInputError(_user_columns(str(exc), feeds)) from None
        if output_names:  # several outputs: each as the model writes it
            return scored
        names = {
            "prediction": prediction,
            "probability": self.getProbabilityCol(),
            "rawPrediction": self.getRawPredictionCol(),
        }
        return outputs.spark_ml_columns(scored, _OUTPUT, self.resolved_output_kind(), names, class_col)

    def resolved_output_kind(self) -> str:
        """``output_kind``, or where it is None the kind the model file's Keras config says (read
        once, as JSON: none of the model's code runs)."""
        kind = self.getOutputKind()
        if kind is None:
            if self._output_kind is None:
                self._output_kind = outputs.output_kind(self._saved_config())
            kind = self._output_kind
        return kind

    def _saved_config(self) -> dict:
        with loaders.private_copy(self._path(), _storage(None)) as local:
            try:
                with zipfile.ZipFile(local) as archive:
                    return json.loads(archive.read("config.json"))
            except (KeyError, ValueError, zipfile.BadZipFile):
                return {}  # not a .keras file's config: scored as a regressor unless output_kind says

    # -- MLWritable / MLReadable --

    def write(self) -> MLWriter:
        """A writer saving every Param (as JSON) and a copy of the model file."""
        return _KerasModelWriter(self)

    @classmethod
    def read(cls) -> MLReader:
        """A reader loading what ``write()`` saved (the model file from inside the saved directory)."""
        return _KerasModelReader()


@dataclass(frozen=True)
class _Feed:
    """The columns of one model input and the DataFrame column that feeds it: the user's own when it
    is one plain column (named in every error as the user knows it), else one built by Spark SQL."""

    input: str | None  # the model input's name (None: the one input of a one-input model)
    columns: tuple[str, ...]
    column: str  # what feeds the input: the user's column, or a built one (_INPUT + index)

    @classmethod
    def of(cls, schema, index: int, name: str | None, columns) -> "_Feed":
        from pyspark.ml.linalg import VectorUDT

        columns = tuple(columns)
        missing = [c for c in columns if c not in schema.fieldNames()]
        if missing:
            raise KerasInputError(
                f"feature_cols: the DataFrame has no column {missing[0]!r}; its columns are {schema.fieldNames()}"
            )
        plain = len(columns) == 1 and not isinstance(schema[columns[0]].dataType, VectorUDT)
        return cls(name, columns, columns[0] if plain else f"{_INPUT}{index}")

    @property
    def built(self) -> bool:
        return self.column.startswith(_INPUT)

    def described(self) -> str:
        return f"feature column{'s' if len(self.columns) > 1 else ''} {list(self.columns)}"

    def expression(self, schema, declared: str | None):
        """The columns (numbers, arrays, Vectors) as one array expression of the input's dtype
        (``declared``, else the columns' integer type when all are integers, else float),
        concatenated in order; KerasInputError naming a column that cannot become it."""
        from pyspark.ml.functions import vector_to_array
        from pyspark.ml.linalg import VectorUDT
        from pyspark.sql import functions as F
        from pyspark.sql.types import ArrayType

        sources = column_dtypes(schema, self.columns)
        dtype = declared
        if dtype is None:
            integers = all(sources[c].startswith(("int", "uint")) for c in self.columns)
            dtype = str(np.result_type(*sources.values())) if integers else "float32"
        element = spark_name(dtype) or "float"
        target = numpy_dtype(element)
        parts = []
        for name in self.columns:
            if not castable(sources[name], target):
                raise KerasInputError(
                    f"feature_cols: column {name!r} holds {sources[name]} values but the model's input "
                    f"{self.input or 'its one input'!r} expects {dtype}: cast the column first "
                    f"(df.withColumn({name!r}, F.col({name!r}).cast(...)))"
                )
            column = F.col("`" + name.replace("`", "``") + "`")
            kind = schema[name].dataType
            if isinstance(kind, VectorUDT):  # doubles: only a float input takes them (checked above)
                values = vector_to_array(column, "float32" if element == "float" else "float64")
                parts.append(values.cast(f"array<{element}>"))
            elif isinstance(kind, ArrayType):
                parts.append(column.cast(f"array<{element}>"))
            else:
                parts.append(F.array(column.cast(element)))
        return parts[0] if len(parts) == 1 else F.concat(*parts)


def _declared(inputs: list[TensorInfo], feed: _Feed, count: int) -> str | None:
    """The dtype the model declares for ``feed``'s input (by name; a one-input model's only input)."""
    if count == 1 and len(inputs) == 1:
        return inputs[0].dtype
    for info in inputs:
        if info.name.split(":")[0] == feed.input:
            return info.dtype
    return None


def _user_columns(message: str, feeds: list[_Feed]) -> str:
    """``message`` naming the user's feature columns where it names a column KerasModel built."""
    for feed in feeds:
        if feed.built:
            message = message.replace(f"column {feed.column!r}", feed.described())
            message = message.replace(repr(feed.column), repr(list(feed.columns)))
    return message


def _named_for_this_stage(error: ModelLoadError) -> ModelLoadError:
    """A safe-mode refusal naming this stage's Param rather than the loaders' keyword argument."""
    text = str(error)
    if _LOADERS_OPT_OUT not in text:
        return error
    return ModelLoadError(text.replace(_LOADERS_OPT_OUT, _PARAM_OPT_OUT))


def _storage(spark) -> Storage:
    """A Storage with the store settings of ``spark`` (None: the active session's, if any)."""
    return Storage(spark_conf.from_spark(spark))


def qualified_path(spark, path: str) -> str:
    """``path`` as Spark resolves it (one without a scheme: on ``fs.defaultFS`` of ``spark``, a SparkContext
    or SparkSession); a local one as an absolute path without ``file:``, a store's as written (``s3a://b/k``)."""
    try:
        sc = getattr(spark, "sparkContext", spark) if spark is not None else None
        jsc = getattr(sc, "_jsc", None)
        default_fs = jsc.hadoopConfiguration().get("fs.defaultFS") if jsc is not None else None
    except Exception:  # noqa: BLE001 - Spark Connect has no SparkContext: a path without a scheme is local
        default_fs = None
    qualified = locations.qualify(path, default_fs)
    location = parse(qualified)
    return location.key if location.is_local else qualified.rstrip("/")


def _in_object_store(path: str) -> bool:
    """Whether ``path`` is on S3, GCS or Azure (whose metadata ``KerasModel`` writes without the JVM)."""
    return is_remote(path) and parse(path).store in ("s3", "gcs", "azure")


def _copy(storage: Storage, source: str, target: str) -> None:
    """Copy the file ``source`` to ``target`` (any stores), whole or not at all."""
    if not is_remote(source):
        storage.upload(parse(source).key, target)
        return
    scratch = tempfile.mkdtemp(prefix="sparkdl-keras-copy-")
    try:
        local = os.path.join(scratch, os.path.basename(source.rstrip("/")) or "model.keras")
        storage.download(source, local)
        storage.upload(local, target)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _write_metadata(storage: Storage, path: str, text: str) -> None:
    """Spark ML's metadata layout (``metadata/part-00000`` then ``_SUCCESS``), written through ``storage``."""
    storage.write_text(f"{path}/metadata/part-00000", text + "\n")
    storage.write_text(f"{path}/metadata/_SUCCESS", "")


def _read_metadata(storage: Storage, path: str) -> str:
    """The metadata JSON that Spark ML (or :func:`_write_metadata`) wrote under ``path``."""
    directory = f"{path}/metadata"
    names = sorted(
        name for name, is_dir in storage.listdir(directory) if not is_dir and not name.startswith(("_", "."))
    )
    for name in names:
        text = storage.read_text(f"{directory}/{name}") or ""
        line = next((line for line in text.splitlines() if line.strip()), None)
        if line is not None:
            return line
    raise FileNotFoundError(f"{path} holds no saved KerasModel (no metadata under {directory})")


class _KerasModelWriter(MLWriter):
    def __init__(self, instance: KerasModel):
        super().__init__()
        self.instance = instance

    def save(self, path: str) -> None:
        """Save to ``path`` (``overwrite()``: replacing what is there); see ``saveImpl``."""
        if not isinstance(path, str):
            raise TypeError(f"path should be a string, got type {type(path)}")
        target = qualified_path(self.sparkSession, path)
        if not _in_object_store(target):
            super().save(path)
            return
        storage = _storage(self.sparkSession)
        if storage.exists(target):
            if not self.shouldOverwrite:
                raise FileExistsError(f"{path} already exists: save with write().overwrite().save(path) to replace it")
            storage.delete(target)
        self.saveImpl(path)

    def saveImpl(self, path: str) -> None:
        """Every Param and the history as Spark ML's metadata, and a copy of the model file inside ``path``."""
        target = qualified_path(self.sparkSession, path)
        storage = _storage(self.sparkSession)
        extra = {"history": self.instance._history, "model_file": MODEL_FILE}
        if _in_object_store(target):
            _write_metadata(
                storage, target, DefaultParamsWriter._get_metadata_to_save(self.instance, self.sparkSession, extra)
            )
        else:
            DefaultParamsWriter.saveMetadata(self.instance, path, self.sparkSession, extraMetadata=extra)
        _copy(storage, self.instance._path(), f"{target}/{MODEL_FILE}")


class _KerasModelReader(MLReader):
    def load(self, path: str) -> KerasModel:
        target = qualified_path(self.sparkSession, path)
        if _in_object_store(target):
            metadata = DefaultParamsReader._parseMetaData(_read_metadata(_storage(self.sparkSession), target))
        else:
            metadata = DefaultParamsReader.loadMetadata(path, self.sparkSession)
        model = KerasModel()
        DefaultParamsReader.getAndSetParams(model, metadata, skipParams=["model_path"])
        model._resetUid(metadata["uid"])
        model._set(model_path=f"{target}/{metadata['model_file']}")
        model.set_history(metadata.get("history", {}))
        return model
