"""Columnar conversions for feeding: Spark rows or Arrow record batches in, columns out.

DataFrames travel as Arrow record batches end to end. On the node, a column that is a tensor
already becomes one numpy array without per-row Python objects: an ``array<float>`` column
becomes one ``(rows, width)`` float32 array by reshaping Arrow's flat value buffer
(:mod:`sparkdl.columns.arrow_numpy`, shared with inference). Every other column stays the Arrow array
it came in (bytes, strings, Vectors, images, arrays of varying length, columns with nulls), and
the reader the node asks for makes it a tensor (``sparkdl/columns/readers.py``). RDD rows are
turned into record batches once, on the executor that feeds them, with their structure in the
schema metadata (``elements.py``).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pyarrow as pa

from ..columns import arrow_rows as ar
from ..columns.arrow_numpy import ColumnRef, arrow_to_numpy
from ..common.errors import FeedDataError as FeedDataError  # re-exported: raised here
from .elements import BARE, LIST, TUPLE, RowLayout, value_kind

#: Fields of Spark's image data source struct (``spark.read.format("image")``).
_IMAGE_FIELDS = ar.IMAGE_FIELDS


def feedable_type(kind) -> bool:
    """Whether a Spark column type can be fed: numbers (but decimals), booleans, strings, binary,
    ``pyspark.ml`` Vectors, Spark's image struct, and (nested) arrays of numbers, booleans, strings
    or binary."""
    from pyspark.ml.linalg import VectorUDT
    from pyspark.sql import types as T

    if isinstance(kind, VectorUDT):
        return True
    if isinstance(kind, T.StructType):
        return {f.name for f in kind.fields} == _IMAGE_FIELDS
    while isinstance(kind, T.ArrayType):
        kind = kind.elementType
    scalars = (T.NumericType, T.BooleanType, T.StringType, T.BinaryType)
    return isinstance(kind, scalars) and not isinstance(kind, T.DecimalType)  # no tensor holds a Decimal


def check_spark_schema(schema) -> None:
    """Reject, before any job runs, DataFrame columns that cannot become tensors: one line naming
    the column, its type and what to do."""
    from pyspark.sql import types as T

    for field in schema.fields:
        name, kind = field.name, field.dataType
        if name == ar.ORIGIN:
            raise FeedDataError(f"column {name!r} is a name sparkdl keeps for itself: rename the column")
        if feedable_type(kind):
            continue
        decimal = kind
        while isinstance(decimal, T.ArrayType):
            decimal = decimal.elementType
        if isinstance(decimal, T.DecimalType):
            target = kind.simpleString().replace(decimal.simpleString(), "double")
            raise FeedDataError(
                f"column {name!r} has type {kind.simpleString()}, which no tensor holds (TensorFlow has no "
                f"decimal type): cast it first, e.g. df.withColumn({name!r}, df[{name!r}].cast({target!r}))"
            )
        raise FeedDataError(
            f"column {name!r} has type {kind.simpleString()}, which sparkdl cannot feed as "
            "a tensor; supported: numbers, booleans, strings and binary, (nested) arrays of them, "
            "pyspark.ml Vectors and Spark's image struct. "
            f"Select or convert it first (e.g. df.drop({name!r}))."
        )


def ignoring_nullability(kind):
    """A Spark type with every nested field, array element and map value declared nullable. Two
    types that differ only there are read alike: the feed checks each row's nulls as it reads it
    (a null fails naming its row, or ``bad_rows="skip"`` skips it), whatever the schema declares."""
    from pyspark.sql import types as T

    if isinstance(kind, T.ArrayType):
        return T.ArrayType(ignoring_nullability(kind.elementType), True)
    if isinstance(kind, T.MapType):
        return T.MapType(ignoring_nullability(kind.keyType), ignoring_nullability(kind.valueType), True)
    if isinstance(kind, T.StructType):
        return T.StructType([T.StructField(f.name, ignoring_nullability(f.dataType), True) for f in kind.fields])
    return kind


def type_names(first, second) -> tuple[str, str]:
    """Two Spark types as messages name them: their simple strings, else (equal simple strings,
    e.g. two user-defined types) their JSON."""
    names = first.simpleString(), second.simpleString()
    return names if names[0] != names[1] else (first.json(), second.json())


def check_same_columns(training, validation) -> None:
    """Reject validation data whose columns or types differ from the training data's, naming the
    column; types that differ only in what they declare nullable are the same to the feed."""
    if validation is None:
        return
    expected = {f.name: f.dataType for f in training.fields}
    given = {f.name: f.dataType for f in validation.fields}
    for name in list(expected) + [n for n in given if n not in expected]:
        if name not in given:
            raise FeedDataError(
                f"validation_data has no column {name!r}, which the training data has; give both the same columns"
            )
        if name not in expected:
            raise FeedDataError(
                f"validation_data has a column {name!r} that the training data does not have; "
                "give both the same columns"
            )
        if ignoring_nullability(expected[name]) != ignoring_nullability(given[name]):
            validation_type, training_type = type_names(given[name], expected[name])
            raise FeedDataError(
                f"validation_data column {name!r} is {validation_type} but the training "
                f"column is {training_type}; cast one of them"
            )
    if list(expected) != list(given):
        raise FeedDataError(
            f"validation_data has the training data's columns in another order ({list(given)} vs "
            f"{list(expected)}); select them in the same order"
        )


def column_to_numpy(array: pa.Array | pa.ChunkedArray, name: str) -> np.ndarray:
    """One Arrow column as a dense numpy array (2-D for arrays and vectors); see
    :func:`sparkdl.columns.arrow_numpy.arrow_to_numpy`."""
    return arrow_to_numpy(array, ColumnRef(name, FeedDataError))


def column_values(array: pa.Array, name: str) -> np.ndarray | pa.Array:
    """One fed column as the node keeps it: a dense numpy array when it is one (numbers, and
    arrays of equal length, with no nulls), else the Arrow array itself."""
    kind = array.type
    if array.null_count or ar.is_bytes(kind) or pa.types.is_struct(kind):
        return array
    if ar.is_list(kind):
        if ar.is_bytes(ar.innermost(kind)[0]):
            return array
        try:
            return column_to_numpy(array, name)
        except FeedDataError:  # rows of different lengths, or null elements: a reader decides
            return array
    if pa.types.is_nested(kind):
        raise FeedDataError(f"column {name!r} has Arrow type {kind}, which sparkdl cannot feed")
    return column_to_numpy(array, name)


def data_names(schema: pa.Schema) -> list[str]:
    """A fed batch's column names, without sparkdl's own row origins."""
    return [name for name in schema.names if name != ar.ORIGIN]


def batch_to_columns(batch: pa.RecordBatch, origin: np.ndarray | None = None) -> dict:
    """Every column of a record batch by name (:func:`column_values`; RDD arrays of two or more
    dimensions in their own shape, ``(rows, *shape)``), with each row's origin under
    :data:`~sparkdl.columns.arrow_rows.ORIGIN`: the batch's own column, else ``origin``."""
    columns = {name: column_values(batch.column(i), name) for i, name in enumerate(batch.schema.names)}
    if ar.ORIGIN in columns:
        columns[ar.ORIGIN] = np.asarray(columns[ar.ORIGIN], dtype=np.int64)
    elif origin is not None:
        columns[ar.ORIGIN] = origin
    return RowLayout.of(batch.schema).shaped(columns)


def bad_row_error(name: str, problem: ar.Problem, origins: np.ndarray | None) -> FeedDataError:
    """The error for ``problem``'s rows of column ``name``, naming the first row's partition and position."""
    rows = np.flatnonzero(problem.mask)
    first = int(origins[rows[0]]) if origins is not None and len(origins) > rows[0] else None
    more = f" ({len(rows)} such rows in this batch)" if len(rows) > 1 else ""
    return FeedDataError(f"column {name!r}, {ar.describe_origin(first)}: {problem.reason}{more}")


def check_rows(columns: dict, names: Sequence[str]) -> None:
    """Raise a :class:`FeedDataError` naming the column, partition and row of the first row that no
    tensor can take (a null, text that is not UTF-8, a Vector or image struct at odds with itself)."""
    for name in names:
        column = columns[name]
        if isinstance(column, np.ndarray):
            continue
        for problem in ar.column_problems(column):
            raise bad_row_error(name, problem, columns.get(ar.ORIGIN))


def _column_to_arrow(values: list, name: str) -> tuple[pa.Array, tuple[int, ...] | None]:
    """One RDD column as an Arrow array, and the per-element shape of multi-dimensional arrays."""
    first = values[0]
    if isinstance(first, (np.ndarray, list, tuple)) and not isinstance(first, (str, bytes)):
        try:
            dense = np.asarray(values)
        except ValueError as exc:
            raise FeedDataError(f"RDD column {name} holds arrays of different lengths; pad or filter them") from exc
        if dense.dtype == object or dense.ndim < 2:
            raise FeedDataError(
                f"RDD column {name} must hold equal-shape arrays of numbers, "
                f"got an array of shape {dense.shape[1:]} and dtype {dense.dtype}"
            )
        shape = dense.shape[1:] if dense.ndim > 2 else None
        width = int(np.prod(dense.shape[1:]))
        return pa.FixedSizeListArray.from_arrays(pa.array(dense.reshape(-1)), width), shape
    if hasattr(first, "toArray"):  # a pyspark.ml / mllib Vector: kept sparse, as Spark keeps it
        return ar.vectors_to_arrow(values), None
    try:
        return pa.array(values), None
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise FeedDataError(f"RDD column {name} cannot be converted to a tensor column: {exc}") from exc


def rows_to_record_batch(rows: Sequence[Any]) -> pa.RecordBatch:
    """RDD elements as one record batch whose schema metadata says how to rebuild them.

    Tuples (and lists holding arrays or lists) become columns ``"0"``, ``"1"``, ...; any other
    element (a number, a string, a list of numbers, an array, a Vector) is one column. The
    :class:`~sparkdl.feed.elements.RowLayout` in the metadata lets ``next_batch`` give each element
    back as it was: bare values bare, tuples as tuples, lists as lists.
    """
    first = rows[0]
    if isinstance(first, tuple) or (
        isinstance(first, list) and first and isinstance(first[0], (list, tuple, np.ndarray))
    ):
        width = len(first)
        if any(len(row) != width for row in rows):
            raise FeedDataError(f"RDD rows have different numbers of fields (first row has {width})")
        columns = [list(values) for values in zip(*rows)]
        container = TUPLE if isinstance(first, tuple) else LIST
    else:
        columns, container = [list(rows)], BARE
    names = [str(i) for i in range(len(columns))]
    converted = [_column_to_arrow(values, name) for values, name in zip(columns, names)]
    layout = RowLayout(
        tuple(names),
        container,
        tuple(value_kind(values[0]) for values in columns),
        tuple(shape for _, shape in converted),
    )
    batch = pa.RecordBatch.from_arrays([array for array, _ in converted], names=names)
    return batch.replace_schema_metadata(layout.metadata())
