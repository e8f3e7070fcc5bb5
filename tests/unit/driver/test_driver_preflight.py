"""Pre-flight checks: slot layout from the master URL and conf, actionable errors, bounded waits."""

import time

import pytest

from sparkdl.common.errors import PreflightError
from sparkdl.driver.preflight import (
    SlotLayout,
    check_configuration,
    dynamic_allocation,
    slot_layout,
    wait_for_executors,
)

pytestmark = pytest.mark.timeout(60)


def conf(**settings):
    """A ``conf`` callable: keyword ``spark_task_cpus`` stands for ``spark.task.cpus``."""
    return {key.replace("_", "."): value for key, value in settings.items()}.get


@pytest.mark.parametrize(
    "master, settings, expected",
    [
        ("local-cluster[2,1,1024]", {}, SlotLayout(2, 1)),
        ("local-cluster[ 3 , 4 , 512 ]", {}, SlotLayout(3, 4)),
        ("local-cluster[3,4,512]", {"spark_task_cpus": "2"}, SlotLayout(3, 2)),
        ("local[4]", {}, SlotLayout(1, 4)),
        ("local[4]", {"spark_task_cpus": "4"}, SlotLayout(1, 1)),
        ("local[4,2]", {}, SlotLayout(1, 4)),
        ("local[*]", {}, SlotLayout(1, None)),
        ("local", {}, SlotLayout(1, 1)),
        ("spark://h:7077", {}, SlotLayout(None, None)),
        ("spark://h:7077", {"spark_executor_instances": "3", "spark_executor_cores": "4"}, SlotLayout(3, 4)),
        (
            "spark://h:7077",
            {"spark_executor_instances": "3", "spark_executor_cores": "4", "spark_task_cpus": "2"},
            SlotLayout(3, 2),
        ),
        ("yarn", {"spark_executor_instances": "5"}, SlotLayout(5, None)),
    ],
)
def test_slot_layout(master, settings, expected):
    assert slot_layout(master, conf(**settings)) == expected


@pytest.mark.parametrize("value", ["true", "TRUE", "True"])
def test_dynamic_allocation_is_allowed_and_its_executor_count_is_not_fixed(value):
    settings = {"spark.dynamicAllocation.enabled": value, "spark.executor.instances": "1"}
    assert check_configuration("spark://h:7077", settings.get, 2) == SlotLayout(None, None)
    assert dynamic_allocation(settings.get) and not dynamic_allocation({}.get)


def test_single_local_executor_cannot_host_two_nodes():
    with pytest.raises(PreflightError, match=r"local-cluster\[2,1,1024\]") as info:
        check_configuration("local[4]", conf(), 2)
    assert "num_executors=2" in str(info.value)


def test_too_few_executors_in_local_cluster():
    with pytest.raises(PreflightError, match="num_executors=3") as info:
        check_configuration("local-cluster[2,1,1024]", conf(), 3)
    assert "only 2 executor(s)" in str(info.value)


def test_too_few_executor_instances_on_a_real_cluster():
    with pytest.raises(PreflightError, match="spark.executor.instances"):
        check_configuration("spark://h:7077", conf(spark_executor_instances="2"), 4)


def test_several_slots_per_executor_pass_the_configuration_check():
    """Nodes that must own an executor get it from the launch stage's profile (test_launch_scheduling.py)."""
    assert check_configuration("local-cluster[2,2,1024]", conf(), 2) == SlotLayout(2, 2)


@pytest.mark.parametrize(
    "master, settings, nodes",
    [
        ("local-cluster[2,2,1024]", {"spark_task_cpus": "2"}, 2),
        ("local-cluster[2,2,1024]", {}, 2),
        ("local-cluster[3,1,1024]", {"spark_dynamicAllocation_enabled": "false"}, 2),
        ("local", {}, 1),
        ("local[*]", {}, 1),
        ("yarn", {}, 8),  # nothing known: the executor wait decides
    ],
)
def test_valid_configurations_pass(master, settings, nodes):
    check_configuration(master, conf(**settings), nodes)


def test_wait_for_executors_returns_as_soon_as_the_count_is_reached():
    calls = []

    def count():
        calls.append(1)
        return 1 if len(calls) < 3 else 3

    start = time.monotonic()
    assert wait_for_executors(count, 3, SlotLayout(3, 1), wait_s=30) == 3
    assert len(calls) == 3
    assert time.monotonic() - start < 5


def test_wait_for_executors_counts_slots():
    assert wait_for_executors(lambda: 2, 4, SlotLayout(None, 2), wait_s=5) == 2


def test_wait_for_executors_counts_executors_when_each_node_owns_one():
    with pytest.raises(PreflightError, match=r"need 4 executors \(one each\), but only 2 executor\(s\) registered"):
        wait_for_executors(lambda: 2, 4, SlotLayout(None, 2), wait_s=0.3, one_node_per_executor=True)


def test_wait_for_executors_gives_up_naming_the_counts():
    start = time.monotonic()
    with pytest.raises(PreflightError) as info:
        wait_for_executors(lambda: 1, 3, SlotLayout(3, 1), wait_s=0.5)
    elapsed = time.monotonic() - start
    assert 0.5 <= elapsed < 5
    message = str(info.value)
    assert "num_executors=3" in message and "only 1 executor(s)" in message


def test_the_node_count_is_named_as_the_caller_named_it():
    """KerasEstimator's users set num_workers, not num_executors: the errors say what they set."""
    with pytest.raises(PreflightError, match=r"^num_workers=3 but .* only 2 executor") as info:
        check_configuration("local-cluster[2,1,1024]", conf(), 3, nodes_param="num_workers")
    assert "num_executors" not in str(info.value)
    with pytest.raises(PreflightError, match=r"local-cluster\[2,1,1024\]") as info:
        check_configuration("local[4]", conf(), 2, nodes_param="num_workers")
    assert "num_workers=2" in str(info.value) and "num_executors" not in str(info.value)
    with pytest.raises(PreflightError) as info:
        wait_for_executors(lambda: 1, 2, SlotLayout(2, 1), 0.0, nodes_param="num_workers")
    assert "num_workers=2" in str(info.value) and "lower num_workers" in str(info.value)
    assert "num_executors" not in str(info.value)


def test_an_elastic_cluster_starts_on_what_spark_has_once_the_wait_is_over():
    assert wait_for_executors(lambda: 2, 3, SlotLayout(None, 1), 0.2, one_node_per_executor=True, at_least=2) == 2
    with pytest.raises(PreflightError, match="only 1 executor"):
        wait_for_executors(lambda: 1, 3, SlotLayout(None, 1), 0.2, one_node_per_executor=True, at_least=2)
