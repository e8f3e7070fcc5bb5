"""Elastic training across hosts (slow tier): a standalone cluster of three Workers, each on a host
of its own (network namespaces, ``netns_cluster.py``). A host that dies for good shrinks the cluster,
a Worker started again on it grows it back; under dynamic allocation an ETL job's executors come and
go while the nodes keep theirs."""

from __future__ import annotations

import json
import threading
import time

import elastic_functions as ef
import pytest
from elastic_checks import EPOCHS, active_executors, check_epochs, check_weights, frame_of_ids, hold

from sparkdl import TFCluster

import netns_cluster
from node_functions import wait_for_file

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def _standalone_spark(standalone, name: str, **conf):
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(standalone.master_url)
        .appName(name)
        .config("spark.driver.host", standalone.driver_host)
        .config("spark.driver.bindAddress", standalone.driver_host)
        .config("spark.executor.memory", "1g")
        .config("spark.ui.enabled", "false")
    )
    for key, value in conf.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def _until(condition, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.2)  # polling Spark's executor list: no event reaches Python


def _train_in_thread(cluster, frame, epochs: int) -> tuple[threading.Thread, dict]:
    outcome: dict = {}

    def body():
        try:
            outcome["history"] = cluster.train(frame, num_epochs=epochs)
        except BaseException as exc:  # noqa: BLE001 - the test thread asserts on it
            outcome["error"] = exc

    thread = threading.Thread(target=body)
    thread.start()
    return thread, outcome


@pytest.fixture
def standalone_spark(spark_holder, tmp_path):
    why_not = netns_cluster.unavailable()
    if why_not:
        pytest.skip(why_not)
    spark_holder.stop()  # one SparkContext per process: these tests' run on a standalone master
    return tmp_path


def test_a_host_killed_for_good_shrinks_the_cluster_and_a_worker_started_again_grows_it_back(standalone_spark):
    tmp_path = standalone_spark
    out = tmp_path / "out"
    out.mkdir()
    with netns_cluster.namespaced_standalone(tmp_path, workers=3) as standalone:
        spark = _standalone_spark(standalone, "sparkdl-elastic-hosts")
        try:
            sc = spark.sparkContext
            sc.setLogLevel("ERROR")
            frame = frame_of_ids(sc)
            holds = (hold(0, node=2, epoch=1, step=2, name="lost"), hold(1, node=0, epoch=2, step=1, name="back"))
            args = {"out": str(out), "backup_dir": str(out / "backup"), "holds": holds}
            cluster = TFCluster.run(
                sc, ef.elastic_fit, args, 3, input_mode=TFCluster.InputMode.SPARK, min_executors=2, elastic_wait=5,
                executor_wait_timeout=90,
            )  # fmt: skip
            thread, outcome = _train_in_thread(cluster, frame, EPOCHS)
            assert wait_for_file(str(out / "lost.json"), 240), "worker:1 never reached epoch 2"
            host = json.loads((out / "lost.json").read_text())["host"]
            standalone.kill_host(standalone.worker_hosts.index(host))  # for good: no Worker is left there
            assert wait_for_file(str(out / "back.json"), 240), "the 2 survivors never reached epoch 3"
            standalone.start_worker(standalone.worker_hosts.index(host))
            _until(lambda: len(active_executors(sc)) == 3, 180, "Spark gave no executor on the restarted host")
            (out / "back-release").touch()
            thread.join(400)
            assert not thread.is_alive() and "history" in outcome, outcome.get("error")
            cluster.shutdown(timeout=120)
        finally:
            (out / "back-release").touch()
            spark.stop()
    assert outcome["history"]["nodes"] == [3.0, 2.0, 2.0, 3.0]
    assert [(r["from_nodes"], r["to_nodes"]) for r in cluster.resizes] == [(3, 2), (2, 3)]
    check_epochs(out, [3, 2, 2, 3])
    check_weights(out, attempt=2, nodes=3)


def test_under_dynamic_allocation_etl_executors_come_and_go_while_the_nodes_keep_theirs(standalone_spark):
    tmp_path = standalone_spark
    out = tmp_path / "out"
    out.mkdir()
    with netns_cluster.namespaced_standalone(tmp_path, workers=3, cores=3, memory_mb=3584) as standalone:
        spark = _standalone_spark(
            standalone,
            "sparkdl-dynamic-allocation",
            **{
                "spark.executor.cores": "1",
                "spark.dynamicAllocation.enabled": "true",
                "spark.dynamicAllocation.shuffleTracking.enabled": "true",
                "spark.dynamicAllocation.minExecutors": "0",
                "spark.dynamicAllocation.maxExecutors": "9",
                "spark.dynamicAllocation.executorIdleTimeout": "3s",
                "spark.dynamicAllocation.schedulerBacklogTimeout": "1s",
            },
        )
        try:
            sc = spark.sparkContext
            sc.setLogLevel("ERROR")
            frame = frame_of_ids(sc)
            args = {"out": str(out), "backup_dir": str(out / "backup"), "holds": (hold(0, 0, epoch=1, step=1),)}
            cluster = TFCluster.run(sc, ef.elastic_fit, args, 3, input_mode=TFCluster.InputMode.SPARK, min_executors=2)
            with cluster:  # an error here stops the nodes before Spark stops
                thread, outcome = _train_in_thread(cluster, frame, EPOCHS)
                assert wait_for_file(str(out / "held.json"), 240), "the chief never reached epoch 2"
                nodes_executors = {json.loads(p.read_text())["executor"] for p in out.glob("executor-attempt0-*.json")}
                assert len(nodes_executors) == 3 and nodes_executors <= set(active_executors(sc))
                before_etl = set(active_executors(sc))  # the nodes' and the feeders' (holding cached blocks)
                seen = set(before_etl)
                etl = threading.Thread(
                    target=lambda: sc.parallelize(range(12), 12).map(lambda x: time.sleep(2) or x).count()
                )
                etl.start()
                while etl.is_alive():  # watch the application grow for the ETL job
                    seen |= set(active_executors(sc))
                    etl.join(0.2)
                etl_executors = seen - before_etl
                assert etl_executors, "Spark added no executor for the ETL job"
                _until(
                    lambda: not etl_executors & set(active_executors(sc)),
                    120,
                    "Spark did not release the ETL job's idle executors",
                )
                assert nodes_executors <= set(active_executors(sc)), "an executor holding a node was released"
                (out / "held-release").touch()
                thread.join(400)
                assert not thread.is_alive() and "history" in outcome, outcome.get("error")
        finally:
            (out / "held-release").touch()
            spark.stop()
    assert cluster.resizes == [] and outcome["history"]["nodes"] == [3.0] * EPOCHS
    check_epochs(out, [3] * EPOCHS)
