"""TensorFlow's half of the column readers: parts (flat numpy arrays) in, tensors out.

A reader (``sparkdl/columns/readers.py``) turns a block of rows into parts; here they become, in
two steps that a ``tf.data`` pipeline runs around its ``rebatch``:

1. :func:`assemble` (before batching): a tensor with one entry per row. Bytes become a
   ``tf.string`` vector cut out of the block's one flat buffer by ``tf.strings.substr`` over its
   offsets, so no Python object is made per row; arrays of varying length and the coordinates of
   sparse vectors become ``tf.RaggedTensor`` rows.
2. :func:`finish` (after batching, and after :func:`keep_rows` dropped skipped rows): the tensor
   ``map_fun``'s model gets. Images are decoded (``tf.io.decode_image``, or Spark's raw BGR
   pixels) and resized, ``parallel`` at a time (the caller's choice: the task's cores);
   sparse rows become one ``tf.SparseTensor``; padded arrays a dense tensor.

TensorFlow is imported by the functions, never by this module: the driver imports readers only.
"""

from __future__ import annotations

import numpy as np

from .readers import BytesReader, ColumnReader, DenseReader, ImageReader, RaggedReader, VectorReader


def _tf():
    import tensorflow as tf

    return tf


def part_specs(reader: ColumnReader) -> dict:
    """The ``tf.TensorSpec`` of each part :meth:`ColumnReader.parts` gives (``data`` parts travel
    as one ``tf.string`` scalar: :func:`generator_parts`)."""
    tf = _tf()
    index = tf.TensorSpec((None,), tf.int64)
    data = tf.TensorSpec((), tf.string)
    if isinstance(reader, DenseReader):
        return {reader.key(): tf.TensorSpec((None, *reader.shape), tf.as_dtype(reader.dtype))}
    if isinstance(reader, VectorReader):
        if not reader.sparse:
            return {reader.key(): tf.TensorSpec((None, reader.size), tf.as_dtype(reader.dtype))}
        return {
            reader.key("splits"): index,
            reader.key("columns"): index,
            reader.key("values"): tf.TensorSpec((None,), tf.as_dtype(reader.dtype)),
        }
    if isinstance(reader, (BytesReader, ImageReader)):
        specs = {reader.key("offsets"): index, reader.key("data"): data}
        if isinstance(reader, ImageReader) and reader.struct:
            specs[reader.key("sizes")] = tf.TensorSpec((None, 3), tf.int32)
        return specs
    if isinstance(reader, RaggedReader):
        specs = {reader.key("splits"): index}
        if reader.dtype is None:
            specs.update({reader.key("offsets"): index, reader.key("data"): data})
        else:
            specs[reader.key("values")] = tf.TensorSpec((None,), tf.as_dtype(reader.dtype))
        return specs
    raise TypeError(f"no tensor form for {reader!r}")


def generator_parts(parts: dict[str, np.ndarray]) -> dict:
    """Parts as a ``tf.data`` generator yields them: each flat byte buffer as one ``bytes`` value
    (one copy of the block, in C), the rest as they are."""
    return {key: (value.tobytes() if key.endswith("/data") else value) for key, value in parts.items()}


def _strings(data, offsets):
    """The rows of one flat byte string: ``data[offsets[i]:offsets[i+1]]``, without a Python loop."""
    tf = _tf()
    return tf.strings.substr(data, offsets[:-1], offsets[1:] - offsets[:-1])


def assemble(reader: ColumnReader, parts: dict):
    """One entry per row (``tf.string``, dense or ragged), from the reader's parts (graph code)."""
    tf = _tf()
    if isinstance(reader, DenseReader) or (isinstance(reader, VectorReader) and not reader.sparse):
        return parts[reader.key()]
    if isinstance(reader, VectorReader):
        splits = parts[reader.key("splits")]
        return (
            tf.RaggedTensor.from_row_splits(parts[reader.key("columns")], splits, validate=False),
            tf.RaggedTensor.from_row_splits(parts[reader.key("values")], splits, validate=False),
        )
    if isinstance(reader, RaggedReader):
        values = (
            _strings(parts[reader.key("data")], parts[reader.key("offsets")])
            if reader.dtype is None
            else parts[reader.key("values")]
        )
        return tf.RaggedTensor.from_row_splits(values, parts[reader.key("splits")], validate=False)
    strings = _strings(parts[reader.key("data")], parts[reader.key("offsets")])
    if isinstance(reader, ImageReader) and reader.struct:
        return strings, parts[reader.key("sizes")]
    return strings


def keep_rows(value, keep):
    """``value`` (an :func:`assemble` result, batched) without the rows where ``keep`` is False."""
    tf = _tf()
    if isinstance(value, tuple):
        return tuple(keep_rows(part, keep) for part in value)
    if isinstance(value, tf.RaggedTensor):
        return tf.ragged.boolean_mask(value, keep)
    return tf.boolean_mask(value, keep)


def finish(reader: ColumnReader, value, parallel: int = 1):
    """The tensor the model gets, from a batch of :func:`assemble` results (graph code); images
    decode ``parallel`` at a time."""
    tf = _tf()
    if isinstance(reader, VectorReader) and reader.sparse:
        columns, values = value
        indices = tf.stack([columns.value_rowids(), columns.flat_values], axis=1)
        return tf.SparseTensor(
            indices, values.flat_values, tf.stack([columns.nrows(), tf.constant(reader.size, tf.int64)])
        )
    if isinstance(reader, RaggedReader) and reader.padded is not None:
        shape = None if reader.padded.length is None else [None, reader.padded.length]
        fill = reader.padded.value
        if reader.dtype is None:
            fill = fill.encode() if isinstance(fill, str) else fill
        return value.to_tensor(default_value=tf.constant(fill, value.dtype), shape=shape)
    if isinstance(reader, ImageReader):
        return decode_images(reader, value, parallel)
    return value


def decode_images(reader: ImageReader, value, parallel: int):
    """A batch of encoded images (``tf.string``), or of Spark image structs (pixel bytes and
    ``(height, width, channels)``), as ``uint8`` ``(batch, height, width, channels)``, decoding at
    most ``parallel`` at a time (each holds its full size until resized)."""
    tf = _tf()
    spec, size = reader.spec, [reader.height, reader.width]
    channels = spec.channels

    def fit(image):
        if spec.resize is None:  # another size was a bad row
            return image
        # unconditionally: a tf.cond skipping images of the right size cost 20% of the decode rate
        return tf.saturate_cast(tf.round(tf.image.resize(image, size, method=spec.resize)), tf.uint8)

    if reader.struct:
        strings, sizes = value

        def one(row):
            data, shape = row
            pixels = tf.reshape(tf.io.decode_raw(data, tf.uint8), shape)
            if spec.rgb:  # OpenCV's BGR(A) -> RGB(A)
                order = tf.where(shape[2] == 4, tf.constant([2, 1, 0, 3]), tf.constant([2, 1, 0, 0]))[: shape[2]]
                pixels = tf.cond(shape[2] >= 3, lambda: tf.gather(pixels, order, axis=2), lambda: pixels)
            image = fit(_to_channels(pixels, shape[2], channels))
            return tf.ensure_shape(image, [*size, channels])

        elements = (strings, sizes)
    else:

        def one(data):
            image = tf.io.decode_image(data, channels=channels, dtype=tf.uint8, expand_animations=False)
            return tf.ensure_shape(fit(image), [*size, channels])

        elements = value
    return tf.map_fn(
        one,
        elements,
        fn_output_signature=tf.TensorSpec([*size, channels], tf.uint8),
        parallel_iterations=max(1, int(parallel)),
    )


def _to_channels(pixels, count, channels: int):
    """``pixels`` (HWC ``uint8`` with ``count`` channels, 1, 3 or 4) with ``channels`` channels,
    converted as ``tf.io.decode_image`` converts."""
    tf = _tf()

    def grey(image):
        return tf.image.rgb_to_grayscale(image[..., :3])

    def rgb(image):
        return tf.image.grayscale_to_rgb(image) if image.shape[-1] == 1 else image[..., :3]

    def opaque(image):
        return tf.concat([image, tf.fill(tf.concat([tf.shape(image)[:2], [1]], 0), tf.constant(255, tf.uint8))], 2)

    def as_count(source: int):
        def convert():
            image = tf.ensure_shape(pixels, [None, None, source])
            if source == channels:
                return image
            if channels == 1:
                return grey(image)
            if channels == 3:
                return rgb(image)
            return opaque(rgb(image)) if source < 4 else image

        return convert

    return tf.switch_case(
        tf.cast(tf.minimum(count, 4), tf.int32) - 1, [as_count(1), as_count(1), as_count(3), as_count(4)]
    )


def converter(reader: ColumnReader, dtype: str | None = None, parallel: int = 1):
    """A function from ``reader.parts(column)`` to a model's input (cast to ``dtype`` when it is a
    number type), traced once: inference calls it once per chunk of rows, and images decode
    ``parallel`` at a time inside it."""
    tf = _tf()

    @tf.function(input_signature=[part_specs(reader)])
    def convert(parts):
        value = finish(reader, assemble(reader, parts), parallel)
        if dtype and dtype not in ("str", "bytes", "object", "string") and value.dtype != tf.as_dtype(dtype):
            value = tf.cast(value, dtype)
        return value

    return lambda parts: convert(
        {key: (tf.constant(value.tobytes()) if key.endswith("/data") else value) for key, value in parts.items()}
    )
