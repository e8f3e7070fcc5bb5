"""Executor leases of one application's clusters (``driver/node_groups.py``): turns, waits, release."""

from __future__ import annotations

import threading

import pytest

from sparkdl.common.errors import ReservationTimeout
from sparkdl.driver.node_groups import NodeGroups, node_groups

pytestmark = pytest.mark.timeout(30)

EXECUTORS = ["0", "1", "2", "3"]


class Reserver(threading.Thread):
    """``groups.reserve`` in a thread of its own; its result or error once it returns."""

    def __init__(self, groups: NodeGroups, owner: str, count: int, timeout: float = 20.0, executors=EXECUTORS):
        super().__init__(daemon=True)
        self.groups, self.owner, self.count, self.timeout, self.executors = groups, owner, count, timeout, executors
        self.result = self.error = None
        self.returned = threading.Event()

    def run(self):
        try:
            self.result = self.groups.reserve(self.owner, self.count, lambda: self.executors, self.timeout)
        except BaseException as exc:  # noqa: BLE001 - checked by the test
            self.error = exc
        finally:
            self.returned.set()


def started(groups, owner, count, **kwargs) -> Reserver:
    reserver = Reserver(groups, owner, count, **kwargs)
    reserver.start()
    return reserver


def in_line(reserver: Reserver) -> bool:
    """Whether ``reserver`` waits in its registry's line (waited for, bounded: it queues at once)."""
    for _ in range(1000):
        if reserver.owner in reserver.groups.waiting():
            return True
        if reserver.returned.wait(0.01):
            return False
    return False


def still_waiting(reserver: Reserver) -> bool:
    """Queued (the synchronisation), and not returned a moment later (a negative check only)."""
    return in_line(reserver) and not reserver.returned.wait(0.3)


def test_a_lone_cluster_launches_anywhere_and_records_its_executors():
    groups = NodeGroups()
    assert groups.reserve("a", 2, lambda: EXECUTORS, 5) is None
    assert groups.placed("a", ["3", "1"]) == []
    assert groups.holders() == {"a": ["1", "3"]}


def test_a_second_cluster_gets_executors_the_first_does_not_hold():
    groups = NodeGroups()
    groups.reserve("a", 2, lambda: EXECUTORS, 5)
    groups.placed("a", ["0", "2"])
    assert groups.reserve("b", 2, lambda: EXECUTORS, 5) == ["1", "3"]
    assert groups.placed("b", ["1", "3"]) == []
    assert groups.holders() == {"a": ["0", "2"], "b": ["1", "3"]}


def test_a_third_cluster_waits_for_a_release_then_takes_the_freed_executors():
    groups = NodeGroups()
    groups.reserve("a", 2, lambda: EXECUTORS, 5)
    groups.placed("a", ["0", "1"])
    groups.reserve("b", 2, lambda: EXECUTORS, 5)
    groups.placed("b", ["2", "3"])
    third = started(groups, "c", 2)
    assert still_waiting(third)
    groups.release("a")
    assert third.returned.wait(10)
    assert third.error is None and third.result == ["0", "1"]


def test_waiting_clusters_are_served_first_come_first_served():
    groups = NodeGroups()
    groups.reserve("a", 4, lambda: EXECUTORS, 5)
    groups.placed("a", EXECUTORS)
    first = started(groups, "first", 3)
    assert still_waiting(first)
    second = started(groups, "second", 1)
    assert still_waiting(second)  # one executor would do for it, but "first" is ahead
    groups.release("a")
    assert first.returned.wait(10) and first.result is None  # nobody holds executors: it launches anywhere
    assert still_waiting(second)  # "first" has the turn until it says where its nodes went
    groups.placed("first", ["0", "1", "2"])
    assert second.returned.wait(10) and second.result == ["3"]


def test_a_launch_in_progress_holds_the_turn_until_its_nodes_are_placed_or_it_fails():
    groups = NodeGroups()
    assert groups.reserve("a", 2, lambda: EXECUTORS, 5) is None  # a's nodes are starting somewhere
    second = started(groups, "b", 2)
    assert still_waiting(second)
    groups.release("a")  # a's launch failed: it holds nothing
    assert second.returned.wait(10) and second.result is None


def test_the_wait_is_bounded():
    groups = NodeGroups()
    groups.reserve("a", 3, lambda: EXECUTORS, 5)
    groups.placed("a", ["0", "1", "2"])
    with pytest.raises(ReservationTimeout, match="2 executors free"):
        groups.reserve("b", 2, lambda: EXECUTORS, 0.2)
    assert groups.reserve("c", 1, lambda: EXECUTORS, 5) == ["3"]  # the timed-out one left the line


def test_releasing_a_waiting_cluster_ends_its_wait_and_lets_the_next_go():
    groups = NodeGroups()
    groups.reserve("a", 4, lambda: EXECUTORS, 5)
    groups.placed("a", EXECUTORS)
    doomed = started(groups, "doomed", 2)
    assert still_waiting(doomed)
    nxt = started(groups, "next", 2)
    assert still_waiting(nxt)
    groups.release("doomed")  # e.g. its cluster was aborted while it waited
    assert doomed.returned.wait(10) and isinstance(doomed.error, ReservationTimeout)
    groups.release("a")
    assert nxt.returned.wait(10) and nxt.error is None


def test_a_failed_reserved_launch_frees_its_executors():
    groups = NodeGroups()
    groups.reserve("a", 2, lambda: EXECUTORS, 5)
    groups.placed("a", ["0", "1"])
    assert groups.reserve("b", 2, lambda: EXECUTORS, 5) == ["2", "3"]
    groups.release("b")  # its launch failed
    assert groups.holders() == {"a": ["0", "1"]}
    assert groups.reserve("c", 2, lambda: EXECUTORS, 5) == ["2", "3"]


def test_a_node_placed_beside_another_clusters_is_reported_and_not_leased():
    groups = NodeGroups()
    groups.reserve("a", 2, lambda: EXECUTORS, 5)
    groups.placed("a", ["0", "1"])
    groups.reserve("b", 2, lambda: EXECUTORS, 5)
    assert groups.placed("b", ["1", "2"]) == ["1"]
    assert groups.holders()["a"] == ["0", "1"]


def test_executors_registered_later_count():
    groups = NodeGroups()
    groups.reserve("a", 2, lambda: ["0", "1"], 5)
    groups.placed("a", ["0", "1"])
    executors = ["0", "1"]
    waiting = started(groups, "b", 2, executors=executors)
    assert still_waiting(waiting)
    executors += ["2", "3"]  # registered meanwhile: seen at the next wake-up
    groups.release("nobody")  # any change wakes the waiters
    assert waiting.returned.wait(10) and waiting.result == ["2", "3"]


def test_executor_ids_are_chosen_in_numeric_order():
    groups = NodeGroups()
    ids = [str(i) for i in range(12)]
    groups.reserve("a", 1, lambda: ids, 5)
    groups.placed("a", ["0"])
    assert groups.reserve("b", 2, lambda: list(reversed(ids)), 5) == ["1", "2"]


def test_one_registry_per_spark_context():
    class Context:  # stands for a SparkContext
        pass

    first, second = Context(), Context()
    assert node_groups(first) is node_groups(first)
    assert node_groups(first) is not node_groups(second)


def test_a_launch_released_before_it_says_where_its_nodes_went_leases_nothing():
    groups = NodeGroups()
    groups.reserve("a", 2, lambda: EXECUTORS, 5)
    groups.release("a")  # stopped while its launch job ran
    assert groups.placed("a", ["0", "1"]) == []  # the launch thread returns afterwards
    assert groups.holders() == {}


def test_the_driver_and_unknown_executors_are_never_leased():
    groups = NodeGroups()
    groups.reserve("a", 2, lambda: EXECUTORS, 5)
    assert groups.placed("a", ["driver", None, "1"]) == []
    assert groups.holders() == {"a": ["1"]}
