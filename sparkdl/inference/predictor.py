"""Driver side: turn "this model, these columns" into a validated scoring plan and Spark functions.

A :class:`Predictor` resolves the mapping between DataFrame columns and model inputs/outputs,
checks dtypes and shapes against the model's signature before any job runs (the signature is
read by a one-row Spark job on an executor, so the driver never imports TensorFlow, and the
model is then already cached in that executor's Python worker), and produces:

- an iterator function and output schema for ``DataFrame.mapInPandas`` (or ``mapInArrow``);
- ``Predictor.with_predictions(df)``: every column of ``df`` plus the predictions (what
  ``sparkdl.ml.TFModel.transform`` uses);
- a pandas UDF (:func:`predict_batch_udf`) for ``select``/``withColumn``, called like PySpark's
  ``pyspark.ml.functions.predict_batch_udf``.

On executors every Arrow batch is converted column-wise (:mod:`.columns`), split into
``batch_size`` chunks, scored by the cached model (:mod:`.worker`) and converted back.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterator, Mapping, Sequence, Tuple

import numpy as np
import pandas as pd

from . import columns as cols
from . import worker
from .columns import InferenceInputError, InputPlan, OutputPlan
from .worker import ModelSource, TensorInfo

PAD_MODES = ("auto", True, False)


@dataclass(frozen=True)
class ScoringPlan:
    """Everything an executor needs to score batches (picklable, no Spark objects).

    ``pad_to``: when set, a chunk shorter than this is padded (by repeating its last row) to this
    many rows and the padding is dropped from the outputs, so the model always sees one batch
    shape (needed for models with a fixed batch dimension or jit-compiled functions).
    """

    source: ModelSource
    inputs: tuple[InputPlan, ...]
    outputs: tuple[OutputPlan, ...]
    keep: tuple[str, ...]
    batch_size: int
    pad_to: int | None
    gpus: str
    output_schema_json: str  # StructType.json(): executors rebuild it without a JVM

    def output_schema(self):
        """The result ``StructType``."""
        from pyspark.sql.types import StructType

        return StructType.fromJson(json.loads(self.output_schema_json))


# ---------------------------------------------------------------------------------------------
# Executor-side scoring (shared by every form)
# ---------------------------------------------------------------------------------------------

def _normalise_result(result: Any, plan: ScoringPlan) -> dict[str, np.ndarray]:
    """What a model or predict function returned, as ``{output name: array}``."""
    if isinstance(result, Mapping):
        return {key: np.asarray(value) for key, value in result.items()}
    if isinstance(result, pd.DataFrame):
        return {key: result[key].to_numpy() for key in result.columns}
    if isinstance(result, list) and result and isinstance(result[0], Mapping):
        # predict_batch_udf's row-oriented form: a list of dicts, one per row.
        return {key: np.asarray([row[key] for row in result]) for key in result[0]}
    if isinstance(result, (list, tuple)):
        if len(result) != len(plan.outputs):
            raise InferenceInputError(f"the predict function returned {len(result)} arrays but "
                                      f"{len(plan.outputs)} outputs were declared")
        return {out.tensor: np.asarray(value) for out, value in zip(plan.outputs, result)}
    if len(plan.outputs) != 1:
        raise InferenceInputError(f"the predict function returned one array but {len(plan.outputs)} outputs "
                                  f"were declared ({[o.tensor for o in plan.outputs]}); return a dict")
    return {plan.outputs[0].tensor: np.asarray(result)}


def score_arrays(model: worker.LoadedModel, plan: ScoringPlan, arrays: list[np.ndarray],
                 rows: int) -> dict[str, np.ndarray]:
    """Run the model over ``rows`` rows of ``arrays`` in ``batch_size`` chunks; outputs by name."""
    parts: list[dict[str, np.ndarray]] = []
    for start in range(0, rows, plan.batch_size):
        chunk = [array[start:start + plan.batch_size] for array in arrays]
        size = min(plan.batch_size, rows - start)
        pad = (plan.pad_to - size) if plan.pad_to and size < plan.pad_to else 0
        if pad:
            chunk = [np.concatenate([a, np.repeat(a[-1:], pad, axis=0)]) for a in chunk]
        result = _normalise_result(model(chunk), plan)
        if pad:
            result = {key: value[:size] for key, value in result.items()}
        parts.append(result)
    if len(parts) == 1:
        return parts[0]
    return {key: np.concatenate([part[key] for part in parts]) for key in parts[0]}


def _pandas_scorer(plan: ScoringPlan) -> Callable[[Iterator[pd.DataFrame]], Iterator[pd.DataFrame]]:
    """The ``mapInPandas`` function: one cached model per worker, vectorised batches."""

    def score_partition(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        model = None  # loaded lazily: an empty partition loads nothing
        for frame in batches:
            rows = len(frame)
            if rows == 0:
                continue
            # Data first: a bad batch fails before TensorFlow is even imported in a fresh worker.
            arrays = [cols.pandas_to_numpy(frame[p.column], p) for p in plan.inputs]
            if model is None:
                model = worker.get_model(plan.source, plan.gpus)
            outputs = score_arrays(model, plan, arrays, rows)
            yield cols.outputs_to_pandas(outputs, plan.outputs, rows, frame[list(plan.keep)] if plan.keep else None)

    return score_partition


def _arrow_scorer(plan: ScoringPlan) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The ``mapInArrow`` function: like :func:`_pandas_scorer`, on Arrow record batches; kept
    columns pass through as the very Arrow arrays Spark sent (no conversion at all)."""

    def score_partition(batches):
        import pyarrow as pa
        from pyspark.sql.pandas.types import to_arrow_schema
        from pyspark.sql.types import StructType

        result_fields = list(to_arrow_schema(StructType(plan.output_schema().fields[len(plan.keep):])))
        model = None
        for batch in batches:
            rows = batch.num_rows
            if rows == 0:
                continue
            arrays = [cols.arrow_to_numpy(batch.column(p.column), p) for p in plan.inputs]
            if model is None:
                model = worker.get_model(plan.source, plan.gpus)
            outputs = score_arrays(model, plan, arrays, rows)
            keep = batch.select(list(plan.keep)) if plan.keep else None
            schema = pa.schema((list(keep.schema) if keep is not None else []) + result_fields)
            yield cols.outputs_to_arrow(outputs, plan.outputs, rows, schema, keep)

    return score_partition


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


def _probe_function(source: ModelSource, gpus: str):
    def probe(batches):
        for _ in batches:
            pass
        try:
            answer = {"signature": worker.get_model(source, gpus).signature()}
        except Exception as exc:  # reported, not raised: Spark would retry a deterministic failure
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        yield pd.DataFrame({"signature": [json.dumps(answer)]})

    return probe


# ---------------------------------------------------------------------------------------------
# Driver-side resolution
# ---------------------------------------------------------------------------------------------

def _active_spark():
    from pyspark.sql import SparkSession

    spark = SparkSession.getActiveSession()
    if spark is None:
        raise RuntimeError("no active SparkSession: pass spark=... or create a session first")
    return spark


def read_signature(spark, source: ModelSource, gpus: str = "spark") -> dict:
    """The model's signature (inputs and outputs, dtypes and shapes) as read on an executor.

    Runs a one-row Spark job (works under Spark Connect too); the model stays cached in that
    executor's Python worker for the scoring job.
    """
    probe = spark.range(1, numPartitions=1).mapInPandas(_probe_function(source, gpus), "signature string")
    answer = json.loads(probe.collect()[0]["signature"])
    if "error" in answer:
        raise worker.ModelLoadError(f"could not load {source.describe()} on an executor: {answer['error']}")
    return answer["signature"]


def _spark_type_for(info: TensorInfo) -> tuple[str, bool]:
    """DDL type and scalar-ness of a model output column."""
    dtype = info.dtype or "float32"
    if dtype not in cols.NUMPY_TO_SPARK:
        raise InferenceInputError(f"model output {info.name!r} has dtype {dtype}, which has no Spark type")
    base = cols.NUMPY_TO_SPARK[dtype]
    scalar = info.shape is not None and (len(info.shape) == 0 or tuple(info.shape) == (1,))
    return (base if scalar else f"array<{base}>"), scalar


_SIMPLE_TYPES = {"float": "FloatType", "double": "DoubleType", "tinyint": "ByteType", "byte": "ByteType",
                 "smallint": "ShortType", "short": "ShortType", "int": "IntegerType", "integer": "IntegerType",
                 "bigint": "LongType", "long": "LongType", "boolean": "BooleanType", "string": "StringType",
                 "binary": "BinaryType"}


def spark_type(ddl: Any):
    """A Spark ``DataType`` from a DataType or DDL string; simple and ``array<...>`` types are
    parsed here (no JVM needed, so this works under Spark Connect), others by PySpark."""
    from pyspark.sql import types as T

    if not isinstance(ddl, str):
        return ddl
    text = ddl.strip()
    if text.lower().startswith("array<") and text.endswith(">"):
        inner = spark_type(text[len("array<"):-1])
        return T.ArrayType(inner) if inner is not None else T._parse_datatype_string(text)
    if text.lower() in _SIMPLE_TYPES:
        return getattr(T, _SIMPLE_TYPES[text.lower()])()
    return T._parse_datatype_string(text)


def _numpy_for_spark(ddl: str) -> str | None:
    base = ddl[len("array<"):-1] if ddl.startswith("array<") else ddl
    inverse = {"float": "float32", "double": "float64", "byte": "int8", "tinyint": "int8", "short": "int16",
               "smallint": "int16", "integer": "int32", "int": "int32", "long": "int64", "bigint": "int64",
               "boolean": "bool"}
    return inverse.get(base)


def _normalise_inputs(input_mapping: Any) -> list[tuple[str, str | None]]:
    if input_mapping is None:
        raise ValueError("input_mapping is required: a column name, a list of columns (model input order) "
                         "or a dict {column: model input name}")
    if isinstance(input_mapping, str):
        return [(input_mapping, None)]
    if isinstance(input_mapping, Mapping):
        return [(str(c), str(t)) for c, t in input_mapping.items()]
    return [(str(c), None) for c in input_mapping]


def _resolve_inputs(pairs: list[tuple[str, str | None]], model_inputs: list[TensorInfo] | None,
                    input_shapes: Mapping[str, Sequence[int]], schema: Any | None,
                    describe: Callable[[str], str] = lambda c: f"column {c!r}") -> tuple[InputPlan, ...]:
    """Match columns to model inputs, fixing each input's shape and dtype; errors name the column."""
    if model_inputs is not None:
        names = [t.name for t in model_inputs]
        by_name = {t.name: t for t in model_inputs}
        if all(t is None for _, t in pairs):
            if len(pairs) != len(model_inputs):
                raise InferenceInputError(f"{len(pairs)} input column(s) {[c for c, _ in pairs]} for a model with "
                                          f"{len(model_inputs)} input(s) {names}; map each one: "
                                          "input_mapping={column: input name}")
            pairs = [(c, n) for (c, _), n in zip(pairs, names)]
        for column, tensor in pairs:
            if tensor not in by_name:
                raise InferenceInputError(f"{describe(column)} is mapped to model input {tensor!r}, which the "
                                          f"model does not have; its inputs are {names}")
        missing = [n for n in names if n not in {t for _, t in pairs}]
        if missing:
            raise InferenceInputError(f"model input(s) {missing} are not fed by any column; add them to "
                                      "input_mapping")
    plans = []
    for index, (column, tensor) in enumerate(pairs):
        tensor = tensor or (column if schema is not None else f"input_{index}")
        info = by_name.get(tensor) if model_inputs is not None else None
        depth, source_dtype = None, None
        if schema is not None:
            if column not in schema.fieldNames():
                raise InferenceInputError(f"input column {column!r} is not in the DataFrame; its columns are "
                                          f"{schema.fieldNames()}")
            try:
                depth, source_dtype = cols.spark_value_info(schema[column].dataType)
            except InferenceInputError as exc:
                raise InferenceInputError(f"{describe(column)}: {exc}") from None
        shape = input_shapes.get(column, input_shapes.get(tensor))
        row_shape = tuple(int(d) for d in shape) if shape is not None else None
        if row_shape is None and info is not None and info.shape is not None and None not in info.shape:
            row_shape = tuple(info.shape)
        if depth == 0 and row_shape is not None and int(np.prod(row_shape, dtype=np.int64)) != 1:
            raise InferenceInputError(f"{describe(column)} holds one value per row but model input {tensor!r} "
                                      f"expects shape {row_shape}; give it an array column "
                                      "(F.array(...) combines scalar columns)")
        plan = InputPlan(column, tensor, -1 if depth is None else depth, source_dtype or "",
                         row_shape, info.dtype if info is not None else None)
        if source_dtype:
            try:
                cols.check_dtype(plan)
            except InferenceInputError as exc:
                raise InferenceInputError(str(exc).replace(plan.describe(), describe(column), 1)) from None
        plans.append(plan)
    return tuple(plans)


def _resolve_outputs(output_mapping: Any, model_outputs: list[TensorInfo] | None,
                     return_type: Any, default_column: str = "prediction") -> tuple[OutputPlan, ...]:
    """Match model outputs to result columns and Spark types."""
    from pyspark.sql.types import ArrayType, DataType, StructType

    return_type = spark_type(return_type)
    if return_type is not None and not isinstance(return_type, DataType):
        raise ValueError(f"return_type must be a Spark DataType or DDL string, got {type(return_type).__name__}")
    declared: list[tuple[str, str, bool]] = []  # (tensor, ddl, scalar)
    if return_type is not None:
        fields = return_type.fields if isinstance(return_type, StructType) else None
        if fields is None:
            names = [o.name for o in model_outputs] if model_outputs is not None else [None]
            if isinstance(output_mapping, Mapping) and len(output_mapping) == 1:
                names = [next(iter(output_mapping))]
            elif isinstance(output_mapping, (list, tuple)) and len(output_mapping) == 1:
                names = [output_mapping[0]]
            if len(names) != 1:
                raise InferenceInputError(f"return_type {return_type.simpleString()} describes one output but the "
                                          f"model has {names}; pass a StructType or choose one in output_mapping")
            declared = [(names[0] or default_column, return_type.simpleString(),
                         not isinstance(return_type, ArrayType))]
        else:
            declared = [(f.name, f.dataType.simpleString(), not isinstance(f.dataType, ArrayType)) for f in fields]
    elif model_outputs is not None:
        declared = [(o.name, *_spark_type_for(o)) for o in model_outputs]
    else:
        raise ValueError("return_type is required with make_predict_fn (the outputs' Spark types), as in "
                         "pyspark.ml.functions.predict_batch_udf")
    available = {tensor: (ddl, scalar) for tensor, ddl, scalar in declared}

    if output_mapping is None:
        pairs = [(declared[0][0], default_column)] if len(declared) == 1 else [(t, t) for t, _, _ in declared]
    elif isinstance(output_mapping, str):
        if len(declared) != 1:
            raise InferenceInputError(f"output_mapping {output_mapping!r} names one column but the model has "
                                      f"outputs {list(available)}; use a dict {{output: column}}")
        pairs = [(declared[0][0], output_mapping)]
    elif isinstance(output_mapping, Mapping):
        pairs = [(str(t), str(c)) for t, c in output_mapping.items()]
    else:
        pairs = [(str(t), str(t)) for t in output_mapping]
    plans = []
    for tensor, column in pairs:
        if tensor not in available:
            raise InferenceInputError(f"output_mapping names model output {tensor!r}, which the model does not "
                                      f"have; its outputs are {list(available)}")
        ddl, scalar = available[tensor]
        plans.append(OutputPlan(tensor, column, ddl, scalar, _numpy_for_spark(ddl)))
    return tuple(plans)


def _pad_to(pad_batches: Any, batch_size: int, model_inputs: list[TensorInfo] | None) -> tuple[int, int | None]:
    """``(chunk size, pad_to)`` from the pad policy and any fixed batch dimension of the model."""
    if pad_batches not in PAD_MODES:
        raise ValueError(f"pad_batches must be 'auto', True or False, got {pad_batches!r}")
    fixed = sorted({t.batch for t in model_inputs or [] if t.batch})
    if len(fixed) > 1:
        raise InferenceInputError(f"model inputs have different fixed batch sizes {fixed}")
    if fixed and pad_batches is not False:
        return fixed[0], fixed[0]  # the model only takes this batch size
    return batch_size, (batch_size if pad_batches is True else None)


class Predictor:
    """Score a Spark DataFrame with a TensorFlow model, one cached model per Python worker.

    Parameters
    ----------
    model:
        A Keras ``.keras`` (or tf-keras ``.h5``) file, or a SavedModel directory
        (``model.export(path)``, ``tf.saved_model.save``, tf-keras ``model.save(dir)``), on a path
        every executor can read.
    make_predict_fn:
        Instead of ``model``: a function run once per worker that loads a model and returns
        ``predict(*arrays)`` returning an array, a tuple of arrays, or a dict of arrays (as for
        ``pyspark.ml.functions.predict_batch_udf``); then ``return_type`` is required.
    input_mapping:
        ``{column: model input name}`` (TensorFlowOnSpark's form), a list of columns in the
        model's input order (Keras: ``model.inputs``; SavedModel: input names sorted), or one
        column name. Array columns are reshaped to the input's shape (784 values -> 28x28x1).
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
        True (default) refuses model files that would run Python code of their own while they
        load (Keras' safe mode for ``.keras``; a ``Lambda`` layer in an ``.h5`` file). Pass False
        only for files from people you trust: a model path is code, so keep model directories
        writable by trusted users only.

    Null values in input columns raise an error naming the column (nulls in float scalar columns
    reach pandas as NaN and are passed to the model in the mapInPandas form; the mapInArrow
    form rejects them too).
    """

    def __init__(self, model: str | None = None, *, make_predict_fn: Callable | None = None,
                 input_mapping: Any = None, output_mapping: Any = None, keep_columns: Sequence[str] = (),
                 batch_size: int = 1024, input_shapes: Mapping[str, Sequence[int]] | None = None,
                 return_type: Any = None, signature: str = "serving_default", tags: Sequence[str] | None = None,
                 pad_batches: Any = "auto", gpus: str = "spark", safe_mode: bool = True):
        if model is not None and not isinstance(model, str):
            model = str(model)  # pathlib.Path
        if not isinstance(batch_size, int) or batch_size <= 0:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        if gpus not in worker.GPU_MODES:
            raise ValueError(f"gpus must be one of {worker.GPU_MODES}, got {gpus!r}")
        if pad_batches not in PAD_MODES:
            raise ValueError(f"pad_batches must be 'auto', True or False, got {pad_batches!r}")
        self.source = ModelSource(model, make_predict_fn, signature or "serving_default",
                                  tuple(tags) if tags else None, safe_mode=bool(safe_mode))
        self.input_pairs = _normalise_inputs(input_mapping)
        self.output_mapping = output_mapping
        self.keep_columns = (keep_columns,) if isinstance(keep_columns, str) else tuple(keep_columns)
        self.batch_size = batch_size
        self.input_shapes = dict(input_shapes or {})
        self.return_type = return_type
        self.pad_batches = pad_batches
        self.gpus = gpus
        self._signature: dict | None = None

    def model_signature(self, spark=None) -> dict | None:
        """The model's inputs and outputs as read on an executor (None for ``make_predict_fn``)."""
        if self.source.path is None:
            return None
        if self._signature is None:
            self._signature = read_signature(spark or _active_spark(), self.source, self.gpus)
        return self._signature

    def _model_tensors(self, spark) -> tuple[list[TensorInfo] | None, list[TensorInfo] | None]:
        signature = self.model_signature(spark)
        if signature is None:
            return None, None
        return ([TensorInfo.from_dict(t) for t in signature["inputs"]],
                [TensorInfo.from_dict(t) for t in signature["outputs"]])

    def plan(self, df) -> ScoringPlan:
        """Validate the mapping against ``df``'s schema and the model; the executors' plan."""
        schema = df.schema
        model_inputs, model_outputs = self._model_tensors(df.sparkSession)
        inputs = _resolve_inputs(self.input_pairs, model_inputs, self.input_shapes, schema)
        outputs = _resolve_outputs(self.output_mapping, model_outputs, self.return_type)
        for column in self.keep_columns:
            if column not in schema.fieldNames():
                raise InferenceInputError(f"keep_columns names {column!r}, which is not in the DataFrame; its "
                                          f"columns are {schema.fieldNames()}")
        clash = sorted(set(self.keep_columns) & {o.column for o in outputs})
        if clash or len({o.column for o in outputs}) != len(outputs):
            raise InferenceInputError(f"result column names collide: {clash or [o.column for o in outputs]}; "
                                      "rename them with output_mapping")
        chunk, pad_to = _pad_to(self.pad_batches, self.batch_size, model_inputs)
        from pyspark.sql.types import StructField, StructType

        fields = [schema[c] for c in self.keep_columns]
        fields += [StructField(o.column, spark_type(o.spark_type), True) for o in outputs]
        return ScoringPlan(self.source, inputs, outputs, self.keep_columns, chunk, pad_to, self.gpus,
                           StructType(fields).json())

    def output_schema(self, df):
        """The ``StructType`` of the scored DataFrame: kept columns, then one per output."""
        return self.plan(df).output_schema()

    def map_in_pandas_fn(self, df) -> tuple[Callable, Any]:
        """``(function, schema)`` for ``df.mapInPandas(function, schema)``."""
        plan = self.plan(df)
        return _pandas_scorer(plan), plan.output_schema()

    def map_in_arrow_fn(self, df) -> tuple[Callable, Any]:
        """``(function, schema)`` for ``df.mapInArrow(function, schema)``: no pandas conversion."""
        plan = self.plan(df)
        return _arrow_scorer(plan), plan.output_schema()

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
        from pyspark.sql.types import StructField, StructType

        plan = replace(self.plan(df), keep=())
        clash = sorted(set(df.columns) & {o.column for o in plan.outputs})
        if clash:
            raise InferenceInputError(f"the DataFrame already has column(s) {clash}; choose other names in "
                                      "output_mapping")
        results = [StructField(o.column, spark_type(o.spark_type), True) for o in plan.outputs]
        if _arrow_passthrough(df.schema):
            schema = StructType(list(df.schema.fields) + results)
            plan = replace(plan, keep=tuple(df.columns), output_schema_json=schema.json())
            return df.mapInArrow(_arrow_scorer(plan), schema)
        arguments = [F.col(f"`{p.column}`") for p in plan.inputs]
        if len(plan.outputs) == 1:
            udf = pandas_udf(_udf_scorer(plan, False, len(arguments)), results[0].dataType)
            return df.withColumn(plan.outputs[0].column, udf(*arguments))
        udf = pandas_udf(_udf_scorer(plan, True, len(arguments)), StructType(results))
        hidden = "__sparkdl_predictions"
        scored = df.withColumn(hidden, udf(*arguments))
        return scored.select("*", *[F.col(hidden)[o.column].alias(o.column) for o in plan.outputs]).drop(hidden)

    def __repr__(self) -> str:
        return (f"Predictor({self.source.describe()}, inputs={self.input_pairs}, outputs={self.output_mapping!r}, "
                f"batch_size={self.batch_size})")


def map_in_pandas(df, model: str | None = None, **options) -> tuple[Callable, Any]:
    """The iterator function and output schema to score ``df`` with ``df.mapInPandas``.

    ``options`` are :class:`Predictor`'s (``input_mapping``, ``output_mapping``,
    ``keep_columns``, ``batch_size``, ...)::

        fn, schema = map_in_pandas(df, "/models/digits.keras", input_mapping={"pixels": "image"},
                                   keep_columns=["id"], batch_size=1024)
        scored = df.mapInPandas(fn, schema)
    """
    return Predictor(model, **options).map_in_pandas_fn(df)


def map_in_arrow(df, model: str | None = None, **options) -> tuple[Callable, Any]:
    """Like :func:`map_in_pandas`, for ``df.mapInArrow`` (Arrow batches, no pandas at all)."""
    return Predictor(model, **options).map_in_arrow_fn(df)


# ---------------------------------------------------------------------------------------------
# The pandas UDF form
# ---------------------------------------------------------------------------------------------

def _udf_scorer(plan: ScoringPlan, struct: bool, arity: int):
    """The SCALAR_ITER pandas UDF body (type hints tell PySpark which UDF kind this is)."""

    def score_task(batches):
        model = None  # looked up (cache or load) at this task's first batch
        for batch_args in batches:
            args = batch_args if isinstance(batch_args, tuple) else (batch_args,)
            if len(args) != len(plan.inputs):
                raise InferenceInputError(f"the UDF was called with {len(args)} column(s) but the model takes "
                                          f"{len(plan.inputs)} input(s) {[p.tensor for p in plan.inputs]}")
            rows = len(args[0])
            arrays = [cols.pandas_to_numpy(series, _runtime_plan(p, series)) for series, p in zip(args, plan.inputs)]
            if model is None:
                model = worker.get_model(plan.source, plan.gpus)
            frame = cols.outputs_to_pandas(score_arrays(model, plan, arrays, rows), plan.outputs, rows)
            yield frame if struct else frame.iloc[:, 0]

    if struct and arity == 1:
        def udf_struct_one(batches: Iterator[pd.Series]) -> Iterator[pd.DataFrame]:
            return score_task(batches)
        return udf_struct_one
    if struct:
        def udf_struct(batches: Iterator[Tuple[pd.Series, ...]]) -> Iterator[pd.DataFrame]:
            return score_task(batches)
        return udf_struct
    if arity == 1:
        def udf_one(batches: Iterator[pd.Series]) -> Iterator[pd.Series]:
            return score_task(batches)
        return udf_one

    def udf_many(batches: Iterator[Tuple[pd.Series, ...]]) -> Iterator[pd.Series]:
        return score_task(batches)
    return udf_many


def _runtime_plan(plan: InputPlan, series: pd.Series) -> InputPlan:
    """Fill in a UDF argument's depth and dtype from the pandas data (no schema at UDF creation)."""
    if plan.depth >= 0:
        return plan
    if series.dtype == object:
        first = series.iloc[series.first_valid_index()] if series.first_valid_index() is not None else None
        if isinstance(first, (str, bytes)):
            return replace(plan, depth=0, source_dtype="str" if isinstance(first, str) else "bytes")
        depth = 0
        while isinstance(first, (np.ndarray, list)) and len(first):
            depth += 1
            first = first[0]
        source = np.asarray(first).dtype.name if first is not None else ""
        return replace(plan, depth=max(depth, 1), source_dtype=source)
    return replace(plan, depth=0, source_dtype=series.dtype.name)


def predict_batch_udf(make_predict_fn: Callable | None = None, *, return_type: Any = None, batch_size: int = 1024,
                      input_tensor_shapes: Any = None, model: str | None = None,
                      input_names: Sequence[str] | None = None, output_mapping: Any = None,
                      signature: str = "serving_default", tags: Sequence[str] | None = None,
                      pad_batches: Any = "auto", gpus: str = "spark", spark=None, safe_mode: bool = True):
    """A pandas UDF scoring its argument columns, like ``pyspark.ml.functions.predict_batch_udf``.

    Switching from PySpark's is a change of import: ``make_predict_fn``, ``return_type``,
    ``batch_size`` and ``input_tensor_shapes`` mean the same (``input_tensor_shapes``: a list of
    per-argument shapes, or a dict ``{argument index: shape}``). The model is cached per worker
    like PySpark's, and sparkdl adds GPU pinning from Spark's resources and stricter errors.
    Alternatively pass ``model=`` (a ``.keras`` file or SavedModel directory): then
    ``return_type`` is derived from the model's signature (read with one small Spark job on the
    active session, or ``spark=``) and arguments feed the model's inputs in order (or
    ``input_names``). ``safe_mode=False`` loads model files that run code of their own (see
    ``Predictor``). Several outputs come back as one struct column (``select("preds.*")``)::

        udf = predict_batch_udf(model="/models/digits.keras", batch_size=1024)
        df.withColumn("probabilities", udf("pixels"))
    """
    from pyspark.sql.functions import pandas_udf
    from pyspark.sql.types import StructField, StructType

    predictor = Predictor(model, make_predict_fn=make_predict_fn, input_mapping=[],
                          output_mapping=output_mapping, batch_size=batch_size, return_type=return_type,
                          signature=signature, tags=tags, pad_batches=pad_batches, gpus=gpus,
                          safe_mode=safe_mode)
    model_inputs, model_outputs = predictor._model_tensors(spark or (None if model is None else _active_spark()))
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
    inputs = _resolve_inputs(pairs, model_inputs, overrides, None,
                             describe=lambda column: f"UDF {column}")
    outputs = _resolve_outputs(output_mapping, model_outputs, return_type)
    resolved_type = spark_type(return_type)
    if resolved_type is None:
        if len(outputs) == 1:
            resolved_type = spark_type(outputs[0].spark_type)
        else:
            resolved_type = StructType([StructField(o.column, spark_type(o.spark_type), True) for o in outputs])
    struct = isinstance(resolved_type, StructType)
    if struct and [o.column for o in outputs] != resolved_type.names:
        raise ValueError(f"the struct's fields {resolved_type.names} must be the output columns "
                         f"{[o.column for o in outputs]}; with a StructType return_type, name its fields "
                         "after the predict function's outputs and leave output_mapping out")
    chunk, pad_to = _pad_to(pad_batches, batch_size, model_inputs)
    plan = ScoringPlan(predictor.source, inputs, outputs, (), chunk, pad_to, gpus, StructType().json())
    return pandas_udf(_udf_scorer(plan, struct, arity), resolved_type)
