"""sparkdl.common.timeouts: one feed timeout sets each limit; a Deadline is one budget per call."""

from __future__ import annotations

import pytest

from sparkdl.common.timeouts import CONTROL_CALL_MAX_S, Deadline, FeedLimits

pytestmark = pytest.mark.timeout(60)


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
