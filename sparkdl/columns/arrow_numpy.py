"""Arrow ↔ numpy, and Spark SQL types ↔ numpy dtypes: the conversions the feed and inference share.

Columns reach sparkdl as Arrow arrays (a DataFrame's record batches on their way to a node,
``mapInArrow``'s batches) or, from ``mapInPandas`` and pandas UDFs, as columns of per-row
arrays. Both become one dense ``(rows, *shape)`` numpy array without a Python loop over rows:
an Arrow list column (lists, large lists, fixed-size lists, nested to any depth, and
``pyspark.ml`` Vectors) by reshaping its flat value buffer (no copy when Arrow's buffer already
has the values' layout), per-row arrays by one ``np.stack``. A tensor holds neither nulls nor
rows of different lengths: both raise the caller's error naming the column (:class:`ColumnRef`).
The way back, :func:`to_list_array`, builds a list column from a dense array's flat buffer.

:data:`SPARK_TYPES` is sparkdl's one table between Spark SQL types and numpy dtypes.

numpy and pyarrow only (pandas and PySpark imported on demand): the feed and the inference room
both import this module, and it imports neither.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

#: Spark SQL types a tensor can hold: ``DataType.typeName()``, the DDL names that parse to it,
#: its ``pyspark.sql.types`` class, and the numpy dtype of its values on the Python side.
SPARK_TYPES = (
    ("byte", ("tinyint", "byte"), "ByteType", "int8"),
    ("short", ("smallint", "short"), "ShortType", "int16"),
    ("integer", ("int", "integer"), "IntegerType", "int32"),
    ("long", ("bigint", "long"), "LongType", "int64"),
    ("float", ("float",), "FloatType", "float32"),
    ("double", ("double",), "DoubleType", "float64"),
    ("boolean", ("boolean",), "BooleanType", "bool"),
    ("string", ("string",), "StringType", "str"),
    ("binary", ("binary",), "BinaryType", "bytes"),
)
_BY_SPARK_NAME = {name: row for row in SPARK_TYPES for name in (row[0], *row[1])}
_BY_NUMPY = {row[3]: row for row in SPARK_TYPES}

VECTOR_FIELDS = {"type", "size", "indices", "values"}  # pyspark.ml.linalg.VectorUDT's sqlType
TEXT_DTYPES = ("str", "bytes", "object", "string")


def numpy_dtype(spark_name: str) -> str | None:
    """The numpy dtype of a Spark type's values, from its ``typeName()`` or DDL name (None if none)."""
    row = _BY_SPARK_NAME.get(spark_name.strip().lower())
    return None if row is None else row[3]


def spark_name(dtype: str) -> str | None:
    """The Spark type (its ``typeName()``) that holds values of numpy ``dtype`` (None if none).

    Spark has no half floats or unsigned integers: they widen to float and to the signed
    integer of twice the bits, which holds every value.
    """
    if dtype in ("float16", "bfloat16"):
        dtype = "float32"
    elif dtype in ("uint8", "uint16", "uint32"):
        dtype = f"int{2 * int(dtype[len('uint') :])}"
    row = _BY_NUMPY.get(dtype)
    return None if row is None else row[0]


def spark_type(ddl: Any):
    """A Spark ``DataType`` from a DataType or DDL string; simple and ``array<...>`` types are
    parsed here (no JVM needed, so this works under Spark Connect), others by PySpark."""
    from pyspark.sql import types as T

    if not isinstance(ddl, str):
        return ddl
    text = ddl.strip()
    if text.lower().startswith("array<") and text.endswith(">"):
        return T.ArrayType(spark_type(text[len("array<") : -1]))
    row = _BY_SPARK_NAME.get(text.lower())
    if row is not None:
        return getattr(T, row[2])()
    return T._parse_datatype_string(text)


def castable(source: str, target: str) -> bool:
    """Whether values of numpy dtype ``source`` may be fed to a model input of dtype ``target``.

    The rule is numpy's ``same_kind`` casting (int -> float and float64 -> float32 are fine,
    float -> int is not), plus strings to strings and bytes to bytes or strings.
    """
    if source in ("str", "bytes") or target in TEXT_DTYPES:
        return source in ("str", "bytes") and target in TEXT_DTYPES
    try:
        return bool(np.can_cast(np.dtype(source), np.dtype(target), casting="same_kind"))
    except TypeError:
        return False


# ---------------------------------------------------------------------------------------------
# Errors naming the column
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ColumnRef:
    """A column as error messages name it, and the error its data raises when it is no tensor.

    ``label`` defaults to ``column 'name'``; ``expects``, the values per row the consumer wants,
    is named in the message about rows of different lengths.
    """

    name: str
    error: type = ValueError
    label: str = ""
    expects: int | None = None

    def describe(self) -> str:
        """How messages name the column."""
        return self.label or f"column {self.name!r}"


def null_error(ref: ColumnRef, rows: np.ndarray, batch: int) -> Exception:
    """The error for null values at batch rows ``rows`` (indices) of a ``batch``-row batch."""
    return ref.error(
        f"{ref.describe()} has {len(rows)} null value(s) in a batch of {batch} (first at batch row {int(rows[0])}); "
        f"a tensor cannot hold nulls: drop them (e.g. df.dropna(subset=[{ref.name!r}])) or fill them first"
    )


def ragged_error(ref: ColumnRef, lengths: np.ndarray) -> Exception:
    """The error for arrays of different ``lengths`` in one batch."""
    widths = np.unique(lengths)
    bad = int(np.flatnonzero(lengths != lengths[0])[0]) if len(widths) > 1 else 0
    expected = f" (expected: {ref.expects} values per row)" if ref.expects is not None else ""
    return ref.error(
        f"{ref.describe()} holds arrays of different lengths in one batch ({widths[0]} .. {widths[-1]}, "
        f"e.g. batch row {bad} has {lengths[bad]}){expected}; a tensor is dense: pad or filter the rows first"
    )


# ---------------------------------------------------------------------------------------------
# Arrow -> numpy
# ---------------------------------------------------------------------------------------------


def _is_list(kind: pa.DataType) -> bool:
    return pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind)


def arrow_to_numpy(array: pa.Array | pa.ChunkedArray, ref: ColumnRef) -> np.ndarray:
    """One Arrow column as a dense numpy array: ``(rows,)`` for scalars, ``(rows, *shape)`` for
    (nested) list columns, ``(rows, size)`` float64 for Vectors; nulls and ragged rows raise."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if array.null_count:
        raise null_error(ref, np.flatnonzero(array.is_null().to_numpy(zero_copy_only=False)), len(array))
    shape = [len(array)]
    values = array
    while _is_list(values.type):
        if pa.types.is_fixed_size_list(values.type):
            width = values.type.list_size
        else:
            lengths = np.diff(values.offsets.to_numpy())
            if len(lengths) and (lengths != lengths[0]).any():
                raise ragged_error(ref, lengths)
            width = int(lengths[0]) if len(lengths) else 0
        values = values.flatten()
        if values.null_count:
            raise ref.error(
                f"{ref.describe()} has null elements inside its arrays; fill them first "
                "(e.g. with F.transform and F.coalesce)"
            )
        shape.append(width)
    if pa.types.is_struct(values.type) and {f.name for f in values.type} == VECTOR_FIELDS:
        dense = _vectors_to_dense(values, ref)
        return dense.reshape((*shape, dense.shape[1]))
    if pa.types.is_nested(values.type):
        raise ref.error(f"{ref.describe()} has Arrow type {array.type}, which cannot become a dense tensor")
    return values.to_numpy(zero_copy_only=False).reshape(shape)


def _packed_dtype(dtype: str) -> np.dtype:
    return np.dtype(dtype).newbyteorder("<")


def packed_error(ref: ColumnRef, lengths: np.ndarray, row_bytes: int, shape: tuple, dtype: str) -> Exception:
    """The error for packed rows whose byte ``lengths`` are not ``row_bytes``."""
    bad = int(np.flatnonzero(lengths != row_bytes)[0])
    count = int((lengths != row_bytes).sum())
    return ref.error(
        f"{ref.describe()} is read as Packed({tuple(shape)}, {dtype!r}), {row_bytes} bytes a row, but batch row "
        f"{bad} holds {int(lengths[bad])} bytes ({count} such row(s) in this batch of {len(lengths)}); "
        "check the spec's shape and dtype against how the column was written"
    )


def packed_to_numpy(array: pa.Array | pa.ChunkedArray, shape: tuple, dtype: str, ref: ColumnRef) -> np.ndarray:
    """A ``binary`` column of packed rows (:class:`~sparkdl.columns.specs.Packed`) as one
    ``(rows, *shape)`` array viewing Arrow's data buffer (no copy when the rows are contiguous);
    nulls and rows of another byte length raise naming the column."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if not (pa.types.is_binary(array.type) or pa.types.is_large_binary(array.type)):
        raise ref.error(f"{ref.describe()} is read as Packed(...), which takes a binary column, not {array.type}")
    if array.null_count:
        raise null_error(ref, np.flatnonzero(array.is_null().to_numpy(zero_copy_only=False)), len(array))
    rows, kind = len(array), _packed_dtype(dtype)
    row_bytes = int(np.prod(shape, dtype=np.int64)) * kind.itemsize
    offset_type = np.int64 if pa.types.is_large_binary(array.type) else np.int32
    _, offsets_buffer, data = array.buffers()
    offsets = np.frombuffer(
        offsets_buffer, dtype=offset_type, count=rows + 1, offset=array.offset * offset_type().itemsize
    )
    lengths = np.diff(offsets)
    if rows and (lengths != row_bytes).any():
        raise packed_error(ref, lengths, row_bytes, shape, dtype)
    if not rows:
        return np.empty((0, *shape), dtype=kind.newbyteorder("="))
    start = int(offsets[0])
    values = np.frombuffer(data, dtype=kind, count=rows * row_bytes // kind.itemsize, offset=start)
    return values.astype(kind.newbyteorder("="), copy=False).reshape((rows, *shape))


def packed_rows_to_numpy(values: np.ndarray, shape: tuple, dtype: str, ref: ColumnRef) -> np.ndarray:
    """A 1-D object array of ``bytes`` (a pandas ``binary`` column) of packed rows as one
    ``(rows, *shape)`` array: one join, one buffer view; nulls and wrong lengths raise."""
    return packed_to_numpy(pa.array(values, type=pa.binary(), from_pandas=True), shape, dtype, ref)


def _vectors_to_dense(array: pa.StructArray, ref: ColumnRef) -> np.ndarray:
    """pyspark.ml Vectors (dense type=1, sparse type=0) as a dense float64 matrix."""
    kinds = array.field("type").to_numpy(zero_copy_only=False)
    values = array.field("values")
    if (kinds == 1).all():
        return arrow_to_numpy(values, ref)
    sizes = array.field("size").to_numpy(zero_copy_only=False)
    dense_widths = np.diff(values.offsets.to_numpy())
    width = int(max(np.max(np.where(kinds == 0, sizes, dense_widths)), 0))
    out = np.zeros((len(array), width), dtype=np.float64)
    indices = array.field("indices")
    for row in range(len(array)):  # sparse vectors are rare; a simple scatter per row
        row_values = values[row].values.to_numpy(zero_copy_only=False)
        if kinds[row] == 1:
            out[row, : len(row_values)] = row_values
        else:
            out[row, indices[row].values.to_numpy(zero_copy_only=False)] = row_values
    return out


def stack_rows(values: np.ndarray, ref: ColumnRef) -> np.ndarray:
    """A 1-D object array of equal-shape per-row arrays (a pandas column of arrays, as
    ``mapInPandas`` hands it over) as one ``(rows, *shape)`` array, stacked in one C call."""
    try:
        stacked = np.stack(values) if len(values) else np.empty((0, 0))
    except (ValueError, TypeError):
        import pandas as pd  # only to tell nulls (None, NaN, NA) apart, on this error path

        nulls = np.flatnonzero(pd.isna(pd.Series(values, dtype=object)).to_numpy())
        if len(nulls):
            raise null_error(ref, nulls, len(values)) from None
        lengths = np.fromiter(map(len, values), dtype=np.int64, count=len(values))
        raise ragged_error(ref, lengths) from None
    if stacked.dtype == object and stacked.size:
        # Nested arrays (array<array<...>>): stack the inner level too.
        return stack_rows(stacked.reshape(-1), ref).reshape((*stacked.shape, -1))
    return stacked


# ---------------------------------------------------------------------------------------------
# numpy -> Arrow
# ---------------------------------------------------------------------------------------------


def to_packed_array(values: np.ndarray) -> pa.BinaryArray:
    """A ``(rows, ...)`` numeric array as an Arrow ``binary`` column of packed rows (each row's
    values as little-endian bytes, C order: what :class:`~sparkdl.columns.specs.Packed` reads),
    built on one buffer and computed offsets."""
    values = np.ascontiguousarray(values, dtype=values.dtype.newbyteorder("<"))
    rows = len(values)
    row_bytes = values.nbytes // rows if rows else 0
    offsets = (
        np.arange(0, rows * row_bytes + 1, row_bytes, dtype=np.int32) if row_bytes else np.zeros(rows + 1, np.int32)
    )
    return pa.BinaryArray.from_buffers(pa.binary(), rows, [None, pa.py_buffer(offsets), pa.py_buffer(values)])


def to_list_array(values: np.ndarray, list_type: pa.ListType) -> pa.ListArray:
    """A ``(rows, width)`` array as an Arrow list column of ``list_type``, built from its flat
    buffer and computed offsets (no per-row Python objects)."""
    rows = len(values)
    width = values.shape[1] if values.ndim == 2 else 0
    flat = pa.array(values.reshape(-1), type=list_type.value_type)
    offsets = pa.array(
        np.arange(0, rows * width + 1, width, dtype=np.int32) if width else np.zeros(rows + 1, dtype=np.int32)
    )
    return pa.ListArray.from_arrays(offsets, flat, type=list_type)
