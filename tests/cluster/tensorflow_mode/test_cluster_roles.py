"""ps and evaluator roles on a real Spark: the evaluator on local-cluster[3,1,1024], the ps (hosted
by the driver) with chief and worker on local-cluster[2,1,1024]."""

from __future__ import annotations

import json

import pytest

from sparkdl import TFCluster

import cluster_functions as cluster_fns
from conftest import read_json_files

pytestmark = pytest.mark.timeout(300)


def test_evaluator_runs_outside_the_collective(sc3, tmp_path):
    cluster = TFCluster.run(sc3, cluster_fns.evaluator_layout, {"out": str(tmp_path)}, num_executors=3, eval_node=True)
    spec = cluster.cluster_spec
    cluster.shutdown(timeout=200)
    assert set(spec) == {"chief", "evaluator", "worker"}
    nodes = read_json_files(tmp_path)
    evaluator = nodes["node1"]
    assert evaluator["job_name"] == "evaluator"
    tf_config = json.loads(evaluator["tf_config"])
    assert tf_config["task"] == {"type": "evaluator", "index": 0}
    assert "evaluator" not in tf_config["cluster"] and set(tf_config["cluster"]) == {"chief", "worker"}
    assert evaluator["cluster_spec"]["evaluator"] == spec["evaluator"]
    for trainer in (nodes["node0"], nodes["node2"]):
        assert trainer["replicas"] == 2 and trainer["sum"] == 2.0


def test_parameter_server_strategy_trains_end_to_end_with_the_ps_on_the_driver(sc2, tmp_path):
    """ParameterServerStrategy model.fit from start to end, with driver_ps_nodes=True: the ps runs
    beside the driver, chief and worker on the two executors. (One cluster for both: a ps on an
    executor, under the same strategy, trains in test_faults' ps-death test and the ps_strategy example.)"""
    cluster = TFCluster.run(
        sc2,
        cluster_fns.parameter_server_fit,
        {"out": str(tmp_path)},
        num_executors=3,
        num_ps=1,
        driver_ps_nodes=True,
        env={"TF_USE_LEGACY_KERAS": "1"},  # Keras 3's trainer cannot drive ParameterServerStrategy
    )
    assert {job: len(hosts) for job, hosts in cluster.cluster_spec.items()} == {"ps": 1, "chief": 1, "worker": 1}
    info = {n["job_name"]: n for n in cluster.cluster_info}
    # ps and the worker serve forever; shutdown stops them once the chief (coordinator) is done.
    cluster.shutdown(timeout=240)
    assert info["ps"]["spark_executor"] == "" and info["chief"]["spark_executor"] != ""
    assert info["worker"]["spark_executor"] not in ("", info["chief"]["spark_executor"])
    nodes = read_json_files(tmp_path)
    assert nodes["node0"] == {"job_name": "ps", "served": True}
    chief = nodes["node1"]
    assert chief["job_name"] == "chief" and len(chief["loss"]) == 3
    assert chief["loss"][-1] < chief["loss"][0]
    assert all(status == "exited" for status in (n["status"] for n in cluster.cluster_info))
