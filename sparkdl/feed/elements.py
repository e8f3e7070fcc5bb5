"""How RDD elements were shaped, carried in Arrow schema metadata, so ``next_batch`` rebuilds them.

RDD elements travel to the nodes as Arrow record batches, one column per field (``"0"``,
``"1"``, ...), which ``as_dataset`` and ``input_mapping`` read as dense numpy arrays. What
columns alone lose, the element's Python structure, rides along in the batch's schema metadata
(key ``sparkdl.elements``, a small JSON object; never pickle):

- ``container``: ``"bare"`` (the element was one value: a number, a string, a list, an array),
  ``"tuple"`` or ``"list"`` (one column per item);
- ``kinds``: per column, ``"python"`` (ints, floats, bools, strings, bytes, lists: rebuilt with
  ``tolist()``, so a list comes back a list of Python numbers), ``"numpy"`` (numpy arrays and
  scalars, handed back as numpy), or ``"ml.vector"`` / ``"mllib.vector"`` (pyspark Vectors,
  rebuilt as dense vectors);
- ``shapes``: per column, the per-element shape of arrays with two or more dimensions (Arrow
  carries them flattened).

A batch without this metadata (a DataFrame's) reads as tuples of numpy values.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from ..columns import arrow_rows as ar
from ..columns.arrow_rows import ORIGIN

METADATA_KEY = b"sparkdl.elements"
BARE, TUPLE, LIST = "bare", "tuple", "list"
PYTHON, NUMPY, ML_VECTOR, MLLIB_VECTOR = "python", "numpy", "ml.vector", "mllib.vector"


def value_kind(value: Any) -> str:
    """How a value of an RDD element is handed back: ``python``, ``numpy`` or a Vector kind."""
    if isinstance(value, (np.ndarray, np.generic)):
        return NUMPY
    if hasattr(value, "toArray"):
        return MLLIB_VECTOR if type(value).__module__.startswith("pyspark.mllib") else ML_VECTOR
    return PYTHON


@dataclass(frozen=True)
class RowLayout:
    """The structure of the elements in a record batch: container, per-column kinds and shapes."""

    names: tuple[str, ...]
    container: str = TUPLE
    kinds: tuple[str, ...] | None = None  # None: numpy for every column (DataFrames)
    shapes: tuple[tuple[int, ...] | None, ...] | None = None

    @classmethod
    def of(cls, schema) -> "RowLayout":
        """The layout a batch's Arrow schema describes (tuples of numpy values without metadata)."""
        names = tuple(name for name in schema.names if name != ORIGIN)  # sparkdl's own column: not data
        raw = (schema.metadata or {}).get(METADATA_KEY)
        if raw is None:
            return cls(names)
        spec = json.loads(raw)
        shapes = spec.get("shapes")
        return cls(
            names,
            spec.get("container", TUPLE),
            tuple(spec["kinds"]) if "kinds" in spec else None,
            tuple(tuple(s) if s is not None else None for s in shapes) if shapes else None,
        )

    @property
    def widths_vary(self) -> bool:
        """Whether a list column's width is a batch's, not the column's: a DataFrame's ``array<...>``
        columns hold lists of any length, and a feeder sends a batch whose rows agree in length as a
        fixed-size list, so one column arrives at several widths. An RDD's arrays are tensors of one
        shape (``rows_to_record_batch`` refuses others), so their width is the column's."""
        return self.kinds is None

    def metadata(self) -> dict[bytes, bytes]:
        """This layout as Arrow schema metadata."""
        spec: dict[str, Any] = {"container": self.container}
        if self.kinds is not None:
            spec["kinds"] = list(self.kinds)
        if self.shapes and any(s is not None for s in self.shapes):
            spec["shapes"] = [list(s) if s is not None else None for s in self.shapes]
        return {METADATA_KEY: json.dumps(spec).encode()}

    def shaped(self, columns: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Columns with multi-dimensional elements given back their shape, ``(rows, *shape)``."""
        if not self.shapes:
            return columns
        out = dict(columns)
        for name, shape in zip(self.names, self.shapes):
            if shape is not None and name in out:
                out[name] = out[name].reshape((-1, *shape))
        return out

    def rows(self, columns: dict[str, np.ndarray]) -> list:
        """The elements themselves, as they were in the RDD (tuples of numpy values for DataFrames)."""
        kinds = self.kinds or (NUMPY,) * len(self.names)
        values = [_values(columns[name], kind) for name, kind in zip(self.names, kinds)]
        if self.container == BARE and len(values) == 1:
            return values[0]
        if self.container == LIST:
            return [list(items) for items in zip(*values)]
        return list(zip(*values))


def _values(column, kind: str) -> list:
    """One column (numpy, or the Arrow array of a column that is not dense) as per-element
    values of ``kind``."""
    if kind in (ML_VECTOR, MLLIB_VECTOR):
        return _vectors(column, kind)
    if not isinstance(column, np.ndarray):
        return arrow_values(column, python=kind == PYTHON)
    if kind == PYTHON:
        return column.tolist()
    return list(_owned(column))


def _owned(column: np.ndarray) -> np.ndarray:
    """``column`` copied when its rows would be views: a numpy element was writable in the RDD and
    its own. The column may be a read-only view of an Arrow frame, or a buffer the reader hands out
    again (a cached epoch that fits one replay window serves the same window next epoch), where a
    ``map_fun`` that scales its rows in place would change later epochs' rows. One copy per batch."""
    return column.copy() if column.ndim > 1 else column


def _vectors(column, kind: str) -> list:
    """Vectors as they were in the RDD: dense ones dense, sparse ones sparse."""
    if kind == ML_VECTOR:
        from pyspark.ml.linalg import DenseVector, SparseVector
    else:
        from pyspark.mllib.linalg import DenseVector, SparseVector
    if isinstance(column, np.ndarray):
        return [DenseVector(row) for row in _owned(column)]
    rows, kinds = ar.vector_rows(column), column.field("type").to_numpy(zero_copy_only=False)
    pieces = zip(np.split(rows.columns, rows.splits[1:-1]), np.split(rows.values, rows.splits[1:-1]))
    return [
        DenseVector(values) if dense == 1 else SparseVector(int(size), indices, values)
        for (indices, values), dense, size in zip(pieces, kinds, rows.sizes)
    ]


def arrow_values(column: pa.Array, python: bool = False) -> list:
    """A column kept in Arrow as per-row values: bytes and strings as Python values, arrays of
    numbers as numpy arrays (lists with ``python``), Vectors as dense float64 arrays, other
    structs (Spark's images) as dicts, nulls as None."""
    if ar.is_vector(column.type):
        return list(ar.densify(ar.vector_rows(column), int(ar.vector_rows(column).sizes.max(initial=0))))
    if python or not ar.is_list(column.type) or column.null_count or ar.is_bytes(ar.innermost(column.type)[0]):
        return column.to_pylist()
    parts = ar.list_parts(column)
    flat = parts.values.to_numpy(zero_copy_only=False)
    if ar.is_list(parts.values.type):  # nested: rows of rows
        return [np.asarray(row) for row in column.to_pylist()]
    return np.split(flat, parts.splits[1:-1])


def column_array(column) -> np.ndarray:
    """A column as one numpy array, for ``next_batch`` with ``input_mapping``: dense columns as
    they are, Vectors dense, other Arrow columns as an object array of per-row values."""
    if isinstance(column, np.ndarray):
        return column
    if ar.is_vector(column.type):
        rows = ar.vector_rows(column)
        return ar.densify(rows, int(rows.sizes.max(initial=0)))
    values = np.empty(len(column), dtype=object)
    values[:] = arrow_values(column)
    return values
