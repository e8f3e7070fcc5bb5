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


def test_a_micro_batch_that_differs_only_in_nullability_has_not_drifted():
    """As validation_data (issue 53 item 13b): a type that differs only in what it declares nullable
    is read alike (nulls are checked row by row); the message was "changed type from array<double>
    to array<double>"."""
    from pyspark.sql import types as T

    from sparkdl.driver.streaming import schema_drift

    first = T.StructType([T.StructField("x", T.ArrayType(T.DoubleType(), containsNull=True))])
    strict = T.StructType([T.StructField("x", T.ArrayType(T.DoubleType(), containsNull=False), nullable=False)])
    assert schema_drift(first, strict) is None
    other = T.StructType([T.StructField("x", T.ArrayType(T.FloatType(), containsNull=False))])
    assert schema_drift(first, other) == "column 'x' changed type from array<double> to array<float>"
