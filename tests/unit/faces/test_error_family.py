"""One exception family: every error sparkdl raises for users to catch is a SparkDLError, and keeps
the builtin base callers may already catch (ValueError for bad data, TypeError for bad results,
ConnectionError for a broken channel)."""

from __future__ import annotations

import pytest

import sparkdl
from sparkdl import SparkDLError
from sparkdl.feed.columns import FeedDataError
from sparkdl.feed.feeder import FeedError, NodeGone
from sparkdl.feed.results import ResultsError
from sparkdl.gpus import GPUSelectionError
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
}


@pytest.mark.parametrize("error,builtin", ERRORS.items(), ids=[e.__name__ for e in ERRORS])
def test_every_user_facing_error_is_a_sparkdl_error_and_keeps_its_builtin_base(error, builtin):
    assert issubclass(error, SparkDLError)
    assert issubclass(error, builtin)
    with pytest.raises(SparkDLError, match="the message"):
        raise error("the message") if error is not sparkdl.ClusterError else error([], "the message")


def test_the_feed_errors_are_importable_from_the_package():
    assert (sparkdl.FeedError, sparkdl.FeedDataError, sparkdl.ResultsError) == (FeedError, FeedDataError, ResultsError)
