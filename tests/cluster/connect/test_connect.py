"""sparkdl over Spark Connect, against a real local Connect server over local-cluster[2,1,1024].

The client runs in its own process (``connect_scenarios.py``): a Python process holds one
SparkContext, and the local Connect server needs its own. Every scenario there goes through
the Connect client only; here each test checks one scenario's outcome and what its nodes wrote.
CI's scenarios run from the session's start, beside the other tests (``support/connect_runs.py``).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from connect_runs import ConnectRun

from conftest import read_json_files

pytestmark = [pytest.mark.timeout(900), pytest.mark.cluster]


def skip_without_the_connect_client() -> None:
    pytest.importorskip("grpc_status", reason="Spark Connect needs pyspark[connect]'s dependencies")


def run_scenarios(out: Path, spark_holder, names: list[str]) -> tuple[Path, dict, str]:
    """Run ``names`` (connect_scenarios.py) now, against a Connect server of their own."""
    skip_without_the_connect_client()
    spark_holder.stop()  # the Connect server's executors need the memory this process's Spark holds
    return ConnectRun(out, names).outcome()


@pytest.fixture(scope="module")
def outcome(connect_ci_run):
    """CI's scenarios, run since the session began (tests/conftest.py's ``connect_ci_run``)."""
    skip_without_the_connect_client()
    return connect_ci_run.outcome()


def scenario(outcome, name: str) -> tuple[Path, dict]:
    out, results, stderr = outcome
    assert name in results, f"scenario {name} did not run:\n{stderr[-4000:]}"
    result = results[name]
    assert result["ok"], f"{name} raised {result['error']}\n{result['traceback']}"
    return out / name, result


def test_the_client_is_a_spark_connect_session(outcome):
    assert outcome[1]["session_type"].startswith("pyspark.sql.connect."), outcome[1]["session_type"]


def test_tensorflow_mode_launches_one_node_per_executor_with_tf_config(outcome):
    out, result = scenario(outcome, "tensorflow_mode")
    assert result["sc"] == "None", "a Connect cluster has no SparkContext"
    assert len(set(result["executors"])) == 2, result["executors"]  # one node per executor, from the barrier task
    records = read_json_files(out)
    assert {r["job_name"] for r in records.values()} == {"chief", "worker"}
    for record in records.values():
        tf_config = json.loads(record["tf_config"])
        assert tf_config["cluster"] == record["cluster_spec"], record
        assert sorted(tf_config["cluster"]) == ["chief", "worker"] and sum(map(len, tf_config["cluster"].values())) == 2
        assert tf_config["task"] == {"type": record["job_name"], "index": record["task_index"]}


def test_spark_mode_trains_from_a_dataframe_with_history_and_progress(outcome):
    out, result = scenario(outcome, "spark_mode_training")
    records = read_json_files(out)
    assert len(records) == 2
    # 600 rows over 2 nodes: 300 each per epoch, in batches of 32 -> 10 steps per epoch
    assert all(r["steps_per_epoch"] == 10 for r in records.values()), records
    assert all(len(r["loss"]) == 2 for r in records.values())
    assert len(result["history"]["loss"]) == 2, result["history"]
    shown = result["shown"]
    assert "sparkdl train [fed]: 1,200/1,200 rows fed" in shown, shown
    assert "partitions" not in shown, "no status tracker under Connect: the line leaves partitions out"
    first, second = (np.load(out / f"weights{i}.npz") for i in (0, 1))
    for name in first.files:
        np.testing.assert_array_equal(first[name], second[name])


def test_inference_returns_a_dataframe_of_results_and_names_wrong_inputs(outcome):
    _, result = scenario(outcome, "spark_mode_inference")
    assert result["columns"] == ["score"]
    assert result["values"] == [10.0 * i for i in range(200)]
    pandas_input = result["errors"]["pandas_input"]
    assert "pandas.core.frame.DataFrame" in pandas_input and "no RDDs" in pandas_input
    assert "result_schema" in result["errors"]["no_result_schema"]


def test_a_failing_node_is_reported_with_role_host_and_traceback(outcome):
    _, result = scenario(outcome, "failure_report")
    assert result["error"] is not None, "shutdown() did not raise"
    assert result["failed"] == ["worker:0"]
    assert "boom from worker:0 (sentinel 7f3a)" in result["error"]
    assert result["hosts"][0] and "cluster_functions.py" in result["tracebacks"][0]


def test_tfparallel_runs_one_independent_node_per_executor(outcome):
    out, _ = scenario(outcome, "parallel")
    records = read_json_files(out)
    assert len(records) == 2 and all(r["tf_config"] is None for r in records.values())


@pytest.mark.slow
def test_tfestimator_and_tfmodel_work_under_connect(tmp_path, spark_holder):
    out, result = scenario(run_scenarios(tmp_path, spark_holder, ["estimator_and_model"]), "estimator_and_model")
    assert len(result["history"]["loss"]) == 3 and len(result["history"]["val_loss"]) == 3
    assert (out / "export" / "saved_model.pb").exists()
    assert result["accuracy"] > 0.8, result["accuracy"]
    assert result["export_fn_pid"] > 0  # export_fn ran once, on an executor


def test_the_inference_udf_scores_a_connect_dataframe_like_model_predict(outcome):
    _, result = scenario(outcome, "inference_udf")
    assert result["rows"] == 200 and result["max_error"] < 1e-5, result
