"""``KerasModel``: what ``KerasEstimator.fit`` returns, a Spark ML ``Model`` that scores with sparkdl's inference.

``transform(df)`` appends the model's output column(s) (``prediction_col``; one per output,
``prediction_col + "_" + name``, for a multi-output model) and, with ``predicted_class_col``,
the predicted class as a double for Spark ML's evaluators. The feature columns are turned into
the model's inputs by Spark SQL (numbers, arrays and Vectors concatenated as ``array<float>``, as
during training) and scored by :class:`sparkdl.inference.Predictor` (one cached model per Python
worker, Arrow batches). ``history`` holds the per-epoch metrics of the fit; ``keras_model`` loads
the trained model on the driver. ``write()``/``read()`` save the model file and every Param, so a
``PipelineModel`` holding a ``KerasModel`` saves, loads and predicts the same.

The model file is read and copied through :class:`sparkdl.storage.Storage` with the active
application's store settings: local paths, ``s3a://``, ``gs://``, ``abfss://``, ``hdfs://`` alike. A
``KerasModel`` saved to an object store (``s3a://``, ``gs://``, ``abfss://``) writes its metadata there
too, in Spark ML's layout (``metadata/part-00000``), so it saves and loads without the JVM's file
system for that store (hadoop-aws...). A ``PipelineModel``'s own metadata is written by Spark ML
through the JVM, so saving a pipeline to ``s3a://`` needs Spark's S3A (``hadoop-aws``) as clusters
such as EMR and Databricks have; its ``KerasModel`` stage's files still go through the storage layer.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import zipfile
from typing import Any

from pyspark.ml import Model
from pyspark.ml.util import DefaultParamsReader, DefaultParamsWriter, MLReadable, MLReader, MLWritable, MLWriter

from ..storage import Storage, is_remote, locations, parse, spark_conf
from . import outputs
from .params import KerasModelParams, spark_ml_names

MODEL_FILE = "model/model.keras"  #: where ``write()`` keeps the model file inside the saved directory
_INPUT = "__sparkdl_input_"
_OUTPUT = "__sparkdl_output"


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
        """The trained model, loaded on the driver (once; Keras' safe mode on)."""
        if self._keras_model is None:
            with self._local_copy() as local:
                self._keras_model = _keras_for_file(local).models.load_model(local, safe_mode=True)
        return self._keras_model

    @contextlib.contextmanager
    def _local_copy(self):
        """The model file copied to a scratch path on the driver (removed afterwards)."""
        scratch = tempfile.mkdtemp(prefix="sparkdl-keras-model-")
        try:
            local = os.path.join(scratch, "model.keras")
            _storage(None).download(self._path(), local)
            yield local
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

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
        inputs = {f"{_INPUT}{i}": _as_float_array(dataset.schema, cols) for i, cols in enumerate(groups.values())}
        names = list(groups)
        mapping = list(inputs) if names == [None] else dict(zip(inputs, names))
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
        predictor = Predictor(
            self._path(),
            input_mapping=mapping,
            output_mapping=output_mapping,
            batch_size=self.getPredictBatchSize(),
            packed_outputs=packed,  # True: array outputs only (a one-value regressor stays a double)
        )
        scored = predictor.with_predictions(dataset.withColumns(inputs)).drop(*inputs)
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
        with self._local_copy() as local:
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


def _as_float_array(schema, columns: list[str]):
    """Columns (numbers, arrays, Vectors) as one ``array<float>`` expression, concatenated in order."""
    from pyspark.ml.functions import vector_to_array
    from pyspark.ml.linalg import VectorUDT
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType

    parts = []
    for name in columns:
        column = F.col("`" + name.replace("`", "``") + "`")
        kind = schema[name].dataType
        if isinstance(kind, VectorUDT):
            parts.append(vector_to_array(column, "float32"))
        elif isinstance(kind, ArrayType):
            parts.append(column.cast("array<float>"))
        else:
            parts.append(F.array(column.cast("float")))
    return parts[0] if len(parts) == 1 else F.concat(*parts)


def _keras_for_file(path: str):
    """The Keras that wrote a ``.keras`` file (its metadata's version: 2.x is tf-keras)."""
    from .shipping import KERAS3, TF_KERAS, keras_module

    try:
        with zipfile.ZipFile(path) as archive:
            version = str(json.loads(archive.read("metadata.json")).get("keras_version", ""))
    except (OSError, KeyError, ValueError, zipfile.BadZipFile) as exc:
        raise ValueError(f"{path} is not a .keras model file: {exc}") from exc
    return keras_module(TF_KERAS if version.startswith("2.") else KERAS3)


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
