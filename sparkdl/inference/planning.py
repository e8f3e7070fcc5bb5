"""Driver side: from "this model, these columns" to a validated :class:`~.scoring.ScoringPlan`.

:func:`build_plan` is the one plan builder, for every form (``mapInPandas``, ``mapInArrow``,
``with_predictions`` and the pandas UDF): it matches columns to model inputs and outputs to
result columns, checks dtypes and shapes against the model's signature before any job runs
(errors name the column), fixes the chunk size and padding, and derives the result schema. The
signature is read by :func:`read_signature`, a one-row Spark job on an executor, so the driver
never imports TensorFlow, and the model is then already cached in that executor's Python worker.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..columns import arrow_numpy, arrow_rows
from ..columns.arrow_numpy import spark_type
from ..columns.specs import Image, Packed, Padded, Ragged, Sparse, check_columns
from ..common.errors import PreflightError
from . import columns as cols
from .columns import InferenceInputError, InputPlan, OutputPlan
from .model import ModelLoadError, ModelSource, TensorInfo
from .scoring import ScoringPlan, probe_function

PAD_MODES = ("auto", True, False)


def _column(name: str) -> str:
    return f"column {name!r}"


def active_spark():
    """The active SparkSession (raises when there is none)."""
    from pyspark.sql import SparkSession

    spark = SparkSession.getActiveSession()
    if spark is None:
        raise PreflightError("no active SparkSession: pass spark=... or create a session first")
    return spark


def read_signature(spark, source: ModelSource, gpus: str = "spark") -> dict:
    """The model's signature (inputs and outputs, dtypes and shapes) as read on an executor.

    Runs a one-row Spark job (works under Spark Connect too); the model stays cached in that
    executor's Python worker for the scoring job.
    """
    probe = spark.range(1, numPartitions=1).mapInPandas(probe_function(source, gpus), "signature string")
    answer = json.loads(probe.collect()[0]["signature"])
    if "error" in answer:
        raise ModelLoadError(f"could not load {source.describe()} on an executor: {answer['error']}")
    return answer["signature"]


def _spark_type_for(info: TensorInfo) -> tuple[str, bool]:
    """DDL type and scalar-ness of a model output column."""
    dtype = info.dtype or "float32"
    base = arrow_numpy.spark_name(dtype)
    if base is None:
        raise InferenceInputError(f"model output {info.name!r} has dtype {dtype}, which has no Spark type")
    scalar = info.shape is not None and (len(info.shape) == 0 or tuple(info.shape) == (1,))
    return (base if scalar else f"array<{base}>"), scalar


def _numpy_for_spark(ddl: str) -> str | None:
    """The numpy dtype to cast an output to for its (one-level array of a) numeric Spark type."""
    dtype = arrow_numpy.numpy_dtype(ddl[len("array<") : -1] if ddl.startswith("array<") else ddl)
    return None if dtype in ("str", "bytes") else dtype


def normalise_inputs(input_mapping: Any) -> list[tuple[str, str | None]]:
    """``input_mapping`` (a column, a list of columns or a dict) as ``[(column, input name or None)]``."""
    if input_mapping is None:
        raise ValueError(
            "input_mapping is required: a column name, a list of columns (model input order) "
            "or a dict {column: model input name}"
        )
    if isinstance(input_mapping, str):
        return [(input_mapping, None)]
    if isinstance(input_mapping, Mapping):
        return [(str(c), str(t)) for c, t in input_mapping.items()]
    return [(str(c), None) for c in input_mapping]


def _resolve_inputs(
    pairs: list[tuple[str, str | None]],
    model_inputs: list[TensorInfo] | None,
    input_shapes: Mapping[str, Sequence[int]],
    schema: Any | None,
    describe: Callable[[str], str],
    specs: Mapping[str, Any] | None = None,
) -> tuple[InputPlan, ...]:
    """Match columns to model inputs, fixing each input's shape and dtype (and, for columns that
    are not plain tensors, the reader's spec: ``specs`` by column); errors name the column."""
    by_name: dict[str, TensorInfo] = {}
    if model_inputs is not None:
        pairs = _match_model_inputs(pairs, model_inputs, describe)
        by_name = {t.name: t for t in model_inputs}
    resolve = _InputResolver(by_name, input_shapes, schema, describe, specs or {})
    return tuple(resolve(index, column, tensor) for index, (column, tensor) in enumerate(pairs))


def _match_model_inputs(
    pairs: list[tuple[str, str | None]], model_inputs: list[TensorInfo], describe: Callable[[str], str]
) -> list[tuple[str, str | None]]:
    """``pairs`` with every column mapped to a model input (unmapped columns take the inputs in
    order); InferenceInputError for a column mapped to no input of the model, or an input no column feeds."""
    names = [t.name for t in model_inputs]
    if all(t is None for _, t in pairs):
        if len(pairs) != len(model_inputs):
            raise InferenceInputError(
                f"{len(pairs)} input column(s) {[c for c, _ in pairs]} for a model with "
                f"{len(model_inputs)} input(s) {names}; map each one: "
                "input_mapping={column: input name}"
            )
        pairs = [(c, n) for (c, _), n in zip(pairs, names)]
    for column, tensor in pairs:
        if tensor not in names:
            raise InferenceInputError(
                f"{describe(column)} is mapped to model input {tensor!r}, which the "
                f"model does not have; its inputs are {names}"
            )
    missing = [n for n in names if n not in {t for _, t in pairs}]
    if missing:
        raise InferenceInputError(f"model input(s) {missing} are not fed by any column; add them to input_mapping")
    return pairs


class _InputResolver:
    """One column's ``InputPlan``: what the column holds (from ``schema``), the input's shape (given,
    or the model's), then either a reader's spec (images, Vectors, ragged or padded arrays) or the
    plain dense path with its checks."""

    def __init__(self, by_name, input_shapes, schema, describe, specs):
        self.by_name = by_name
        self.input_shapes = input_shapes
        self.schema = schema
        self.describe = describe
        self.specs = specs

    def __call__(self, index: int, column: str, tensor: str | None) -> InputPlan:
        tensor = tensor or (column if self.schema is not None else f"input_{index}")
        info = self.by_name.get(tensor)
        depth, source_dtype = self._value_info(column)
        row_shape = self._row_shape(column, tensor, info)
        if isinstance(self.specs.get(column), Packed):
            return self._packed_input(column, tensor, depth, source_dtype, row_shape, info)
        try:
            data_type = self.schema[column].dataType if self.schema is not None else None
            spec, vector = _reader_spec(data_type, self.specs.get(column), info)
        except InferenceInputError as exc:
            raise InferenceInputError(f"{self.describe(column)}: {exc}") from None
        if spec is not None or vector:
            return _reader_input(column, tensor, depth, source_dtype, row_shape, info, spec, vector)
        return self._dense_input(column, tensor, depth, source_dtype, row_shape, info)

    def _value_info(self, column: str) -> tuple[int | None, str | None]:
        """``(depth, numpy dtype)`` of the column's values (None, None without a schema)."""
        if self.schema is None:
            return None, None
        if column not in self.schema.fieldNames():
            raise InferenceInputError(
                f"input column {column!r} is not in the DataFrame; its columns are {self.schema.fieldNames()}"
            )
        try:
            return cols.spark_value_info(self.schema[column].dataType)
        except InferenceInputError as exc:
            raise InferenceInputError(f"{self.describe(column)}: {exc}") from None

    def _row_shape(self, column: str, tensor: str, info: TensorInfo | None) -> tuple[int, ...] | None:
        """The shape of one row: given in ``input_shapes`` (by column or input), else the model's when fixed."""
        shape = self.input_shapes.get(column, self.input_shapes.get(tensor))
        if shape is not None:
            return tuple(int(d) for d in shape)
        if info is not None and info.shape is not None and None not in info.shape:
            return tuple(info.shape)
        return None

    def _packed_input(self, column, tensor, depth, source_dtype, row_shape, info) -> InputPlan:
        """A binary column of packed rows: the dense path, its values' dtype and shape the spec's."""
        spec = self.specs[column]
        if source_dtype is not None and source_dtype != "bytes":
            raise InferenceInputError(f"{self.describe(column)}: Packed() reads a binary column, not {source_dtype}")
        if row_shape is not None and int(np.prod(row_shape, dtype=np.int64)) != int(
            np.prod(spec.shape, dtype=np.int64)
        ):
            raise InferenceInputError(
                f"{self.describe(column)} is read as Packed({spec.shape}, {spec.dtype!r}), but model input "
                f"{tensor!r} expects shape {row_shape}"
            )
        plan = InputPlan(
            column, tensor, 1, spec.dtype, row_shape or spec.shape, info.dtype if info is not None else None, spec
        )
        try:
            cols.check_dtype(plan)
        except InferenceInputError as exc:
            raise InferenceInputError(str(exc).replace(plan.describe(), self.describe(column), 1)) from None
        return plan

    def _dense_input(self, column, tensor, depth, source_dtype, row_shape, info) -> InputPlan:
        """The plain dense path: a scalar column feeds only a one-value input; dtypes are checked."""
        if depth == 0 and row_shape is not None and int(np.prod(row_shape, dtype=np.int64)) != 1:
            raise InferenceInputError(
                f"{self.describe(column)} holds one value per row but model input {tensor!r} "
                f"expects shape {row_shape}; give it an array column "
                "(F.array(...) combines scalar columns)"
            )
        plan = InputPlan(
            column,
            tensor,
            -1 if depth is None else depth,
            source_dtype or "",
            row_shape,
            info.dtype if info is not None else None,
        )
        if source_dtype:
            try:
                cols.check_dtype(plan)
            except InferenceInputError as exc:
                raise InferenceInputError(str(exc).replace(plan.describe(), self.describe(column), 1)) from None
        return plan


def _reader_input(column, tensor, depth, source_dtype, row_shape, info, spec, vector) -> InputPlan:
    """A column read by a column reader: an image decodes to its spec's size as uint8; a sparse or
    ragged input takes the shape the reader gives."""
    if isinstance(spec, Image):
        row_shape, source_dtype = (spec.height, spec.width, spec.channels), "uint8"
    elif info is not None and info.form != "dense" or isinstance(spec, Ragged):
        row_shape = None
    return InputPlan(
        column,
        tensor,
        depth if depth is not None else -1,
        source_dtype or "",
        row_shape,
        info.dtype if info is not None else None,
        spec,
        vector,
    )


def _reader_spec(data_type: Any, spec: Any, info: TensorInfo | None) -> tuple[Any, bool]:
    """``(spec, vector)``: how a column that is not a plain tensor is read for a model input,
    completed from the input's shape: Spark's images and ``Image`` specs decode to the input's
    ``(height, width, channels)``, Vectors are sparse for a sparse input (or ``Sparse()``),
    arrays become ragged for a ragged input (or ``Ragged()``) or padded (``Padded``, to the
    input's length when it is fixed). ``(None, False)``: the plain dense path."""
    from pyspark.ml.linalg import VectorUDT
    from pyspark.sql.types import ArrayType, BinaryType, StringType, StructType

    shape = info.shape if info is not None else None
    form = info.form if info is not None else "dense"
    image_struct = isinstance(data_type, StructType) and set(data_type.names) == arrow_rows.IMAGE_FIELDS
    if isinstance(data_type, VectorUDT):
        if spec is not None and not isinstance(spec, Sparse):
            raise InferenceInputError(f"{type(spec).__name__}() does not read a Vector column (Sparse() does)")
        return (spec or Sparse()) if form == "sparse" or spec is not None else None, True
    if image_struct or isinstance(spec, Image):
        if data_type is not None and not (image_struct or isinstance(data_type, BinaryType)):
            raise InferenceInputError(f"Image() decodes binary or image-struct columns, not {data_type.simpleString()}")
        given, spec = spec is not None, spec or Image()
        if spec.height is None:
            if shape is None or len(shape) != 3 or None in shape:
                raise InferenceInputError(
                    f"the model input's shape {shape} gives no image size: declare columns={{...: Image(h, w)}}"
                )
            channels = spec.channels if given else int(shape[2])  # an Image() given says its channels
            spec = replace(spec, height=int(shape[0]), width=int(shape[1]), channels=channels)
        return spec, False
    if isinstance(spec, Padded) and spec.length is None and shape is not None and len(shape) == 1 and shape[0]:
        return replace(spec, length=int(shape[0])), False
    if spec is None and form == "ragged":
        return Ragged(), False
    strings = isinstance(data_type, ArrayType) and isinstance(data_type.elementType, StringType)
    if spec is None and strings:
        if info is not None and info.dtype is not None and info.dtype not in arrow_numpy.TEXT_DTYPES:  # no spec helps
            raise InferenceInputError(f"the column holds str values but the model expects {info.dtype}")
        raise InferenceInputError("an array<string> column needs columns={...: Ragged()} or Padded(length)")
    return spec, False


def _resolve_outputs(
    output_mapping: Any,
    model_outputs: list[TensorInfo] | None,
    return_type: Any,
    default_column: str = "prediction",
    packed_outputs: Any = False,
) -> tuple[OutputPlan, ...]:
    """Match model outputs to result columns and Spark types; ``packed_outputs`` (True: every
    array output; or result column names) writes those as packed ``binary`` columns."""
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
                raise InferenceInputError(
                    f"return_type {return_type.simpleString()} describes one output but the "
                    f"model has {names}; pass a StructType or choose one in output_mapping"
                )
            declared = [
                (names[0] or default_column, return_type.simpleString(), not isinstance(return_type, ArrayType))
            ]
        else:
            declared = [(f.name, f.dataType.simpleString(), not isinstance(f.dataType, ArrayType)) for f in fields]
    elif model_outputs is not None:
        declared = [(o.name, *_spark_type_for(o)) for o in model_outputs]
    else:
        raise ValueError(
            "return_type is required with make_predict_fn (the outputs' Spark types), as in "
            "pyspark.ml.functions.predict_batch_udf"
        )
    available = {tensor: (ddl, scalar) for tensor, ddl, scalar in declared}

    if output_mapping is None:
        pairs = [(declared[0][0], default_column)] if len(declared) == 1 else [(t, t) for t, _, _ in declared]
    elif isinstance(output_mapping, str):
        if len(declared) != 1:
            raise InferenceInputError(
                f"output_mapping {output_mapping!r} names one column but the model has "
                f"outputs {list(available)}; use a dict {{output: column}}"
            )
        pairs = [(declared[0][0], output_mapping)]
    elif isinstance(output_mapping, Mapping):
        pairs = [(str(t), str(c)) for t, c in output_mapping.items()]
    else:
        pairs = [(str(t), str(t)) for t in output_mapping]
    packed = _packed_columns(packed_outputs, pairs, available)
    plans = []
    for tensor, column in pairs:
        if tensor not in available:
            raise InferenceInputError(
                f"output_mapping names model output {tensor!r}, which the model does not "
                f"have; its outputs are {list(available)}"
            )
        ddl, scalar = available[tensor]
        dtype = _numpy_for_spark(ddl)  # None for strings, bytes and nested arrays
        if column in packed:
            if dtype is None:
                raise InferenceInputError(
                    f"packed_outputs names {column!r}, whose values ({ddl}) are not numbers: only numeric "
                    "outputs are written packed"
                )
            plans.append(OutputPlan(tensor, column, "binary", False, dtype, packed=True))
        else:
            plans.append(OutputPlan(tensor, column, ddl, scalar, dtype))
    return tuple(plans)


def _packed_columns(packed_outputs: Any, pairs: list[tuple[str, str]], available: Mapping) -> set[str]:
    """The result columns ``packed_outputs`` asks to write packed: for True those of every array
    output (``available[tensor]`` is ``(ddl, scalar)``), or the columns it names."""
    columns = [column for _, column in pairs]
    if packed_outputs is True:
        return {column for tensor, column in pairs if tensor in available and not available[tensor][1]}
    if not packed_outputs:
        return set()
    names = [packed_outputs] if isinstance(packed_outputs, str) else list(packed_outputs)
    unknown = sorted(set(names) - set(columns))
    if unknown:
        raise ValueError(f"packed_outputs names {unknown}, which are not result columns; they are {columns}")
    return set(names)


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


def model_tensors(signature: dict | None) -> tuple[list[TensorInfo] | None, list[TensorInfo] | None]:
    """The model's inputs and outputs from :func:`read_signature`'s answer (None, None without one)."""
    if signature is None:
        return None, None
    return (
        [TensorInfo.from_dict(t) for t in signature["inputs"]],
        [TensorInfo.from_dict(t) for t in signature["outputs"]],
    )


def build_plan(
    source: ModelSource,
    pairs: Sequence[tuple[str, str | None]],
    signature: dict | None,
    *,
    schema: Any = None,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    output_mapping: Any = None,
    return_type: Any = None,
    keep: Sequence[str] = (),
    batch_size: int = 1024,
    pad_batches: Any = "auto",
    gpus: str = "spark",
    describe: Callable[[str], str] | None = None,
    version_column: str | None = None,
    columns: Mapping[str, Any] | None = None,
    packed_outputs: Any = False,
) -> ScoringPlan:
    """The executors' plan, validated against the model's ``signature`` and, when given, the
    DataFrame's ``schema`` (the pandas UDF has none: its arguments' types are read at run time).

    ``pairs`` are ``(column, model input or None)``; ``keep`` columns pass through, first in
    the result schema; ``describe`` names a column in errors (default: ``column 'name'``);
    ``version_column`` (a versioned source only) is a ``long`` column after the outputs;
    ``columns`` (``{column: spec}``) says how columns that are not plain tensors are read;
    ``packed_outputs`` which outputs are written as packed ``binary`` columns.
    """
    from pyspark.sql.types import LongType, StructField, StructType

    if version_column is not None and source.versions is None:
        raise ValueError("version_column needs a versioned model: model=ModelVersions(base, refresh_seconds=...)")

    model_inputs, model_outputs = model_tensors(signature)
    inputs = _resolve_inputs(
        list(pairs), model_inputs, input_shapes or {}, schema, describe or _column, check_columns(columns, "Predictor")
    )
    outputs = _resolve_outputs(output_mapping, model_outputs, return_type, packed_outputs=packed_outputs)
    fields = []
    for column in keep:
        if column not in schema.fieldNames():
            raise InferenceInputError(
                f"keep_columns names {column!r}, which is not in the DataFrame; its columns are {schema.fieldNames()}"
            )
        fields.append(schema[column])
    results = [o.column for o in outputs] + ([version_column] if version_column is not None else [])
    clash = sorted(set(keep) & set(results))
    if clash or len(set(results)) != len(results):
        raise InferenceInputError(
            f"result column names collide: {clash or results}; rename them with output_mapping (or version_column)"
        )
    chunk, pad_to = _pad_to(pad_batches, batch_size, model_inputs)
    fields += [StructField(o.column, spark_type(o.spark_type), True) for o in outputs]
    if version_column is not None:
        fields.append(StructField(version_column, LongType(), True))
    schema = StructType(fields).json()
    return ScoringPlan(source, inputs, outputs, tuple(keep), chunk, pad_to, gpus, schema, version_column)
