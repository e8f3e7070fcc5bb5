"""A cluster's life as named states (``driver/lifecycle.py``), the one failure policy both input
modes use, the time limits one ``feed_timeout`` sets (``timeouts.py``), and how a failed Spark
job's cause is read (``driver/spark_errors.py``). Pure objects: no Spark, no TensorFlow."""

from __future__ import annotations

import threading

import pytest

from sparkdl.common.errors import ClusterError, ClusterStateError, FeedDataError, FeedError, NodeFailure
from sparkdl.common.timeouts import CONTROL_CALL_MAX_S, Deadline, FeedLimits
from sparkdl.driver.lifecycle import (
    TRANSITIONS,
    ClusterState,
    FailureDecision,
    FailurePolicy,
    Lifecycle,
)
from sparkdl.driver.spark_errors import TaskFailure, _exception_line, task_failure

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
    assert policy.decide(_failure(), failed_in) is decision
    assert policy.restarts == (1 if decision is FailureDecision.RESTART else 0)


def test_the_policy_counts_restarts_and_raises_once_they_are_spent_or_no_node_failed():
    policy = FailurePolicy(max_restarts=2, resumes_in=S.FEEDING)
    first, second = _failure(), _failure()
    assert policy.decide(first, S.FEEDING) is FailureDecision.RESTART
    assert policy.decide(ClusterError([], "the launch job failed"), S.FEEDING) is FailureDecision.RAISE
    assert policy.decide(second, S.FEEDING) is FailureDecision.RESTART
    assert policy.decide(_failure(), S.FEEDING) is FailureDecision.RAISE
    assert policy.survived == [first, second] and policy.restarts == 2


def test_one_feed_timeout_sets_each_limit_under_its_own_name():
    assert FeedLimits.of(600) == FeedLimits(stream_s=600.0, control_s=CONTROL_CALL_MAX_S, read_stall_s=600.0)
    assert FeedLimits.of(5).control_s == 5.0
    with pytest.raises(ValueError, match="^feed_timeout must be a positive, finite number"):
        FeedLimits.of(float("inf"))


def test_a_deadline_is_one_budget_for_every_step_of_a_call():
    unbounded = Deadline(None)
    assert unbounded.remaining() is None and not unbounded.expired()
    running = Deadline(60, "a call")
    assert 0 < running.remaining() <= 60 and not running.expired()
    running.check("connecting")
    spent = Deadline(0, "the 'plan' request to worker:1")
    assert spent.expired() and spent.remaining() == 0
    with pytest.raises(TimeoutError, match="'plan' request to worker:1 ran out of its 0 s while waiting"):
        spent.check("waiting for the answer")


TRACEBACK = """Traceback (most recent call last):
  File "/x/pyspark/worker.py", line 1, in main
    process()
  File "/x/sparkdl/feed/feeder.py", line 9, in feed_training_partition
    raise FeedDataError(...)
sparkdl.common.errors.FeedDataError: partition 3 had 5 rows when sparkdl counted them and 4 now
cache() it first

\tat org.apache.spark.api.python.BasePythonRunner.handlePythonException(PythonRunner.scala:1)
"""


def test_the_python_exception_is_read_from_the_end_of_its_traceback():
    kind, message = _exception_line(TRACEBACK)
    assert kind == "sparkdl.common.errors.FeedDataError"
    assert message == "partition 3 had 5 rows when sparkdl counted them and 4 now\ncache() it first"
    assert _exception_line("no traceback at all") == (None, "")


def test_a_task_failure_becomes_the_feed_error_of_its_kind():
    data = TaskFailure("x.PythonException", None, "sparkdl.common.errors.FeedDataError", "column 'a' differs")
    error = data.as_feed_error("sparkdl: feed epoch 1/2")
    assert type(error) is FeedDataError and str(error) == (
        "sparkdl: feed epoch 1/2 failed: FeedDataError: column 'a' differs"
    )
    assert data.is_data_error  # raised at once: no node report is awaited for it
    other = TaskFailure(
        "x", None, "sparkdl.common.errors.FeedError", "node worker:0 dropped partition 2"
    ).as_feed_error("d")
    assert type(other) is FeedError and str(other) == "d failed: FeedError: node worker:0 dropped partition 2"
    assert not TaskFailure("x", None, "sparkdl.common.errors.FeedError", "dropped").is_data_error
    plain = task_failure(RuntimeError("Job aborted\nmore"))  # no Python task's traceback in it
    assert plain.python_type is None and plain.message == "Job aborted" and plain.condition is None


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


class _CapturedPythonException(Exception):
    """What PySpark 4 raises for a failed Python task, reduced to the structure ``task_failure`` reads
    (a stand-in: the real one needs a JVM; ``test_bad_input.py`` meets the real one on a cluster)."""

    def getCondition(self):  # noqa: N802 - PySpark's name
        return "PYTHON_EXCEPTION"

    def getMessageParameters(self):  # noqa: N802 - PySpark's name
        return {"msg": "An exception was thrown from the Python worker", "traceback": TRACEBACK}


def test_a_python_task_s_failure_is_read_from_spark_s_condition_and_message_parameters():
    failure = task_failure(_CapturedPythonException("An exception was thrown from the Python worker"))
    assert failure.condition == "PYTHON_EXCEPTION" and failure.python_class == "FeedDataError"
    assert failure.message.startswith("partition 3 had 5 rows")
    assert type(failure.as_feed_error("feed")) is FeedDataError


class _JavaException:
    """A JVM exception as py4j shows it, reduced to what ``task_failure`` reads (a stand-in: the real
    chain needs a JVM; ``test_exactly_once.py`` meets it when an executor holding a local checkpoint is lost)."""

    def __init__(self, message, cause=None, condition=None):
        self._message, self._cause, self._condition = message, cause, condition

    def getMessage(self):  # noqa: N802 - Java's name
        return self._message

    def getCause(self):  # noqa: N802 - Java's name
        return self._cause

    def getCondition(self):  # noqa: N802 - Spark's name
        return self._condition


class _Py4JJavaError(Exception):
    def __init__(self, java_exception):
        super().__init__("An error occurred while calling o614.collectToPython.\n: ...")
        self.java_exception = java_exception


def test_a_jvm_failure_is_read_from_its_causes_and_a_lost_local_checkpoint_is_named():
    lost = _JavaException(
        "[CHECKPOINT_RDD_BLOCK_ID_NOT_FOUND] Checkpoint block rdd_9_1 not found! Either the executor...",
        condition="CHECKPOINT_RDD_BLOCK_ID_NOT_FOUND",
    )
    failure = task_failure(_Py4JJavaError(_JavaException("Job aborted due to stage failure: ...\nstack", lost)))
    assert failure.jvm_conditions == ("CHECKPOINT_RDD_BLOCK_ID_NOT_FOUND",) and failure.lost_checkpoint
    assert failure.message.startswith("[CHECKPOINT_RDD_BLOCK_ID_NOT_FOUND] Checkpoint block rdd_9_1 not found")
    error = failure.as_feed_error("sparkdl: feed epoch 2/3")
    assert type(error) is FeedError and "an executor that held blocks of a local checkpoint is gone" in str(error)
    other = task_failure(_Py4JJavaError(_JavaException("Job aborted due to stage failure: disk full\nstack")))
    assert other.message == "Job aborted due to stage failure: disk full" and not other.lost_checkpoint
