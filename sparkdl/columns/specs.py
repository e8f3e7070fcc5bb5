"""How a column becomes a tensor: the column specs ``as_dataset`` and the inference UDFs take.

Every Spark column type sparkdl feeds has a default tensor form, and a spec changes it for one
column (``feed.as_dataset(..., columns={"image": Image(64, 64)})``, ``Predictor(...,
columns=...)``):

=================================  ============================  ===============================
column                             default                       with a spec
=================================  ============================  ===============================
numbers, booleans                  dense ``(batch,)``            ``shapes=`` reshapes
``array<number>`` (equal lengths)  dense ``(batch, length)``     ``Ragged()``, ``Padded(length)``
``array<number|string>`` ragged    (refused: declare it)         ``Ragged()``, ``Padded(length)``
``binary``, ``string``             ``tf.string`` ``(batch,)``    ``Image(...)`` decodes
Spark's image struct               ``Image()``: HWC ``uint8``    ``Image(h, w, channels)``
``pyspark.ml`` Vector              dense ``float64``             ``Sparse()``: ``tf.SparseTensor``
``binary`` of packed values        (bytes, as above)             ``Packed(shape, dtype)``: dense
=================================  ============================  ===============================

Plain frozen dataclasses, no TensorFlow: the driver can build them and they pickle.
"""

from __future__ import annotations

from dataclasses import dataclass

#: What ``bad_rows`` may say: fail naming the row, or skip it and count it.
BAD_ROWS = ("fail", "skip")
#: ``Image``'s default ``max_pixels``: 64 Mi pixels (8192x8192, a 48-megapixel photo), about 200 MB
#: decoded to RGB; a decompression bomb declares more from a few hundred kilobytes.
MAX_PIXELS = 1 << 26
#: How ``Image`` may resize (``tf.image.resize`` methods); None: never (another size is a bad row).
RESIZE_METHODS = ("bilinear", "nearest", "bicubic", "area", "lanczos3", "lanczos5", "gaussian", "mitchellcubic")


def _positive(value, what: str, spec: str) -> None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value <= 0):
        raise ValueError(f"{spec}({what}=...) must be a positive integer or None, got {value!r}")


@dataclass(frozen=True)
class Image:
    """Decode a column of images (encoded PNG/JPEG/GIF/BMP bytes, or Spark's image struct) to
    ``uint8`` tensors of shape ``(height, width, channels)``.

    ``height``/``width`` None: the size of the run's first image (then every image must have it
    unless ``resize``). Images of another size are resized with ``resize`` (a
    ``tf.image.resize`` method; the aspect ratio is not kept), or, with ``resize=None``, are bad
    rows. ``channels``: 1 (grey), 3 (RGB) or 4 (RGBA); an image with another channel count is
    converted as ``tf.io.decode_image(channels=...)`` converts (grey to RGB repeats the value, RGB
    to grey takes the luminance, alpha is dropped or set opaque) unless ``convert=False``, which
    makes it a bad row. Spark's image data source stores pixels in OpenCV's BGR(A) order:
    ``rgb=True`` (the default) gives RGB(A) like decoded files; ``rgb=False`` keeps BGR.

    Decoding runs in the ``tf.data`` pipeline, ``parallel`` images at a time (None: as many as the
    task has cores: ``spark.task.cpus`` when scoring, the node's launch task's cores when
    training). An image whose header declares more than ``max_pixels`` pixels (height times
    width, a GIF's every frame) is a bad row, refused before it is decoded; None lifts the limit.
    A row that is not an image of a known format, is truncated, or whose struct fields disagree
    with its data is a bad row (see ``bad_rows``).
    """

    height: int | None = None
    width: int | None = None
    channels: int = 3
    resize: str | None = "bilinear"
    convert: bool = True
    rgb: bool = True
    parallel: int | None = None
    max_pixels: int | None = MAX_PIXELS

    def __post_init__(self):
        _positive(self.height, "height", "Image")
        _positive(self.width, "width", "Image")
        _positive(self.parallel, "parallel", "Image")
        _positive(self.max_pixels, "max_pixels", "Image")
        if (self.height is None) != (self.width is None):
            raise ValueError("Image(height, width): give both, or neither (the first image's size)")
        if self.height is not None and self.max_pixels is not None and self.height * self.width > self.max_pixels:
            raise ValueError(
                f"Image({self.height}, {self.width}) is more than max_pixels={self.max_pixels} pixels: "
                "raise max_pixels (or None) to decode images this large"
            )
        if self.channels not in (1, 3, 4):
            raise ValueError(f"Image(channels=...) must be 1, 3 or 4, got {self.channels!r}")
        if self.resize is not None and self.resize not in RESIZE_METHODS:
            raise ValueError(f"Image(resize=...) must be one of {RESIZE_METHODS} or None, got {self.resize!r}")


@dataclass(frozen=True)
class Sparse:
    """Deliver a ``pyspark.ml`` Vector column as ``tf.SparseTensor`` batches ``(batch, size)``,
    never dense: memory follows the non-zeros. ``dtype`` casts the values (default: Spark's
    float64); ``size`` None takes the first row's (a vector of another size is a bad row)."""

    dtype: str | None = None
    size: int | None = None

    def __post_init__(self):
        _positive(self.size, "size", "Sparse")


@dataclass(frozen=True)
class Ragged:
    """Deliver an ``array<...>`` column whose rows differ in length as ``tf.RaggedTensor``
    batches ``(batch, None)`` (numbers or strings). ``max_length``: a longer row is a bad row."""

    max_length: int | None = None

    def __post_init__(self):
        _positive(self.max_length, "max_length", "Ragged")


@dataclass(frozen=True)
class Padded:
    """Deliver an ``array<...>`` column of varying lengths as a dense tensor padded with
    ``value``: to ``length`` (a longer row is a bad row), or with ``length=None`` to the
    longest row of each batch."""

    length: int | None = None
    value: float | int | str = 0

    def __post_init__(self):
        _positive(self.length, "length", "Padded")


@dataclass(frozen=True)
class Packed:
    """Read a ``binary`` column whose every row holds one tensor's values as raw little-endian
    bytes (numpy's ``tobytes()`` of a C-ordered ``shape`` array of ``dtype``), as a dense tensor
    ``(batch, *shape)``. Spark moves such a column to Python as one buffer per batch, where an
    ``array<float>`` column costs it a step per value (``sparkdl.dfutil.pack_tensors`` writes
    one). A row of another byte length is a bad row, named with its column."""

    shape: tuple
    dtype: str = "float32"

    def __post_init__(self):
        shape = (self.shape,) if isinstance(self.shape, int) else tuple(self.shape)
        if any(not isinstance(d, int) or isinstance(d, bool) or d <= 0 for d in shape):
            raise ValueError(f"Packed(shape=...) must be positive integers, got {self.shape!r}")
        import numpy as np

        try:
            kind = np.dtype(self.dtype).kind
        except TypeError:
            kind = ""
        if kind == "" or kind not in "biuf":
            raise ValueError(f"Packed(dtype=...) must be a numeric numpy dtype, got {self.dtype!r}")
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "dtype", np.dtype(self.dtype).name)

    @property
    def row_bytes(self) -> int:
        """Bytes each row holds."""
        import numpy as np

        return int(np.prod(self.shape, dtype=np.int64)) * np.dtype(self.dtype).itemsize


#: The specs a ``columns=`` mapping may hold.
SPECS = (Image, Sparse, Ragged, Padded, Packed)


def check_columns(columns, where: str) -> dict:
    """``columns`` (``{column: spec}`` or None) checked, as a dict keyed by column name."""
    if columns is None:
        return {}
    if not isinstance(columns, dict):
        raise TypeError(f"{where}(columns=...) takes a dict {{column: spec}}, got {type(columns).__name__}")
    for name, spec in columns.items():
        if not isinstance(spec, SPECS):
            raise TypeError(
                f"{where}(columns={{{name!r}: ...}}): a spec is one of Image, Sparse, Ragged, Padded, Packed "
                f"(sparkdl.columns.specs), got {spec!r}"
            )
    return {str(name): spec for name, spec in columns.items()}


def check_bad_rows(bad_rows: str, where: str) -> str:
    """``bad_rows`` checked: ``"fail"`` or ``"skip"``."""
    if bad_rows not in BAD_ROWS:
        raise ValueError(f"{where}(bad_rows=...) must be 'fail' or 'skip', got {bad_rows!r}")
    return bad_rows
