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
        names = tuple(schema.names)
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


def _values(column: np.ndarray, kind: str) -> list:
    """One column as per-element values of ``kind``."""
    if kind == PYTHON:
        return column.tolist()
    if kind in (ML_VECTOR, MLLIB_VECTOR):
        if kind == ML_VECTOR:
            from pyspark.ml.linalg import DenseVector
        else:
            from pyspark.mllib.linalg import DenseVector
        return [DenseVector(row) for row in column]
    if column.ndim > 1 and not column.flags.writeable:
        column = column.copy()  # a numpy element was writable in the RDD; Arrow's buffers are read-only
    return list(column)
