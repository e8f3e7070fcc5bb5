"""sparkdl's time limits: each named for what it bounds, each default defined once, and
``Deadline``, the time budget of one call.

Every module-level duration constant (in seconds) is here, grouped by the room that waits on it
(``tests/unit/project/test_time_limits.py`` refuses one anywhere else); the modules import it by
name (so a test may still patch the module's own binding). Sizes and counts stay beside the code
that uses them, and so do a few short literal waits inside single calls (a join, a poll).

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

# -- driver/: the cluster as the driver runs it --

#: ``TFCluster.shutdown``: each wait for the nodes (and the launch thread) to end once stopped.
STOP_WAIT_S = 60.0
#: ``ClusterAttempt.abort``: how long an aborted attempt waits for its registered nodes and launch threads.
ABORT_WAIT_S = 15.0
#: ``sparkdl.storage``: seconds to connect to a store's endpoint before a request fails (the cloud
#: SDKs' own default is 1 s; an emulator or a busy proxy needs more).
STORE_CONNECT_TIMEOUT_S = 5.0
#: How often a node copies what its TensorBoard log dir gained to a store ``log_dir`` (and once at its end).
LOG_MIRROR_INTERVAL_S = 10.0
#: ``hadoop classpath --glob``, run once per process that opens HDFS without Hadoop's jars on CLASSPATH.
HADOOP_CLASSPATH_TIMEOUT_S = 60.0
#: How long a node's end waits for a copy of its logs still under way before it copies the rest.
LOG_MIRROR_STOP_S = 60.0
#: How often the coordinator looks for stalled nodes.
STALL_CHECK_S = 0.5
#: How long a stalled node's supervisor has to report before the driver gives up on it.
STALL_REPORT_S = 5.0
#: How long a failed Spark job (launch or feed) waits for the node report that explains it.
CAUSE_WAIT_S = 10.0
#: ``TFCluster.run``: the one-task job that checks the executors' Python imports sparkdl
#: (``driver/executor_python.py``); past it the launch goes on unchecked.
EXECUTOR_PYTHON_CHECK_S = 30.0
#: Default ``elastic_wait`` of ``TFCluster.run``: how long an elastic cluster (``min_executors``)
#: waits for Spark to replace a lost executor before it goes on with fewer nodes.
ELASTIC_WAIT_S = 30.0
#: How long an elastic cluster's chief waits at an epoch boundary for the driver's word (grow or go on).
ELASTIC_GATE_WAIT_S = 60.0
#: How long a relaunched chief waits, as its first ``model.fit`` begins, for the driver's word that
#: the attempt is fed the epochs this fit runs (``ctx.progress_callback()``, ``driver/call_epochs.py``).
RELAUNCH_GATE_WAIT_S = 60.0
#: How long a tuned fit's chief waits at an epoch boundary for the driver's word (prune or go on:
#: ``TFCluster.watch_epochs``); past it the fit goes on.
EPOCH_GATE_WAIT_S = 60.0
#: Default ``heartbeat_interval`` of ``sparkdl.keras.tuning.run_study``: seconds between a running trial's
#: heartbeats in Optuna's storage; a trial silent for twice this (its driver died) is retried.
TRIAL_HEARTBEAT_S = 30
#: How long ``train()`` waits for the chief's report of its last epoch once every row was read.
LAST_EPOCH_WAIT_S = 30.0
#: How often ``shutdown(ssc)`` asks Spark whether the StreamingContext stopped (TFoS: each second);
#: the nodes' and the stream's own events end the wait at once.
DSTREAM_POLL_S = 0.5
#: How long ``cluster.start_tensorboard()`` waits for the driver's TensorBoard to answer HTTP.
DRIVER_TENSORBOARD_START_S = 90.0
#: How often the progress display prints a plain line (not a terminal: logs, notebooks' files).
PLAIN_INTERVAL_S = 10.0
#: How often the progress bar redraws on a terminal.
BAR_INTERVAL_S = 0.5

# -- node/: a TF node's processes --

#: How long the supervisor waits for TensorBoard to listen.
TENSORBOARD_START_TIMEOUT_S = 90.0
#: The least time the supervisor gives its TF process to end after asking it to stop.
STOP_GRACE_MIN_S = 3.0
#: How long a stalled node's safe Python-level stack dump (SIGUSR2) may take.
PYTHON_DUMP_WAIT_S = 1.0
#: Then faulthandler's dump from C (SIGUSR1), if the first got no answer.
C_DUMP_WAIT_S = 1.0
#: A fork server with no node for this long leaves (PySpark's idle workers: 60 s).
IDLE_EXIT_S = 120.0
#: For a new fork server to import TensorFlow and listen.
START_TIMEOUT_S = 120.0
#: For a fork server to answer a request with the node's pid.
REPLY_TIMEOUT_S = 30.0
#: For a fork server to take a connection (its backlog may be full).
CONNECT_TIMEOUT_S = 10.0
#: How often a supervisor waiting for another's fork server start looks again.
LOCK_POLL_S = 0.1
#: For a connection to the fork server to send its request, else it is closed.
REQUEST_TIMEOUT_S = 10.0

# -- feed/: the data plane --

#: A connection to a feed server must say what it is within this long.
FIRST_MESSAGE_TIMEOUT_S = 60.0
#: How long the node tries to tell a dropped feeder why.
NOTICE_TIMEOUT_S = 1.0
#: How often a node waiting for data tells the driver it is alive.
WAIT_HEARTBEAT_S = 1.0

# -- transport/: the wire --

#: A server's deadline for a whole handshake: short, to free slots that peers hold.
HANDSHAKE_TIMEOUT_S = 3.0
#: A channel's send timeout until ``set_send_timeout`` (no send waits forever).
DEFAULT_SEND_TIMEOUT_S = 120.0
#: The pause after ``accept()`` fails for want of descriptors or memory.
ACCEPT_RETRY_S = 0.1
#: How long a channel server's ``close()`` waits, in all, for the threads serving connections to end.
CLOSE_JOIN_S = 2.0
#: How long a server tries to tell an evicted connection so.
BUSY_SEND_S = 1.0
#: A client's first pause before retrying a connection the server had no slot for, ...
RETRY_FIRST_S = 0.05
#: ... doubling up to this.
RETRY_MAX_S = 0.5
#: At most one log line per this many seconds about refused connections.
REJECTION_LOG_S = 10.0
#: TCP keepalive: the first probe after this long without traffic, ...
KEEPALIVE_IDLE_S = 30
#: ... then one probe every this many seconds (``tcp_options.KEEPALIVE_PROBES`` of them).
KEEPALIVE_INTERVAL_S = 10

# -- common/ and the command line --

#: ``gpus.free_gpus``: seconds before the first retry; the n-th retry waits n times as long.
RETRY_WAIT_S = 30.0
#: ``python -m sparkdl``: each command it runs to report a component (java, nvidia-smi, ...).
COMMAND_TIMEOUT_S = 20.0


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


#: How long the driver waits for Spark's status store to list where a placed launch's tasks ran,
#: when the tasks could not tell (``spark_access.task_executors``).
PLACEMENT_STATUS_WAIT_S = 10.0

#: How long ``stop_tensorboard()`` waits for the driver's TensorBoard to end before killing it.
TENSORBOARD_STOP_WAIT_S = 10.0

#: How often ``ClusterAttempt.wait_ready`` looks for a failed launch while the launch waits for
#: executors other clusters hold (``NodeGroups.reserve``, bounded by ``reservation_timeout``).
TURN_POLL_S = 0.5

#: How long past ``reservation_timeout`` ``wait_ready`` waits for that turn at most: the reserve's
#: own timeout ends it first, as a launch error.
TURN_MARGIN_S = 30.0
