"""Columnar conversions (RDD rows and Arrow columns to dense numpy), schema checks and wire framing."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from pyspark.ml.linalg import DenseVector, SparseVector, VectorUDT
from pyspark.sql import types as T

from sparkdl.columns import arrow_rows as ar
from sparkdl.feed.columns import (
    FeedDataError,
    batch_to_columns,
    check_rows,
    check_same_columns,
    check_spark_schema,
    column_to_numpy,
    rows_to_record_batch,
)
from sparkdl.feed.elements import RowLayout
from sparkdl.feed.wire import decode_batch, encode_batch

pytestmark = pytest.mark.timeout(120)


def columns_to_rows(columns, names) -> list:
    """A batch's columns back as row tuples (what ``next_batch`` gives without ``input_mapping``)."""
    return RowLayout(tuple(names)).rows(columns)


def test_tuples_of_array_and_label():
    rows = [(np.arange(3, dtype=np.float32) + i, i) for i in range(4)]
    batch = rows_to_record_batch(rows)
    assert batch.schema.names == ["0", "1"] and batch.num_rows == 4
    assert pa.types.is_fixed_size_list(batch.column(0).type) and batch.column(0).type.list_size == 3
    assert pa.types.is_integer(batch.column(1).type)
    cols = batch_to_columns(batch)
    assert cols["0"].dtype == np.float32 and cols["0"].shape == (4, 3)
    np.testing.assert_array_equal(cols["0"], np.arange(3) + np.arange(4)[:, None])
    assert cols["1"].tolist() == [0, 1, 2, 3]
    back = columns_to_rows(cols, batch.schema.names)
    assert len(back) == 4 and back[2][1] == 2 and back[2][0].tolist() == [2, 3, 4]


def test_numpy_array_rows_and_list_rows():
    batch = rows_to_record_batch([np.array([i, i + 1.0]) for i in range(3)])
    assert batch.schema.names == ["0"]
    np.testing.assert_array_equal(column_to_numpy(batch.column(0), "0"), [[0, 1], [1, 2], [2, 3]])
    batch = rows_to_record_batch([[1.0, 2.0], [3.0, 4.0]])  # a plain list is one array column
    assert batch.num_columns == 1
    np.testing.assert_array_equal(column_to_numpy(batch.column(0), "0"), [[1, 2], [3, 4]])
    batch = rows_to_record_batch([[[1.0, 2.0], 5], [[3.0, 4.0], 6]])  # list rows of (array, label)
    assert batch.num_columns == 2 and batch.column(1).to_pylist() == [5, 6]


def test_dense_vector_rows():
    batch = rows_to_record_batch([(DenseVector([1.0, 2.0]), 1.0), (DenseVector([3.0, 4.0]), 0.0)])
    np.testing.assert_array_equal(column_to_numpy(batch.column(0), "0"), [[1, 2], [3, 4]])
    batch = rows_to_record_batch([DenseVector([i, 0.5]) for i in range(3)])
    assert column_to_numpy(batch.column(0), "0").shape == (3, 2)


def test_scalars_and_strings():
    batch = rows_to_record_batch([1.5, 2.5, 3.5])
    assert batch.schema.names == ["0"] and column_to_numpy(batch.column(0), "0").tolist() == [1.5, 2.5, 3.5]
    batch = rows_to_record_batch([("a", 1), ("bc", 2)])
    assert pa.types.is_string(batch.column(0).type) and batch.column(0).to_pylist() == ["a", "bc"]
    assert rows_to_record_batch(["x", "y"]).column(0).to_pylist() == ["x", "y"]


def test_ragged_arrays_name_the_column():
    with pytest.raises(FeedDataError, match=r"column 0 .*different lengths"):
        rows_to_record_batch([(np.zeros(3), 1), (np.zeros(2), 2)])
    with pytest.raises(FeedDataError, match=r"column 1 "):
        rows_to_record_batch([(1, np.zeros(3)), (2, np.zeros(2))])


def test_different_tuple_widths():
    with pytest.raises(FeedDataError, match="different numbers of fields"):
        rows_to_record_batch([(1, 2), (3, 4, 5)])


def test_unconvertible_column():
    with pytest.raises(FeedDataError, match="column 0"):
        rows_to_record_batch([(1, 2), ("a", 3)])


def test_list_of_floats_is_a_zero_copy_reshape():
    values = np.arange(12, dtype=np.float32)
    array = pa.ListArray.from_arrays(pa.array([0, 4, 8, 12], pa.int32()), pa.array(values))
    out = column_to_numpy(array, "x")
    assert out.dtype == np.float32 and out.shape == (3, 4)
    np.testing.assert_array_equal(out, values.reshape(3, 4))
    # No per-row Python loop: the result is a view of Arrow's value buffer, not a fresh copy.
    assert not out.flags.owndata
    # A sliced column (as a record batch frame is) starts at the slice.
    np.testing.assert_array_equal(column_to_numpy(array.slice(1, 2), "x"), values[4:].reshape(2, 4))
    chunked = pa.chunked_array([array.slice(0, 1), array.slice(1, 2)])
    np.testing.assert_array_equal(column_to_numpy(chunked, "x"), values.reshape(3, 4))


def test_fixed_size_list_and_large_list():
    fsl = pa.FixedSizeListArray.from_arrays(pa.array(np.arange(6, dtype=np.float64)), 2)
    np.testing.assert_array_equal(column_to_numpy(fsl, "f"), [[0, 1], [2, 3], [4, 5]])
    large = pa.array([[1, 2], [3, 4]], pa.large_list(pa.int64()))
    out = column_to_numpy(large, "l")
    assert out.dtype == np.int64 and out.tolist() == [[1, 2], [3, 4]]


def test_ragged_list_is_rejected():
    with pytest.raises(FeedDataError, match=r"'feat'.*different lengths"):
        column_to_numpy(pa.array([[1.0, 2.0], [3.0]], pa.list_(pa.float32())), "feat")


@pytest.mark.parametrize(
    "array",
    [
        pa.array([1.0, None, 3.0], pa.float32()),
        pa.array([[1.0], None], pa.list_(pa.float32())),
        pa.array([[1.0, None], [2.0, 3.0]], pa.list_(pa.float32())),
    ],
    ids=["scalar", "row", "element"],
)
def test_nulls_are_rejected(array):
    with pytest.raises(FeedDataError, match=r"'col'.*null"):
        column_to_numpy(array, "col")


VECTOR_TYPE = pa.struct(
    [("type", pa.int8()), ("size", pa.int32()), ("indices", pa.list_(pa.int32())), ("values", pa.list_(pa.float64()))]
)


def test_dense_vectors():
    array = pa.array(
        [
            {"type": 1, "size": None, "indices": None, "values": [1.0, 2.0, 3.0]},
            {"type": 1, "size": None, "indices": None, "values": [4.0, 5.0, 6.0]},
        ],
        VECTOR_TYPE,
    )
    out = column_to_numpy(array, "v")
    assert out.dtype == np.float64 and out.tolist() == [[1, 2, 3], [4, 5, 6]]


def test_dense_and_sparse_vectors():
    array = pa.array(
        [
            {"type": 1, "size": None, "indices": None, "values": [1.0, 2.0, 3.0, 4.0]},
            {"type": 0, "size": 4, "indices": [1, 3], "values": [7.0, 8.0]},
            {"type": 0, "size": 4, "indices": [], "values": []},
        ],
        VECTOR_TYPE,
    )
    out = column_to_numpy(array, "v")
    assert out.shape == (3, 4)
    np.testing.assert_array_equal(out, [[1, 2, 3, 4], [0, 7, 0, 8], [0, 0, 0, 0]])
    np.testing.assert_array_equal(column_to_numpy(array.slice(1, 2), "v"), [[0, 7, 0, 8], [0, 0, 0, 0]])
    assert SparseVector(4, [1, 3], [7.0, 8.0]).toArray().tolist() == out[1].tolist()


@pytest.mark.parametrize(
    "array",
    [
        pa.array([[("a", 1)], [("b", 2)]], pa.map_(pa.string(), pa.int32())),
        pa.array([{"x": 1, "y": 2}], pa.struct([("x", pa.int32()), ("y", pa.int32())])),
    ],
    ids=["map", "struct"],
)
def test_nested_columns_are_rejected(array):
    with pytest.raises(FeedDataError, match="'m'"):
        column_to_numpy(array, "m")


def test_batch_to_columns_by_name():
    batch = pa.RecordBatch.from_pydict({"a": [1, 2], "b": [[1.0, 2.0], [3.0, 4.0]], "s": ["x", "y"]})
    cols = batch_to_columns(batch)
    assert cols["a"].tolist() == [1, 2] and cols["b"].shape == (2, 2) and cols["s"].tolist() == ["x", "y"]


IMAGE_STRUCT = T.StructType(
    [
        T.StructField("origin", T.StringType()),
        T.StructField("height", T.IntegerType()),
        T.StructField("width", T.IntegerType()),
        T.StructField("nChannels", T.IntegerType()),
        T.StructField("mode", T.IntegerType()),
        T.StructField("data", T.BinaryType()),
    ]
)


def test_schema_accepts_feedable_types():
    check_spark_schema(
        T.StructType(
            [
                T.StructField("i", T.IntegerType()),
                T.StructField("l", T.LongType()),
                T.StructField("d", T.DoubleType()),
                T.StructField("f", T.FloatType()),
                T.StructField("b", T.BooleanType()),
                T.StructField("s", T.StringType()),
                T.StructField("a", T.ArrayType(T.FloatType())),
                T.StructField("ai", T.ArrayType(T.IntegerType())),
                T.StructField("v", VectorUDT()),
                T.StructField("bytes", T.BinaryType()),
                T.StructField("tokens", T.ArrayType(T.StringType())),
                T.StructField("nested", T.ArrayType(T.ArrayType(T.DoubleType()))),
                T.StructField("image", IMAGE_STRUCT),  # spark.read.format("image")'s column
            ]
        )
    )


@pytest.mark.parametrize(
    "kind, text",
    [
        (T.MapType(T.StringType(), T.IntegerType()), "map<string,int>"),
        (T.StructType([T.StructField("x", T.IntegerType())]), "struct<x:int>"),
        (T.ArrayType(T.StructType([T.StructField("x", T.IntegerType())])), "array<struct<x:int>>"),
        (T.TimestampType(), "timestamp"),
    ],
)
def test_schema_rejects_unfeedable_types(kind, text):
    schema = T.StructType([T.StructField("ok", T.DoubleType()), T.StructField("bad_col", kind)])
    with pytest.raises(FeedDataError) as info:
        check_spark_schema(schema)
    assert "'bad_col'" in str(info.value) and text in str(info.value) and "'ok'" not in str(info.value)


def _image(nullable: bool) -> T.StructType:
    return T.StructType([T.StructField(f.name, f.dataType, nullable) for f in IMAGE_STRUCT.fields])


def test_validation_columns_that_differ_from_training_only_in_nullability_are_accepted():
    """Issue 53 item 13b: ``array<float>`` whose elements may be null (createDataFrame) against one
    whose may not (``F.array`` of columns, a UDF) was refused as "validation_data column 'x' is
    array<float> but the training column is array<float>". Nulls are checked row by row as they are
    read (a null fails naming its row, or is skipped with ``bad_rows="skip"``), so the declared
    nullability says nothing the feed needs: both are read alike."""
    training = T.StructType(
        [
            T.StructField("x", T.ArrayType(T.FloatType(), containsNull=True)),
            T.StructField("nested", T.ArrayType(T.ArrayType(T.DoubleType(), True), True)),
            T.StructField("image", _image(nullable=True)),
            T.StructField("y", T.LongType(), nullable=True),
        ]
    )
    validation = T.StructType(
        [
            T.StructField("x", T.ArrayType(T.FloatType(), containsNull=False)),
            T.StructField("nested", T.ArrayType(T.ArrayType(T.DoubleType(), False), False)),
            T.StructField("image", _image(nullable=False)),
            T.StructField("y", T.LongType(), nullable=False),
        ]
    )
    check_same_columns(training, validation)
    check_same_columns(validation, training)
    # and the node reads both alike: the same dense column, whichever nullability Arrow declares
    values = [[1.0, 2.0], [3.0, 4.0]]
    loose = pa.record_batch([pa.array(values, pa.list_(pa.float32()))], names=["x"])
    strict = pa.record_batch(
        [pa.array(values, pa.list_(pa.field("element", pa.float32(), nullable=False)))], names=["x"]
    )
    np.testing.assert_array_equal(batch_to_columns(loose)["x"], batch_to_columns(strict)["x"])


@pytest.mark.parametrize(
    "given, message",
    [
        (T.ArrayType(T.DoubleType(), False), "'x' is array<double> but the training column is array<float>"),
        (T.ArrayType(T.ArrayType(T.FloatType())), "'x' is array<array<float>> but the training column is array<float>"),
    ],
)
def test_validation_columns_of_another_type_are_refused_naming_both_types(given, message):
    training = T.StructType([T.StructField("x", T.ArrayType(T.FloatType(), True))])
    with pytest.raises(FeedDataError, match=message):
        check_same_columns(training, T.StructType([T.StructField("x", given)]))


@pytest.mark.parametrize(
    "kind, cast",
    [(T.DecimalType(10, 2), "'double'"), (T.ArrayType(T.DecimalType(38, 18)), "'array<double>'")],
)
def test_a_decimal_column_is_refused_before_any_job_saying_what_to_cast_it_to(kind, cast):
    """Spark calls decimals numbers, but no tensor holds one: the nodes would get numpy arrays of
    Python Decimals and fail reading them; the driver says so first, in one line."""
    schema = T.StructType([T.StructField("ok", T.DoubleType()), T.StructField("price", kind)])
    with pytest.raises(FeedDataError) as info:
        check_spark_schema(schema)
    message = str(info.value)
    assert "\n" not in message and f"column 'price' has type {kind.simpleString()}" in message
    assert f"df.withColumn('price', df['price'].cast({cast}))" in message


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
