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
