"""Every message sparkdl's processes send each other, each defined once, with its parser.

Messages travel as JSON objects on an authenticated ``Channel`` (``sparkdl/channel.py``): a
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

    driver -> node      Plan -> Ack; CacheSeal -> CacheStatus; CacheUse -> Ack; End -> Ack
    feeder -> node      Train, data frames, Done -> Ack(rows) | Terminated | Rejected
                        Infer, data frames, Done; node -> feeder: result frames, then Complete
    node -> feeder      Dropped: the node gave up on a stream that passed its timeout
"""

# No ``from __future__ import annotations`` here: parse() checks values against the field
# annotations, which must therefore be real types, not strings.
import math
import types
import typing
from dataclasses import MISSING, dataclass, fields
from typing import Any, ClassVar

from .channel import ChannelError


class ProtocolError(ChannelError):
    """A peer sent a message that is not one of sparkdl's, or not the one expected now."""


@dataclass(frozen=True)
class Message:
    """One message type: subclasses set ``TYPE`` (the wire tag) and declare their fields.

    A field whose default is None is optional: left out of the wire form when None. Every number
    field is a count, id, port, size, seed or duration: parse refuses a negative or non-finite one,
    an int outside 64 bits, and a field named in ``POSITIVE`` that is zero; a field named in
    ``FREE`` holds any JSON value and is not checked as a number.
    """

    TYPE: ClassVar[str] = ""
    POSITIVE: ClassVar[frozenset[str]] = frozenset({"timeout"})  #: number fields that must be > 0
    FREE: ClassVar[frozenset[str]] = frozenset()  #: fields holding any JSON value, not a count

    def wire(self) -> dict[str, Any]:
        """The JSON object sent on a channel."""
        data: dict[str, Any] = {"type": self.TYPE}
        for spec in fields(self):
            value = getattr(self, spec.name)
            if value is None and spec.default is None:
                continue
            data[spec.name] = list(value) if isinstance(value, tuple) else value
        return data

    @classmethod
    def from_wire(cls, data: dict[str, Any]):
        """The message ``data`` holds; ProtocolError names a missing, unknown or mistyped field."""
        values = {}
        for spec in fields(cls):
            if spec.name in data:
                value = data[spec.name]
                if not _conforms(value, spec.type):
                    raise ProtocolError(
                        f"{cls.TYPE!r} message: field {spec.name!r} must be {_describe(spec.type)}, "
                        f"got {type(value).__name__}"
                    )
                if spec.name not in cls.FREE:
                    _check_number(cls, spec.name, value)
                values[spec.name] = value
            elif spec.default is MISSING and spec.default_factory is MISSING:
                raise ProtocolError(f"{cls.TYPE!r} message: field {spec.name!r} is missing")
        unknown = set(data) - {"type"} - {spec.name for spec in fields(cls)}
        if unknown:
            raise ProtocolError(f"{cls.TYPE!r} message: unknown fields {sorted(unknown)}")
        return cls(**values)


def _conforms(value: Any, kind: Any) -> bool:
    """Whether a JSON value fits the annotation ``kind`` (bool is never a number here)."""
    origin = typing.get_origin(kind)
    if kind is Any:
        return True
    if origin in (typing.Union, types.UnionType):
        return any(_conforms(value, option) for option in typing.get_args(kind))
    if kind is type(None):
        return value is None
    if kind is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if origin in (list, tuple):
        args = typing.get_args(kind)
        return isinstance(value, (list, tuple)) and all(_conforms(item, args[0]) for item in value)
    if origin is dict or kind is dict:
        return isinstance(value, dict) and all(isinstance(key, str) for key in value)
    return isinstance(value, kind)


def _check_number(cls: type[Message], name: str, value: Any) -> None:
    """Raise ProtocolError when a number field's ``value`` is out of its range (see ``Message``)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return
    problem = None
    if isinstance(value, float) and not math.isfinite(value):
        problem = "must be a finite number"
    elif isinstance(value, int) and not -(2**63) <= value < 2**63:
        problem = "must fit in 64 bits"  # numpy and Arrow hold counts as int64
    elif name in cls.POSITIVE and value <= 0:
        problem = "must be positive"
    elif value < 0:
        problem = "must not be negative"
    if problem:
        raise ProtocolError(f"{cls.TYPE!r} message: field {name!r} {problem}, got {value!r}")


def _describe(kind: Any) -> str:
    """``int``, ``list[str]``, ``int | None``: an annotation as written."""
    return kind.__name__ if typing.get_origin(kind) is None and isinstance(kind, type) else str(kind)


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
    """Something the driver's log should show (e.g. TensorBoard did not start)."""

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


# -- node events: written by the TF process, relayed by its supervisor --


@dataclass(frozen=True)
class Progress(Message):
    """A heartbeat with the node's latest metrics (step, epoch, loss, rows_read, epoch_end, ...)."""

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
class Result(Message):
    """What ``map_fun`` returned, as JSON (``node/return_value.py``): sent once, as it returns, by the
    nodes ``TFCluster.run(return_results=...)`` asks (the chief by default, or every node)."""

    TYPE: ClassVar[str] = "result"
    FREE: ClassVar[frozenset[str]] = frozenset({"value"})
    value: Any = None


#: What a TF process may report through its supervisor (``NodeContext.report``).
NODE_EVENTS = (Progress, Serving, FeedReady, FeedTerminated, FeedConsumed, StreamPosition, Inferred, Result)


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
class Plan(Message):
    """One training run of ``qname``: what the node will be fed (driver -> node)."""

    TYPE: ClassVar[str] = "plan"
    session: int
    epochs: int
    rows_per_epoch: int
    qname: str = "input"
    validation_rows: int = 0
    cache: bool = False
    cache_max_bytes: int | None = None
    shuffle: bool = False
    seed: int = 0  # of the per-epoch shuffle
    node: int = 0  # the node's index among the data nodes
    deterministic: bool = False  # epoch 1 too is read in the seeded order, from the cache
    first_epoch: int = 0  # the absolute number of the first epoch fed (a relaunch resumes past 0)
    batch_id: int | None = None  # the Structured Streaming micro-batch this run is (train_stream)
    timeout: float | None = None


@dataclass(frozen=True)
class Train(Message):
    """A feeding task's rows of one partition for one epoch and split; data frames follow."""

    TYPE: ClassVar[str] = "train"
    session: int  # the training run
    partition: int = 0
    epoch: int = 0
    split: str = "train"
    qname: str = "input"
    timeout: float | None = None
    attempt: int = 0  # Spark's attempt number of the feeding task (retries and speculative copies)


@dataclass(frozen=True)
class Infer(Message):
    """A feeding task's rows of one inference partition; data frames follow."""

    TYPE: ClassVar[str] = "infer"
    partition: int | None = None
    qname: str = "input"
    run: str = ""
    stage: int = 0
    timeout: float | None = None


@dataclass(frozen=True)
class CacheSeal(Message):
    """Epoch 1 of ``session`` is fed: may the node serve the later epochs from its cache?"""

    TYPE: ClassVar[str] = "cache_seal"
    session: int
    qname: str = "input"
    timeout: float | None = None


@dataclass(frozen=True)
class CacheUse(Message):
    """The driver's decision for every node: epochs 2..N come from the caches (``use``) or Spark."""

    TYPE: ClassVar[str] = "cache_use"
    session: int
    use: bool
    qname: str = "input"
    timeout: float | None = None


@dataclass(frozen=True)
class End(Message):
    """No more data will come (shutdown)."""

    TYPE: ClassVar[str] = "end"
    qname: str = "input"
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
