"""One exception family: every error sparkdl raises for users to catch is a SparkDLError, and keeps
the builtin base callers may already catch (ValueError for bad data, TypeError for bad results,
ConnectionError for a broken channel)."""

from __future__ import annotations

import pytest

import sparkdl
from sparkdl import NodeFailure, SparkDLError
from sparkdl.common.gpus import GPUSelectionError
from sparkdl.feed.columns import FeedDataError
from sparkdl.feed.feeder import FeedError, NodeGone
from sparkdl.feed.results import ResultsError
from sparkdl.inference.columns import InferenceInputError
from sparkdl.inference.worker import ModelLoadError
from sparkdl.transport.channel import AuthenticationError, ChannelError

ERRORS = {
    FeedError: RuntimeError,
    NodeGone: RuntimeError,
    FeedDataError: ValueError,
    ResultsError: TypeError,
    ModelLoadError: RuntimeError,
    InferenceInputError: ValueError,
    GPUSelectionError: RuntimeError,
    ChannelError: ConnectionError,
    AuthenticationError: ConnectionError,
    sparkdl.ClusterError: RuntimeError,
    sparkdl.PreflightError: RuntimeError,
    sparkdl.ReservationTimeout: RuntimeError,
    sparkdl.ShutdownTimeout: RuntimeError,
    sparkdl.ClusterStateError: RuntimeError,
    sparkdl.InputModeError: ValueError,
}


@pytest.mark.parametrize("error,builtin", ERRORS.items(), ids=[e.__name__ for e in ERRORS])
def test_every_user_facing_error_is_a_sparkdl_error_and_keeps_its_builtin_base(error, builtin):
    assert issubclass(error, SparkDLError)
    assert issubclass(error, builtin)
    with pytest.raises(SparkDLError, match="the message"):
        raise error("the message") if error is not sparkdl.ClusterError else error([], "the message")


def test_the_feed_errors_are_importable_from_the_package():
    assert (sparkdl.FeedError, sparkdl.FeedDataError, sparkdl.ResultsError) == (FeedError, FeedDataError, ResultsError)


def test_a_failed_nodes_account_gives_its_traceback_once_and_its_log():
    trace = 'Traceback (most recent call last):\n  File "job.py", line 3, in map_fun\nValueError: boom\n'
    tail = "sparkdl: starting map_fun\n" + trace  # the node's log ends with the same traceback
    failure = NodeFailure("worker:0", 1, "h", exit_code=1, traceback=trace, log_tail=tail, log_path="/n/node.log")
    text = sparkdl.ClusterError([failure], "sparkdl cluster c failed").args[0]
    assert text.count("ValueError: boom") == 1 and text.rstrip().endswith("node log: /n/node.log"), text
    summary = "node worker:0 (node #1) on host h exited with code 1: ValueError: boom (node log: /n/node.log)"
    assert failure.summary() == summary
    killed = NodeFailure("worker:0", 1, "h", signal="SIGKILL", log_tail="last words", log_path="/n/node.log")
    assert "--- last lines of /n/node.log ---\nlast words" in killed.describe(), "no traceback: the log's tail tells"
