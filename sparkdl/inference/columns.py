"""Columns in, tensors out, and back: a scoring plan's conversions between Spark batches and numpy.

Everything here works on whole batches, through :mod:`sparkdl.columns.arrow_numpy` (shared with the
feed): an Arrow ``list<float>`` column becomes one ``(rows, *shape)`` array by reshaping Arrow's
flat value buffer (no copy when the dtype already matches); a pandas column of per-row arrays
(what ``mapInPandas`` hands over) is stacked with one ``np.stack`` call, done in C. Each column
is then shaped and cast for the model input it feeds (:class:`InputPlan`). Nulls, ragged rows and
impossible dtypes raise :class:`InferenceInputError` naming the column, because a model cannot
score them.

No TensorFlow, no Spark: numpy, pandas and pyarrow only, so these functions are cheap to test.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa

from ..columns import arrow_numpy, arrow_rows
from ..columns.arrow_numpy import TEXT_DTYPES, ColumnRef, castable
from ..columns.readers import ColumnSpecError, ImageReader, VectorReader, reader_for, take
from ..columns.specs import Packed, Sparse
from ..common.errors import InferenceInputError as InferenceInputError  # re-exported: raised here

__all__ = [
    "InferenceInputError",
    "InputPlan",
    "OutputPlan",
    "castable",
    "check_dtype",
    "pandas_to_model_input",
    "arrow_to_model_input",
    "outputs_to_pandas",
    "outputs_to_arrow",
    "spark_value_info",
    "needs_reader",
    "read_column",
]


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
    spec: Any = None  # a column spec (Image, Sparse, Ragged, Padded: through a reader; Packed: dense)
    vector: bool = False  # a pyspark.ml Vector column (dense unless spec is Sparse)

    @property
    def row_size(self) -> int | None:
        """Values per row once flattened, or None when the shape is left natural."""
        return None if self.row_shape is None else int(np.prod(self.row_shape, dtype=np.int64))

    def describe(self) -> str:
        """``column 'x' (model input 'y')`` for error messages."""
        return f"column {self.column!r} (model input {self.tensor!r})"

    @property
    def ref(self) -> ColumnRef:
        """The column as :mod:`sparkdl.columns.arrow_numpy` names it in errors."""
        return ColumnRef(self.column, InferenceInputError, self.describe(), self.row_size)


@dataclass(frozen=True)
class OutputPlan:
    """How one model output becomes one result column.

    ``scalar`` outputs (per-row shape ``()`` or ``(1,)``) become plain columns; others are
    flattened per row into ``array<...>`` columns, or, ``packed``, into ``binary`` columns of
    each row's values as little-endian ``dtype`` bytes (what ``Packed(shape, dtype)`` reads back).
    ``spark_type`` is a DDL string.
    """

    tensor: str
    column: str
    spark_type: str
    scalar: bool
    dtype: str | None = None
    packed: bool = False


def check_dtype(plan: InputPlan) -> None:
    """Raise :class:`InferenceInputError` when the column's dtype cannot feed the model input."""
    if plan.dtype is not None and not castable(plan.source_dtype, plan.dtype):
        raise InferenceInputError(
            f"{plan.describe()}: the column holds {plan.source_dtype} values but the model expects "
            f"{plan.dtype}; convert it first, e.g. df.withColumn({plan.column!r}, "
            f"F.col({plan.column!r}).cast(...))"
        )


# ---------------------------------------------------------------------------------------------
# Input side
# ---------------------------------------------------------------------------------------------


def _finish(plan: InputPlan, values: np.ndarray, rows: int) -> np.ndarray:
    """Reshape ``values`` (already ``rows`` long in the first axis) and cast it for the model."""
    if plan.row_shape is not None:
        per_row = values.size // rows if rows else plan.row_size
        if per_row != plan.row_size:
            raise InferenceInputError(
                f"{plan.describe()}: each row holds {per_row} values but the model expects "
                f"{plan.row_size} (shape {tuple(plan.row_shape)}); check input_shapes or the column"
            )
        values = values.reshape((rows, *plan.row_shape))
    if plan.dtype is not None and plan.dtype not in TEXT_DTYPES:
        if values.dtype.kind in "OUS":
            raise InferenceInputError(
                f"{plan.describe()}: values are {values.dtype} but the model expects {plan.dtype}"
            )
        if not castable(values.dtype.name, plan.dtype):
            raise InferenceInputError(
                f"{plan.describe()}: the column holds {values.dtype.name} values but the model expects {plan.dtype}"
            )
        if values.dtype != np.dtype(plan.dtype):
            values = values.astype(plan.dtype)
    return values


def pandas_to_model_input(series: pd.Series, plan: InputPlan) -> np.ndarray:
    """One pandas column (as ``mapInPandas`` or a pandas UDF receives it) as a model-ready array."""
    rows = len(series)
    if isinstance(plan.spec, Packed):
        return _finish(
            plan, arrow_numpy.packed_rows_to_numpy(series.to_numpy(), plan.spec.shape, plan.spec.dtype, plan.ref), rows
        )
    if plan.depth == 0:
        if plan.source_dtype in ("str", "bytes"):
            values = series.to_numpy(dtype=object)
            nulls = np.flatnonzero(pd.isna(series).to_numpy())
            if len(nulls):
                raise arrow_numpy.null_error(plan.ref, nulls, rows)
            return _finish(plan, values, rows)
        if series.dtype == object or (series.dtype.kind == "f" and plan.source_dtype[0] in "ib"):
            # Spark turns integer/boolean columns with nulls into float64/object pandas columns.
            nulls = np.flatnonzero(pd.isna(series).to_numpy())
            if len(nulls):
                raise arrow_numpy.null_error(plan.ref, nulls, rows)
            values = series.to_numpy(dtype=plan.source_dtype)
        else:
            # Float nulls arrive as NaN in pandas, indistinguishable from NaN: documented, passed on.
            values = series.to_numpy()
        return _finish(plan, values, rows)
    return _finish(plan, arrow_numpy.stack_rows(series.to_numpy(), plan.ref), rows)


def arrow_to_model_input(column: pa.Array | pa.ChunkedArray, plan: InputPlan) -> np.ndarray:
    """One Arrow column (as ``mapInArrow`` receives it) as a model-ready array, without row loops."""
    if isinstance(plan.spec, Packed):
        return _finish(
            plan, arrow_numpy.packed_to_numpy(column, plan.spec.shape, plan.spec.dtype, plan.ref), len(column)
        )
    return _finish(plan, arrow_numpy.arrow_to_numpy(column, plan.ref), len(column))


# ---------------------------------------------------------------------------------------------
# Output side
# ---------------------------------------------------------------------------------------------


def _output_values(outputs: Mapping[str, np.ndarray], plan: OutputPlan, rows: int) -> np.ndarray:
    try:
        values = np.asarray(outputs[plan.tensor])
    except KeyError:
        raise InferenceInputError(
            f"the model returned no output named {plan.tensor!r} (it returned {sorted(outputs)}); fix output_mapping"
        ) from None
    if values.ndim == 0 or len(values) != rows:
        raise InferenceInputError(
            f"model output {plan.tensor!r} has shape {values.shape} for a batch of "
            f"{rows} rows; it must have one entry per row"
        )
    if values.dtype.kind == "S":
        values = values.astype(object)
    if values.dtype == object and values.size and isinstance(values.flat[0], bytes) and plan.spark_type == "string":
        values = np.char.decode(values.astype(bytes), "utf-8").astype(object)
    if plan.packed:
        if values.dtype.kind not in "biuf":
            raise InferenceInputError(
                f"model output {plan.tensor!r} is {values.dtype}, not numbers: it cannot be written packed"
            )
        values = values.reshape(rows, -1) if rows else values.reshape(0, max(1, int(np.prod(values.shape[1:]))))
    elif plan.scalar:
        if values.ndim > 1:
            if int(np.prod(values.shape[1:])) != 1:
                raise InferenceInputError(
                    f"model output {plan.tensor!r} has shape {values.shape}, "
                    "not one value per row, but its column was declared scalar"
                )
            values = values.reshape(rows)
    else:
        values = values.reshape(rows, -1) if rows else values.reshape(0, max(1, int(np.prod(values.shape[1:]))))
    if plan.dtype is not None and values.dtype != object and values.dtype != np.dtype(plan.dtype):
        values = values.astype(plan.dtype)
    return values


def outputs_to_pandas(
    outputs: Mapping[str, np.ndarray], plans: Sequence[OutputPlan], rows: int, keep: pd.DataFrame | None = None
) -> pd.DataFrame:
    """Model outputs as a pandas DataFrame: kept columns first, then one column per output."""
    frame = {} if keep is None else {name: keep[name].reset_index(drop=True) for name in keep.columns}
    for plan in plans:
        values = _output_values(outputs, plan, rows)
        if plan.packed:  # the Arrow path's packing, as a Series of bytes
            frame[plan.column] = arrow_numpy.to_packed_array(values).to_pandas()
        else:
            # A 2-D array becomes a Series of row views (no copy); Arrow turns it into list<...>.
            frame[plan.column] = values if plan.scalar else pd.Series(list(values), dtype=object)
    return pd.DataFrame(frame, index=pd.RangeIndex(rows))


def outputs_to_arrow(
    outputs: Mapping[str, np.ndarray],
    plans: Sequence[OutputPlan],
    rows: int,
    schema: pa.Schema,
    keep: pa.RecordBatch | None = None,
) -> pa.RecordBatch:
    """Model outputs as an Arrow record batch matching ``schema`` (kept columns first)."""
    arrays: list[pa.Array] = [] if keep is None else list(keep.columns)
    offset = len(arrays)
    for index, plan in enumerate(plans):
        values = _output_values(outputs, plan, rows)
        field_type = schema.field(offset + index).type
        if plan.packed:
            arrays.append(arrow_numpy.to_packed_array(values))
        elif plan.scalar:
            arrays.append(pa.array(values, type=field_type))
        else:
            arrays.append(arrow_numpy.to_list_array(values, field_type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def spark_value_info(data_type: Any) -> tuple[int, str]:
    """``(depth, numpy dtype)`` of a Spark column type; raises for types a model cannot take.
    A ``pyspark.ml`` Vector is ``(1, "float64")`` and Spark's image struct ``(3, "uint8")``."""
    from pyspark.ml.linalg import VectorUDT
    from pyspark.sql.types import StructType

    if isinstance(data_type, VectorUDT):
        return 1, "float64"
    if isinstance(data_type, StructType) and set(data_type.names) == arrow_rows.IMAGE_FIELDS:
        return 3, "uint8"
    depth = 0
    while data_type.typeName() == "array":
        data_type = data_type.elementType
        depth += 1
    dtype = arrow_numpy.numpy_dtype(data_type.typeName())
    if dtype is None:
        raise InferenceInputError(
            f"Spark type {data_type.simpleString()} cannot be fed to a model; supported: numeric, "
            "boolean, string and binary scalars, (nested) arrays of them, pyspark.ml Vectors and "
            "Spark's image struct"
        )
    return depth, dtype


# ---------------------------------------------------------------------------------------------
# Columns read by a column reader (images, Vectors, arrays of varying length)
# ---------------------------------------------------------------------------------------------


def needs_reader(plan: InputPlan) -> bool:
    """Whether ``plan``'s column goes through a column reader rather than the dense path."""
    return (plan.spec is not None and not isinstance(plan.spec, Packed)) or plan.vector


def pandas_to_arrow(values: Any) -> pa.Array:
    """A pandas column as Arrow, for the readers: Vectors (objects) as Spark's Vector struct, a
    struct (a DataFrame, or dicts) as a struct, anything else as Arrow infers it."""
    if isinstance(values, pd.DataFrame):
        return pa.StructArray.from_arrays([pa.array(values[c]) for c in values.columns], names=list(values.columns))
    items = values.tolist() if hasattr(values, "tolist") else list(values)
    first = next((item for item in items if item is not None), None)
    if first is not None and hasattr(first, "toArray"):
        return arrow_rows.vectors_to_arrow(items)
    if first is not None and hasattr(first, "asDict"):
        items = [None if item is None else item.asDict() for item in items]
    return pa.array(items)


class ReaderBatch:
    """One batch of a column read by a column reader: sliced into chunks like a numpy array and
    made the model's input (a tensor, ``tf.SparseTensor`` or ``tf.RaggedTensor``) per chunk by
    ``convert`` (``sparkdl.columns.tensors.converter``)."""

    def __init__(self, reader, column, convert):
        self.reader, self.column, self.convert = reader, column, convert

    def __len__(self) -> int:
        return len(self.column)

    def __getitem__(self, rows: slice) -> "ReaderBatch":
        return ReaderBatch(self.reader, self.column[rows], self.convert)

    def repeat_last(self, count: int) -> "ReaderBatch":
        """This batch with its last row repeated ``count`` more times (padding to a fixed batch size)."""
        index = np.concatenate([np.arange(len(self.column)), np.full(count, len(self.column) - 1)])
        return ReaderBatch(self.reader, take(self.column, index), self.convert)

    def tensor(self):
        """The model's input for these rows."""
        return self.convert(self.reader.parts(self.column))


def read_column(column: Any, plan: InputPlan, origins: np.ndarray, converters: dict) -> ReaderBatch:
    """A column that needs a reader (:func:`needs_reader`), checked (a bad row raises naming the
    column, partition and row) and ready to score; ``converters`` keeps one traced converter
    per input for the task."""
    from ..columns import tensors as tf_columns

    if not isinstance(column, (pa.Array, pa.ChunkedArray)):
        column = pandas_to_arrow(column)
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    reader = _reader(plan, column)
    for problem in reader.problems(column):
        rows = np.flatnonzero(problem.mask)
        more = f" ({len(rows)} such rows in this batch)" if len(rows) > 1 else ""
        where = arrow_rows.describe_origin(int(origins[rows[0]]))
        raise InferenceInputError(f"{plan.describe()}, {where}: {problem.reason}{more}")
    if plan.tensor not in converters:
        converters[plan.tensor] = tf_columns.converter(reader, plan.dtype, _decode_parallelism(reader))
    return ReaderBatch(reader, column, converters[plan.tensor])


def _decode_parallelism(reader) -> int:
    """How many images a task decodes at once: ``Image(parallel=...)``, else the cores Spark gave
    the task (``spark.task.cpus``; never the machine's, which other tasks share), else one."""
    from .worker import task_cpus

    parallel = reader.spec.parallel if isinstance(reader, ImageReader) else None
    return parallel or task_cpus() or 1


def _reader(plan: InputPlan, column: pa.Array):
    """The reader of ``plan``'s column: its spec, completed by the model's shape at planning time."""
    if plan.vector:
        size = plan.row_shape[-1] if plan.row_shape else int(arrow_rows.vector_rows(column[:1]).sizes[0])
        sparse = isinstance(plan.spec, Sparse)
        dtype = np.dtype(plan.spec.dtype) if sparse and plan.spec.dtype else np.dtype("float64")
        return VectorReader(plan.column, column[:1], size=size, sparse=sparse, dtype=dtype)
    try:
        return reader_for(plan.column, column[:16], plan.spec)
    except ColumnSpecError as exc:
        raise InferenceInputError(str(exc)) from None
