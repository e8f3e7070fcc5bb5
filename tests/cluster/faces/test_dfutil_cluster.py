"""sparkdl.dfutil: DataFrames to TFRecord files and back with TensorFlow's own reader and writer
(no JAR), and the same files read by tf.data.TFRecordDataset inside a node. (Columns it cannot
write, without Spark or TensorFlow: tests/unit/faces/test_dfutil.py.)"""

from __future__ import annotations

import os

import pytest

from sparkdl import TFCluster, dfutil

import feed_functions as feed_fns
from conftest import read_json_files

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def tf():
    return pytest.importorskip("tensorflow")


# -- without Spark --


@pytest.mark.cluster  # imports TensorFlow
def test_examples_round_trip_through_to_and_from_tfexample(tf):
    from pyspark.ml.linalg import Vectors
    from pyspark.sql import Row

    dtypes = [
        ("i", "int"),
        ("f", "double"),
        ("s", "string"),
        ("b", "binary"),
        ("a", "array<float>"),
        ("n", "array<bigint>"),
        ("v", "vector"),
        ("flag", "boolean"),
        ("none", "double"),
    ]
    rows = [
        Row(
            i=3,
            f=0.5,
            s="héllo",
            b=bytearray(b"\x00\x01"),
            a=[1.5, 2.5],
            n=[4, 5, 6],
            v=Vectors.dense([0.25, 0.75]),
            flag=True,
            none=None,
        )
    ]
    pairs = dfutil.toTFExample(dtypes)(iter(rows))
    assert len(pairs) == 1 and isinstance(pairs[0][0], bytearray) and pairs[0][1] is None
    back = dfutil.fromTFExample(pairs, binary_features=["b"])[0]
    assert back.asDict() == {
        "a": [1.5, 2.5],
        "b": bytearray(b"\x00\x01"),
        "f": 0.5,
        "flag": 1,
        "i": 3,
        "n": [4, 5, 6],
        "none": None,
        "s": "héllo",
        "v": [0.25, 0.75],
    }
    example = tf.train.Example()
    example.ParseFromString(bytes(pairs[0][0]))
    schema = dfutil.infer_schema(example, binary_features=["b"])
    assert [(f.name, f.dataType.simpleString()) for f in schema.fields] == [
        ("a", "array<double>"),
        ("b", "binary"),
        ("f", "double"),
        ("flag", "bigint"),
        ("i", "bigint"),
        ("n", "array<bigint>"),
        ("none", "string"),
        ("s", "string"),
        ("v", "array<double>"),
    ]
    assert dfutil.fromTFExample([bytes(pairs[0][0])])[0]["b"] == "\x00\x01"  # bytes read as a string without the hint


# -- on local-cluster --


@pytest.fixture
def spark(sc2, spark_holder):
    return spark_holder.spark


def test_dataframe_to_tfrecords_and_back_and_into_a_node(spark, sc2, tmp_path):
    from pyspark.sql import types as T

    schema = T.StructType(
        [
            T.StructField("id", T.LongType()),
            T.StructField("x", T.ArrayType(T.FloatType())),
            T.StructField("score", T.DoubleType()),
            T.StructField("name", T.StringType()),
            T.StructField("raw", T.BinaryType()),
        ]
    )
    rows = [(i, [float(i), 0.5, -1.0], i / 4, f"n{i % 3}", bytearray([i % 256, 7])) for i in range(50)]
    frame = spark.createDataFrame(rows, schema).repartition(3)
    out = str(tmp_path / "records")
    dfutil.saveAsTFRecords(frame, out)
    assert sorted(os.listdir(out)) == ["part-r-00000", "part-r-00001", "part-r-00002"]
    with pytest.raises(FileExistsError, match="already holds files"):
        dfutil.saveAsTFRecords(frame, out)

    loaded = dfutil.loadTFRecords(sc2, out, binary_features=["raw"])
    assert dfutil.isLoadedDF(loaded) and not dfutil.isLoadedDF(loaded.select("id"))
    assert [(f.name, f.dataType.simpleString()) for f in loaded.schema.fields] == [
        ("id", "bigint"),
        ("name", "string"),
        ("raw", "binary"),
        ("score", "double"),
        ("x", "array<double>"),
    ]
    back = sorted((r.id, r.x, r.score, r.name, bytes(r.raw)) for r in loaded.collect())
    assert back == [(i, x, score, name, bytes(raw)) for i, x, score, name, raw in rows]

    # One node reads every file (one TensorFlow import: the reader is the same on any node).
    cluster = TFCluster.run(sc2, feed_fns.read_tfrecords, {"out": str(tmp_path), "dir": out}, 1)
    cluster.shutdown(timeout=120)
    nodes = read_json_files(tmp_path)
    assert len(nodes) == 1
    for node in nodes.values():
        assert node["files"] == 3 and node["ids"] == list(range(50)) and node["names"] == ["n0", "n1", "n2"]
        assert node["x_sum"] == pytest.approx(sum(range(50)) + 50 * -0.5)
