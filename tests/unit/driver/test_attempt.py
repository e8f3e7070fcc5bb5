"""A cluster attempt's launch beside another sparkdl cluster of the same application: it waits for
executors of its own, launches on them, launches again when Spark ran a task elsewhere (no node
started), and frees them on close or abort. No Spark: a stand-in ``SparkAccess``."""

from __future__ import annotations

import threading
import time

import pytest

from sparkdl.common.errors import ReservationTimeout
from sparkdl.common.roles import NodeRole
from sparkdl.driver import attempt as attempt_module
from sparkdl.driver.attempt import ClusterAttempt, ClusterRequest
from sparkdl.driver.coordinator import Listeners
from sparkdl.driver.node_groups import node_groups
from sparkdl.driver.spark_access import SparkAccess
from sparkdl.node.config import NodeSettings

pytestmark = pytest.mark.timeout(60)


class Application:
    """Stands for a SparkContext: what the application's registry is kept by."""


class FakeSpark(SparkAccess):
    """Four executors; each launch returns the next of ``answers`` (records per task)."""

    def __init__(self, answers):
        self._app = Application()
        self.answers = list(answers)
        self.launches: list[list[str] | None] = []

    @property
    def sc(self):
        return self._app

    @property
    def master(self):
        return "spark://fake:7077"

    def conf(self, key):
        return None

    def coordinator_addresses(self):
        return "127.0.0.1", "127.0.0.1"

    def default_fs(self):
        return "file://"

    def thread(self, target, name):
        return threading.Thread(target=target, name=name, daemon=True)

    def set_job_tag(self, tag, description):
        pass

    def cancel(self, tag):
        pass

    def executor_ids(self):
        return ["0", "1", "2", "3"]

    def launch(self, count, launcher, profile, barrier, executors=None):
        self.launches.append(executors)
        return self.answers.pop(0) if self.answers else []


def placed(*executors):
    return [{"node_number": i, "executor_id": e} for i, e in enumerate(executors)]


def misplaced(*executors):
    return [{"node_number": i, "misplaced": i == 0, "executor_id": e} for i, e in enumerate(executors)]


def new_attempt(spark) -> ClusterAttempt:
    settings = NodeSettings(
        fn=b"", roles=(NodeRole(0, "chief", 0), NodeRole(1, "worker", 0)), feeds=True, set_tf_config=True,
        release_port=True, reservation_timeout=20, tensorboard_node=None, log_dir=None, num_gpus=None,
    )  # fmt: skip
    return ClusterAttempt(spark, ClusterRequest(settings, 0, True, None), "cid", 0, Listeners())


def launched(attempt: ClusterAttempt) -> ClusterAttempt:
    attempt.start()
    attempt.join(20)
    return attempt


def test_a_lone_cluster_launches_anywhere_and_holds_where_its_nodes_went():
    spark = FakeSpark([placed("3", "1")])
    attempt = launched(new_attempt(spark))
    try:
        assert attempt.launch_error() is None and spark.launches == [None]
        assert node_groups(spark.sc).holders() == {attempt.job_group: ["1", "3"]}
    finally:
        attempt.close()
    assert node_groups(spark.sc).holders() == {}


def test_beside_another_cluster_it_launches_on_free_executors_again_until_spark_runs_it_there():
    spark = FakeSpark([misplaced("1", "3"), placed("2", "3")])
    groups = node_groups(spark.sc)
    groups.reserve("other", 2, spark.executor_ids, 5)
    groups.placed("other", ["0", "1"])
    attempt = launched(new_attempt(spark))
    try:
        assert attempt.launch_error() is None
        assert spark.launches == [["2", "3"], ["2", "3"]]  # the first launch started no node
        assert groups.holders() == {"other": ["0", "1"], attempt.job_group: ["2", "3"]}
    finally:
        attempt.close()
    assert groups.holders() == {"other": ["0", "1"]}


def test_launches_that_spark_never_places_end_in_a_reservation_timeout(monkeypatch):
    monkeypatch.setattr(attempt_module, "PLACEMENT_LAUNCHES", 3)
    spark = FakeSpark([misplaced("0", "3")] * 3)
    groups = node_groups(spark.sc)
    groups.reserve("other", 2, spark.executor_ids, 5)
    groups.placed("other", ["0", "1"])
    attempt = launched(new_attempt(spark))
    try:
        assert isinstance(attempt.launch_error(), ReservationTimeout) and len(spark.launches) == 3
    finally:
        attempt.close()
    assert groups.holders() == {"other": ["0", "1"]}


def test_an_attempt_aborted_while_it_waits_for_executors_stops_waiting_at_once():
    spark = FakeSpark([])
    groups = node_groups(spark.sc)
    groups.reserve("other", 4, spark.executor_ids, 5)
    groups.placed("other", ["0", "1", "2", "3"])
    attempt = new_attempt(spark)
    attempt.start()
    attempt.join(0.3)  # it waits: every executor is held
    assert attempt.launch_error() is None and spark.launches == []
    started = time.monotonic()
    attempt.abort("the driver gave up")
    assert time.monotonic() - started < 5
    assert isinstance(attempt.launch_error(), ReservationTimeout) and spark.launches == []
    assert groups.holders() == {"other": ["0", "1", "2", "3"]}
