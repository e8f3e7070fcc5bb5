"""Columns in, tensors out, and back: vectorised conversions between Spark batches and numpy.

Everything here works on whole batches. An Arrow ``list<float>`` column becomes one
``(rows, *shape)`` array by reshaping Arrow's flat value buffer (no copy when the dtype already
matches); a pandas column of per-row arrays (what ``mapInPandas`` hands over) is stacked with one
``np.stack`` call, done in C. Nulls, ragged rows and impossible dtypes raise
:class:`InferenceInputError` naming the column, because a model cannot score them.

No TensorFlow, no Spark: numpy, pandas and pyarrow only, so these functions are cheap to test.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa

from ..errors import SparkDLError


class InferenceInputError(SparkDLError, ValueError):
    """A column cannot be turned into the model input it is mapped to; the message says why."""


# Spark SQL type names (``DataType.typeName()``) -> numpy dtype of the values on the Python side.
SPARK_TO_NUMPY = {
    "byte": "int8", "short": "int16", "integer": "int32", "long": "int64",
    "float": "float32", "double": "float64", "boolean": "bool", "string": "str", "binary": "bytes",
}
# numpy dtype of a model output -> Spark SQL type (DDL).
NUMPY_TO_SPARK = {
    "float16": "float", "float32": "float", "float64": "double", "bfloat16": "float",
    "int8": "byte", "uint8": "short", "int16": "short", "uint16": "integer", "int32": "integer",
    "uint32": "long", "int64": "long", "bool": "boolean", "str": "string", "bytes": "binary",
}


@dataclass(frozen=True)
class InputPlan:
    """How one DataFrame column becomes one model input.

    ``depth`` is the column's array nesting (0 for a scalar, 1 for ``array<...>``, 2 for
    ``array<array<...>>``); ``row_shape`` is the per-row tensor shape the model expects (``None``
    keeps the column's natural shape: ``()`` for scalars, ``(length,)`` for arrays); ``dtype`` is
    the numpy dtype to cast to (``None`` keeps the column's dtype). ``source_dtype`` is the numpy
    dtype of the column's values.
    """

    column: str
    tensor: str
    depth: int
    source_dtype: str
    row_shape: tuple[int, ...] | None = None
    dtype: str | None = None

    @property
    def row_size(self) -> int | None:
        """Values per row once flattened, or None when the shape is left natural."""
        return None if self.row_shape is None else int(np.prod(self.row_shape, dtype=np.int64))

    def describe(self) -> str:
        """``column 'x' (model input 'y')`` for error messages."""
        return f"column {self.column!r} (model input {self.tensor!r})"


@dataclass(frozen=True)
class OutputPlan:
    """How one model output becomes one result column.

    ``scalar`` outputs (per-row shape ``()`` or ``(1,)``) become plain columns; others are
    flattened per row into ``array<...>`` columns. ``spark_type`` is a DDL string.
    """

    tensor: str
    column: str
    spark_type: str
    scalar: bool
    dtype: str | None = None


def castable(source: str, target: str) -> bool:
    """Whether values of numpy dtype ``source`` may be fed to a model input of dtype ``target``.

    The rule is numpy's ``same_kind`` casting (int -> float and float64 -> float32 are fine,
    float -> int is not), plus strings to strings and bytes to bytes or strings.
    """
    if source in ("str", "bytes") or target in ("str", "bytes", "object", "string"):
        return source in ("str", "bytes") and target in ("str", "bytes", "object", "string")
    try:
        return bool(np.can_cast(np.dtype(source), np.dtype(target), casting="same_kind"))
    except TypeError:
        return False


def check_dtype(plan: InputPlan) -> None:
    """Raise :class:`InferenceInputError` when the column's dtype cannot feed the model input."""
    if plan.dtype is not None and not castable(plan.source_dtype, plan.dtype):
        raise InferenceInputError(
            f"{plan.describe()}: the column holds {plan.source_dtype} values but the model expects "
            f"{plan.dtype}; convert it first, e.g. df.withColumn({plan.column!r}, "
            f"F.col({plan.column!r}).cast(...))")


# ---------------------------------------------------------------------------------------------
# Input side
# ---------------------------------------------------------------------------------------------

def _null_error(plan: InputPlan, rows: np.ndarray) -> InferenceInputError:
    first = int(rows[0])
    return InferenceInputError(
        f"{plan.describe()} has {len(rows)} null value(s) in a batch (first at batch row {first}); "
        f"a model cannot score nulls: drop them (df.dropna(subset=[{plan.column!r}])) or fill them first")


def _finish(plan: InputPlan, values: np.ndarray, rows: int) -> np.ndarray:
    """Reshape ``values`` (already ``rows`` long in the first axis) and cast it for the model."""
    if plan.row_shape is not None:
        per_row = values.size // rows if rows else plan.row_size
        if per_row != plan.row_size:
            raise InferenceInputError(
                f"{plan.describe()}: each row holds {per_row} values but the model expects "
                f"{plan.row_size} (shape {tuple(plan.row_shape)}); check input_shapes or the column")
        values = values.reshape((rows, *plan.row_shape))
    if plan.dtype is not None and plan.dtype not in ("str", "bytes", "object", "string"):
        if values.dtype.kind in "OUS":
            raise InferenceInputError(f"{plan.describe()}: values are {values.dtype} but the model expects "
                                      f"{plan.dtype}")
        if not castable(values.dtype.name, plan.dtype):
            raise InferenceInputError(f"{plan.describe()}: the column holds {values.dtype.name} values but "
                                      f"the model expects {plan.dtype}")
        if values.dtype != np.dtype(plan.dtype):
            values = values.astype(plan.dtype)
    return values


def _ragged_error(plan: InputPlan, lengths: np.ndarray) -> InferenceInputError:
    widths = np.unique(lengths)
    bad = int(np.flatnonzero(lengths != lengths[0])[0]) if len(widths) > 1 else 0
    expected = f" (the model expects {plan.row_size} values per row)" if plan.row_size is not None else ""
    return InferenceInputError(
        f"{plan.describe()} holds arrays of different lengths in one batch ({widths[0]} .. {widths[-1]}, "
        f"e.g. batch row {bad} has {lengths[bad]}){expected}; pad or filter the rows first")


def _stack_objects(plan: InputPlan, values: np.ndarray) -> np.ndarray:
    """Stack a 1-D object array of equal-length numpy arrays into one array (one C call)."""
    try:
        stacked = np.stack(values) if len(values) else np.empty((0, 0))
    except (ValueError, TypeError):
        nulls = np.flatnonzero(pd.isna(pd.Series(values, dtype=object)).to_numpy())
        if len(nulls):
            raise _null_error(plan, nulls) from None
        lengths = np.fromiter(map(len, values), dtype=np.int64, count=len(values))
        raise _ragged_error(plan, lengths) from None
    if stacked.dtype == object and stacked.size:
        # Nested arrays (array<array<...>>): stack the inner level too.
        inner = stacked.reshape(-1)
        return _stack_objects(plan, inner).reshape((*stacked.shape, -1))
    return stacked


def pandas_to_numpy(series: pd.Series, plan: InputPlan) -> np.ndarray:
    """One pandas column (as ``mapInPandas`` or a pandas UDF receives it) as a model-ready array."""
    rows = len(series)
    if plan.depth == 0:
        if plan.source_dtype in ("str", "bytes"):
            values = series.to_numpy(dtype=object)
            nulls = np.flatnonzero(pd.isna(series).to_numpy())
            if len(nulls):
                raise _null_error(plan, nulls)
            return _finish(plan, values, rows)
        if series.dtype == object or (series.dtype.kind == "f" and plan.source_dtype[0] in "ib"):
            # Spark turns integer/boolean columns with nulls into float64/object pandas columns.
            nulls = np.flatnonzero(pd.isna(series).to_numpy())
            if len(nulls):
                raise _null_error(plan, nulls)
            values = series.to_numpy(dtype=plan.source_dtype)
        else:
            # Float nulls arrive as NaN in pandas, indistinguishable from NaN: documented, passed on.
            values = series.to_numpy()
        return _finish(plan, values, rows)
    return _finish(plan, _stack_objects(plan, series.to_numpy()), rows)


def _arrow_flat(plan: InputPlan, column: pa.Array) -> np.ndarray:
    """The flat values of a (possibly nested) Arrow list column, with nulls and lengths checked."""
    if column.null_count:
        raise _null_error(plan, np.flatnonzero(column.is_null().to_numpy(zero_copy_only=False)))
    values = column
    rows = len(column)
    for _ in range(plan.depth):
        if isinstance(values, pa.FixedSizeListArray):
            inner = values.flatten()
        else:
            offsets = values.offsets.to_numpy()
            lengths = np.diff(offsets)
            if len(lengths) and (lengths != lengths[0]).any():
                raise _ragged_error(plan, lengths)
            inner = values.flatten()
        if inner.null_count:
            raise InferenceInputError(f"{plan.describe()} has null elements inside its arrays; "
                                      "fill them first (e.g. with F.transform and F.coalesce)")
        values = inner
    flat = values.to_numpy(zero_copy_only=False)
    if plan.row_shape is None and plan.depth:
        width = flat.size // rows if rows else 0
        return flat.reshape(rows, width)
    return flat


def arrow_to_numpy(column: pa.Array | pa.ChunkedArray, plan: InputPlan) -> np.ndarray:
    """One Arrow column (as ``mapInArrow`` receives it) as a model-ready array, without row loops."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    rows = len(column)
    if plan.depth == 0:
        if column.null_count:
            raise _null_error(plan, np.flatnonzero(column.is_null().to_numpy(zero_copy_only=False)))
        values = column.to_numpy(zero_copy_only=False)
        if plan.source_dtype in ("str", "bytes"):
            values = values.astype(object)
        return _finish(plan, values, rows)
    return _finish(plan, _arrow_flat(plan, column), rows)


# ---------------------------------------------------------------------------------------------
# Output side
# ---------------------------------------------------------------------------------------------

def _output_values(outputs: Mapping[str, np.ndarray], plan: OutputPlan, rows: int) -> np.ndarray:
    try:
        values = np.asarray(outputs[plan.tensor])
    except KeyError:
        raise InferenceInputError(f"the model returned no output named {plan.tensor!r} (it returned "
                                  f"{sorted(outputs)}); fix output_mapping") from None
    if values.ndim == 0 or len(values) != rows:
        raise InferenceInputError(f"model output {plan.tensor!r} has shape {values.shape} for a batch of "
                                  f"{rows} rows; it must have one entry per row")
    if values.dtype.kind == "S":
        values = values.astype(object)
    if values.dtype == object and values.size and isinstance(values.flat[0], bytes) \
            and plan.spark_type == "string":
        values = np.char.decode(values.astype(bytes), "utf-8").astype(object)
    if plan.scalar:
        if values.ndim > 1:
            if int(np.prod(values.shape[1:])) != 1:
                raise InferenceInputError(f"model output {plan.tensor!r} has shape {values.shape}, "
                                          "not one value per row, but its column was declared scalar")
            values = values.reshape(rows)
    else:
        values = values.reshape(rows, -1) if rows else values.reshape(0, max(1, int(np.prod(values.shape[1:]))))
    if plan.dtype is not None and values.dtype != object and values.dtype != np.dtype(plan.dtype):
        values = values.astype(plan.dtype)
    return values


def outputs_to_pandas(outputs: Mapping[str, np.ndarray], plans: Sequence[OutputPlan], rows: int,
                      keep: pd.DataFrame | None = None) -> pd.DataFrame:
    """Model outputs as a pandas DataFrame: kept columns first, then one column per output."""
    frame = {} if keep is None else {name: keep[name].reset_index(drop=True) for name in keep.columns}
    for plan in plans:
        values = _output_values(outputs, plan, rows)
        # A 2-D array becomes a Series of row views (no copy); Arrow turns it into list<...>.
        frame[plan.column] = values if plan.scalar else pd.Series(list(values), dtype=object)
    return pd.DataFrame(frame, index=pd.RangeIndex(rows))


def outputs_to_arrow(outputs: Mapping[str, np.ndarray], plans: Sequence[OutputPlan], rows: int,
                     schema: pa.Schema, keep: pa.RecordBatch | None = None) -> pa.RecordBatch:
    """Model outputs as an Arrow record batch matching ``schema`` (kept columns first)."""
    arrays: list[pa.Array] = [] if keep is None else list(keep.columns)
    offset = len(arrays)
    for index, plan in enumerate(plans):
        values = _output_values(outputs, plan, rows)
        field_type = schema.field(offset + index).type
        if plan.scalar:
            arrays.append(pa.array(values, type=field_type))
        else:
            width = values.shape[1] if values.ndim == 2 else 0
            flat = pa.array(values.reshape(-1), type=field_type.value_type)
            offsets = pa.array(np.arange(0, rows * width + 1, width, dtype=np.int32) if width
                               else np.zeros(rows + 1, dtype=np.int32))
            arrays.append(pa.ListArray.from_arrays(offsets, flat, type=field_type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def spark_value_info(data_type: Any) -> tuple[int, str]:
    """``(depth, numpy dtype)`` of a Spark column type; raises for types a model cannot take."""
    depth = 0
    while data_type.typeName() == "array":
        data_type = data_type.elementType
        depth += 1
    name = data_type.typeName()
    if name not in SPARK_TO_NUMPY:
        raise InferenceInputError(f"Spark type {data_type.simpleString()} cannot be fed to a model; supported: "
                                  "numeric, boolean, string and binary scalars and (nested) arrays of numbers")
    return depth, SPARK_TO_NUMPY[name]
