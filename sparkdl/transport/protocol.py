"""Every message sparkdl's processes send each other, each defined once, with its parser.

Messages travel as JSON objects on an authenticated ``Channel`` (``sparkdl/transport/channel.py``): a
``"type"`` tag plus the fields of one class below. ``Message.wire()`` builds that object and
``parse(data, *expected)`` turns a received one back into its class, checking the tag, every
field's presence and JSON type (a peer's bytes are never trusted, and never unpickled).
Searching for a class name finds both ends of its message.

Control plane: the node's supervisor and the driver's coordinator (one channel per node)::

    supervisor -> coordinator   Register, then Started, Log, NodeWarning, TensorBoard, the node's
                                events (Progress, Serving, FeedReady, FeedTerminated,
                                FeedConsumed, StreamPosition, Inferred, Result: written by the TF process, relayed
                                by its supervisor) and finally Exited
    coordinator -> supervisor   ClusterSpec (or Abort) after registration; Stop, Stall

Data plane: the driver or a feeding task and a node's feed server (one channel per stream;
the first message names the stream; data frames in between are Arrow IPC bytes)::

    driver -> node      Plan -> Ack; CacheSeal -> CacheStatus; CacheUse -> Ack; EpochGate -> Ack; End -> Ack
    feeder -> node      Train, data frames, Done -> Ack(rows) | Terminated | Rejected
                        Infer, data frames, Done; node -> feeder: result frames, then Complete
    node -> feeder      Dropped: the node gave up on a stream that passed its timeout
"""

# No ``from __future__ import annotations`` here: parse() checks values against the field
# annotations, which must therefore be real types, not strings.
import types
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from ..common.errors import ProtocolError as ProtocolError  # re-exported: what parse raises
from ..common.timeouts import FEED_TIMEOUT_S
from .message import Message

#: The feed's queue when ``qname`` is not given (TensorFlowOnSpark's name).
DEFAULT_QNAME = "input"
#: The two splits of a training run: its training rows, and ``validation_data``'s.
TRAIN_SPLIT = "train"
VALIDATION_SPLIT = "validation"


# -- control plane: supervisor -> coordinator --


@dataclass(frozen=True)
class Register(Message):
    """A node's supervisor introduces its node: the first message on its channel."""

    TYPE: ClassVar[str] = "register"
    node_number: int
    host: str
    port: int  # the TF port reserved for the node
    pid: int  # the supervisor's
    anchor_pid: int  # the Spark task or executor JVM the node lives and dies with
    spark_executor: str = ""
    gpus: str | None = None  # CUDA_VISIBLE_DEVICES chosen for the node
    log_path: str = ""  # on the node's host: the driver never opens it


@dataclass(frozen=True)
class Started(Message):
    """The TF process runs (``pid``)."""

    TYPE: ClassVar[str] = "started"
    pid: int


@dataclass(frozen=True)
class TensorBoard(Message):
    """TensorBoard answers at ``url``."""

    TYPE: ClassVar[str] = "tensorboard"
    url: str


@dataclass(frozen=True)
class NodeWarning(Message):
    """Something the driver's log should show (e.g. TensorBoard did not start; from the supervisor,
    or from the TF process as a node event, e.g. a column read in a form that wastes memory)."""

    TYPE: ClassVar[str] = "warning"
    message: str


@dataclass(frozen=True)
class Log(Message):
    """Lines of the node's output for the driver's console."""

    TYPE: ClassVar[str] = "log"
    lines: list[str]


@dataclass(frozen=True)
class Exited(Message):
    """How the TF process ended: the last message of a node's channel."""

    TYPE: ClassVar[str] = "exited"
    exit_code: int | None  # None when a signal ended it
    signal: str | None
    stopped: bool  # ended as asked (or successfully)
    failed: bool
    cause: str = ""  # why the supervisor ended it, when it did
    stalled: bool = False
    log_path: str = ""
    traceback: str = ""
    log_tail: str = ""
    hint: str = ""  # what to change (keras_policy.failure_hint)
    executor_lost: bool = False  # the Spark executor (or task) hosting the node went away


# -- node events: written by the TF process, relayed by its supervisor --


@dataclass(frozen=True)
class Progress(Message):
    """A heartbeat with the node's latest metrics (step, epoch, loss, rows_read, epoch_end, fit_end, ...)."""

    TYPE: ClassVar[str] = "progress"
    metrics: dict


@dataclass(frozen=True)
class Serving(Message):
    """The node runs a long-lived server (ps-like): shutdown stops it instead of waiting."""

    TYPE: ClassVar[str] = "serving"


@dataclass(frozen=True)
class FeedReady(Message):
    """The node's feed server listens on ``port`` (InputMode.SPARK)."""

    TYPE: ClassVar[str] = "feed_ready"
    port: int


@dataclass(frozen=True)
class FeedTerminated(Message):
    """``map_fun`` called ``DataFeed.terminate()``: the node wants no more data."""

    TYPE: ClassVar[str] = "feed_terminated"


@dataclass(frozen=True)
class FeedConsumed(Message):
    """The node read training run ``session`` of ``qname`` in full."""

    TYPE: ClassVar[str] = "feed_consumed"
    qname: str
    session: int
    rows_read: int
    rows_received: int


@dataclass(frozen=True)
class StreamPosition(Message):
    """The node's model holds every micro-batch of stream ``qname`` up to ``batch_id`` (None: none
    yet): sent when ``feed.micro_batches()`` starts (after a restore) and after each batch."""

    TYPE: ClassVar[str] = "stream_position"
    qname: str
    batch_id: int | None = None


@dataclass(frozen=True)
class Inferred(Message):
    """The node answered one inference partition in full (the driver's progress counts it)."""

    TYPE: ClassVar[str] = "inferred"
    run: str
    stage: int
    partition: int | None
    rows: int


@dataclass(frozen=True)
class BadRows(Message):
    """The node skipped ``rows`` bad rows of training run ``session`` (``bad_rows="skip"``); ``example``
    names the first of them (column, partition, row, what is wrong)."""

    TYPE: ClassVar[str] = "bad_rows"
    qname: str
    session: int
    rows: int
    example: str


@dataclass(frozen=True)
class Result(Message):
    """What ``map_fun`` returned, as JSON (``node/return_value.py``): sent once, as it returns, by the
    nodes ``TFCluster.run(return_results=...)`` asks (the chief by default, or every node)."""

    TYPE: ClassVar[str] = "result"
    FREE: ClassVar[frozenset[str]] = frozenset({"value"})
    value: Any = None


#: What a TF process may report through its supervisor (``NodeContext.report``).
NODE_EVENTS = (
    Progress,
    Serving,
    FeedReady,
    FeedTerminated,
    FeedConsumed,
    StreamPosition,
    Inferred,
    BadRows,
    NodeWarning,
    Result,
)


# -- control plane: coordinator -> supervisor --


@dataclass(frozen=True)
class ClusterSpec(Message):
    """Every node registered: the cluster spec (``{job: ["host:port", ...]}``)."""

    TYPE: ClassVar[str] = "cluster"
    cluster_spec: dict


@dataclass(frozen=True)
class Abort(Message):
    """Registration refused, or the cluster was aborted before it formed."""

    TYPE: ClassVar[str] = "abort"
    reason: str


@dataclass(frozen=True)
class Stop(Message):
    """Stop the TF process: SIGTERM, then SIGKILL after ``grace_s``."""

    TYPE: ClassVar[str] = "stop"
    grace_s: float = 0.0


@dataclass(frozen=True)
class Stall(Message):
    """The node made no progress: dump its stacks into its log and end it as failed."""

    TYPE: ClassVar[str] = "stall"
    reason: str


# -- data plane: the first message of a stream to a node's feed server --


@dataclass(frozen=True)
class TrainingPlan:
    """One ``cluster.train`` call (a training run), from ``train()``'s arguments to the node's reader.

    ``train()`` builds it from its arguments; the driver's feeder adds what it works out (the run's
    number, each node's rows per epoch of each split, the node's place among the data nodes) with
    ``dataclasses.replace``; a ``Plan`` message carries it to each node, which keeps it as it
    arrived. A new ``train()`` option is one field here, and the code that uses it.
    """

    POSITIVE: ClassVar[frozenset[str]] = frozenset({"epochs", "feed_timeout"})  #: checked on the wire

    epochs: int = 1  # epochs fed by this call (after a relaunch that resumes: those not yet completed)
    qname: str = DEFAULT_QNAME
    feed_timeout: float = FEED_TIMEOUT_S  # see timeouts.FeedLimits
    cache: bool = True  # keep epoch 1 on the node's disk and, if the driver agrees, replay it
    cache_max_bytes: int | None = None
    shuffle: bool = True  # permute each node's rows every epoch
    seed: int | None = None  # of the permutations; the driver draws one when None
    deterministic: bool = False  # epoch 1 too is read from the cache, in the seeded order
    first_epoch: int = 0  # the absolute number of the first epoch fed (a relaunch resumes past 0)
    batch_id: int | None = None  # the Structured Streaming micro-batch this run is (train_stream)
    bad_rows: Literal["fail", "skip"] = "fail"  # "skip": the node skips rows no tensor can take, and counts them
    session: int = 0  # the run's number on its queue (set by the driver's feeder)
    rows_per_epoch: int = 0  # this node's training rows per epoch (set by the feeder)
    validation_rows: int = 0  # and its validation rows per epoch (0: no validation data)
    node: int = 0  # the node's index among the data nodes (set by the feeder)
    # this node's training rows from each Spark partition, per epoch (set by the feeder): where
    # each partition's rows start in the cache's numbering, known before the first row arrives
    partition_rows: tuple[int, ...] = ()

    def split_rows(self, split: str) -> int:
        """Rows per epoch of ``split``."""
        return self.rows_per_epoch if split == TRAIN_SPLIT else self.validation_rows

    def total_rows(self, split: str = TRAIN_SPLIT) -> int:
        """Rows of ``split`` over the whole call (every epoch)."""
        return self.split_rows(split) * self.epochs

    @property
    def splits(self) -> tuple[str, ...]:
        """The splits this run feeds."""
        return (TRAIN_SPLIT, VALIDATION_SPLIT) if self.validation_rows else (TRAIN_SPLIT,)


@dataclass(frozen=True)
class Plan(Message):
    """One training run: what the node will be fed (driver -> node)."""

    TYPE: ClassVar[str] = "plan"
    plan: TrainingPlan
    timeout: float | None = None


@dataclass(frozen=True)
class Train(Message):
    """A feeding task's rows of one partition for one epoch and split; data frames follow."""

    TYPE: ClassVar[str] = "train"
    session: int  # the training run
    partition: int = 0
    epoch: int = 0
    split: str = TRAIN_SPLIT
    qname: str = DEFAULT_QNAME
    timeout: float | None = None
    attempt: int = 0  # Spark's attempt number of the feeding task (retries and speculative copies)


@dataclass(frozen=True)
class Infer(Message):
    """A feeding task's rows of one inference partition; data frames follow."""

    TYPE: ClassVar[str] = "infer"
    partition: int | None = None
    qname: str = DEFAULT_QNAME
    run: str = ""
    stage: int = 0
    timeout: float | None = None


@dataclass(frozen=True)
class CacheSeal(Message):
    """Epoch 1 of ``session`` is fed: may the node serve the later epochs from its cache?"""

    TYPE: ClassVar[str] = "cache_seal"
    session: int
    qname: str = DEFAULT_QNAME
    timeout: float | None = None


@dataclass(frozen=True)
class CacheUse(Message):
    """The driver's decision for every node: epochs 2..N come from the caches (``use``) or Spark."""

    TYPE: ClassVar[str] = "cache_use"
    session: int
    use: bool
    qname: str = DEFAULT_QNAME
    timeout: float | None = None


@dataclass(frozen=True)
class EpochGate(Message):
    """The driver's word on an elastic cluster's epoch boundary, which its chief waits for: go on
    with the next epoch, or not (the driver relaunches the cluster on another node count). With
    ``fit_begin``, the word a relaunched chief waits for as its first fit begins ``epoch`` (go on, or
    not: the driver relaunches the cluster fed other epochs); the two are never taken for each other."""

    TYPE: ClassVar[str] = "epoch_gate"
    epoch: int
    go_on: bool = True
    timeout: float | None = None
    fit_begin: bool = False


@dataclass(frozen=True)
class End(Message):
    """No more data will come (shutdown)."""

    TYPE: ClassVar[str] = "end"
    qname: str = DEFAULT_QNAME
    timeout: float | None = None


# -- data plane: within a stream --


@dataclass(frozen=True)
class Done(Message):
    """The sender sent all ``rows`` of its partition."""

    TYPE: ClassVar[str] = "done"
    rows: int


@dataclass(frozen=True)
class Ack(Message):
    """Received (with the row count for a fed partition)."""

    TYPE: ClassVar[str] = "ack"
    rows: int | None = None


@dataclass(frozen=True)
class CacheStatus(Message):
    """The node's answer to CacheSeal: None, or why its share does not fit its cache."""

    TYPE: ClassVar[str] = "cache_status"
    problem: str | None


@dataclass(frozen=True)
class Terminated(Message):
    """The node's map_fun terminated its feed: the rows were not taken."""

    TYPE: ClassVar[str] = "terminated"


@dataclass(frozen=True)
class Rejected(Message):
    """The rows cannot be fed (e.g. validation columns that differ); ``message`` says why."""

    TYPE: ClassVar[str] = "error"
    message: str


@dataclass(frozen=True)
class Dropped(Message):
    """The node dropped the stream (it passed its timeout); ``message`` says why."""

    TYPE: ClassVar[str] = "dropped"
    message: str


@dataclass(frozen=True)
class Complete(Message):
    """All ``rows`` of an inference partition's results were sent."""

    TYPE: ClassVar[str] = "complete"
    rows: int


#: Every message type, by its wire tag.
MESSAGES: types.MappingProxyType = types.MappingProxyType(
    {
        cls.TYPE: cls
        for cls in (
            Register,
            Started,
            TensorBoard,
            NodeWarning,
            Log,
            Exited,
            *NODE_EVENTS,
            ClusterSpec,
            Abort,
            Stop,
            Stall,
            Plan,
            Train,
            Infer,
            CacheSeal,
            CacheUse,
            EpochGate,
            End,
            Done,
            Ack,
            CacheStatus,
            Terminated,
            Rejected,
            Dropped,
            Complete,
        )
    }
)


def parse(data: Any, *expected: type[Message]) -> Message:
    """The message ``data`` (a received JSON object) holds, one of ``expected`` (default: any).

    Raises ProtocolError naming the problem: not an object, an unknown or unexpected type, a
    missing, unknown or mistyped field.
    """
    if not isinstance(data, dict):
        raise ProtocolError(f"expected a message, got {type(data).__name__}")
    cls = MESSAGES.get(data.get("type"))
    if cls is None:
        raise ProtocolError(f"unknown message type {data.get('type')!r}")
    if expected and cls not in expected:
        names = ", ".join(repr(e.TYPE) for e in expected)
        raise ProtocolError(f"unexpected {cls.TYPE!r} message (expected {names})")
    return cls.from_wire(data)
