"""Stage-level scheduling of the launch stage on real Spark: a profile Spark refuses becomes a
PreflightError, and on ``local-cluster[2,2,2048]`` with ``spark.task.cpus=1`` two nodes own two
distinct executors, where an ETL stage of the same application runs two tasks on each at once, and
are fed there (pure-Python nodes: what is tested is where Spark puts the tasks, not TensorFlow).
(The rules without Spark: tests/unit/driver/test_scheduling.py.)
"""

from __future__ import annotations

from collections import Counter

import pytest

from sparkdl import PreflightError, TFCluster
from sparkdl.driver.scheduling import LaunchResources, register_profile
from sparkdl.driver.spark_access import ClassicSpark

import feed_functions as feed_fns
import node_functions as nf
from conftest import read_json_files

pytestmark = pytest.mark.timeout(300)


def test_a_negative_num_gpus_is_refused_before_anything_starts(sc2, tmp_path):
    with pytest.raises(ValueError, match="num_gpus"):
        TFCluster.run(
            sc2, nf.describe_node, {"out": str(tmp_path)}, 2, num_gpus=-1, input_mode=TFCluster.InputMode.SPARK
        )


def test_a_profile_spark_refuses_is_a_preflight_error(sc2):
    """Spark itself decides: a profile with executor requests needs dynamic allocation, so this
    local-cluster refuses it, and the refusal names Spark's reason and the setting to change."""
    from pyspark.resource import ExecutorResourceRequests, ResourceProfileBuilder, TaskResourceRequests

    class WithExecutorRequests(ClassicSpark):  # the profile sparkdl builds, plus an executor request
        def check_profile(self, profile):
            super().check_profile(
                ResourceProfileBuilder()
                .require(ExecutorResourceRequests().cores(2))
                .require(TaskResourceRequests().cpus(1))
                .build
            )

    with pytest.raises(PreflightError, match="dynamic allocation") as info:
        register_profile(WithExecutorRequests(sc2), LaunchResources(2))
    assert "spark.task.cpus equal to spark.executor.cores" in str(info.value)


def _launch_task_cpus(sc, cluster_id: str) -> int:
    """The CPUs each task of a cluster's launch stage asked for: its resource profile's, read from
    Spark's status store and resource profile manager (what the Spark UI shows)."""
    spark_context = sc._jsc.sc()
    jobs = spark_context.statusStore().jobsList(None)
    launch_jobs = [
        jobs.apply(i)
        for i in range(jobs.size())
        if jobs.apply(i).jobGroup().isDefined() and jobs.apply(i).jobGroup().get() == f"sparkdl-{cluster_id}"
    ]
    assert len(launch_jobs) == 1, f"{len(launch_jobs)} launch jobs"
    stage = spark_context.statusStore().lastStageAttempt(launch_jobs[0].stageIds().apply(0))
    profile = spark_context.resourceProfileManager().resourceProfileFromId(stage.resourceProfileId())
    # getTaskCpus() is an Option[Int] that py4j cannot decode; the request's amount is a Double.
    return int(profile.taskResources().get("cpus").get().amount())


@pytest.fixture
def sc_two_slots(spark_holder):
    """local-cluster[2,2,2048] with spark.task.cpus=1: two executors with two task slots each.
    Barrier stages that cannot get their slots fail within seconds instead of Spark's minutes."""
    conf = {
        "spark.task.cpus": "1",
        "spark.barrier.sync.timeout": "60",
        "spark.scheduler.barrier.maxConcurrentTasksCheck.interval": "1s",
        "spark.scheduler.barrier.maxConcurrentTasksCheck.maxFailures": "3",
    }
    yield spark_holder.get(2, conf, cores=2, memory_mb=2048)
    spark_holder.stop()  # two 2 GiB executors: give the memory back to the next tests


def test_spark_mode_nodes_own_executors_while_etl_keeps_two_slots_each(sc_two_slots, spark_holder, tmp_path):
    spark = spark_holder.spark
    rows = [([float(i % 7), 1.0, -1.0, 0.5], float(i)) for i in range(600)]
    frame = spark.createDataFrame(rows, "x array<float>, y double").repartition(4)

    def rendezvous(_rows):
        """One barrier task: Spark starts the stage only when every task has a slot, and allGather
        returns only once every task has reached it, so all of them run at the same time."""
        from pyspark import BarrierTaskContext

        context = BarrierTaskContext.get()
        address = context.getTaskInfos()[context.partitionId()].address
        yield address, len(context.allGather(address))

    cluster = TFCluster.run(
        sc_two_slots,
        feed_fns.count_feed,
        {"out": str(tmp_path), "batch": 32},
        2,
        input_mode=TFCluster.InputMode.SPARK,
    )
    with cluster:  # aborts the nodes if anything below raises
        assert ClassicSpark(sc_two_slots).executor_cores(at_least=2) == [2, 2]  # what a standalone master reports
        node_executors = [node["spark_executor"] for node in cluster.cluster_info]
        # While both nodes run: four ETL tasks at once on the two executors.
        etl = spark.range(0, 4, numPartitions=4).rdd.barrier().mapPartitions(rendezvous).collect()
        cluster.train(frame, num_epochs=2)
        launch_cpus = _launch_task_cpus(sc_two_slots, cluster.cluster_id)

    assert len(set(node_executors)) == 2, node_executors
    assert launch_cpus == 2  # each launch task held a whole executor
    assert [count for _, count in etl] == [4] * 4
    assert sorted(Counter(address for address, _ in etl).values()) == [2, 2]
    assert {address for address, _ in etl} == set(node_executors)  # the executors hosting the nodes
    nodes = read_json_files(tmp_path)
    assert [n["rows"] for n in nodes.values()] == [600, 600]  # 300 rows each per epoch, 2 epochs
