"""Column readers: how one fed column becomes tensor parts, and which of its rows are bad.

A reader is made once per column of a dataset (or of a scoring plan) from the column's spec
(:mod:`sparkdl.columns.specs`, or the default for its type) and an example of its rows, then
applied to every block of rows:

- :meth:`ColumnReader.problems`: the rows no tensor of this form can take (nulls, text that is
  not UTF-8, an image that is not whole or of another size, an array longer than declared, a
  vector of another size...), as masks with a reason; the caller fails naming the first row or
  skips them (``bad_rows``).
- :meth:`ColumnReader.parts`: the rows as flat numpy arrays (the *parts* of the tensor: values
  and row splits, bytes and offsets, coordinates), built from Arrow's buffers without a Python
  step per row. TensorFlow assembles them (``sparkdl/columns/tensors.py``).

A column's rows arrive as a numpy array (dense columns) or as the Arrow array they came in
(everything else: bytes, strings, Vectors, images, arrays of varying length, and columns with
nulls); readers take either. numpy and pyarrow only.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from . import arrow_rows as ar
from .arrow_numpy import ColumnRef, arrow_to_numpy, packed_to_numpy
from .image_headers import BadImage, ImageHeader, read_header
from .specs import Image, Packed, Padded, Ragged, Sparse

Column = "np.ndarray | pa.Array"


class ColumnSpecError(ValueError):
    """A spec does not fit its column (e.g. ``Sparse()`` for a string column); names the column."""


def take(column, rows: np.ndarray):
    """Rows ``rows`` of a numpy or Arrow column."""
    if isinstance(column, np.ndarray):
        return column[rows]
    return column.take(pa.array(rows, type=pa.int64()))


def row_count(column) -> int:
    """Rows of a numpy or Arrow column."""
    return len(column)


def nbytes(column) -> int:
    """Bytes a numpy or Arrow column holds (an Arrow slice counts its own rows' bytes)."""
    return int(column.nbytes)


def _numpy_type(kind: pa.DataType) -> np.dtype:
    return np.dtype(kind.to_pandas_dtype())


@dataclass
class ColumnReader:
    """The common part of every reader: the column, its example row, the checks of any column."""

    name: str
    example: object = field(repr=False)  # one row without problems, numpy or Arrow (fills skipped rows)
    kind = "dense"

    def problems(self, column) -> list[ar.Problem]:
        """Bad rows of ``column`` (an empty list when there are none)."""
        return [] if isinstance(column, np.ndarray) else ar.column_problems(column)

    def parts(self, column) -> dict[str, np.ndarray]:
        """``column``'s rows (without problems) as the flat arrays TensorFlow builds the tensor from."""
        raise NotImplementedError

    def row_bytes(self) -> int:
        """About how many bytes a row of this column takes as read (``as_dataset`` sizes its blocks
        by it); as fed, unless the reader makes its rows larger (a Vector read dense)."""
        return max(1, nbytes(self.example) // max(1, row_count(self.example)))

    def key(self, part: str = "") -> str:
        """The name of one of this column's parts."""
        return f"{self.name}/{part}" if part else self.name


@dataclass
class DenseReader(ColumnReader):
    """Numbers and equal-length arrays: ``(rows, *shape)`` of ``dtype``."""

    dtype: np.dtype = np.dtype("float32")
    shape: tuple[int, ...] = ()

    def problems(self, column) -> list[ar.Problem]:
        width = int(np.prod(self.shape, dtype=np.int64))
        if isinstance(column, np.ndarray):
            if int(np.prod(column.shape[1:], dtype=np.int64)) == width:
                return []
            per_row = int(np.prod(column.shape[1:], dtype=np.int64))
            return [ar.Problem(np.ones(len(column), bool), self._length_reason(per_row, width))]
        problems = ar.column_problems(column)
        if ar.is_list(column.type):
            counts = _values_per_row(column)
            if (counts != width).any():
                first = int(counts[np.flatnonzero(counts != width)[0]])
                problems.append(ar.Problem(counts != width, self._length_reason(first, width)))
        return problems

    def _length_reason(self, got: int, width: int) -> str:
        return (
            f"an array of {got} values where this column's rows have {width} (the first row's); for arrays "
            f"of varying length declare columns={{{self.name!r}: Ragged()}} or Padded(length)"
        )

    def parts(self, column) -> dict[str, np.ndarray]:
        values = column if isinstance(column, np.ndarray) else arrow_to_numpy(column, ColumnRef(self.name))
        if values.dtype != self.dtype:
            values = values.astype(self.dtype)
        return {self.key(): values.reshape((-1, *self.shape))}


@dataclass
class PackedReader(DenseReader):
    """A ``binary`` column of packed rows (:class:`~sparkdl.columns.specs.Packed`): dense
    ``(rows, *shape)`` values viewing the column's one data buffer; a row of another byte
    length is a bad row."""

    spec: Packed = None

    def problems(self, column) -> list[ar.Problem]:
        if isinstance(column, np.ndarray):
            return super().problems(column)
        problems = ar.column_problems(column)
        import pyarrow.compute as pc

        lengths = pc.binary_length(column).fill_null(self.spec.row_bytes).to_numpy(zero_copy_only=False)
        wrong = lengths != self.spec.row_bytes
        if wrong.any():
            got = int(lengths[np.flatnonzero(wrong)[0]])
            problems.append(
                ar.Problem(
                    wrong,
                    f"{got} bytes where Packed({self.spec.shape}, {self.spec.dtype!r}) rows hold {self.spec.row_bytes}",
                )
            )
        return problems

    def parts(self, column) -> dict[str, np.ndarray]:
        if isinstance(column, np.ndarray):
            return super().parts(column)
        values = packed_to_numpy(column, self.spec.shape, self.spec.dtype, ColumnRef(self.name, ColumnSpecError))
        return {self.key(): values}


def _values_per_row(column: pa.Array) -> np.ndarray:
    """How many leaf values each row of a (nested) list column holds."""
    counts = np.ones(len(column), dtype=np.int64)
    rows = np.arange(len(column))
    while ar.is_list(column.type):
        parts = ar.list_parts(column)
        lengths = np.diff(parts.splits)
        owner = np.repeat(rows, lengths)
        if not ar.is_list(parts.values.type):
            return np.bincount(owner, minlength=len(counts)).astype(np.int64)
        column, rows = parts.values, owner
    return counts


@dataclass
class VectorReader(ColumnReader):
    """``pyspark.ml`` Vectors of ``size``, dense ``float64`` (the default) or ``tf.SparseTensor``
    coordinates (``sparse``)."""

    size: int = 0
    sparse: bool = False
    dtype: np.dtype = np.dtype("float64")

    @property
    def kind(self) -> str:
        return "sparse" if self.sparse else "dense"

    def problems(self, column) -> list[ar.Problem]:
        problems = ar.column_problems(column)
        sizes = ar.vector_rows(column).sizes
        if (sizes != self.size).any():
            first = int(sizes[np.flatnonzero(sizes != self.size)[0]])
            problems.append(ar.Problem(sizes != self.size, f"a vector of size {first} in a column of size {self.size}"))
        return problems

    def row_bytes(self) -> int:
        """Bytes of a row as read: ``size`` values when dense (what each block is made), else its
        coordinates as fed, so a block of a wide sparse Vector read dense is a batch or so, not a share."""
        return self.size * self.dtype.itemsize if not self.sparse else self.fed_row_bytes()

    def fed_row_bytes(self) -> int:
        """Bytes of a row's coordinates as fed (Spark's Vector struct, only its non-zeros when sparse)."""
        return super().row_bytes()

    def parts(self, column) -> dict[str, np.ndarray]:
        rows = ar.vector_rows(column)
        if not self.sparse:
            return {self.key(): ar.densify(rows, self.size).astype(self.dtype, copy=False)}
        return {
            self.key("splits"): rows.splits,
            self.key("columns"): rows.columns,
            self.key("values"): rows.values.astype(self.dtype, copy=False),
        }


@dataclass
class BytesReader(ColumnReader):
    """Binary and string columns: ``tf.string`` rows (strings as their UTF-8 bytes)."""

    kind = "bytes"

    def parts(self, column) -> dict[str, np.ndarray]:
        rows = ar.bytes_of(column)
        return {self.key("offsets"): rows.offsets, self.key("data"): rows.data}


@dataclass
class ImageReader(ColumnReader):
    """Encoded images (``binary``: PNG, JPEG, GIF, BMP) or Spark's image struct, decoded by
    TensorFlow to ``uint8`` ``(height, width, channels)`` as ``spec`` says."""

    spec: Image = field(default_factory=Image)
    height: int = 0
    width: int = 0
    struct: bool = False  # Spark's image struct (raw BGR pixels) rather than encoded bytes

    kind = "image"

    def problems(self, column) -> list[ar.Problem]:
        problems = ar.column_problems(column)
        if self.struct:
            sizes = np.stack(
                [column.field(f).fill_null(0).to_numpy(zero_copy_only=False) for f in ("height", "width", "nChannels")],
                axis=1,
            ).astype(np.int64)
            problems += self._shape_problems(sizes)
            if self.spec.max_pixels is not None:
                large = sizes[:, 0] * sizes[:, 1] > self.spec.max_pixels
                if large.any():
                    h, w = sizes[np.flatnonzero(large)[0], :2]
                    reason = f"an image of {h}x{w}, more than Image(max_pixels={self.spec.max_pixels}) pixels"
                    problems.append(ar.Problem(large, reason))
            return problems
        rows, headers, reasons = ar.bytes_of(column), [], {}
        mask = np.zeros(len(column), bool)
        nulls = column.is_null().to_numpy(zero_copy_only=False) if column.null_count else mask
        for index in range(len(column)):
            if nulls[index]:
                headers.append((1, 1, self.spec.channels))
                continue
            try:
                header = read_header(rows.row(index))
                self._check_pixels(header)
                headers.append((header.height, header.width, header.channels))
            except BadImage as exc:
                mask[index] = True
                reasons.setdefault("bad", str(exc))
                headers.append((1, 1, self.spec.channels))
        if mask.any():
            problems.append(ar.Problem(mask, reasons["bad"]))
        problems += self._shape_problems(np.array(headers, dtype=np.int64).reshape(-1, 3), nulls | mask)
        return problems

    def _check_pixels(self, header: ImageHeader) -> None:
        """BadImage if an image declares more pixels than ``spec.max_pixels`` (before decoding)."""
        limit = self.spec.max_pixels
        if limit is not None and header.pixels > limit:
            frames = ", its frames together" if header.pixels != header.height * header.width else ""
            raise BadImage(
                f"an image of {header.height}x{header.width} declaring {header.pixels} pixels{frames}, more than "
                f"Image(max_pixels={limit}): refused before decoding (raise max_pixels to decode it)"
            )

    def _shape_problems(self, sizes: np.ndarray, ignore: np.ndarray | None = None) -> list[ar.Problem]:
        problems = []
        ok = np.ones(len(sizes), bool) if ignore is None else ~ignore
        if self.spec.resize is None:
            other = ok & ((sizes[:, 0] != self.height) | (sizes[:, 1] != self.width))
            if other.any():
                h, w = sizes[np.flatnonzero(other)[0], :2]
                reason = f"an image of {h}x{w} where {self.height}x{self.width} is expected (resize=None)"
                problems.append(ar.Problem(other, reason))
        if not self.spec.convert:
            other = ok & (sizes[:, 2] != self.spec.channels)
            if other.any():
                count = sizes[np.flatnonzero(other)[0], 2]
                reason = f"an image of {count} channels where {self.spec.channels} are expected (convert=False)"
                problems.append(ar.Problem(other, reason))
        return problems

    def parts(self, column) -> dict[str, np.ndarray]:
        if not self.struct:
            rows = ar.bytes_of(column)
            return {self.key("offsets"): rows.offsets, self.key("data"): rows.data}
        rows = ar.bytes_of(column.field("data"))
        sizes = np.stack(
            [column.field(f).to_numpy(zero_copy_only=False) for f in ("height", "width", "nChannels")], axis=1
        ).astype(np.int32)
        return {self.key("offsets"): rows.offsets, self.key("data"): rows.data, self.key("sizes"): sizes}

    def row_bytes(self) -> int:
        return max(super().row_bytes(), 1)


@dataclass
class RaggedReader(ColumnReader):
    """Arrays of varying length (numbers or strings): ``tf.RaggedTensor`` rows, or padded
    (``padded``) to a declared length or to each batch's longest row."""

    dtype: np.dtype | None = None  # None: strings
    max_length: int | None = None
    padded: Padded | None = None

    @property
    def kind(self) -> str:
        return "padded" if self.padded is not None else "ragged"

    def problems(self, column) -> list[ar.Problem]:
        problems = ColumnReader.problems(self, column)
        if self.max_length is not None:
            lengths = self._lengths(column)
            long = lengths > self.max_length
            if long.any():
                first = int(lengths[np.flatnonzero(long)[0]])
                declared = "padded length" if self.padded is not None else "max_length"
                problems.append(
                    ar.Problem(long, f"an array of {first} values, longer than the {declared} {self.max_length}")
                )
        return problems

    @staticmethod
    def _lengths(column) -> np.ndarray:
        if isinstance(column, np.ndarray):
            return np.full(len(column), int(np.prod(column.shape[1:], dtype=np.int64)), dtype=np.int64)
        return np.diff(ar.list_parts(column).splits)

    def parts(self, column) -> dict[str, np.ndarray]:
        if isinstance(column, np.ndarray):
            width = int(np.prod(column.shape[1:], dtype=np.int64))
            splits = np.arange(len(column) + 1, dtype=np.int64) * width
            return {self.key("splits"): splits, self.key("values"): column.reshape(-1).astype(self.dtype, copy=False)}
        parts = ar.list_parts(column)
        if self.dtype is None:
            strings = ar.bytes_of(parts.values)
            return {
                self.key("splits"): parts.splits,
                self.key("offsets"): strings.offsets,
                self.key("data"): strings.data,
            }
        values = parts.values.to_numpy(zero_copy_only=False).astype(self.dtype, copy=False)
        return {self.key("splits"): parts.splits, self.key("values"): values}


def reader_for(name: str, example, spec=None, shape: tuple[int, ...] | None = None) -> ColumnReader:
    """The reader of column ``name`` given ``example`` (its first rows, numpy or Arrow: a row without
    problems is kept as the reader's example), its ``spec`` and, for dense columns, a per-row ``shape``."""
    clean = _clean_row(example)
    if isinstance(spec, Image):
        return _image_reader(name, clean, spec)
    arrow = not isinstance(clean, np.ndarray)
    if isinstance(spec, Sparse) or (spec is None and arrow and ar.is_vector(clean.type)):
        if not (arrow and ar.is_vector(clean.type)):
            raise ColumnSpecError(f"column {name!r}: Sparse() is for pyspark.ml Vector columns, not {_type_of(clean)}")
        size = (spec.size if spec is not None else None) or int(ar.vector_rows(clean).sizes[0])
        dtype = np.dtype(spec.dtype) if spec is not None and spec.dtype else np.dtype("float64")
        return VectorReader(name, clean, size, spec is not None, dtype)
    if isinstance(spec, (Ragged, Padded)):
        return _ragged_reader(name, clean, spec)
    if isinstance(spec, Packed):
        if not (arrow and ar.is_bytes(clean.type) and not ar.is_text(clean.type)):
            raise ColumnSpecError(f"column {name!r}: Packed() reads a binary column, not {_type_of(clean)}")
        return PackedReader(name, clean, np.dtype(spec.dtype), tuple(spec.shape), spec)
    if arrow and ar.is_image(clean.type):
        return _image_reader(name, clean, Image())
    if arrow and ar.is_bytes(clean.type):
        return BytesReader(name, clean)
    if arrow and ar.is_list(clean.type) and ar.is_bytes(ar.innermost(clean.type)[0]):
        raise ColumnSpecError(
            f"column {name!r} holds arrays of strings: declare columns={{{name!r}: Ragged()}} or Padded(length)"
        )
    dense = clean if not arrow else arrow_to_numpy(clean, ColumnRef(name, ColumnSpecError))
    row_shape = tuple(dense.shape[1:])
    if shape is not None:
        if int(np.prod(shape, dtype=np.int64)) != int(np.prod(row_shape, dtype=np.int64)):
            raise ColumnSpecError(f"shapes[{name!r}] = {tuple(shape)} does not hold a row of {row_shape}")
        row_shape = tuple(int(d) for d in shape)
    return DenseReader(name, clean, dense.dtype, row_shape)


def _type_of(column) -> str:
    return str(column.dtype) if isinstance(column, np.ndarray) else str(column.type)


def _clean_row(example):
    """The first row of ``example`` without a problem any spec would see (else its first row)."""
    if isinstance(example, np.ndarray) or not len(example):
        return example[:1]
    mask = np.zeros(len(example), bool)
    for problem in ar.column_problems(example):
        mask |= problem.mask
    good = np.flatnonzero(~mask)
    return example.slice(int(good[0]) if len(good) else 0, 1)


def _image_reader(name: str, clean, spec: Image) -> ImageReader:
    arrow = not isinstance(clean, np.ndarray)
    struct = arrow and ar.is_image(clean.type)
    if not (struct or (arrow and ar.is_bytes(clean.type) and not ar.is_text(clean.type))):
        raise ColumnSpecError(f"column {name!r}: Image() decodes binary or image-struct columns, not {_type_of(clean)}")
    height, width = spec.height, spec.width
    if height is None:
        try:
            if struct:
                height, width = (int(clean.field(f)[0].as_py()) for f in ("height", "width"))
            else:
                header = read_header(ar.bytes_of(clean).row(0))
                height, width = header.height, header.width
            if spec.max_pixels is not None and height * width > spec.max_pixels:
                raise BadImage(f"it is {height}x{width}, more than Image(max_pixels={spec.max_pixels}) pixels")
        except (BadImage, TypeError) as exc:
            raise ColumnSpecError(
                f"column {name!r}: the first image cannot give the size ({exc}); declare Image(height, width)"
            ) from None
    return ImageReader(name, clean, spec, int(height), int(width), struct)


def _ragged_reader(name: str, clean, spec) -> RaggedReader:
    length = spec.max_length if isinstance(spec, Ragged) else spec.length
    padded = spec if isinstance(spec, Padded) else None
    if isinstance(clean, np.ndarray):
        if clean.ndim != 2:
            raise ColumnSpecError(
                f"column {name!r}: {type(spec).__name__}() is for one level of arrays, got {clean.shape[1:]}"
            )
        return RaggedReader(name, clean, clean.dtype, length, padded)
    inner, depth = ar.innermost(clean.type)
    if depth != 1:
        raise ColumnSpecError(
            f"column {name!r}: {type(spec).__name__}() is for arrays of numbers or strings, not {clean.type}"
        )
    if ar.is_bytes(inner):
        if padded is not None and not isinstance(padded.value, (str, bytes)):
            padded = Padded(padded.length, "")
        return RaggedReader(name, clean, None, length, padded)
    return RaggedReader(name, clean, _numpy_type(inner), length, padded)
