"""``cluster.train_stream``'s schema check without Spark: the drift between two micro-batches'
schemas names the column. (Structured Streaming into a live cluster:
tests/cluster/streaming/test_stream_training.py.)"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.timeout(300)


def test_schema_drift_names_the_column_that_changed():
    from pyspark.sql import types as T

    from sparkdl.driver.streaming import schema_drift

    def schema(**columns):
        return T.StructType([T.StructField(name, kind) for name, kind in columns.items()])

    first = schema(id=T.LongType(), x=T.ArrayType(T.DoubleType()), y=T.DoubleType())
    assert schema_drift(first, first) is None
    assert schema_drift(first, schema(id=T.LongType(), y=T.DoubleType())) == "column 'x' is missing"
    changed = schema(id=T.LongType(), x=T.StringType(), y=T.DoubleType())
    assert schema_drift(first, changed) == "column 'x' changed type from array<double> to string"
    grown = schema(id=T.LongType(), x=T.ArrayType(T.DoubleType()), y=T.DoubleType(), z=T.LongType())
    assert schema_drift(first, grown) == "column 'z' is new"
