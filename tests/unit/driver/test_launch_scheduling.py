"""Stage-level scheduling of the launch stage (driver/scheduling.py): InputMode.SPARK nodes each
take a whole executor, while the application's other stages keep ``spark.task.cpus`` and their slots.

The rules first (no Spark), then real Spark: a profile Spark refuses becomes a PreflightError,
and on ``local-cluster[2,2,2048]`` with ``spark.task.cpus=1`` two nodes train on two distinct
executors while an ETL stage of the same application runs two tasks on each executor at once.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from sparkdl import PreflightError, TFCluster
from sparkdl.driver.scheduling import (
    LaunchResources,
    executor_cores,
    launch_resources,
    register_profile,
    slots_per_executor,
)
from sparkdl.driver.spark_access import ClassicSpark

import feed_functions as feed_fns
import node_functions as nf
from conftest import read_json_files

pytestmark = pytest.mark.timeout(300)


def conf(**settings):
    """A ``conf`` callable: keyword ``spark_task_cpus`` stands for ``spark.task.cpus``."""
    return {key.replace("_", "."): value for key, value in settings.items()}.get


GPU_EXECUTORS = {"spark_executor_resource_gpu_amount": "2"}


@pytest.mark.parametrize(
    "cores, settings, slots",
    [
        (2, {}, 2),
        (4, {"spark_task_cpus": "2"}, 2),
        (4, {**GPU_EXECUTORS, "spark_task_resource_gpu_amount": "1"}, 2),  # GPUs allow fewer than cores
        (8, {**GPU_EXECUTORS, "spark_task_resource_gpu_amount": "0.5"}, 4),  # a GPU shared by 2 tasks
        (1, {**GPU_EXECUTORS, "spark_task_resource_gpu_amount": "0.25"}, 1),  # cores allow fewer than GPUs
    ],
)
def test_slots_per_executor_follow_cores_and_gpus(cores, settings, slots):
    assert slots_per_executor(cores, conf(**settings)) == slots


@pytest.mark.parametrize("master", ["local-cluster[2,2,2048]", "spark://h:7077", "yarn", "k8s://https://k:6443"])
def test_several_slots_make_each_launch_task_ask_for_a_whole_executor(master):
    assert launch_resources(master, conf(spark_task_cpus="1"), 2, None, 2) == LaunchResources(2, 0.0)


@pytest.mark.parametrize(
    "cores, settings, nodes",
    [
        (1, {}, 2),  # one slot per executor: the default profile will do
        (4, {"spark_task_cpus": "4"}, 2),
        (4, {}, 1),  # a single node cannot share an executor with another
        (4, {**GPU_EXECUTORS, "spark_task_resource_gpu_amount": "2"}, 2),  # GPUs already allow one task
    ],
)
def test_no_profile_where_a_node_cannot_share_its_executor(cores, settings, nodes):
    assert launch_resources("spark://h:7077", conf(**settings), nodes, None, cores) is None


@pytest.mark.parametrize("num_gpus, gpus", [(None, 2.0), (1, 1.0), (0, 0.0)])
def test_the_launch_task_asks_for_the_nodes_gpus(num_gpus, gpus):
    settings = conf(**GPU_EXECUTORS, spark_task_resource_gpu_amount="0.5")
    assert launch_resources("spark://h:7077", settings, 2, num_gpus, 4) == LaunchResources(4, gpus)


def test_gpus_no_default_task_gets_are_asked_for_even_with_one_slot():
    """ETL tasks take no GPU (spark.task.resource.gpu.amount unset): the launch task asks for them,
    so the node gets Spark's GPU addresses rather than an nvidia-smi guess."""
    assert launch_resources("yarn", conf(**GPU_EXECUTORS), 2, None, 1) == LaunchResources(1, 2.0)
    assert launch_resources("yarn", conf(**GPU_EXECUTORS), 2, 0, 1) is None
    assert launch_resources("custom://m", conf(**GPU_EXECUTORS), 2, None, 1) is None  # nvidia-smi, as before


def test_more_gpus_than_an_executor_has_are_refused_naming_the_setting():
    with pytest.raises(PreflightError, match="num_gpus=3 .*spark.executor.resource.gpu.amount=2"):
        launch_resources("spark://h:7077", conf(**GPU_EXECUTORS), 2, 3, 4)


def test_a_master_without_stage_level_scheduling_keeps_the_one_slot_rule():
    with pytest.raises(PreflightError, match="set spark.task.cpus equal to spark.executor.cores") as info:
        launch_resources("custom://m", conf(), 2, None, 4)
    assert "4 task slots" in str(info.value) and "custom://m" in str(info.value)


def test_unknown_executor_cores_are_asked_for_where_a_profile_is_possible():
    with pytest.raises(PreflightError, match="set spark.executor.cores"):
        launch_resources("spark://h:7077", conf(), 2, None, None)
    assert launch_resources("custom://m", conf(), 2, None, None) is None  # nothing to check, as before


@pytest.mark.parametrize(
    "master, settings, registered, cores",
    [
        ("local-cluster[2,3,1024]", {"spark_executor_cores": "8"}, [], 3),
        ("spark://h:7077", {"spark_executor_cores": "8"}, [4], 8),
        ("spark://h:7077", {}, [4, 4], 4),
        ("spark://h:7077", {}, [], None),  # standalone executors take all of a worker's cores
        ("yarn", {}, [], 1),  # Spark's default on YARN and Kubernetes
        ("k8s://https://k:6443", {}, [], 1),
    ],
)
def test_executor_cores(master, settings, registered, cores):
    assert executor_cores(master, conf(**settings), lambda: registered) == cores


def test_executors_of_different_sizes_are_refused_naming_the_setting():
    with pytest.raises(PreflightError, match=r"different numbers of cores \(2, 4\).*spark.executor.cores"):
        executor_cores("spark://h:7077", conf(), lambda: [4, 2, 4])


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
        feed_fns.fit_from_feed,
        {"out": str(tmp_path), "batch": 32, "epochs": 2},
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
    assert [n["steps_per_epoch"] for n in nodes.values()] == [10, 10]  # ceil(300 / 32)
    first, second = (np.load(tmp_path / f"weights{i}.npz") for i in (0, 1))
    for name in first.files:
        np.testing.assert_array_equal(first[name], second[name])
