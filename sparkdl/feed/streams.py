"""One feeder's stream to a node's feed server: how long the node waits on it, and the
inference stream through which ``map_fun``'s results go back to their Spark task.

A stream's first message names its ``timeout`` (the stream limit set by the ``feed_timeout`` of
``cluster.train`` / ``cluster.inference``: ``timeouts.FeedLimits.stream_s``; ``FEED_TIMEOUT_S``
when it names none). The node waits that long at most for each frame the feeder sends, and
for the feeder to take each frame the node sends; a stream that runs past it is dropped, its
feeder told why (best effort) and its channel closed, so that Spark task fails while
``map_fun`` and the node's other streams go on.
"""

from __future__ import annotations

import logging
import math
import threading
from dataclasses import dataclass, field
from typing import Any

from ..common.timeouts import FEED_TIMEOUT_S, NOTICE_TIMEOUT_S
from ..transport import protocol
from ..transport.channel import Channel, ChannelError, ChannelTimeout
from .wire import encode_batch, results_to_batch

logger = logging.getLogger(__name__)


def stream_timeout(value: float | None) -> float:
    """The ``timeout`` (seconds) a stream's first message names (None: the default): how long
    the node waits on that peer for one frame, or to take one frame it sends."""
    value = FEED_TIMEOUT_S if value is None else value
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
        raise ChannelError(f"a stream's timeout must be a positive number of seconds, got {value!r}")
    return float(value)


def send_notice(channel: Channel, message: str) -> None:
    """Tell a peer its stream was dropped, and why (best effort, briefly: it may not be listening)."""
    channel.set_send_timeout(NOTICE_TIMEOUT_S)
    try:
        channel.send(protocol.Dropped(message).wire())
    except OSError:  # ChannelError included
        pass


@dataclass
class InferenceStream:
    """One inference partition being served: results go back on its channel, in order.

    A Spark action that needs only part of a partition (``first()``, ``take(n)``) closes the
    feeding task's channel early: the stream is then ``abandoned`` and the rest of its results
    are dropped, so ``map_fun`` carries on with the next partition. So is a stream whose task
    stops reading its results for the stream's timeout (the send gives up): its channel is
    closed, so that task fails instead of waiting, and ``batch_results`` returns.
    """

    channel: Channel
    expected: int | None = None
    delivered: int = 0
    abandoned: bool = False
    finished: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def send_results(self, results: Any) -> None:
        """Return results for the next ``len(results)`` rows of this stream."""
        payload = encode_batch(results_to_batch(results))  # a result that cannot be sent raises here
        if not self.abandoned:
            try:
                self.channel.send_bytes(payload)  # bounded by the stream's timeout
            except OSError as exc:  # ChannelError included
                self.abandon(exc)
        self.delivered += len(results)
        self.maybe_complete()

    def abandon(self, reason: Exception, notice: str | None = None) -> None:
        """Give up on this stream: its task went away (its action needed no more rows), stopped
        reading its results, or went silent. The rest of its results are dropped, the task is told
        ``notice`` (best effort) and its channel closed, so it fails rather than waits."""
        if self.abandoned:
            return
        self.abandoned = True
        if isinstance(reason, ChannelTimeout):
            logger.warning(
                "sparkdl: dropped an inference stream: %s; the rest of its partition's results are "
                "dropped and its Spark task fails",
                notice or reason,
            )
        else:
            logger.info(
                "sparkdl: a Spark task stopped reading its inference results (%s); the rest of its "
                "partition's results are dropped",
                reason,
            )
        if notice:
            send_notice(self.channel, notice)
        self.channel.close()

    def maybe_complete(self) -> None:
        """Tell the feeder the partition is fully answered, once it is."""
        with self.lock:  # the reader thread and map_fun's thread may both get here
            if self.expected is not None and self.delivered >= self.expected and not self.finished.is_set():
                if not self.abandoned:
                    try:
                        self.channel.send(protocol.Complete(self.delivered).wire())
                    except OSError as exc:
                        self.abandon(exc)
                self.finished.set()
