"""Arrow columns whose rows vary in size, taken apart without a Python step per row.

Bytes and strings, arrays of varying length, ``pyspark.ml`` Vectors (dense or sparse) and
Spark's image struct all keep Arrow's layout: flat values plus per-row offsets. The functions
here read those buffers as numpy views (respecting a slice's offset) and find the rows that no
tensor can take (nulls, text that is not UTF-8, vectors or images whose fields disagree with
their data), all vectorised. Rows are named by their *origin*: the Spark partition and the row's
position in it, carried per row as one int64 (:func:`origin_values`).

numpy and pyarrow only; shared by the feed (``sparkdl/feed``) and inference (``sparkdl/inference``).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pyarrow as pa

from .arrow_numpy import VECTOR_FIELDS

#: The hidden column a feeding task adds to each training frame: every row's origin.
ORIGIN = "__sparkdl_origin"
#: An origin is ``partition << ORIGIN_BITS | row``.
ORIGIN_BITS = 40
#: Fields of the struct Spark's image data source (``spark.read.format("image")``) gives.
IMAGE_FIELDS = {"origin", "height", "width", "nChannels", "mode", "data"}
#: OpenCV modes of Spark's image source -> channels (CV_8UC1, CV_8UC3, CV_8UC4).
IMAGE_MODES = {0: 1, 16: 3, 24: 4}


def origin_values(partition: int, positions: np.ndarray) -> np.ndarray:
    """The origins of rows at ``positions`` of Spark partition ``partition``."""
    return (np.int64(partition) << ORIGIN_BITS) | np.asarray(positions, dtype=np.int64)


def describe_origin(origin: int | None) -> str:
    """``partition 3, row 17`` (rows numbered from 0 in the partition)."""
    if origin is None or origin < 0:
        return "row unknown"
    return f"partition {int(origin) >> ORIGIN_BITS}, row {int(origin) & ((1 << ORIGIN_BITS) - 1)}"


# ---------------------------------------------------------------------------------------------
# What a column is
# ---------------------------------------------------------------------------------------------


def is_list(kind: pa.DataType) -> bool:
    """Whether ``kind`` is a list, large list or fixed-size list."""
    return pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind)


def is_bytes(kind: pa.DataType) -> bool:
    """Whether ``kind`` holds bytes or text (binary, string, and their large forms)."""
    return any(check(kind) for check in (pa.types.is_binary, pa.types.is_large_binary)) or is_text(kind)


def is_text(kind: pa.DataType) -> bool:
    """Whether ``kind`` is a (large) UTF-8 string."""
    return pa.types.is_string(kind) or pa.types.is_large_string(kind)


def is_vector(kind: pa.DataType) -> bool:
    """Whether ``kind`` is the struct of ``pyspark.ml`` Vectors (VectorUDT's storage)."""
    return pa.types.is_struct(kind) and {f.name for f in kind} == VECTOR_FIELDS


def is_image(kind: pa.DataType) -> bool:
    """Whether ``kind`` is the struct of Spark's image data source."""
    return pa.types.is_struct(kind) and {f.name for f in kind} == IMAGE_FIELDS


def innermost(kind: pa.DataType) -> tuple[pa.DataType, int]:
    """The element type under every list level, and how many list levels there are."""
    depth = 0
    while is_list(kind):
        kind, depth = kind.value_type, depth + 1
    return kind, depth


# ---------------------------------------------------------------------------------------------
# Buffers as numpy
# ---------------------------------------------------------------------------------------------


class Bytes(NamedTuple):
    """Rows of bytes: row ``i`` is ``data[offsets[i]:offsets[i + 1]]``; ``offsets[0] == 0``."""

    offsets: np.ndarray  # int64, rows + 1
    data: np.ndarray  # uint8

    def row(self, index: int) -> memoryview:
        """Row ``index`` as a memoryview (no copy)."""
        return memoryview(self.data[self.offsets[index] : self.offsets[index + 1]])


def _offsets(array: pa.Array) -> np.ndarray:
    """The ``len + 1`` offsets of a (large) binary, string or list array, honouring its slice."""
    large = pa.types.is_large_list(array.type) or array.type in (pa.large_binary(), pa.large_string())
    width = np.int64 if large else np.int32
    raw = np.frombuffer(array.buffers()[1], dtype=width) if array.buffers()[1] is not None else np.zeros(1, width)
    return raw[array.offset : array.offset + len(array) + 1].astype(np.int64)


def bytes_of(array: pa.Array) -> Bytes:
    """A binary or string column's rows as offsets into one flat ``uint8`` buffer (views, no copy
    of the data). Null rows are empty."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    offsets = _offsets(array)
    buffer = array.buffers()[2]
    data = np.frombuffer(buffer, dtype=np.uint8) if buffer is not None else np.zeros(0, np.uint8)
    start = offsets[0] if len(offsets) else 0
    return Bytes(offsets - start, data[start : offsets[-1] if len(offsets) else 0])


class ListParts(NamedTuple):
    """A list column's rows: row ``i`` is ``values[splits[i]:splits[i + 1]]``; ``splits[0] == 0``."""

    splits: np.ndarray  # int64, rows + 1
    values: pa.Array  # the flat elements of this slice


def list_parts(array: pa.Array) -> ListParts:
    """A (large or fixed-size) list column as row splits and its flat elements."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if pa.types.is_fixed_size_list(array.type):
        width = array.type.list_size
        splits = np.arange(len(array) + 1, dtype=np.int64) * width
    else:
        splits = _offsets(array)
        splits = splits - splits[0]
    return ListParts(splits, array.flatten())


def row_nbytes(array: pa.Array) -> np.ndarray:
    """Each row's bytes in Arrow's buffers (int64, one per row), what the row adds to an Arrow IPC
    frame: a fixed-width value's width (a bit rounded up to a byte), a variable-width row's bytes
    and its offset, a list row its offset and its elements', a struct row its fields'. Validity
    bitmaps are not counted. Vectorised: one pass per nesting level of variable width (none for
    fixed-width values, however deep), no Python step per row; a slice counts its own rows only."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    kind, rows = array.type, len(array)
    width = _fixed_row_bytes(kind)
    if width is not None:
        return np.full(rows, width, np.int64)
    if isinstance(kind, pa.ExtensionType):
        return row_nbytes(array.storage)
    if pa.types.is_dictionary(kind):
        return row_nbytes(array.indices)
    if not rows:
        return np.zeros(0, np.int64)
    if is_bytes(kind):
        return np.diff(_offsets(array)) + (8 if kind in (pa.large_binary(), pa.large_string()) else 4)
    if pa.types.is_fixed_size_list(kind):
        size = kind.list_size
        inner = row_nbytes(array.values.slice(array.offset * size, rows * size))
        return inner.reshape(rows, size).sum(axis=1)
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_map(kind):
        offsets = _offsets(array)  # into the whole child: only this slice's elements are counted
        offset_bytes = 8 if pa.types.is_large_list(kind) else 4
        element = _fixed_row_bytes(array.values.type)
        if element is not None:
            return np.diff(offsets) * element + offset_bytes
        first = offsets[0]
        inner = np.concatenate([[0], np.cumsum(row_nbytes(array.values.slice(first, offsets[-1] - first)))])
        return inner[offsets[1:] - first] - inner[offsets[:-1] - first] + offset_bytes
    if pa.types.is_struct(kind):
        return sum((row_nbytes(array.field(index)) for index in range(kind.num_fields)), np.zeros(rows, np.int64))
    return np.full(rows, -(-array.nbytes // rows), np.int64)  # another layout (a union, a view): the average


def _fixed_row_bytes(kind: pa.DataType) -> int | None:
    """The bytes every row of ``kind`` takes when they are all alike (fixed-width values, fixed-size
    lists and structs of them); None for a type whose rows vary."""
    if pa.types.is_null(kind):
        return 0
    if pa.types.is_fixed_size_list(kind):
        inner = _fixed_row_bytes(kind.value_type)
        return None if inner is None else kind.list_size * inner
    if pa.types.is_struct(kind):
        fields = [_fixed_row_bytes(field.type) for field in kind]
        return None if None in fields else sum(fields)
    if isinstance(kind, pa.ExtensionType) or pa.types.is_dictionary(kind) or is_bytes(kind) or is_list(kind):
        return None
    try:
        return (kind.bit_width + 7) // 8
    except ValueError:  # not a fixed-width type
        return None


def fixed_width(array: pa.Array) -> pa.Array:
    """A list column whose rows all hold the same number of values, as a fixed-size list (no copy,
    nested levels too); any other column as it is. Taking rows of a fixed-size list is a plain
    gather (a list's take builds an index per element: measured 13x slower at 784 floats a row),
    and it crosses the wire without offsets."""
    if not (pa.types.is_list(array.type) or pa.types.is_large_list(array.type)) or array.null_count or not len(array):
        return array
    parts = list_parts(array)
    width = int(parts.splits[1])
    if not width or (np.diff(parts.splits) != width).any():
        return array
    return pa.FixedSizeListArray.from_arrays(fixed_width(parts.values), width)


class SparseRows(NamedTuple):
    """Vectors as coordinates: row ``i`` has values ``values[splits[i]:splits[i+1]]`` at columns
    ``columns[...]`` (dense vectors give every column), in a space of ``sizes[i]``."""

    splits: np.ndarray  # int64, rows + 1
    columns: np.ndarray  # int64, one per stored value
    values: np.ndarray  # float64
    sizes: np.ndarray  # int64, rows


def vector_rows(array: pa.StructArray) -> SparseRows:
    """``pyspark.ml`` Vectors (``type`` 0 sparse, 1 dense) as coordinates, without densifying."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    kinds = array.field("type").to_numpy(zero_copy_only=False)
    values = list_parts(array.field("values"))
    flat = values.values.to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
    lengths = np.diff(values.splits)
    sizes = np.where(kinds == 0, array.field("size").fill_null(0).to_numpy(zero_copy_only=False), lengths)
    dense = np.repeat(kinds == 1, lengths)
    columns = np.empty(len(flat), dtype=np.int64)
    if dense.any():  # a dense row's value j sits in column j
        columns[dense] = (np.arange(len(flat), dtype=np.int64) - np.repeat(values.splits[:-1], lengths))[dense]
    if not dense.all():
        columns[~dense] = list_parts(array.field("indices")).values.to_numpy(zero_copy_only=False)
    return SparseRows(values.splits, columns, flat, sizes.astype(np.int64))


def vectors_to_arrow(vectors: list) -> pa.StructArray:
    """``pyspark.ml``/``mllib`` Vector objects as the struct Spark stores ``VectorUDT`` in (``type`` 0
    sparse, 1 dense; None stays null): RDD elements and pandas columns of Vectors."""
    sparse = [hasattr(v, "indices") for v in vectors]
    present = [v is not None for v in vectors]
    values = [
        None if v is None else np.asarray(v.values if s else v.toArray(), np.float64) for v, s in zip(vectors, sparse)
    ]
    return pa.StructArray.from_arrays(
        [
            pa.array([0 if s else 1 for s in sparse], pa.int8()),
            pa.array([int(v.size) if s else None for v, s in zip(vectors, sparse)], pa.int32()),
            pa.array(
                [np.asarray(v.indices, np.int32) if s else None for v, s in zip(vectors, sparse)], pa.list_(pa.int32())
            ),
            pa.array(values, pa.list_(pa.float64())),
        ],
        names=["type", "size", "indices", "values"],
        mask=pa.array([not p for p in present]) if not all(present) else None,
    )


def densify(rows: SparseRows, width: int) -> np.ndarray:
    """Vectors as a dense ``(rows, width)`` float64 matrix, scattered in one numpy call."""
    out = np.zeros((len(rows.sizes), width), dtype=np.float64)
    out[np.repeat(np.arange(len(rows.sizes)), np.diff(rows.splits)), rows.columns] = rows.values
    return out


# ---------------------------------------------------------------------------------------------
# Rows no tensor can take, whatever the spec
# ---------------------------------------------------------------------------------------------


class Problem(NamedTuple):
    """Bad rows of one column: a mask over the rows and what is wrong with the first of them."""

    mask: np.ndarray  # bool, rows
    reason: str


def null_rows(array: pa.Array) -> np.ndarray | None:
    """Rows that are null or (in list columns, at any depth) hold a null element; None if none."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    mask = array.is_null().to_numpy(zero_copy_only=False) if array.null_count else None
    if is_list(array.type):
        parts = list_parts(array)
        inner = null_rows(parts.values)
        if inner is not None:
            rows = np.repeat(np.arange(len(array)), np.diff(parts.splits))[inner]
            mask = np.zeros(len(array), bool) if mask is None else mask.copy()
            mask[rows] = True
    return mask


def bad_utf8_rows(array: pa.Array) -> np.ndarray | None:
    """Rows of a string column (or of lists of strings) that are not valid UTF-8; None if none.
    Arrow validates in bulk; rows are looked for only when some row fails."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if is_list(array.type):
        parts = list_parts(array)
        inner = bad_utf8_rows(parts.values)
        if inner is None:
            return None
        mask = np.zeros(len(array), bool)
        mask[np.repeat(np.arange(len(array)), np.diff(parts.splits))[inner]] = True
        return mask
    if not is_text(array.type):
        return None
    try:
        array.view(pa.large_binary() if pa.types.is_large_string(array.type) else pa.binary()).cast(array.type)
        return None
    except pa.ArrowInvalid:
        rows = bytes_of(array)
        mask = np.zeros(len(array), bool)
        for index in range(len(array)):  # only on this error path
            try:
                bytes(rows.row(index)).decode("utf-8")
            except UnicodeDecodeError:
                mask[index] = True
        return mask


def vector_problems(array: pa.StructArray) -> Problem | None:
    """Vectors whose indices are out of their size or not increasing (as Spark requires)."""
    rows = vector_rows(array)
    lengths = np.diff(rows.splits)
    row_of = np.repeat(np.arange(len(lengths)), lengths)
    bad_value = (rows.columns < 0) | (rows.columns >= rows.sizes[row_of])
    step = np.diff(rows.columns) <= 0
    step &= row_of[1:] == row_of[:-1]
    bad_value[1:] |= step
    if not bad_value.any():
        return None
    mask = np.zeros(len(lengths), bool)
    mask[row_of[bad_value]] = True
    return Problem(mask, "a vector's indices must be increasing and below its size")


def image_problems(array: pa.StructArray) -> Problem | None:
    """Image structs whose mode, channel count, size and pixel data disagree."""
    modes = array.field("mode").fill_null(-1).to_numpy(zero_copy_only=False)
    channels = array.field("nChannels").fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
    heights = array.field("height").fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
    widths = array.field("width").fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
    lengths = np.diff(bytes_of(array.field("data")).offsets)
    mode_channels = np.full(len(modes), -1, dtype=np.int64)
    for mode, count in IMAGE_MODES.items():
        mode_channels[modes == mode] = count
    bad = (mode_channels != channels) | (heights <= 0) | (widths <= 0) | (lengths != heights * widths * channels)
    if not bad.any():
        return None
    first = int(np.flatnonzero(bad)[0])
    return Problem(
        bad,
        f"an image struct whose fields disagree (mode {modes[first]}, nChannels {channels[first]}, "
        f"{heights[first]}x{widths[first]}, {lengths[first]} bytes of data; Spark's image source gives "
        "8-bit modes 0, 16 and 24 with height x width x nChannels bytes)",
    )


def column_problems(array: pa.Array) -> list[Problem]:
    """Every problem of one Arrow column that no spec can fix: nulls, text that is not UTF-8,
    Vectors and image structs that contradict themselves."""
    problems = []
    nulls = null_rows(array)
    if nulls is not None:
        problems.append(Problem(nulls, "a null value (a tensor cannot hold nulls: drop or fill them first)"))
    utf8 = bad_utf8_rows(array)
    if utf8 is not None:
        problems.append(Problem(utf8, "a string that is not valid UTF-8 (cast the column to binary to feed raw bytes)"))
    if is_vector(array.type):
        problems.extend(p for p in [vector_problems(array)] if p is not None)
    if is_image(array.type):
        problems.extend(p for p in [image_problems(array)] if p is not None)
    return problems
