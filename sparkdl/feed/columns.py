"""Columnar conversions for feeding: Spark rows or Arrow record batches in, dense numpy out.

DataFrames travel as Arrow record batches end to end: an ``array<float>`` column becomes one
``(rows, width)`` float32 array by reshaping Arrow's flat value buffer, with no per-row Python
objects (:mod:`sparkdl.arrow_numpy`, shared with inference). RDD rows are turned into record
batches once, on the executor that feeds them, with their structure in the schema metadata
(``elements.py``).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pyarrow as pa

from ..arrow_numpy import ColumnRef, arrow_to_numpy
from ..errors import FeedDataError as FeedDataError  # re-exported: raised here
from .elements import BARE, LIST, TUPLE, RowLayout, value_kind


def check_spark_schema(schema) -> None:
    """Reject, before any job runs, DataFrame columns that cannot become dense tensors."""
    from pyspark.ml.linalg import VectorUDT
    from pyspark.sql import types as T

    for field in schema.fields:
        kind = field.dataType
        if isinstance(kind, (T.NumericType, T.BooleanType, T.StringType, VectorUDT)):
            continue
        if isinstance(kind, T.ArrayType) and isinstance(kind.elementType, (T.NumericType, T.BooleanType)):
            continue
        raise FeedDataError(
            f"column {field.name!r} has type {kind.simpleString()}, which sparkdl cannot feed as a tensor; "
            "supported: numeric, boolean and string scalars, arrays of numbers, and pyspark.ml Vectors. "
            f"Select or convert it first (e.g. df.drop({field.name!r}))."
        )


def check_same_columns(training, validation) -> None:
    """Reject validation data whose columns or types differ from the training data's, naming the column."""
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
        if expected[name] != given[name]:
            raise FeedDataError(
                f"validation_data column {name!r} is {given[name].simpleString()} but the training "
                f"column is {expected[name].simpleString()}; cast one of them"
            )
    if list(expected) != list(given):
        raise FeedDataError(
            f"validation_data has the training data's columns in another order ({list(given)} vs "
            f"{list(expected)}); select them in the same order"
        )


def column_to_numpy(array: pa.Array | pa.ChunkedArray, name: str) -> np.ndarray:
    """One Arrow column as a dense numpy array (2-D for arrays and vectors); see
    :func:`sparkdl.arrow_numpy.arrow_to_numpy`."""
    return arrow_to_numpy(array, ColumnRef(name, FeedDataError))


def batch_to_columns(batch: pa.RecordBatch) -> dict[str, np.ndarray]:
    """Every column of a record batch as a dense numpy array, by name (RDD arrays of two or more
    dimensions in their own shape, ``(rows, *shape)``)."""
    columns = {name: column_to_numpy(batch.column(i), name) for i, name in enumerate(batch.schema.names)}
    return RowLayout.of(batch.schema).shaped(columns)


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
    if hasattr(first, "toArray"):  # a pyspark.ml / mllib Vector
        return _column_to_arrow([v.toArray() for v in values], name)
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
