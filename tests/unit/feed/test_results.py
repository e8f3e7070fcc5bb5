"""sparkdl.feed.results: results cross the wire with their types and fill a Spark schema's fields."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from sparkdl.feed.results import ResultsError, results_as_rows
from sparkdl.feed.wire import batch_to_results, decode_batch, encode_batch, results_to_batch

from value_checks import same


def test_results_fill_one_field_or_several_from_sequences_and_dicts():
    one = results_as_rows([np.float32(1.5), 2, None], pa.schema([("score", pa.float64())]))
    assert one.column(0).to_pylist() == [1.5, 2.0, None]
    schema = pa.schema([("label", pa.int64()), ("probs", pa.list_(pa.float32()))])
    several = results_as_rows([(1, np.array([0.25, 0.75], np.float32)), {"label": 0, "probs": [1.0, 0.0]}], schema)
    assert several.to_pylist() == [{"label": 1, "probs": [0.25, 0.75]}, {"label": 0, "probs": [1.0, 0.0]}]


def test_results_that_do_not_fit_the_schema_name_the_field():
    with pytest.raises(ResultsError, match="field 'score' \\(double\\)"):
        results_as_rows(["high"], pa.schema([("score", pa.float64())]))
    with pytest.raises(ResultsError, match="2 fields \\(label, score\\)"):
        results_as_rows([5], pa.schema([("label", pa.int64()), ("score", pa.float64())]))


def results_back(results):
    return batch_to_results(decode_batch(bytearray(encode_batch(results_to_batch(results)).to_pybytes())))


def test_rows_of_an_array_are_arrays_of_their_shape_and_dtype():
    squares = np.square(np.arange(10, dtype=np.int32).reshape(10, 1))  # what TFoS's test gives batch_results
    back = results_back(squares)
    assert len(back) == 10 and all(same(r, np.array([i * i], np.int32)) for i, r in enumerate(back))
    assert sum(back[1:], back[0]).tolist() == [285]  # what rdd.sum() does
    cubes = results_back(np.ones((3, 2, 4), np.float16))
    assert all(same(r, np.ones((2, 4), np.float16)) for r in cubes)
    back[0][0] = 5  # writable
    assert results_back(np.zeros((2, 0))) and results_back(np.zeros((2, 0)))[0].shape == (0,)


@pytest.mark.parametrize(
    "results",
    [
        [1, 2, 3],
        [0.25, 1.5],
        ["a", "bc"],
        [b"x", b"\x00"],
        [True, None],
        [[1, 2], [3]],
        [{"label": 1, "p": 0.5}],
        [np.float32(0.5), np.float32(2.0)],
        [np.int64(4), np.int64(5)],
        [np.array([1, 2], np.uint8), np.array([3, 4], np.uint8)],
        [np.zeros(2), np.zeros(3)],  # arrays of different shapes
        [(np.ones(2, np.float32), 1, "cat"), (np.zeros(2, np.float32), 0, "dog")],
        [(0.9, [1, 2]), (0.1, [3])],
    ],
    ids=[
        "ints",
        "floats",
        "strings",
        "bytes",
        "bool-none",
        "lists",
        "dicts",
        "np-float32",
        "np-int64",
        "arrays",
        "ragged-arrays",
        "tuples",
        "tuples-with-lists",
    ],
)
def test_each_result_keeps_its_type(results):
    back = results_back(results)
    assert len(back) == len(results) and all(same(x, y) for x, y in zip(results, back)), back


def test_rows_of_a_1d_array_are_numpy_scalars():
    back = results_back(np.array([1.5, 2.5], np.float32))
    assert all(type(v) is np.float32 for v in back) and sum(back) == 4.0
    assert results_back(np.array(["x", "yy"])) == ["x", "yy"]


def test_sum_and_first_field_work_as_under_tfos():
    assert sum(results_back([1, 2, 3])) == 6
    assert [r[0] for r in results_back([(1.0, "a"), (2.0, "b")])] == [1.0, 2.0]
    assert sum(r for r in results_back(np.array([[1], [2]]))).tolist() == [3]


def test_unsendable_results_are_a_clear_error():
    with pytest.raises(ResultsError, match="cannot send results of type.*object"):
        results_to_batch([object(), object()])
    with pytest.raises(ResultsError, match="0-dimensional"):
        results_to_batch(np.array(1.0))


def test_plain_batches_without_metadata_decode_to_python_values():
    assert batch_to_results(pa.RecordBatch.from_pydict({"result": [1, 2]})) == [1, 2]
