"""sparkdl.columns.arrow_rows: sliced and nested Arrow columns, vectors, origins and bad rows."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from pyspark.ml.linalg import DenseVector, SparseVector

from sparkdl.columns import arrow_rows as ar

from image_columns import image_structs

pytestmark = pytest.mark.timeout(60)


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


def test_row_nbytes_counts_each_rows_buffers_through_slices_and_nesting():
    """What a frame's rows weigh (issue 53 item 3: frames are cut by it): values, offsets, nested
    levels, a slice's rows only."""
    assert ar.row_nbytes(pa.array([b"ab", b"", b"cdef"])).tolist() == [6, 4, 8]  # bytes + a 4-byte offset
    assert ar.row_nbytes(pa.array(["ab", "c"], pa.large_string())).tolist() == [10, 9]
    assert ar.row_nbytes(pa.array([1.0, 2.0, 3.0]).slice(1)).tolist() == [8, 8]
    assert ar.row_nbytes(pa.array([True, False])).tolist() == [1, 1]
    nested = pa.array([[b"a", b"bc"], [], [b"def" * 10]], pa.list_(pa.binary())).slice(1)
    assert ar.row_nbytes(nested).tolist() == [4, 4 + 30 + 4]
    fixed = pa.FixedSizeListArray.from_arrays(pa.array(np.arange(12, dtype=np.float32)), 3).slice(2, 2)
    assert ar.row_nbytes(fixed).tolist() == [12, 12]
    vectors = ar.vectors_to_arrow([SparseVector(9, {1: 2.0, 4: -1.0}), DenseVector([1.0, 0.0, 3.0])]).slice(1)
    assert ar.row_nbytes(vectors).tolist() == [1 + 4 + 4 + 4 + 3 * 8]  # type, size, two offsets, three values
    mapped = pa.array([[("a", 1)], [("bc", 2), ("d", 3)]], pa.map_(pa.string(), pa.int64()))
    assert ar.row_nbytes(mapped).tolist() == [4 + 5 + 8, 4 + 6 + 8 + 5 + 8]
    assert ar.row_nbytes(pa.array([None, None], pa.null())).tolist() == [0, 0]
    assert ar.row_nbytes(pa.array([], pa.binary())).tolist() == []


def test_row_nbytes_add_up_to_what_a_frame_carries():
    rng = np.random.default_rng(1)
    lengths = rng.integers(0, 5000, 300)
    batch = pa.RecordBatch.from_arrays(
        [
            pa.array([bytes(int(n)) for n in lengths]),
            pa.array([list(range(int(n) % 40)) for n in lengths], pa.list_(pa.float64())),
            ar.vectors_to_arrow([SparseVector(100, {int(n) % 100: 1.0}) for n in lengths]),
        ],
        names=["blob", "seq", "vec"],
    ).slice(17, 200)
    rows = sum(ar.row_nbytes(column).sum() for column in batch.columns)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:  # an Arrow IPC stream, as the feed frames batches
        writer.write_batch(batch)
    encoded = len(sink.getvalue())
    assert rows <= encoded <= rows + 4096, "the rows' bytes and a small fixed overhead (schema, metadata, padding)"
