"""A cluster's life as named states (``driver/lifecycle.py``), the one failure policy both input
modes use, the time limits one ``feed_timeout`` sets (``timeouts.py``), and how a failed Spark
job's cause is read (``driver/spark_errors.py``). Pure objects: no Spark, no TensorFlow."""

from __future__ import annotations

import threading

import pytest

from sparkdl.common.errors import ClusterError, ClusterStateError, NodeFailure
from sparkdl.driver.lifecycle import (
    TRANSITIONS,
    ClusterState,
    FailureDecision,
    FailurePolicy,
    Lifecycle,
    NodeRange,
)

pytestmark = pytest.mark.timeout(60)


S = ClusterState


def _failure() -> ClusterError:
    return ClusterError([NodeFailure("worker:0", 1, "host", exit_code=1)], "a node failed")


def test_a_cluster_moves_only_along_the_diagram():
    life = Lifecycle("c1")
    assert life.state is S.STARTING
    for state in (S.RUNNING, S.FEEDING, S.RESTARTING, S.STARTING, S.RUNNING, S.STOPPING, S.STOPPED):
        life.move(state)
        assert life.state is state
    with pytest.raises(RuntimeError, match="no transition from stopped to running"):
        life.move(S.RUNNING)
    assert all(S.FAILED in targets for state, targets in TRANSITIONS.items() if not state.ended)
    assert not TRANSITIONS[S.STOPPED] and not TRANSITIONS[S.FAILED] and S.STOPPED.ended and S.FAILED.ended


def test_feeding_returns_to_running_after_the_last_caller_and_waits_on_the_policy_after_a_failure():
    life = Lifecycle("c2")
    life.move(S.RUNNING)
    with life.feeding():
        with life.feeding():  # a DStream's batch while a train() call feeds
            assert life.state is S.FEEDING
        assert life.state is S.FEEDING, "one caller still feeds"
    assert life.state is S.RUNNING
    with pytest.raises(ValueError), life.feeding():
        raise ValueError("bad argument")
    assert life.state is S.RUNNING, "an error that is no node failure changes nothing"
    with pytest.raises(ClusterError), life.feeding():
        raise _failure()
    assert life.state is S.FEEDING, "a node failure is left for the failure policy to decide"


@pytest.mark.parametrize("state", [S.STARTING, S.RESTARTING, S.STOPPING, S.STOPPED, S.FAILED])
def test_a_cluster_that_does_not_run_refuses_to_be_fed_with_a_sparkdl_error(state):
    """e.g. cluster.train() while another thread's shutdown() stops the cluster, or after it."""
    life = Lifecycle("c3")
    path = {
        S.STARTING: [],
        S.RESTARTING: [S.RUNNING, S.FEEDING, S.RESTARTING],
        S.STOPPING: [S.RUNNING, S.STOPPING],
        S.STOPPED: [S.RUNNING, S.STOPPING, S.STOPPED],
        S.FAILED: [S.FAILED],
    }
    for step in path[state]:
        life.move(step)
    refused = f"sparkdl cluster c3 is {state.value}: it takes data only while it runs"
    with pytest.raises(ClusterStateError, match=refused), life.feeding():
        pass
    assert life.state is state


@pytest.mark.parametrize(
    "resumes_in, failed_in, decision",
    [
        (S.FEEDING, S.FEEDING, FailureDecision.RESTART),  # InputMode.SPARK: a cluster.train call resumes
        (S.FEEDING, S.STOPPING, FailureDecision.RAISE),  # ... but not the nodes' end awaited by shutdown()
        (S.STOPPING, S.STOPPING, FailureDecision.RESTART),  # InputMode.TENSORFLOW: the nodes' own run resumes
        (S.STOPPING, S.FEEDING, FailureDecision.RAISE),
    ],
)
def test_one_failure_policy_for_both_input_modes(resumes_in, failed_in, decision):
    policy = FailurePolicy(max_restarts=1, resumes_in=resumes_in)
    assert policy.decide(_failure(), failed_in, nodes=2).action is decision
    assert policy.restarts == (1 if decision is FailureDecision.RESTART else 0)


def test_the_policy_counts_restarts_and_raises_once_they_are_spent_or_no_node_failed():
    policy = FailurePolicy(max_restarts=2, resumes_in=S.FEEDING)
    first, second = _failure(), _failure()
    assert policy.decide(first, S.FEEDING, 2).action is FailureDecision.RESTART
    assert policy.decide(ClusterError([], "the launch job failed"), S.FEEDING, 2).action is FailureDecision.RAISE
    assert policy.decide(second, S.FEEDING, 2).action is FailureDecision.RESTART
    assert policy.decide(_failure(), S.FEEDING, 2).action is FailureDecision.RAISE
    assert policy.survived == [first, second] and policy.restarts == 2


def test_concurrent_feeding_calls_leave_the_state_consistent():
    life = Lifecycle("c3")
    life.move(S.RUNNING)
    start, seen = threading.Barrier(8), set()

    def feed() -> None:
        start.wait(10)
        for _ in range(200):
            with life.feeding():
                seen.add(life.state)

    threads = [threading.Thread(target=feed) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert seen == {S.FEEDING} and life.state is S.RUNNING


def _executor_lost(label: str = "worker:1") -> ClusterError:
    return ClusterError([NodeFailure(label, 2, "host", signal="SIGKILL", executor_lost=True)], "a node was lost")


def _elastic(max_restarts: int = 0) -> FailurePolicy:
    return FailurePolicy(max_restarts, S.FEEDING, NodeRange(2, 3), cluster_id="e1")


def test_an_elastic_cluster_goes_on_with_the_executors_spark_has_left_without_counting_a_restart(caplog):
    policy = _elastic()
    with caplog.at_level("WARNING", logger="sparkdl.driver.lifecycle"):
        decision = policy.decide(_executor_lost(), S.FEEDING, nodes=3, capacity=lambda: 2)
    assert (decision.action, decision.nodes) == (FailureDecision.RESIZE, 2)
    assert policy.restarts == 0 and policy.decisions == [decision]
    assert "worker:1 lost its Spark executor; Spark can host 2 node(s)" in caplog.text  # the decision is logged


def test_a_replacement_executor_relaunches_at_full_size_and_capacity_is_capped_at_num_executors():
    decision = _elastic().decide(_executor_lost(), S.FEEDING, nodes=3, capacity=lambda: 5)
    assert (decision.action, decision.nodes) == (FailureDecision.RESTART, 3)


def test_fewer_executors_than_min_executors_raise_naming_it(caplog):
    policy = _elastic(max_restarts=5)
    with caplog.at_level("ERROR", logger="sparkdl.driver.lifecycle"):
        decision = policy.decide(_executor_lost(), S.FEEDING, nodes=2, capacity=lambda: 1)
    assert decision.action is FailureDecision.RAISE
    assert "fewer than min_executors=2" in decision.reason and "min_executors=2" in caplog.text


def test_a_node_that_fails_by_itself_on_an_elastic_cluster_spends_max_restarts():
    policy = _elastic(max_restarts=1)
    asked = []
    capacity = lambda: asked.append(1) or 3  # noqa: E731
    assert policy.decide(_failure(), S.FEEDING, 3, capacity).action is FailureDecision.RESTART
    assert policy.decide(_failure(), S.FEEDING, 3, capacity).action is FailureDecision.RAISE
    assert asked == [] and policy.restarts == 1  # its executor is fine: no resize is considered


def test_a_fixed_cluster_treats_a_lost_executor_as_before():
    policy = FailurePolicy(1, S.FEEDING, NodeRange(3, 3))
    assert policy.decide(_executor_lost(), S.FEEDING, 3, lambda: 2).action is FailureDecision.RESTART
    assert policy.restarts == 1


def test_lost_executors_do_not_relaunch_an_elastic_cluster_forever():
    """A node whose own memory gets its container killed (YARN's memory check) loses its executor on
    every attempt: each loss relaunched the elastic cluster for free, so it relaunched forever."""
    policy = _elastic()  # the default budget
    actions = [policy.decide(_executor_lost(), S.FEEDING, nodes=3, capacity=lambda: 3).action for _ in range(50)]
    assert FailureDecision.RAISE in actions
    assert policy.restarts == 0, "lost executors never spend max_restarts"


def test_the_budget_of_lost_executor_relaunches_raises_naming_the_node_and_the_setting(caplog):
    policy = FailurePolicy(0, S.FEEDING, NodeRange(2, 3), cluster_id="e1", max_lost_executor_relaunches=2)
    for hosts in (3, 2):  # a restart (a replacement came), then a resize
        assert policy.decide(_executor_lost(), S.FEEDING, 3, lambda n=hosts: n).action is not FailureDecision.RAISE
    lost = _executor_lost("worker:2")
    with caplog.at_level("ERROR", logger="sparkdl.driver.lifecycle"):
        decision = policy.decide(lost, S.FEEDING, 2, lambda: 3)
    assert decision.action is FailureDecision.RAISE and policy.lost_executor_relaunches == 2
    assert "worker:2 lost its Spark executor" in decision.reason and "max_lost_executor_relaunches=2" in caplog.text
    raised = policy.raised(decision, lost)  # what cluster.train / shutdown() raise
    assert isinstance(raised, ClusterError) and raised.failures == lost.failures
    assert str(raised).startswith("sparkdl cluster e1: worker:2 lost its Spark executor")
    assert "max_lost_executor_relaunches=2" in str(raised).splitlines()[0]
    assert policy.raised(FailurePolicy(0, S.FEEDING).decide(_failure(), S.FEEDING, 2), lost) is lost, "else as is"
    assert policy.restarts == 0


def test_a_relaunched_fit_fed_other_epochs_relaunches_without_spending_max_restarts(caplog):
    policy = FailurePolicy(0, S.FEEDING, cluster_id="f1")
    with caplog.at_level("WARNING", logger="sparkdl.driver.lifecycle"):
        decision = policy.refeed(nodes=2, began=0, planned=2)
    assert (decision.action, decision.nodes) == (FailureDecision.RESTART, 2) and policy.restarts == 0
    assert "began again at epoch 1 (no backup restored), but its attempt is fed from epoch 3" in caplog.text


def test_growth_only_below_num_executors_and_only_when_spark_has_more():
    policy = _elastic()
    assert policy.grow(nodes=2, capacity=2) is None
    assert policy.grow(nodes=3, capacity=4) is None
    grow = policy.grow(nodes=2, capacity=4)
    assert (grow.action, grow.nodes) == (FailureDecision.RESIZE, 3) and "growing" in grow.reason
    assert FailurePolicy(0, S.FEEDING, NodeRange(3, 3)).grow(nodes=2, capacity=3) is None


def test_a_growing_cluster_may_relaunch_from_running():
    life = Lifecycle("c4")
    for state in (S.RUNNING, S.RESTARTING, S.STARTING, S.RUNNING):
        life.move(state)
    assert life.state is S.RUNNING


@pytest.mark.parametrize("low, high", [(0, 3), (4, 3), (-1, 2)])
def test_a_node_range_refuses_what_cannot_be(low, high):
    with pytest.raises(ValueError, match="min_executors must be between 1 and num_executors"):
        NodeRange(low, high)
