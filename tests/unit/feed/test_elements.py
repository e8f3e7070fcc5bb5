"""Element fidelity in InputMode.SPARK, without Spark: RDD elements keep their structure through
Arrow (``feed/elements.py``) and inference results keep their types (``feed/results.py``)."""

import numpy as np
import pyarrow as pa
import pytest
from pyspark.ml.linalg import DenseVector
from pyspark.mllib.linalg import DenseVector as MllibDenseVector

from sparkdl.feed.columns import batch_to_columns, rows_to_record_batch
from sparkdl.feed.elements import METADATA_KEY, RowLayout
from sparkdl.feed.wire import decode_batch, encode_batch

from value_checks import same

pytestmark = pytest.mark.timeout(60)


def through_arrow(elements, frames=1):
    """RDD elements -> record batch -> IPC bytes (split in ``frames`` slices, as a feeder sends)
    -> what next_batch hands out."""
    batch = rows_to_record_batch(elements)
    out = []
    step = -(-batch.num_rows // frames)
    for start in range(0, batch.num_rows, step):
        received = decode_batch(bytearray(encode_batch(batch.slice(start, step)).to_pybytes()))
        out += RowLayout.of(received.schema).rows(batch_to_columns(received))
    return out


@pytest.mark.parametrize(
    "elements",
    [
        [0, 1, 2, 3],
        [0.5, -1.5],
        ["a", "bc", ""],
        [b"\x00x", b"y"],
        [True, False],
        [[0], [1], [2]],  # TFoS's test_inputmode_spark input
        [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]],
        [np.array([1, 2], np.int16), np.array([3, 4], np.int16)],
        [np.arange(6, dtype=np.float32).reshape(2, 3), np.ones((2, 3), np.float32)],  # 2-D array elements
        [np.float32(0.5), np.float32(1.5)],
        [np.int64(7), np.int64(8)],
    ],
    ids=[
        "ints",
        "floats",
        "strings",
        "bytes",
        "bools",
        "one-item-lists",
        "lists",
        "arrays",
        "matrices",
        "np-float32",
        "np-int64",
    ],
)
def test_non_tuple_elements_come_back_bare(elements):
    back = through_arrow(elements, frames=2)
    assert len(back) == len(elements)
    assert all(same(x, y) for x, y in zip(elements, back)), back


@pytest.mark.parametrize(
    "elements",
    [
        [([1.0, 2.0], 0), ([3.0, 4.0], 1)],  # (features list, label)
        [(np.array([1.0, 2.0], np.float32), 0.5), (np.array([3.0, 4.0], np.float32), 1.5)],
        [("x", 1, 2.5, True), ("y", 2, 3.5, False)],
        [(1,), (2,), (3,)],  # 1-tuples stay 1-tuples
        [(np.zeros((2, 2)), np.int32(1)), (np.ones((2, 2)), np.int32(0))],
    ],
    ids=["list-label", "array-label", "mixed-scalars", "one-tuples", "matrix-np-scalar"],
)
def test_tuples_stay_tuples_of_the_same_length(elements):
    back = through_arrow(elements)
    assert all(same(x, y) for x, y in zip(elements, back)), back


def test_lists_of_arrays_stay_lists():
    elements = [[np.array([1.0, 2.0]), 3], [np.array([4.0, 5.0]), 6]]
    back = through_arrow(elements)
    assert all(same(x, y) for x, y in zip(elements, back)), back
    nested = [[[1, 2], [3, 4]], [[5, 6], [7, 8]]]
    assert through_arrow(nested) == nested and isinstance(through_arrow(nested)[0], list)


def test_vectors_come_back_as_dense_vectors():
    back = through_arrow([(DenseVector([1.0, 2.0]), 1.0), (DenseVector([3.0, 4.0]), 0.0)])
    assert isinstance(back[0][0], DenseVector) and back[1][0] == DenseVector([3.0, 4.0]) and back[1][1] == 0.0
    back = through_arrow([MllibDenseVector([1.0, 2.0])])
    assert isinstance(back[0], MllibDenseVector)


def test_numpy_elements_are_writable_like_unpickled_ones():
    back = through_arrow([np.zeros(3), np.ones(3)])
    back[0] += 1  # TFoS gave unpickled (writable) arrays; map_fun code may scale them in place
    assert back[0].tolist() == [1.0, 1.0, 1.0]


def test_columns_for_tf_keep_dense_numpy_and_the_element_shape():
    batch = rows_to_record_batch([(np.zeros((2, 3), np.float32), i) for i in range(4)])
    assert METADATA_KEY in batch.schema.metadata
    columns = batch_to_columns(decode_batch(encode_batch(batch)))
    assert columns["0"].shape == (4, 2, 3) and columns["0"].dtype == np.float32
    assert columns["1"].tolist() == [0, 1, 2, 3]


def test_batches_without_metadata_read_as_tuples():
    """A DataFrame's Arrow batches carry no element metadata: rows are tuples of numpy values."""
    batch = pa.RecordBatch.from_pydict({"x": pa.array([[1.0, 2.0]], pa.list_(pa.float32())), "y": [3]})
    rows = RowLayout.of(batch.schema).rows(batch_to_columns(batch))
    assert len(rows) == 1 and isinstance(rows[0], tuple) and rows[0][0].dtype == np.float32 and rows[0][1] == 3


@pytest.mark.parametrize("layout", [RowLayout(("x", "y")), RowLayout(("x", "y"), kinds=("numpy", "python"))])
def test_rows_own_their_arrays_even_from_a_writable_column(layout):
    """A reader may hand the same writable buffer out again (a cached epoch replayed from one
    window): rows edited in place by map_fun must not change it (DataFrame and RDD layouts)."""
    column = np.arange(6, dtype=np.float32).reshape(3, 2)
    rows = layout.rows({"x": column, "y": np.arange(3)})
    for x, _ in rows:
        x *= 10
    assert column.tolist() == [[0, 1], [2, 3], [4, 5]]
    assert [x.tolist() for x, _ in rows] == [[0, 10], [20, 30], [40, 50]]
