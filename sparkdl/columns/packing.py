"""Writing tensor columns packed: ``array<number>`` columns as ``binary`` rows of raw values.

Spark hands an ``array<float>`` column to Python (``mapInArrow``, ``mapInPandas``, the feed) by
writing every value into Arrow one at a time; a ``binary`` column moves as one copy of each row's
bytes. :func:`pack_tensors` rewrites equal-length array columns as binary columns holding each
row's values as little-endian bytes of one dtype, which :class:`~.specs.Packed` reads back as a
dense tensor (``as_dataset``, ``Predictor``, ``predict_batch_udf``). Pack once when the data are
written (e.g. before ``write.parquet``), and every later read pays the cheaper conversion.
"""

from __future__ import annotations

from typing import Iterable

import numpy as np

from .arrow_numpy import ColumnRef, arrow_to_numpy, to_packed_array


def pack_batch(batch, columns: Iterable[str], dtype: str):
    """One Arrow record batch with ``columns`` (equal-length numeric arrays) packed as binary
    (nulls and ragged rows raise naming the column)."""
    import pyarrow as pa

    columns = set(columns)
    arrays, fields = [], []
    for field, array in zip(batch.schema, batch.columns):
        if field.name in columns:
            values = arrow_to_numpy(array, ColumnRef(field.name)).astype(dtype, copy=False)
            array, field = to_packed_array(values), pa.field(field.name, pa.binary(), field.nullable)
        arrays.append(array)
        fields.append(field)
    return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))


def pack_tensors(df, columns, dtype: str = "float32"):
    """``df`` with each of ``columns`` (a name or a list of names of ``array<number>`` columns,
    every row of a column the same length) rewritten as a ``binary`` column of packed rows: each
    row's values as little-endian ``dtype`` bytes, in row-major order. Read them back with
    ``columns={name: Packed(shape, dtype)}``. A null or a row of another length fails the task
    naming the column. Runs as one ``mapInArrow``: lazy, like any transformation."""
    from pyspark.sql.types import ArrayType, BinaryType, StructField, StructType

    names = [columns] if isinstance(columns, str) else list(columns)
    np.dtype(dtype)  # a bad dtype fails here, on the driver
    fields = []
    for name in names:
        if name not in df.columns:
            raise ValueError(f"pack_tensors: no column {name!r}; the DataFrame has {df.columns}")
        if not isinstance(df.schema[name].dataType, ArrayType):
            raise ValueError(
                f"pack_tensors: column {name!r} is {df.schema[name].dataType.simpleString()}, not an array"
            )
    for field in df.schema.fields:
        fields.append(StructField(field.name, BinaryType(), field.nullable) if field.name in names else field)

    def pack(batches):
        for batch in batches:
            yield pack_batch(batch, names, dtype)

    return df.mapInArrow(pack, StructType(fields))
