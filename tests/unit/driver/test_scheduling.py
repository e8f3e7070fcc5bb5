"""Stage-level scheduling of the launch stage (driver/scheduling.py): InputMode.SPARK nodes each
take a whole executor, while the application's other stages keep ``spark.task.cpus`` and their slots.

The rules, without Spark. (Real Spark: a profile Spark refuses, and nodes owning their executors
while ETL keeps two slots each: tests/cluster/deployment/test_launch_scheduling.py.)
"""

from __future__ import annotations

import pytest

from sparkdl import PreflightError
from sparkdl.driver.scheduling import (
    LaunchResources,
    executor_cores,
    launch_resources,
    slots_per_executor,
)

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
