"""Column readers without TensorFlow or Spark: Arrow columns of every kind taken apart into parts
(no Python step per row), and the bad rows each kind finds, named by partition and row."""

from __future__ import annotations

import io

import numpy as np
import pyarrow as pa
import pytest
from PIL import Image as PILImage
from pyspark.ml.linalg import DenseVector, SparseVector

from sparkdl.columns import arrow_rows as ar
from sparkdl.columns.image_headers import BadImage, read_header
from sparkdl.columns.readers import (
    BytesReader,
    ColumnSpecError,
    DenseReader,
    ImageReader,
    RaggedReader,
    VectorReader,
    reader_for,
)
from sparkdl.columns.specs import Image, Padded, Ragged, Sparse, check_bad_rows, check_columns
from sparkdl.feed.columns import batch_to_columns, check_rows, column_values
from sparkdl.feed.dataset import NODE_CORES_ENV, decode_parallelism
from sparkdl.feed.queues import concatenate, same_kind
from sparkdl.feed.wire import decode_batch, encode_batch

from image_bombs import png_bomb

pytestmark = pytest.mark.timeout(60)


def encoded(height: int, width: int, mode: str = "RGB", fmt: str = "PNG") -> bytes:
    pixels = np.arange(height * width * len(mode), dtype=np.uint8).reshape(height, width, len(mode))
    out = io.BytesIO()
    PILImage.fromarray(pixels.squeeze(-1) if mode == "L" else pixels, mode).save(out, format=fmt)
    return out.getvalue()


def image_structs(shapes: list[tuple[int, int, int]], modes=None) -> pa.Array:
    """Spark's image struct (``spark.read.format("image")``) with BGR pixels of the given shapes."""
    rows = []
    for i, (h, w, c) in enumerate(shapes):
        mode = (modes or {}).get(i, {1: 0, 3: 16, 4: 24}[c])
        data = bytes(np.full(h * w * c, i, np.uint8))
        rows.append(
            {"origin": f"file:/img{i}.png", "height": h, "width": w, "nChannels": c, "mode": mode, "data": data}
        )
    return pa.array(rows)


# -- Arrow buffers as numpy --


def test_sliced_bytes_and_lists_are_views_with_offsets_from_zero():
    column = pa.array([b"ab", b"", b"cde", b"f"]).slice(1, 2)
    rows = ar.bytes_of(column)
    assert rows.offsets.tolist() == [0, 0, 3] and bytes(rows.data) == b"cde" and bytes(rows.row(1)) == b"cde"
    parts = ar.list_parts(pa.array([[1, 2], [3], [4, 5, 6]]).slice(1))
    assert parts.splits.tolist() == [0, 1, 4] and parts.values.to_pylist() == [3, 4, 5, 6]


def test_vectors_dense_and_sparse_become_coordinates_and_densify_in_one_call():
    vectors = [SparseVector(5, {1: 2.0, 4: -1.0}), DenseVector([1.0, 0.0, 3.0, 0.0, 0.0]), SparseVector(5, {})]
    column = ar.vectors_to_arrow(vectors)
    rows = ar.vector_rows(column.slice(0))
    assert rows.splits.tolist() == [0, 2, 7, 7] and rows.sizes.tolist() == [5, 5, 5]
    assert rows.columns.tolist() == [1, 4, 0, 1, 2, 3, 4]
    np.testing.assert_array_equal(ar.densify(rows, 5), np.stack([v.toArray() for v in vectors]))
    assert ar.vector_problems(column) is None


def test_origins_name_partition_and_row():
    origins = ar.origin_values(3, np.array([0, 17]))
    assert [ar.describe_origin(o) for o in origins] == ["partition 3, row 0", "partition 3, row 17"]


# -- problems any column can have --


def test_nulls_at_any_depth_and_text_that_is_not_utf8_are_found_by_row():
    assert ar.null_rows(pa.array([[1.0], [None, 2.0], None, [3.0]])).tolist() == [False, True, True, False]
    text = pa.array([b"ok", b"\xff\xfe", b"fine"]).view(pa.string())
    assert ar.bad_utf8_rows(text).tolist() == [False, True, False]
    assert ar.bad_utf8_rows(pa.array(["a", "b"])) is None
    tokens = pa.ListArray.from_arrays(pa.array([0, 1, 3]), text)
    assert ar.bad_utf8_rows(tokens).tolist() == [False, True]


def test_inconsistent_vectors_and_image_structs_are_bad_rows():
    good = ar.vectors_to_arrow([SparseVector(4, {0: 1.0, 2: 1.0})])
    bad = pa.array(
        [
            {"type": 0, "size": 4, "indices": [2, 1], "values": [1.0, 1.0]},
            {"type": 0, "size": 2, "indices": [5], "values": [1.0]},
        ],
        type=good.type,
    )
    problem = ar.vector_problems(pa.concat_arrays([good, bad]))
    assert problem.mask.tolist() == [False, True, True] and "increasing" in problem.reason
    structs = image_structs([(2, 2, 3), (2, 2, 3)], modes={1: 0})  # row 1 says mode CV_8UC1 with 3 channels
    problem = ar.image_problems(structs)
    assert problem.mask.tolist() == [False, True] and "mode 0, nChannels 3" in problem.reason


def test_the_feed_refuses_a_frame_with_a_bad_row_naming_column_partition_and_row():
    batch = pa.RecordBatch.from_arrays(
        [pa.array([1.0, None, 3.0]), pa.array(ar.origin_values(2, np.array([5, 9, 11])))], names=["y", ar.ORIGIN]
    )
    columns = batch_to_columns(decode_batch(encode_batch(batch)))
    assert not isinstance(columns["y"], np.ndarray), "a column with nulls stays in Arrow for a reader"
    with pytest.raises(ValueError, match=r"column 'y', partition 2, row 9: a null value"):
        check_rows(columns, ["y"])


def test_text_that_is_not_utf8_crosses_the_wire_and_is_named_by_its_reader():
    text = pa.array([b"fine", b"\xc3\x28"]).view(pa.string())
    columns = batch_to_columns(
        decode_batch(encode_batch(pa.RecordBatch.from_arrays([text], names=["t"]))), ar.origin_values(0, np.arange(2))
    )
    with pytest.raises(ValueError, match=r"column 't', partition 0, row 1: a string that is not valid UTF-8"):
        check_rows(columns, ["t"])


# -- image headers --


@pytest.mark.parametrize(
    "fmt, mode, channels",
    [("PNG", "RGB", 3), ("PNG", "L", 1), ("PNG", "RGBA", 4), ("JPEG", "RGB", 3), ("GIF", "RGB", 3), ("BMP", "RGB", 3)],
)
def test_image_headers_give_size_and_channels(fmt, mode, channels):
    header = read_header(encoded(5, 7, mode, fmt))
    assert (header.format, header.height, header.width, header.channels) == (fmt.lower(), 5, 7, channels)


@pytest.mark.parametrize("cut", ["truncated", "flipped", "text"])
def test_damaged_images_are_refused_saying_why(cut):
    png = encoded(8, 8)
    data = {
        "truncated": png[: len(png) // 2],
        "flipped": png[:40] + bytes([png[40] ^ 0xFF]) + png[41:],
        "text": b"this is not an image at all",
    }[cut]
    with pytest.raises(
        BadImage, match={"truncated": "truncated PNG", "flipped": "CRC", "text": "not a PNG, JPEG"}[cut]
    ):
        read_header(data)
    jpeg = encoded(8, 8, fmt="JPEG")
    with pytest.raises(BadImage, match="truncated JPEG"):
        read_header(jpeg[: len(jpeg) - 100])


# -- readers --


def test_a_dense_reader_names_rows_of_another_length_and_suggests_ragged():
    example = column_values(pa.array([[1.0, 2.0, 3.0]], pa.list_(pa.float32())), "x")
    reader = reader_for("x", example)
    assert isinstance(reader, DenseReader) and reader.shape == (3,)
    ragged = pa.array([[1.0, 2.0, 3.0], [1.0]], pa.list_(pa.float32()))
    (problem,) = reader.problems(column_values(ragged, "x"))
    assert problem.mask.tolist() == [False, True] and "Ragged()" in problem.reason
    assert reader.parts(column_values(pa.array([[4.0, 5.0, 6.0]], pa.list_(pa.float32())), "x"))["x"].shape == (1, 3)


def test_ragged_and_padded_readers_give_splits_and_values_and_check_lengths():
    column = pa.array([[1, 2], [], [3, 4, 5]], pa.list_(pa.int64()))
    reader = reader_for("tokens", column, Ragged(max_length=2))
    assert isinstance(reader, RaggedReader) and reader.kind == "ragged"
    parts = reader.parts(column)
    assert parts["tokens/splits"].tolist() == [0, 2, 2, 5] and parts["tokens/values"].tolist() == [1, 2, 3, 4, 5]
    (problem,) = reader.problems(column)
    assert problem.mask.tolist() == [False, False, True] and "longer than the max_length 2" in problem.reason
    words = pa.array([["a", "bc"], ["d"]])
    padded = reader_for("words", words, Padded(length=3))
    assert padded.kind == "padded" and padded.padded.value == "" and padded.dtype is None
    parts = padded.parts(words)
    assert parts["words/splits"].tolist() == [0, 2, 3] and bytes(parts["words/data"]) == b"abcd"


def test_vector_readers_dense_by_default_sparse_on_request_and_sizes_checked():
    column = ar.vectors_to_arrow([SparseVector(1 << 18, {7: 1.0, 99: 2.0}), SparseVector(1 << 18, {3: 1.0})])
    sparse = reader_for("v", column, Sparse(dtype="float32"))
    assert isinstance(sparse, VectorReader) and sparse.sparse and sparse.size == 1 << 18
    parts = sparse.parts(column)
    assert parts["v/columns"].tolist() == [7, 99, 3] and parts["v/values"].dtype == np.float32
    assert sum(p.nbytes for p in parts.values()) < 100, "no row is densified"
    other = ar.vectors_to_arrow([SparseVector(10, {1: 1.0})])
    (problem,) = sparse.problems(other)
    assert "a vector of size 10 in a column of size 262144" in problem.reason
    dense = reader_for("v", ar.vectors_to_arrow([DenseVector([1.0, 2.0])]))
    assert not dense.sparse and dense.parts(ar.vectors_to_arrow([SparseVector(2, {1: 5.0})]))["v"].tolist() == [
        [0.0, 5.0]
    ]


def test_a_wide_sparse_vector_read_dense_is_read_a_batch_at_a_time_and_hints_at_sparse():
    """HashingTF's 2^18 features, 50 non-zeros a row: as_dataset's blocks are sized by the dense rows
    (a batch of 100 is 210 MB), not by the few hundred bytes Spark sends per row (which made a block
    of 6,900 rows: a node's whole share densified at once); and the node says once that Sparse() exists."""
    wide = ar.vectors_to_arrow([SparseVector(1 << 18, {7 * i + j * 5000: 1.0 for j in range(50)}) for i in range(16)])
    dense, sparse = reader_for("f", wide), reader_for("f", wide, Sparse())
    assert dense.row_bytes() == (1 << 18) * 8, "a row as read: 2^18 float64"
    assert sparse.row_bytes() == dense.fed_row_bytes() < 2000, "as fed: its coordinates"
    from sparkdl.feed.dataset import BLOCK_BYTES, _sparse_hints, block_rows

    assert block_rows({"f": dense}, 100) == 100, "one batch a block: memory follows the batch"
    assert block_rows({"f": sparse}, 100) * sparse.row_bytes() > BLOCK_BYTES // 2, "sparse blocks stay ~4 MiB"
    (hint,) = _sparse_hints({"f": dense}, 100).values()
    assert "column 'f'" in hint and "210 MB" in hint and "50 non-zeros" in hint and "columns={'f': Sparse()}" in hint
    assert _sparse_hints({"f": dense}, 8) == {}, "a batch of 17 MB is no trouble"
    assert _sparse_hints({"f": sparse}, 100) == {}
    stored_dense = ar.vectors_to_arrow([DenseVector(np.ones(1 << 18))])
    assert _sparse_hints({"f": reader_for("f", stored_dense)}, 100) == {}, "dense rows: Sparse() would not help"


def test_image_readers_check_headers_sizes_and_struct_fields():
    files = pa.array([encoded(4, 6), encoded(4, 6, "L"), encoded(4, 6)[:30], encoded(5, 5)])
    reader = reader_for("content", files, Image(resize=None, convert=False))
    assert isinstance(reader, ImageReader) and (reader.height, reader.width) == (4, 6) and not reader.struct
    reasons = {p.reason.split(" (")[0]: p.mask.tolist() for p in reader.problems(files)}
    assert reasons["an image of 1 channels where 3 are expected"] == [False, True, False, False]
    assert reasons["an image of 5x5 where 4x6 is expected"] == [False, False, False, True]
    assert [m for r, m in reasons.items() if "truncated PNG" in r] == [[False, False, True, False]]
    resized = reader_for("content", files, Image(8, 8))
    assert [p.mask.tolist() for p in resized.problems(files)] == [[False, False, True, False]]
    structs = image_structs([(2, 3, 3), (4, 4, 1)])
    reader = reader_for("image", structs)  # Spark's image struct: Image() by default, the first image's size
    assert reader.struct and (reader.height, reader.width, reader.spec.channels) == (2, 3, 3)
    parts = reader.parts(structs)
    assert parts["image/sizes"].tolist() == [[2, 3, 3], [4, 4, 1]] and parts["image/offsets"].tolist() == [0, 18, 34]
    with pytest.raises(ColumnSpecError, match="Image\\(\\) decodes binary or image-struct columns"):
        reader_for("t", pa.array(["text"]), Image(2, 2))


def test_bytes_reader_and_the_first_clean_row_as_example():
    column = pa.array([None, b"xy", b"z"])
    reader = reader_for("b", column)
    assert isinstance(reader, BytesReader) and reader.example.to_pylist() == [b"xy"]
    parts = reader.parts(column.slice(1))
    assert parts["b/offsets"].tolist() == [0, 2, 3] and bytes(parts["b/data"]) == b"xyz"


def test_specs_and_options_are_checked():
    with pytest.raises(TypeError, match="a spec is one of Image, Sparse, Ragged, Padded"):
        check_columns({"x": "image"}, "feed.as_dataset")
    with pytest.raises(ValueError, match="give both, or neither"):
        Image(height=4)
    with pytest.raises(ValueError, match="'fail' or 'skip'"):
        check_bad_rows("ignore", "cluster.train")
    with pytest.raises(ColumnSpecError, match="arrays of strings: declare"):
        reader_for("w", pa.array([["a"], ["b", "c"]]))


# -- decompression bombs: refused from the header, before any decoder --


def test_an_image_declaring_more_than_max_pixels_is_a_bad_row_before_decoding():
    bomb = png_bomb()  # 388,871 bytes of PNG declaring 20000x20000: 1.2 GB decoded to RGB
    assert len(bomb) < 400_000 and read_header(bomb).pixels == 20000 * 20000
    column = pa.array([encoded(8, 8), bomb, encoded(8, 8)])
    reader = reader_for("content", column, Image(8, 8))
    assert [(p.mask.tolist(), p.reason) for p in reader.problems(column)] == [
        (
            [False, True, False],
            "an image of 20000x20000 declaring 400000000 pixels, more than Image(max_pixels=67108864): "
            "refused before decoding (raise max_pixels to decode it)",
        )
    ]
    assert reader_for("content", column, Image(8, 8, max_pixels=None)).problems(column) == []
    with pytest.raises(ColumnSpecError, match=r"20000x20000, more than Image\(max_pixels=67108864\) pixels"):
        reader_for("content", pa.array([bomb]), Image())  # the first image would set every image's size
    structs = image_structs([(2, 3, 3), (4, 4, 3)])
    reasons = [p.reason for p in reader_for("image", structs, Image(2, 3, max_pixels=10)).problems(structs)]
    assert reasons == ["an image of 4x4, more than Image(max_pixels=10) pixels"]


def test_a_gif_counts_every_frame_a_decoder_holds():
    frames = [PILImage.fromarray(np.full((5, 7, 3), 40 * i, np.uint8)) for i in range(4)]
    out = io.BytesIO()
    frames[0].save(out, format="GIF", save_all=True, append_images=frames[1:])
    gif = out.getvalue()
    assert read_header(gif).pixels == 4 * 5 * 7  # TensorFlow decodes every frame, even for the first
    column = pa.array([gif])
    reasons = [p.reason for p in reader_for("g", column, Image(5, 7, max_pixels=100)).problems(column)]
    assert reasons == [
        "an image of 5x7 declaring 140 pixels, its frames together, more than Image(max_pixels=100): "
        "refused before decoding (raise max_pixels to decode it)"
    ]
    with pytest.raises(BadImage, match="truncated GIF: its blocks run past"):
        read_header(gif[:40] + b";")


def test_max_pixels_and_decoding_parallelism_are_checked(monkeypatch):
    with pytest.raises(ValueError, match=r"Image\(30000, 30000\) is more than max_pixels=67108864 pixels"):
        Image(30000, 30000)
    assert Image(30000, 30000, max_pixels=None).height == 30000
    with pytest.raises(ValueError, match=r"max_pixels=...\) must be a positive integer or None"):
        Image(max_pixels=0)
    monkeypatch.delenv(NODE_CORES_ENV, raising=False)
    assert decode_parallelism(Image()) == 1, "not the machine's cores: executors share the machine"
    monkeypatch.setenv(NODE_CORES_ENV, "3")  # what the node's launch task was given (sparkdl/node/launch.py)
    assert decode_parallelism(Image()) == 3 and decode_parallelism(Image(parallel=5)) == 5


# -- the node's columns: numpy or Arrow, joined --


def test_numpy_and_arrow_pieces_of_one_column_join_and_compare():
    dense = np.arange(6, dtype=np.float32).reshape(2, 3)
    ragged = pa.array([[1.0], [2.0, 3.0]], pa.list_(pa.float32()))
    joined = concatenate("x", [dense, ragged])
    assert joined.to_pylist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0], [1.0], [2.0, 3.0]]
    assert same_kind(dense, ragged) and not same_kind(dense, pa.array([["a"]]))
    assert concatenate("y", [np.arange(2), np.arange(3)]).tolist() == [0, 1, 0, 1, 2]


# -- scoring: specs completed from the model's inputs --


def test_scoring_specs_follow_the_model_inputs():
    from pyspark.ml.linalg import VectorUDT
    from pyspark.sql import types as T

    from sparkdl.inference.columns import InferenceInputError
    from sparkdl.inference.model import TensorInfo
    from sparkdl.inference.planning import _reader_spec

    image_struct = T.StructType(
        [
            T.StructField(n, t)
            for n, t in zip(sorted(ar.IMAGE_FIELDS), [T.BinaryType()] + [T.IntegerType()] * 4 + [T.StringType()])
        ]
    )
    sparse_input = TensorInfo("vec", "float32", (1 << 18,), form="sparse")
    assert _reader_spec(VectorUDT(), None, sparse_input) == (Sparse(), True)
    assert _reader_spec(VectorUDT(), None, TensorInfo("vec", "float32", (8,))) == (None, True), (
        "dense for a dense input"
    )
    spec, _ = _reader_spec(image_struct, None, TensorInfo("image", "uint8", (28, 28, 1)))
    assert (spec.height, spec.width, spec.channels) == (28, 28, 1), "an image struct decodes to the input's shape"
    spec, _ = _reader_spec(T.BinaryType(), Image(channels=3), TensorInfo("image", "float32", (28, 28, 1)))
    assert (spec.height, spec.width, spec.channels) == (28, 28, 3), "a given Image keeps its channels"
    assert _reader_spec(T.ArrayType(T.LongType()), Padded(), TensorInfo("t", "int64", (7,)))[0] == Padded(7)
    assert (
        _reader_spec(T.ArrayType(T.LongType()), None, TensorInfo("t", "int64", (None,), form="ragged"))[0] == Ragged()
    )
    with pytest.raises(InferenceInputError, match="array<string> column needs"):
        _reader_spec(T.ArrayType(T.StringType()), None, TensorInfo("w", "str", (3,)))
    with pytest.raises(InferenceInputError, match="gives no image size"):
        _reader_spec(T.BinaryType(), Image(), TensorInfo("image", "uint8", (None, None, 3)))
