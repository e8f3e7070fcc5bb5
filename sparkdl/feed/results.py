"""Inference results on the wire: every row's value comes back with its type, through Arrow (no pickle).

``map_fun`` answers ``cluster.inference`` with ``feed.batch_results(results)``: a numpy array
(one row per input row) or a list of per-row values. :func:`encode_results` turns them into one
Arrow column, and a JSON description in the schema metadata (key ``sparkdl.results``) of how to
rebuild each row; :func:`decode_results` gives the rows back as ``map_fun`` passed them:

- numpy arrays (rows of a 2-D or larger array, or a list of arrays) as numpy arrays of their
  shape and dtype (arrays of different shapes too);
- numpy scalars (rows of a 1-D array) as numpy scalars of their dtype;
- Python numbers, strings, bytes, booleans, ``None``, lists and dicts as Python values;
- tuples as tuples, each item by these rules.

So ``rdd.sum()``, ``rdd.map(lambda r: r[0])`` and ``collect()`` over the results behave as
they did under TensorFlowOnSpark, which pickled each result.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pyarrow as pa

from ..common.errors import ResultsError as ResultsError  # re-exported: raised here

METADATA_KEY = b"sparkdl.results"
ARRAY, RAGGED, TUPLE, PYTHON = "array", "ragged", "tuple", "python"


def encode_results(results: Any) -> pa.RecordBatch:
    """Per-row results as a one-column record batch that :func:`decode_results` rebuilds."""
    column, spec = _encode(results if isinstance(results, np.ndarray) else list(results))
    batch = pa.RecordBatch.from_arrays([column], names=["result"])
    return batch.replace_schema_metadata({METADATA_KEY: json.dumps(spec).encode()})


def decode_results(batch: pa.RecordBatch) -> list:
    """The per-row results of a batch from :func:`encode_results` (plain Python values without its metadata)."""
    raw = (batch.schema.metadata or {}).get(METADATA_KEY)
    if raw is None:
        return batch.column(0).to_pylist()
    return _decode(batch.column(0), json.loads(raw))


# -- encoding --


def _encode(values: np.ndarray | list) -> tuple[pa.Array, dict]:
    if isinstance(values, np.ndarray):
        if values.ndim == 0:
            raise ResultsError("batch_results needs one result per row, got a 0-dimensional array")
        if values.dtype != object:
            return _encode_array(values)
        values = list(values)
    if not values:
        return pa.nulls(0), {"kind": PYTHON}
    if all(isinstance(v, np.ndarray) for v in values):
        dtypes = {v.dtype for v in values}
        if object not in dtypes:
            if len({v.shape for v in values}) == 1:
                return _encode_array(np.stack(values))
            return _encode_ragged(values, np.result_type(*dtypes))
    elif all(isinstance(v, np.generic) for v in values):
        array = np.asarray(values)
        if array.dtype != object:
            return _encode_array(array)
    elif all(isinstance(v, tuple) for v in values) and len({len(v) for v in values}) == 1 and values[0]:
        children = [_encode([v[i] for v in values]) for i in range(len(values[0]))]
        column = pa.StructArray.from_arrays([c for c, _ in children], names=[str(i) for i in range(len(children))])
        return column, {"kind": TUPLE, "items": [spec for _, spec in children]}
    return _encode_python(values)


def _encode_array(array: np.ndarray) -> tuple[pa.Array, dict]:
    """An array with one row per result: rows of shape ``array.shape[1:]`` and its dtype."""
    shape = [int(d) for d in array.shape[1:]]
    spec = {"kind": ARRAY, "dtype": array.dtype.str, "shape": shape}
    size = int(np.prod(shape, dtype=np.int64))
    if shape and size == 0:
        return pa.nulls(len(array)), spec
    flat = pa.array(np.ascontiguousarray(array).reshape(-1))
    return (pa.FixedSizeListArray.from_arrays(flat, size) if shape else flat), spec


def _encode_ragged(values: list[np.ndarray], dtype: np.dtype) -> tuple[pa.Array, dict]:
    """Arrays of different shapes: each row's values flattened, and its shape."""
    lengths = np.array([v.size for v in values], dtype=np.int64)
    offsets = pa.array(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64))
    flat = pa.array(np.concatenate([v.reshape(-1) for v in values]).astype(dtype, copy=False))
    shapes = pa.array([list(v.shape) for v in values], pa.list_(pa.int64()))
    column = pa.StructArray.from_arrays(
        [pa.LargeListArray.from_arrays(offsets, flat), shapes], names=["values", "shape"]
    )
    return column, {"kind": RAGGED, "dtype": np.dtype(dtype).str}


def _plain(value: Any) -> Any:
    """A value with numpy inside turned into Python values, for Arrow's type inference."""
    if isinstance(value, (np.ndarray, np.generic)):
        return value.tolist()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _encode_python(values: list) -> tuple[pa.Array, dict]:
    try:
        return pa.array([_plain(v) for v in values]), {"kind": PYTHON}
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
        kinds = sorted({type(v).__name__ for v in values})
        raise ResultsError(
            f"batch_results cannot send results of type(s) {kinds} back to Spark: {exc}. Return numbers, strings, "
            "bytes, booleans, None, numpy arrays or scalars, or lists, dicts or tuples of them, the same kind for "
            "every row (sparkdl never pickles: results travel as Arrow)"
        ) from exc


# -- decoding --


def _decode(column: pa.Array, spec: dict) -> list:
    kind = spec["kind"]
    if kind == ARRAY:
        return _decode_array(column, np.dtype(spec["dtype"]), tuple(spec["shape"]))
    if kind == RAGGED:
        dtype = np.dtype(spec["dtype"])
        values, shapes = column.flatten()
        shapes = shapes.to_pylist()
        return [
            np.array(values[i].values.to_numpy(zero_copy_only=False), dtype=dtype).reshape(shape)
            for i, shape in enumerate(shapes)
        ]
    if kind == TUPLE:
        items = [_decode(child, item) for child, item in zip(column.flatten(), spec["items"])]
        return list(zip(*items))
    return column.to_pylist()


def _decode_array(column: pa.Array, dtype: np.dtype, shape: tuple[int, ...]) -> list:
    rows = len(column)
    if shape and int(np.prod(shape)) == 0:
        return list(np.empty((rows, *shape), dtype=dtype))
    flat = (column.flatten() if shape else column).to_numpy(zero_copy_only=False)
    if dtype.kind in "USO" and not shape:
        return flat.tolist() if dtype.kind == "O" else list(flat.astype(dtype))
    array = np.array(flat, dtype=dtype)  # a writable copy, as an unpickled array was
    return list(array.reshape((rows, *shape)))


# -- results as rows of a declared schema (cluster.inference(..., result_schema=...)) --


def results_as_rows(results: list, schema: pa.Schema) -> pa.RecordBatch:
    """Per-row results as a record batch of ``schema``: with one field each result is that
    field's value; with several, each result is a sequence (one item per field, in order) or a
    dict keyed by field name. Raises ResultsError naming the field that a value does not fit."""
    names = schema.names
    if len(names) == 1:
        columns = [results]
    else:
        columns = [[] for _ in names]
        for row in results:
            if isinstance(row, dict):
                items = [row.get(name) for name in names]
            else:
                items = list(row) if isinstance(row, (tuple, list, np.ndarray)) else None
                if items is None or len(items) != len(names):
                    raise ResultsError(
                        f"result_schema has {len(names)} fields ({', '.join(names)}), so each "
                        f"result must be a sequence or dict of {len(names)} values, got {row!r:.80}"
                    )
            for column, item in zip(columns, items):
                column.append(item)
    arrays = []
    for field, values in zip(schema, columns):
        try:
            arrays.append(pa.array([_plain(v) for v in values], type=field.type))
        except (pa.ArrowException, TypeError, ValueError) as exc:
            raise ResultsError(
                f"result_schema field {field.name!r} ({field.type}) cannot hold the results: "
                f"{str(exc).splitlines()[0][:200]}"
            ) from None
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
