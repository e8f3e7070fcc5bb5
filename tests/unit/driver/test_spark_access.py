"""The driver's door to Spark (``driver/spark_access.py``) and DataFrame results, without a cluster."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from sparkdl.driver import spark_access as sa
from sparkdl.feed.results import ResultsError, results_as_rows


def test_anything_but_a_spark_context_or_session_is_refused_by_name():
    with pytest.raises(TypeError, match="SparkContext or a SparkSession.*got str"):
        sa.spark_access("local[2]")


def test_a_connect_session_is_told_apart_by_its_type_not_by_global_state():
    class FakeConnectSession:  # a stand-in: only the module name matters to the check
        pass

    FakeConnectSession.__module__ = "pyspark.sql.connect.session"
    assert sa.is_connect(FakeConnectSession())
    assert isinstance(sa.spark_access(FakeConnectSession()), sa.ConnectSpark)
    assert not sa.is_connect(object())


def test_the_coordinator_advertises_this_machines_route_toward_the_server(monkeypatch):
    monkeypatch.delenv(sa.DRIVER_HOST_ENV, raising=False)
    assert sa._route_toward("localhost") == "127.0.0.1"
    assert sa._route_toward("127.0.0.1") == "127.0.0.1"


def test_sparkdl_driver_host_overrides_the_advertised_address(monkeypatch):
    monkeypatch.setenv(sa.DRIVER_HOST_ENV, "127.0.0.5")

    class Session:
        client = None

    Session.__module__ = "pyspark.sql.connect.session"
    assert sa.ConnectSpark(Session()).coordinator_addresses() == ("127.0.0.5", "127.0.0.5")


def test_an_rdd_or_pandas_frame_under_connect_is_refused_naming_its_type():
    import pandas as pd

    with pytest.raises(TypeError, match=r"pandas\.core\.frame\.DataFrame: under Spark Connect there are no RDDs"):
        sa.ConnectSpark(None).require_frames(pd.DataFrame({"a": [1]}), "cluster.train")


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
