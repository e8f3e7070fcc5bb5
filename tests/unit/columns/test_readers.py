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
from sparkdl.columns.specs import Image, Padded, Ragged, Sparse
from sparkdl.feed.columns import column_values

from image_bombs import png_bomb
from image_columns import encoded, image_structs

pytestmark = pytest.mark.timeout(60)


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


def test_packed_reader_flags_rows_of_another_byte_length_and_views_the_rest():
    from sparkdl.columns.arrow_numpy import to_packed_array
    from sparkdl.columns.readers import PackedReader
    from sparkdl.columns.specs import Packed

    values = np.arange(12, dtype="float32").reshape(3, 2, 2)
    column = to_packed_array(values)
    reader = reader_for("x", column, Packed((2, 2)))
    assert isinstance(reader, PackedReader)
    assert reader.problems(column) == []
    np.testing.assert_array_equal(reader.parts(column)["x"], values)
    short = pa.array([values[0].tobytes(), b"\0" * 8, None], pa.binary())
    problems = reader.problems(short)
    assert [list(p.mask) for p in problems if "bytes" in p.reason] == [[False, True, False]]
    assert any("8 bytes where Packed((2, 2), 'float32') rows hold 16" in p.reason for p in problems)
    with pytest.raises(ColumnSpecError, match="Packed\\(\\) reads a binary column"):
        reader_for("x", pa.array([[1.0]]), Packed((1,)))
