"""sparkdl.driver.spark_errors: a Spark task failure read back as the sparkdl error of its kind."""

from __future__ import annotations

import pytest

from sparkdl.common.errors import FeedDataError, FeedError
from sparkdl.driver.spark_errors import TaskFailure, _exception_line, task_failure

pytestmark = pytest.mark.timeout(60)


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
