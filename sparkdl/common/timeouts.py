"""sparkdl's time limits: each named for what it bounds, each default defined once, and
``Deadline``, the time budget of one call.

The public arguments keep TensorFlowOnSpark's names (``feed_timeout``, ``reservation_timeout``,
``timeout``); what one ``feed_timeout`` bounds is spelt out by :class:`FeedLimits`.
"""

from __future__ import annotations

import math
import numbers
import time
from dataclasses import dataclass

#: Default ``feed_timeout`` of ``cluster.train``/``train_stream``/``inference``, of
#: ``ctx.get_data_feed`` and of ``TFEstimator``; also a stream's bound when its first message names none.
FEED_TIMEOUT_S = 600.0
#: Default ``reservation_timeout`` of ``TFCluster.run``: every node registers within it.
RESERVATION_TIMEOUT_S = 600.0
#: Default ``timeout`` of ``shutdown()`` and ``TFParallel.run`` (TensorFlowOnSpark's three days).
SHUTDOWN_TIMEOUT_S = 259200.0
#: The longest one control call to a node may take (a plan, a cache decision, the end of the feed,
#: a feeder's connection): ``min(feed_timeout, CONTROL_CALL_MAX_S)``.
CONTROL_CALL_MAX_S = 60.0


def check_feed_timeout(feed_timeout) -> float:
    """``feed_timeout`` as a float; ValueError unless it is a positive, finite number of seconds
    (the nodes refuse any other)."""
    number = isinstance(feed_timeout, numbers.Real) and not isinstance(feed_timeout, bool)
    if not number or not math.isfinite(feed_timeout) or feed_timeout <= 0:
        raise ValueError(f"feed_timeout must be a positive, finite number of seconds, got {feed_timeout!r}")
    return float(feed_timeout)


def control_timeout(stream_timeout: float) -> float:
    """How long one control call to a node may take, when its streams are bounded by ``stream_timeout``."""
    return min(stream_timeout, CONTROL_CALL_MAX_S)


@dataclass(frozen=True)
class FeedLimits:
    """What one ``feed_timeout`` bounds, each under its own name."""

    stream_s: float  #: each wait on a feeding stream, at both ends (a frame sent, received, or its results taken)
    control_s: float  #: one control call to a node (see ``CONTROL_CALL_MAX_S``)
    read_stall_s: float  #: a data node that reads nothing for this long while ``cluster.train`` feeds it is stalled

    @classmethod
    def of(cls, feed_timeout: float) -> "FeedLimits":
        """The limits one ``feed_timeout`` sets (checked: ValueError naming it)."""
        seconds = check_feed_timeout(feed_timeout)
        return cls(stream_s=seconds, control_s=control_timeout(seconds), read_stall_s=seconds)


class Deadline:
    """The time budget of one call, started when the call starts (as Horovod's ``Timeout``): each
    step waits ``remaining()``, so the steps together never exceed the budget. ``None``: no limit."""

    def __init__(self, seconds: float | None, what: str = "the call"):
        self.seconds = seconds
        self.what = what
        self._end = None if seconds is None else time.monotonic() + seconds

    def remaining(self) -> float | None:
        """Seconds left (0 once expired), or None without a limit."""
        return None if self._end is None else max(0.0, self._end - time.monotonic())

    def expired(self) -> bool:
        """Whether the budget is spent."""
        return self._end is not None and time.monotonic() >= self._end

    def check(self, activity: str = "") -> None:
        """Raise TimeoutError naming ``what`` (and the ``activity`` under way) once the budget is spent."""
        if self.expired():
            doing = f" while {activity}" if activity else ""
            raise TimeoutError(f"{self.what} ran out of its {self.seconds:g} s{doing}")
