"""Every exception sparkdl raises, in one place, and the structured facts about failed nodes.

Every error for users to catch derives from :class:`SparkDLError`; those that are also a
``ValueError``, ``TypeError`` or ``ConnectionError`` keep that base too:

```text
SparkDLError
├── ClusterError ── NodeStalled        a node failed (each in .failures: NodeFailure)
├── ReservationTimeout, ShutdownTimeout, TrainingStopped, PreflightError (ValueError)
├── ClusterStateError, InputModeError (ValueError)   a call the cluster cannot take now, or in its mode
├── ChannelError (ConnectionError) ── AuthenticationError, ChannelTimeout, ProtocolError
├── FeedError ── NodeGone, StreamEnded, FeedTimeout (TimeoutError); FeedDataError (ValueError); ResultsError (TypeError)
├── InferenceInputError (ValueError), ModelLoadError, ModelVersionError (ValueError)
├── StorageError (OSError)      a path sparkdl cannot read or write (store, bucket, credentials)
└── GPUSelectionError
```

The modules that raise them import them from here (and re-export them where users have imported
them from: ``sparkdl.feed.feeder.FeedError``, ``sparkdl.common.gpus.GPUSelectionError``, ...). Two
internal signals that never reach users close the file.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class NodeFailure:
    """How one TF node died, as reported by the process that watched it."""

    label: str  # e.g. "worker:1"
    node_number: int  # sparkdl's node number (TFoS's executor_id)
    host: str
    spark_executor: str = ""  # Spark's executor address, when known
    exit_code: int | None = None
    signal: str | None = None
    traceback: str = ""
    log_tail: str = ""
    log_path: str = ""
    hint: str = ""
    cause: str = ""  # why sparkdl ended the node, e.g. "made no progress for 30 s"
    stalled: bool = False  # ended by the stall/feed timeout
    executor_lost: bool = False  # its Spark executor (or host) went away: the node did not fail by itself

    def headline(self) -> str:
        """Which node, where, and how it ended, in one line."""
        how = (
            self.cause
            if self.cause
            else f"killed by {self.signal}"
            if self.signal
            else f"exited with code {self.exit_code}"
            if self.exit_code is not None
            else "failed"
        )
        where = f"node {self.label} (node #{self.node_number}) on host {self.host}"
        if self.spark_executor:
            where += f", Spark executor {self.spark_executor}"
        return f"{where} {how}"

    def summary(self) -> str:
        """One line: the headline, the exception that ended the node (if any), and its log."""
        error = self.traceback.rstrip().rsplit("\n", 1)[-1].strip() if self.traceback else ""
        log = f" (node log: {self.log_path})" if self.log_path else ""
        return self.headline() + (f": {error}" if error else "") + log

    def describe(self) -> str:
        """A multi-line, human-readable account of the failure: the node's traceback once, else
        (a node that died without one) the last lines of its log; and where its log is."""
        lines = [self.headline()]
        if self.traceback:
            lines += ["--- remote traceback ---", self.traceback.rstrip()]
        elif self.log_tail:
            lines += [f"--- last lines of {self.log_path or 'the node log'} ---", self.log_tail.rstrip()]
        if self.log_path:
            lines.append(f"node log: {self.log_path}")
        if self.hint:
            lines.append(f"hint: {self.hint}")
        return "\n".join(lines)


class SparkDLError(RuntimeError):
    """Base class of sparkdl's runtime errors."""


class ClusterError(SparkDLError):
    """One or more TF nodes failed; ``failures`` lists each, first failure first."""

    def __init__(self, failures: list[NodeFailure], summary: str = ""):
        self.failures = failures
        head = summary or f"{len(failures)} TensorFlow node(s) failed"
        super().__init__(head + "\n" + "\n\n".join(f.describe() for f in failures))


class ReservationTimeout(SparkDLError):
    """Not every node registered within ``reservation_timeout``."""


class PreflightError(SparkDLError, ValueError):
    """The Spark set-up cannot host the requested cluster (or scoring job: no SparkSession); the
    message says what to change."""


class NodeStalled(ClusterError):
    """A node made no progress for its stall or feed timeout; it was stopped (see ``failures``)."""


def cluster_error(failures: list[NodeFailure], summary: str) -> ClusterError:
    """The exception for these failures: ``NodeStalled`` when the first one was a stall."""
    return (NodeStalled if failures and failures[0].stalled else ClusterError)(list(failures), summary)


class ShutdownTimeout(SparkDLError):
    """Nodes were still running when ``shutdown(timeout=...)`` ran out; they were stopped."""


class TrainingStopped(SparkDLError):
    """``cluster.train`` ended because :meth:`TFCluster.watch_epochs`' watcher stopped the nodes at an
    epoch boundary (``epoch``: the last epoch the chief completed, 0-based); the cluster is stopped."""

    def __init__(self, epoch: int, message: str):
        super().__init__(message)
        self.epoch = epoch


class ClusterStateError(SparkDLError):
    """The cluster cannot take the call in the state it is in (fed after ``shutdown()``, or while
    it shuts down); the message names the state and what to do."""


class InputModeError(SparkDLError, ValueError):
    """The call needs the other input mode (``cluster.train`` on an InputMode.TENSORFLOW cluster,
    ``ctx.get_data_feed()`` on one of its nodes)."""


# -- the wire (sparkdl/transport/) --


class ChannelError(SparkDLError, ConnectionError):
    """The peer failed authentication, broke the protocol, or went away."""


class AuthenticationError(ChannelError):
    """The peer did not prove the cluster's secret (for the endpoint named)."""


class ChannelTimeout(ChannelError):
    """A receive or a send did not complete in time (the channel stays usable after a receive
    timeout; a send timeout closes it, as a partial frame cannot be taken back)."""


class ProtocolError(ChannelError):
    """A peer sent a message that is not one of sparkdl's, or not the one expected now."""


# -- the data plane (sparkdl/feed/, driver/feeding.py, driver/streaming.py) --


class FeedError(SparkDLError):
    """Feeding a partition failed: the message names the node and the partition."""


class NodeGone(FeedError):
    """The node's feed server is gone (it finished, terminated its feed, or died)."""


class StreamEnded(FeedError):
    """Every data node ended its feed (``map_fun`` returned, or called ``feed.terminate()``): the
    query stops without committing the micro-batch at hand, which a later run trains. The handle's
    waits end quietly on it."""


class FeedTimeout(FeedError, TimeoutError):
    """A node's feed waited longer than its ``feed_timeout`` (``ctx.get_data_feed(feed_timeout=...)``)
    inside ``map_fun``: for the driver's plan, for rows, or for the driver's word on its cache. The
    message names what it waited for; still a ``TimeoutError``, which code catching that expects."""


class FeedDataError(SparkDLError, ValueError):
    """The data cannot be fed: the message names the column, its type and what to do."""


class ResultsError(SparkDLError, TypeError):
    """``batch_results`` was given values that cannot be sent back; the message says which."""


# -- inference (sparkdl/inference/, sparkdl/model_versions.py) --


class InferenceInputError(SparkDLError, ValueError):
    """A column cannot be turned into the model input it is mapped to; the message says why."""


class ModelLoadError(SparkDLError):
    """The model cannot be loaded or does not have the requested signature."""


class ModelVersionError(SparkDLError, ValueError):
    """A versioned model directory cannot be used as asked (no version yet, a version holding
    no model, a version published twice); the message names the path."""


# -- storage (sparkdl/storage/) --


class StorageError(SparkDLError, OSError):
    """A path sparkdl cannot read or write: an unknown scheme, a store client that is missing, an
    unreachable endpoint, a missing bucket, refused credentials. The message names the path, the
    store and the setting to change; it never holds a credential."""


# -- GPUs (sparkdl/common/gpus.py) --


class GPUSelectionError(SparkDLError):
    """The requested GPUs cannot be provided; the message says what and why."""


# -- internal signals: caught where they are raised, never seen by users --


class NoSlot(ConnectionError):
    """The server turned a connection away before its handshake completed, for want of a slot."""


class DeliveryConflict(ValueError):
    """An attempt's rows do not match what an earlier attempt delivered (the data changed)."""
