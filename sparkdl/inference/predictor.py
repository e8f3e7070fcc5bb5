"""Driver side: the public forms of scoring a DataFrame with a TensorFlow model.

A :class:`Predictor` holds "this model, these columns" and, through the one plan builder
(:func:`.planning.build_plan`), produces:

- an iterator function and output schema for ``DataFrame.mapInPandas`` (or ``mapInArrow``);
- ``Predictor.with_predictions(df)``: every column of ``df`` plus the predictions (what
  ``sparkdl.ml.TFModel.transform`` uses);
- a pandas UDF (:func:`predict_batch_udf`) for ``select``/``withColumn``, called like PySpark's
  ``pyspark.ml.functions.predict_batch_udf``.

The functions Spark runs on executors come from :mod:`.scoring`. A model on a remote store
(``s3a://``, ``gs://``, ``abfss://``, ``hdfs://``: :mod:`sparkdl.storage`) travels with the store
settings of the user's Spark (``fs.s3a.*``...), read here on the driver
(:func:`_with_store_settings`), so executors reach the store as Spark's own readers do.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Mapping, Sequence

from ..columns.arrow_numpy import spark_type
from ..columns.specs import check_columns
from ..storage import StoreSettings, is_remote
from ..storage import spark_conf as store_conf
from .columns import InferenceInputError
from .model import GPU_MODES, ModelSource
from .model_versions import ModelVersions
from .planning import PAD_MODES, active_spark, build_plan, model_tensors, normalise_inputs, read_signature
from .scoring import ScoringPlan, arrow_scorer, pandas_scorer, udf_scorer


def _arrow_passthrough(schema) -> bool:
    """Whether every column of ``schema`` can travel through ``mapInArrow`` untouched (plain
    Spark SQL types: no user-defined types such as ``pyspark.ml`` vectors)."""
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import ArrayType, MapType, StructType, UserDefinedType

    def plain(data_type) -> bool:
        if isinstance(data_type, UserDefinedType):
            return False
        if isinstance(data_type, ArrayType):
            return plain(data_type.elementType)
        if isinstance(data_type, MapType):
            return plain(data_type.keyType) and plain(data_type.valueType)
        if isinstance(data_type, StructType):
            return all(plain(f.dataType) for f in data_type.fields)
        return True

    try:
        to_arrow_schema(schema, timezone="UTC")
    except Exception:  # a type Arrow conversion does not support
        return False
    return all(plain(f.dataType) for f in schema.fields)


def _with_store_settings(source: ModelSource, spark=None) -> ModelSource:
    """``source`` carrying the store settings of ``spark`` (None: the active session, if any) when
    its model is on a remote store; as it is otherwise (a local path needs none)."""
    if source.path is None or not is_remote(source.path):
        return source
    return replace(source, storage=store_conf.from_spark(spark))


class Predictor:
    """Score a Spark DataFrame with a TensorFlow model, one cached model per Python worker.

    Parameters
    ----------
    model:
        A Keras ``.keras`` (or tf-keras ``.h5``) file, or a SavedModel directory
        (``model.export(path)``, ``tf.saved_model.save``, tf-keras ``model.save(dir)``), on a path
        every executor can read: a local path on a shared file system, or ``s3://``/``s3a://``,
        ``gs://``, ``abfs[s]://``, ``hdfs://`` (read with the ``fs.s3a.*``/``fs.azure.*``/``fs.gs.*``
        settings of the active Spark session and each cloud SDK's environment on the executors,
        see :mod:`sparkdl.storage`; a remote directory counts once its upload finished:
        ``saved_model.pb`` last); or a versioned model directory,
        ``ModelVersions(base, refresh_seconds=30)`` (:mod:`sparkdl.model_versions`): each Python
        worker scores with the newest version in ``base``, looking for a newer one at most once
        every ``refresh_seconds`` as a batch starts, also in a running streaming query. A new
        version must keep the model's inputs and output names; the result schema is the one
        planned when the job (or query) was planned, from the newest version then.
    make_predict_fn:
        Instead of ``model``: a function run once per worker that loads a model and returns
        ``predict(*arrays)`` returning an array, a tuple of arrays, or a dict of arrays (as for
        ``pyspark.ml.functions.predict_batch_udf``); then ``return_type`` is required.
    input_mapping:
        ``{column: model input name}`` (TensorFlowOnSpark's form; in any order: each input is
        fed by its name), a list of columns in the model's input order (Keras: ``model.inputs``;
        SavedModel: input names sorted), or one column name. Array columns are reshaped to the
        input's shape (784 values -> 28x28x1).
    output_mapping:
        ``{model output name: column}``, a list of output names (columns named alike), or one
        column name for a single-output model; default: every output, a single one named
        ``prediction``. Outputs of one value per row become scalar columns, others
        ``array<...>`` columns (flattened per row).
    keep_columns:
        Input columns passed through next to the predictions (e.g. an id) by the mapInPandas form.
    batch_size:
        Rows per model call (Arrow batches are split into chunks of this size).
    input_shapes:
        ``{column or input name: per-row shape}`` overriding the model's shapes (needed for
        ``make_predict_fn`` and for inputs with unknown dimensions).
    return_type:
        Spark type of the outputs (a ``StructType`` for several): required with
        ``make_predict_fn``, otherwise derived from the model's signature.
    signature, tags:
        SavedModel signature key (default ``serving_default``) and tag set.
    pad_batches:
        ``"auto"`` pads the last partial chunk only when the model has a fixed batch size (Keras
        models are traced once with a ``None`` batch axis, SavedModel signatures are concrete
        functions, so partial chunks never retrace); ``True`` always pads to ``batch_size``
        (e.g. for XLA-compiled functions); ``False`` never pads.
    gpus:
        ``"spark"``: the GPU Spark assigned to the task (``spark.task.resource.gpu.amount``),
        else CPU; ``"visible"``: whatever the Python worker can see; ``"none"``: CPU only.
    safe_mode:
        True (default) refuses Keras files (``.keras``, ``.h5``) that may run Python code of their
        own while they load: their config may name only Keras' own classes and functions known
        to run none (a ``Lambda`` layer, a custom layer... are refused). Pass False
        only for files from people you trust: a model path is code, so keep model directories
        writable by trusted users only.
    version_column:
        With ``ModelVersions``: the name of a ``long`` column, after the predictions, holding the
        version that scored each row.
    columns:
        ``{column: spec}`` (:mod:`sparkdl.columns.specs`), as for ``feed.as_dataset``: how a column
        that is not a plain tensor becomes the model's input, decoded on the executors.
        ``Image(height, width, channels)`` decodes image files (a ``binary`` column, e.g.
        ``binaryFile``'s ``content``); Spark's image struct is decoded without one, to the model
        input's ``(height, width, channels)``, as is an ``Image`` spec without a size.
        ``pyspark.ml`` Vectors feed a sparse model input (``Input(sparse=True)``) as
        ``tf.SparseTensor``, a dense one dense; arrays of varying length feed a ragged input
        (``Input(ragged=True)``) as ``tf.RaggedTensor``, or ``Padded(length)`` a dense one
        (length None: the input's); ``Packed(shape, dtype)`` reads a binary column of packed rows
        (``sparkdl.dfutil.pack_tensors``) as a dense input, cheaper for Spark to hand over than
        ``array<float>``. Strings feed ``tf.string`` inputs as they are. A row that
        cannot become its input (a null, a corrupt image...) fails the task naming its column,
        Spark partition and row.
    packed_outputs:
        True writes every array output as a ``binary`` column of packed rows (each row's values
        as little-endian bytes of the output's dtype, C order), or a list names the result
        columns to write so. Spark takes a ``binary`` column from Python as one copy a row,
        an ``array<float>`` column one value at a time: pack wide outputs that are written
        out (``write.parquet``) and read back later with ``Packed(shape, dtype)``.

    Null values in input columns raise an error naming the column (nulls in float scalar columns
    reach pandas as NaN and are passed to the model in the mapInPandas form; the mapInArrow
    form rejects them too).
    """

    def __init__(
        self,
        model: str | ModelVersions | None = None,
        *,
        make_predict_fn: Callable | None = None,
        input_mapping: Any = None,
        output_mapping: Any = None,
        keep_columns: Sequence[str] = (),
        batch_size: int = 1024,
        input_shapes: Mapping[str, Sequence[int]] | None = None,
        return_type: Any = None,
        signature: str = "serving_default",
        tags: Sequence[str] | None = None,
        pad_batches: Any = "auto",
        gpus: str = "spark",
        safe_mode: bool = True,
        version_column: str | None = None,
        columns: Mapping[str, Any] | None = None,
        packed_outputs: Any = False,
    ):
        versions = model if isinstance(model, ModelVersions) else None
        if versions is not None:
            model = versions.base
        elif model is not None and not isinstance(model, str):
            model = str(model)  # pathlib.Path
        if version_column is not None and (
            versions is None or not version_column or not isinstance(version_column, str)
        ):
            raise ValueError(
                f"version_column (a column name, got {version_column!r}) needs a versioned model: "
                "model=ModelVersions(base, refresh_seconds=...)"
            )
        if not isinstance(batch_size, int) or batch_size <= 0:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        if gpus not in GPU_MODES:
            raise ValueError(f"gpus must be one of {GPU_MODES}, got {gpus!r}")
        if pad_batches not in PAD_MODES:
            raise ValueError(f"pad_batches must be 'auto', True or False, got {pad_batches!r}")
        self.source = _with_store_settings(
            ModelSource(
                model,
                make_predict_fn,
                signature or "serving_default",
                tuple(tags) if tags else None,
                safe_mode=bool(safe_mode),
                versions=versions,
            )
        )
        # No settings read yet for a remote model (no active session): read them from the plan's session.
        self._store_settings_pending = self.source.path is not None and self.source.storage == StoreSettings()
        self.version_column = version_column
        self.columns = check_columns(columns, "Predictor")
        self.input_pairs = normalise_inputs(input_mapping)
        self.output_mapping = output_mapping
        self.keep_columns = (keep_columns,) if isinstance(keep_columns, str) else tuple(keep_columns)
        self.batch_size = batch_size
        self.input_shapes = dict(input_shapes or {})
        self.return_type = return_type
        self.packed_outputs = packed_outputs
        self.pad_batches = pad_batches
        self.gpus = gpus
        self._signature: dict | None = None

    def model_signature(self, spark=None) -> dict | None:
        """The model's inputs and outputs as read on an executor (None for ``make_predict_fn``)."""
        if self.source.path is None:
            return None
        self._read_store_settings(spark)
        if self._signature is None:
            self._signature = read_signature(spark or active_spark(), self.source, self.gpus)
        return self._signature

    def _read_store_settings(self, spark) -> None:
        """Read the store settings from ``spark`` when there was no session to read them from
        when this predictor was made (a remote model whose source still carries none)."""
        if spark is not None and self._store_settings_pending:
            self._store_settings_pending = False
            self.source = _with_store_settings(self.source, spark)

    def plan(self, df) -> ScoringPlan:
        """Validate the mapping against ``df``'s schema and the model; the executors' plan."""
        return self._build_plan(df.sparkSession, df.schema)

    def _build_plan(self, spark, schema, pairs=None, shapes=None, describe=None) -> ScoringPlan:
        """This predictor's plan from the one plan builder (the pandas UDF passes its own
        argument ``pairs``, their ``shapes`` and how to name them, without a ``schema``)."""
        self._read_store_settings(spark)
        return build_plan(
            self.source,
            self.input_pairs if pairs is None else pairs,
            self.model_signature(spark),
            schema=schema,
            input_shapes=self.input_shapes if shapes is None else shapes,
            output_mapping=self.output_mapping,
            return_type=self.return_type,
            keep=self.keep_columns,
            batch_size=self.batch_size,
            pad_batches=self.pad_batches,
            gpus=self.gpus,
            describe=describe,
            version_column=self.version_column,
            packed_outputs=self.packed_outputs,
            columns=self.columns,
        )

    def output_schema(self, df):
        """The ``StructType`` of the scored DataFrame: kept columns, then one per output."""
        return self.plan(df).output_schema()

    def map_in_pandas_fn(self, df) -> tuple[Callable, Any]:
        """``(function, schema)`` for ``df.mapInPandas(function, schema)``."""
        plan = self.plan(df)
        return pandas_scorer(plan), plan.output_schema()

    def map_in_arrow_fn(self, df) -> tuple[Callable, Any]:
        """``(function, schema)`` for ``df.mapInArrow(function, schema)``: no pandas conversion."""
        plan = self.plan(df)
        return arrow_scorer(plan), plan.output_schema()

    def transform(self, df, arrow: bool = True):
        """``df`` scored: kept columns plus prediction columns, with ``mapInArrow`` (no pandas
        conversion; the faster form, measured) or, ``arrow=False``, ``mapInPandas``."""
        function, schema = self.map_in_arrow_fn(df) if arrow else self.map_in_pandas_fn(df)
        return df.mapInArrow(function, schema) if arrow else df.mapInPandas(function, schema)

    def with_predictions(self, df):
        """``df`` with the prediction columns appended (every column kept, as Spark ML models do).

        Every column passes through a ``mapInArrow`` job as the Arrow arrays Spark sent (the
        fastest way to keep them, measured); when a column cannot (a user-defined type such as a
        ``pyspark.ml`` vector), a pandas UDF computes the predictions instead (one call for all
        outputs, split into columns afterwards) and Spark keeps the other columns itself.
        """
        from pyspark.sql import functions as F
        from pyspark.sql.functions import pandas_udf
        from pyspark.sql.types import StructType

        full = self.plan(df)
        plan = replace(full, keep=())
        results = full.output_schema().fields[len(full.keep) :]  # the outputs (and the version column)
        clash = sorted(set(df.columns) & {f.name for f in results})
        if clash:
            raise InferenceInputError(
                f"the DataFrame already has column(s) {clash}; choose other names in output_mapping"
            )
        if _arrow_passthrough(df.schema):
            schema = StructType(list(df.schema.fields) + results)
            plan = replace(plan, keep=tuple(df.columns), output_schema_json=schema.json())
            return df.mapInArrow(arrow_scorer(plan), schema)
        arguments = [F.col(f"`{p.column}`") for p in plan.inputs]
        if len(results) == 1:
            udf = pandas_udf(udf_scorer(plan, False, len(arguments)), results[0].dataType)
            return df.withColumn(plan.outputs[0].column, udf(*arguments))
        udf = pandas_udf(udf_scorer(plan, True, len(arguments)), StructType(results))
        hidden = "__sparkdl_predictions"
        scored = df.withColumn(hidden, udf(*arguments))
        return scored.select("*", *[F.col(hidden)[f.name].alias(f.name) for f in results]).drop(hidden)

    def __repr__(self) -> str:
        return (
            f"Predictor({self.source.describe()}, inputs={self.input_pairs}, outputs={self.output_mapping!r}, "
            f"batch_size={self.batch_size})"
        )


def map_in_pandas(df, model: str | ModelVersions | None = None, **options) -> tuple[Callable, Any]:
    """The iterator function and output schema to score ``df`` with ``df.mapInPandas``.

    ``options`` are :class:`Predictor`'s (``input_mapping``, ``output_mapping``,
    ``keep_columns``, ``batch_size``, ...):

    ```python
    fn, schema = map_in_pandas(df, "/models/digits.keras", input_mapping={"pixels": "image"},
                               keep_columns=["id"], batch_size=1024)
    scored = df.mapInPandas(fn, schema)
    ```
    """
    return Predictor(model, **options).map_in_pandas_fn(df)


def map_in_arrow(df, model: str | ModelVersions | None = None, **options) -> tuple[Callable, Any]:
    """Like :func:`map_in_pandas`, for ``df.mapInArrow`` (Arrow batches, no pandas at all)."""
    return Predictor(model, **options).map_in_arrow_fn(df)


def predict_batch_udf(
    make_predict_fn: Callable | None = None,
    *,
    return_type: Any = None,
    batch_size: int = 1024,
    input_tensor_shapes: Any = None,
    model: str | ModelVersions | None = None,
    input_names: Sequence[str] | None = None,
    output_mapping: Any = None,
    signature: str = "serving_default",
    tags: Sequence[str] | None = None,
    pad_batches: Any = "auto",
    gpus: str = "spark",
    spark=None,
    safe_mode: bool = True,
):
    """A pandas UDF scoring its argument columns, like ``pyspark.ml.functions.predict_batch_udf``.

    Switching from PySpark's is a change of import: ``make_predict_fn``, ``return_type``,
    ``batch_size`` and ``input_tensor_shapes`` mean the same (``input_tensor_shapes``: a list of
    per-argument shapes, or a dict ``{argument index: shape}``). The model is cached per worker
    like PySpark's, and sparkdl adds GPU pinning from Spark's resources and stricter errors.
    Alternatively pass ``model=`` (a ``.keras`` file or SavedModel directory): then
    ``return_type`` is derived from the model's signature (read with one small Spark job on the
    active session, or ``spark=``) and arguments feed the model's inputs in order (or
    ``input_names``). ``safe_mode=False`` loads model files that run code of their own (see
    ``Predictor``); ``model=ModelVersions(base, refresh_seconds)`` scores with the newest version
    in a versioned directory (a version column needs ``Predictor``). Several outputs come back as
    one struct column (``select("preds.*")``):

    ```python
    udf = predict_batch_udf(model="/models/digits.keras", batch_size=1024)
    df.withColumn("probabilities", udf("pixels"))
    ```
    """
    from pyspark.sql.functions import pandas_udf
    from pyspark.sql.types import StructType

    predictor = Predictor(
        model,
        make_predict_fn=make_predict_fn,
        input_mapping=[],
        output_mapping=output_mapping,
        batch_size=batch_size,
        return_type=return_type,
        signature=signature,
        tags=tags,
        pad_batches=pad_batches,
        gpus=gpus,
        safe_mode=safe_mode,
    )
    model_inputs, _ = model_tensors(predictor.model_signature(spark))
    if isinstance(input_tensor_shapes, Mapping):
        if model_inputs is not None:
            count = len(model_inputs)
        else:
            count = max(input_tensor_shapes) + 1 if input_tensor_shapes else 1
        shapes = [input_tensor_shapes.get(i) for i in range(count)]
    else:
        shapes = list(input_tensor_shapes) if input_tensor_shapes is not None else None
    if input_names is not None:
        names = list(input_names)
    elif model_inputs is not None:
        names = [t.name for t in model_inputs]
    else:
        names = [f"input_{i}" for i in range(len(shapes) if shapes else 1)]
    arity = len(names)
    if shapes is not None and len(shapes) != arity:
        raise ValueError(f"input_tensor_shapes has {len(shapes)} entries for {arity} inputs")
    pairs = [(f"argument {i}", name) for i, name in enumerate(names)]
    overrides = {f"argument {i}": s for i, s in enumerate(shapes or []) if s}
    plan = predictor._build_plan(spark, None, pairs, overrides, describe=lambda column: f"UDF {column}")
    resolved_type = spark_type(return_type)
    if resolved_type is None:  # the plan's result columns: one as its own type, several as a struct
        fields = plan.output_schema().fields
        resolved_type = fields[0].dataType if len(fields) == 1 else StructType(fields)
    struct = isinstance(resolved_type, StructType)
    outputs = [o.column for o in plan.outputs]
    if struct and outputs != resolved_type.names:
        raise ValueError(
            f"the struct's fields {resolved_type.names} must be the output columns "
            f"{outputs}; with a StructType return_type, name its fields "
            "after the predict function's outputs and leave output_mapping out"
        )
    return pandas_udf(udf_scorer(plan, struct, arity), resolved_type)
