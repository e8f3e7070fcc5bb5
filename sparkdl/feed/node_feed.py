"""The node end of the data plane: a feed server in the TF process, and the ``DataFeed`` API.

Feeding Spark tasks connect to the node's ``FeedServer`` over the authenticated channel and
stream Arrow record batches into a bounded queue: when ``map_fun`` consumes slowly, the queue
fills, the server stops reading, TCP backs up, and the feeding task blocks (backpressure, so
memory stays bounded). ``DataFeed`` reads that queue with TensorFlowOnSpark's API
(``next_batch``, ``should_stop``, ``batch_results``, ``terminate``) and as a ``tf.data.Dataset``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ..channel import Channel, ChannelError, ChannelServer
from .columns import FeedDataError, batch_to_columns, columns_to_rows
from .wire import decode_batch, encode_batch, results_to_batch

logger = logging.getLogger(__name__)

DEFAULT_QUEUE_BYTES = 64 * 1024 * 1024
_END = "end"                 # no more data will ever come (shutdown)
_END_PARTITION = "end-partition"
WAIT_HEARTBEAT_S = 1.0       # how often a node waiting for data tells the driver it is alive


@dataclass
class InferenceStream:
    """One inference partition being served: results go back on its channel, in order."""

    channel: Channel
    expected: int | None = None
    delivered: int = 0
    finished: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def send_results(self, results: Any) -> None:
        """Return results for the next ``len(results)`` rows of this stream."""
        self.channel.send_bytes(encode_batch(results_to_batch(results)))
        self.delivered += len(results)
        self.maybe_complete()

    def maybe_complete(self) -> None:
        """Tell the feeder the partition is fully answered, once it is."""
        with self.lock:  # the reader thread and map_fun's thread may both get here
            if self.expected is not None and self.delivered >= self.expected and not self.finished.is_set():
                self.channel.send({"type": "complete", "rows": self.delivered})
                self.finished.set()


@dataclass
class Chunk:
    """Rows received from a feeder, as dense numpy columns."""

    columns: dict[str, np.ndarray]
    names: list[str]
    rows: int
    session: int | None = None
    stream: InferenceStream | None = None
    offset: int = 0

    @property
    def left(self) -> int:
        """Rows not yet handed out."""
        return self.rows - self.offset


def wait_with_heartbeat(cond: threading.Condition, ready, timeout: float | None, heartbeat=None) -> bool:
    """``cond.wait_for(ready, timeout)`` (lock held) that calls ``heartbeat`` about once a second
    while it waits; returns whether ``ready()`` became true."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while not ready():
        remaining = None if deadline is None else deadline - time.monotonic()
        if remaining is not None and remaining <= 0:
            return False
        if not cond.wait(WAIT_HEARTBEAT_S if remaining is None else min(remaining, WAIT_HEARTBEAT_S)) and heartbeat:
            heartbeat()
    return True


class BoundedQueue:
    """A FIFO bounded by bytes: ``put`` blocks while it is full (backpressure)."""

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self._items: deque = deque()
        self._bytes = 0
        self._dropping = False
        self._cond = threading.Condition()

    def put(self, item, nbytes: int = 0) -> None:
        """Append, waiting while the queue holds ``max_bytes`` or more (markers never wait)."""
        with self._cond:
            self._cond.wait_for(lambda: self._bytes < self.max_bytes or self._dropping or nbytes == 0)
            if self._dropping and nbytes:
                return
            self._items.append((item, nbytes))
            self._bytes += nbytes
            self._cond.notify_all()

    def get(self, timeout: float | None = None, while_waiting=None):
        """Pop the oldest item; raises TimeoutError after ``timeout`` seconds without one.

        ``while_waiting`` is called about once a second during the wait (a heartbeat: waiting
        for data is not a stall).
        """
        with self._cond:
            self._wait_for_item(timeout, while_waiting)
            item, nbytes = self._items.popleft()
            self._bytes -= nbytes
            self._cond.notify_all()
            return item

    def peek(self, timeout: float | None = None, while_waiting=None):
        """The oldest item without removing it (waits like ``get``)."""
        with self._cond:
            self._wait_for_item(timeout, while_waiting)
            return self._items[0][0]

    def _wait_for_item(self, timeout: float | None, while_waiting) -> None:
        if not wait_with_heartbeat(self._cond, lambda: self._items, timeout, while_waiting):
            raise TimeoutError(f"no data arrived within {timeout} s")


    def drop_data(self) -> None:
        """Discard queued data and accept no more (after ``terminate()``); markers stay."""
        with self._cond:
            self._dropping = True
            self._items = deque((item, 0) for item, nbytes in self._items if not nbytes)
            self._bytes = 0
            self._cond.notify_all()

    @property
    def nbytes(self) -> int:
        """Bytes currently queued."""
        return self._bytes


@dataclass(frozen=True)
class SessionPlan:
    """What one ``cluster.train`` call will send this node."""

    session: int
    rows_per_epoch: int
    epochs: int

    @property
    def total_rows(self) -> int:
        """Rows of the whole call (every epoch)."""
        return self.rows_per_epoch * self.epochs


class FeedServer:
    """Receives feed streams for this node (one per TF process, InputMode.SPARK only)."""

    def __init__(self, secret: bytes, host: str, max_queue_bytes: int = DEFAULT_QUEUE_BYTES, notify=None):
        self.max_queue_bytes = max_queue_bytes
        self.notify = notify or (lambda event, **fields: None)  # tells the driver (through the supervisor)
        self.progress = lambda: None  # a heartbeat to the driver: the node reads its feed
        self.rows_received = 0        # rows queued by feeders so far (all training runs)
        self.rows_read = 0            # rows handed to map_fun so far
        self._session_rows_read: dict[tuple[str, int], int] = {}
        self.terminated = threading.Event()
        self._queues: dict[str, BoundedQueue] = {}
        self._plans: dict[tuple[str, int], SessionPlan] = {}
        self._ended = False
        self._cond = threading.Condition()
        self._inference_turn = threading.Lock()  # one inference partition at a time per node
        self._server = ChannelServer(secret, self._handle, host=host, name="sparkdl-feed")

    @property
    def address(self) -> tuple[str, int]:
        """Where feeders connect."""
        return self._server.address

    def queue(self, qname: str) -> BoundedQueue:
        """The queue for ``qname`` (created on first use)."""
        with self._cond:
            if qname not in self._queues:
                self._queues[qname] = BoundedQueue(self.max_queue_bytes)
                if self._ended:
                    self._queues[qname].put(_END)
            return self._queues[qname]

    def plan(self, qname: str, session: int, timeout: float | None) -> SessionPlan:
        """The plan of ``session`` on ``qname``, waiting (bounded) for the driver to send it."""
        with self._cond:
            # waiting for the driver is not a stall: heartbeat meanwhile
            if not wait_with_heartbeat(self._cond, lambda: (qname, session) in self._plans or self._ended,
                                       timeout, self.progress):
                raise TimeoutError(f"no feeding plan arrived within {timeout} s: has the driver called "
                                   "cluster.train()?")
            return self._plans.get((qname, session))

    def rows_left(self, qname: str, session: int) -> int | None:
        """Rows of training run ``session`` not yet read (None until its plan arrives)."""
        with self._cond:
            plan = self._plans.get((qname, session))
            return None if plan is None else plan.total_rows - self._session_rows_read.get((qname, session), 0)

    def count_read(self, qname: str, session: int, rows: int) -> None:
        """Count ``rows`` of training run ``session`` as read; tell the driver when the run's last
        row is read (``cluster.train`` returns once every data node has read all of its rows)."""
        key = (qname, session)
        with self._cond:
            self._session_rows_read[key] = read = self._session_rows_read.get(key, 0) + rows
            plan = self._plans.get(key)
        if plan is not None and read - rows < plan.total_rows <= read:  # this read took the last row
            self.notify("feed_consumed", qname=qname, session=session, rows_read=self.rows_read,
                        rows_received=self.rows_received)

    def close(self) -> None:
        """Stop serving."""
        self._server.close()

    # -- streams --

    def _handle(self, channel: Channel) -> None:
        message = channel.recv(timeout=60)
        kind, qname = message.get("type"), message.get("qname", "input")
        if kind == "plan":
            with self._cond:
                plan = SessionPlan(message["session"], message["rows_per_epoch"], message["epochs"])
                self._plans[(qname, plan.session)] = plan
                self._cond.notify_all()
            channel.send({"type": "ack"})
        elif kind == "end":
            with self._cond:
                self._ended = True
                queues = list(self._queues.values())
            for queue in queues:
                queue.put(_END)
            channel.send({"type": "ack"})
        elif kind == "train":
            self._receive(channel, self.queue(qname), session=message["session"])
        elif kind == "infer":
            with self._inference_turn:
                stream = InferenceStream(channel)
                rows = self._receive(channel, self.queue(qname), stream=stream)
                if rows is not None:
                    self._await_results(stream)
                if stream.finished.is_set():  # answered in full: the driver counts it for its progress
                    self.notify("inferred", run=message.get("run", ""), stage=message.get("stage", 0),
                                partition=message.get("partition"), rows=stream.delivered)

    def _receive(self, channel: Channel, queue: BoundedQueue, session: int | None = None,
                 stream: InferenceStream | None = None) -> int | None:
        """Queue a feeder's data frames until its ``done``; returns the row count (None if cut short)."""
        rows = 0
        while True:
            frame = channel.recv_any()
            if isinstance(frame, dict):
                if frame.get("type") != "done":
                    raise ChannelError(f"unexpected feed message {frame.get('type')!r}")
                if self.terminated.is_set():
                    channel.send({"type": "terminated"})
                    return None
                if stream is not None:
                    queue.put(_END_PARTITION)
                    stream.expected = rows
                    stream.maybe_complete()
                else:
                    channel.send({"type": "ack", "rows": rows})
                return rows
            if self.terminated.is_set():
                channel.send({"type": "terminated"})
                self._drain(channel)
                return None
            try:
                batch = decode_batch(frame)
                columns = batch_to_columns(batch)
            except (FeedDataError, ValueError) as exc:
                channel.send({"type": "error", "message": str(exc)})
                self._drain(channel)
                return None
            queue.put(Chunk(columns, batch.schema.names, batch.num_rows, session, stream), nbytes=len(frame))
            rows += batch.num_rows
            with self._cond:  # several feeders may deliver at once
                self.rows_received += batch.num_rows

    @staticmethod
    def _drain(channel: Channel, timeout: float = 60.0) -> None:
        """After an early reply, discard the feeder's frames until it closes: closing with unread
        data resets the connection, and a feeder blocked in a send would never see the reply."""
        try:
            while True:
                channel.recv_any(timeout)
        except OSError:  # ChannelError (EOF, timeout) or the server closing the channel
            pass

    def _await_results(self, stream: InferenceStream) -> None:
        """Hold this node's inference turn until the partition is answered or the run ends."""
        while not stream.finished.wait(0.5):
            if self.terminated.is_set() or self._ended:
                return


class DataFeed:
    """TensorFlowOnSpark's DataFeed: read fed rows in a node; also as a ``tf.data.Dataset``.

    ``input_mapping`` (``{column: tensor_name}``) makes ``next_batch`` return a dict of numpy
    arrays keyed by tensor name; without it, ``next_batch`` returns a list of row tuples.
    """

    def __init__(self, server: FeedServer, train_mode: bool = True, qname_in: str = "input",
                 qname_out: str = "output", input_mapping: dict[str, str] | None = None,
                 feed_timeout: float = 600.0):
        self.train_mode = train_mode
        self.qname_in = qname_in
        self.qname_out = qname_out
        self.input_mapping = dict(input_mapping) if input_mapping else None
        self.feed_timeout = feed_timeout
        self._server = server
        self._queue = server.queue(qname_in)
        self._chunk: Chunk | None = None
        self._pending: deque[list] = deque()  # [stream, rows awaiting results]
        self._stopped = False
        self._session = 1   # the training run (cluster.train call) being read

    # -- TensorFlowOnSpark API --

    def next_batch(self, batch_size: int):
        """Up to ``batch_size`` rows; fewer at the end of an inference partition, a training run
        (``cluster.train`` call) or the feed. Blocks until rows arrive or the feed ends."""
        columns, names, count = self._read(batch_size, stop_at_partition=not self.train_mode)
        if self.input_mapping:
            return {tensor: columns.get(column, np.empty((0,))) for column, tensor in self.input_mapping.items()}
        return columns_to_rows(columns, names) if count else []

    def should_stop(self) -> bool:
        """True once the feed has ended (``cluster.shutdown``) and every row was read, or after ``terminate``."""
        if self._stopped or self._server.terminated.is_set():
            return True
        if self._chunk is None or not self._chunk.left:
            try:
                item = self._queue.peek(timeout=0)
            except TimeoutError:
                return False
            if item == _END:
                self._stopped = True
        return self._stopped

    def batch_results(self, results: Sequence[Any]) -> None:
        """Return inference results, one per row, in the order the rows were read.

        Each call answers whole batches: exactly the rows of the oldest unanswered batch (or of
        several, in order). Any other count raises ValueError at once, instead of shifting
        results onto the wrong rows.
        """
        results = results if isinstance(results, np.ndarray) else list(results)
        self._check_result_count(len(results))
        start = 0
        while start < len(results):
            if not self._pending:
                raise ValueError(f"batch_results got {len(results) - start} more results than rows were read")
            stream, waiting = self._pending[0]
            part = results[start:start + waiting]
            stream.send_results(part)
            start += len(part)
            self._pending[0][1] -= len(part)
            if not self._pending[0][1]:
                self._pending.popleft()

    def _check_result_count(self, count: int) -> None:
        covered = 0
        for _, waiting in self._pending:
            covered += waiting
            if covered == count:
                return
            if covered > count:
                raise ValueError(f"batch_results got {count} results for a batch of {self._pending[0][1]} rows: "
                                 "return exactly one result per row read (whole batches, in order)")
        raise ValueError(f"batch_results got {count - covered} more results than rows were read "
                         f"({covered} rows await results)")

    def terminate(self) -> None:
        """Stop feeding early: the rest of the feed is skipped and ``should_stop()`` becomes True."""
        if not self._server.terminated.is_set():
            self._server.terminated.set()
            self._server.notify("feed_terminated")
        self._queue.drop_data()
        self._chunk = None

    # -- sparkdl additions --

    def steps_per_epoch(self, batch_size: int) -> int:
        """Batches ``as_dataset(batch_size)`` yields per epoch of the next ``cluster.train`` call.

        Equal on every node: sparkdl gives each node the same number of rows. Under
        MultiWorkerMirroredStrategy, Keras splits each batch across the workers (it treats it
        as the global batch), so ``model.fit`` runs ``num_workers`` times as many steps of
        ``batch_size / num_workers`` rows; let ``fit`` find the epoch's end by itself.
        """
        plan = self._current_plan()
        return -(-plan.rows_per_epoch // batch_size)

    def as_dataset(self, batch_size: int, features: str | int | list | None = None,
                   label: str | int | None = None, shapes: dict | None = None):
        """A ``tf.data.Dataset`` over this node's rows of the next ``cluster.train`` call.

        Under MultiWorkerMirroredStrategy, Keras treats each batch as the *global* batch and
        splits it across the workers: pass ``batch_size = per_worker_batch * ctx.num_workers``
        to train ``per_worker_batch`` rows per worker per step. Each iteration of the dataset
        (one Keras epoch) yields exactly one epoch of the feed in batches of ``batch_size`` (the
        last one smaller if the rows do not divide), the same number of batches on every node, so
        ``model.fit(ds, epochs=num_epochs)`` under MultiWorkerMirroredStrategy never waits on a
        node that ran out. ``features``/``label``
        name columns (DataFrame names, or positions ``0, 1, ...`` for RDD tuples): the dataset
        yields ``(features, label)``; with a list of features, a dict keyed by name (or by
        ``input_mapping``). Without them it yields a dict of every column. ``shapes`` reshapes
        columns per row, e.g. ``{"image": (28, 28, 1)}``. Auto-sharding is off (each node already
        holds only its own rows) and tf.data autotuning is disabled.
        """
        import tensorflow as tf

        plan = self._current_plan()
        first = self._peek_chunk()
        shapes = {str(k): tuple(v) for k, v in (shapes or {}).items()}
        select = self._selector(features, label, first.names)

        def shaped(columns: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
            return {name: (columns[name].reshape((-1, *shapes[name])) if name in shapes else columns[name])
                    for name in columns}

        example = select(shaped({n: c[:1] for n, c in first.columns.items()}))
        signature = tf.nest.map_structure(
            lambda a: tf.TensorSpec((None, *a.shape[1:]), tf.as_dtype(a.dtype) if a.dtype != object else tf.string),
            example)

        def one_epoch():
            left = plan.rows_per_epoch
            while left > 0:
                columns, _, count = self._read(min(batch_size, left), stop_at_partition=False)
                if not count:
                    logger.warning("the feed ended %d rows before the end of the epoch", left)
                    return
                left -= count
                yield select(shaped(columns))

        options = tf.data.Options()
        options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
        options.autotune.enabled = False
        # A fixed prefetch overlaps reading the feed with training without the autotuner, whose
        # thread can hold up the end of fit() for up to a minute.
        return (tf.data.Dataset.from_generator(one_epoch, output_signature=signature).prefetch(2)
                .with_options(options))

    # -- internals --

    def _selector(self, features, label, names: list[str]):
        names_set = set(names)

        def key(name) -> str:
            name = str(name)
            if name not in names_set:
                raise FeedDataError(f"column {name!r} is not in the fed data; columns are {names}")
            return name

        if features is None and label is None:
            mapping = self.input_mapping or {n: n for n in names}
            return lambda cols: {tensor: cols[key(col)] for col, tensor in mapping.items()}
        if isinstance(features, (list, tuple)):
            feature_keys = [key(f) for f in features]
            mapping = self.input_mapping or {}
            x = lambda cols: {mapping.get(k, k): cols[k] for k in feature_keys}  # noqa: E731
        else:
            feature_key = key(features)
            x = lambda cols: cols[feature_key]  # noqa: E731
        if label is None:
            return x
        label_key = key(label)
        return lambda cols: (x(cols), cols[label_key])

    def _current_plan(self) -> SessionPlan:
        """The plan of the training run being read (or about to be), waiting for it if needed."""
        self._advance_session()
        plan = self._server.plan(self.qname_in, self._session, self.feed_timeout)
        if plan is None:
            raise EOFError("the feed has ended (cluster.shutdown was called) before any more training data")
        return plan

    def _session_rows_left(self) -> int | None:
        return self._server.rows_left(self.qname_in, self._session)

    def _advance_session(self) -> None:
        """Move on to the next training run once this one's rows were all read."""
        left = self._session_rows_left()
        if left is not None and left <= 0:
            self._session += 1

    def _peek_chunk(self) -> Chunk:
        if self._chunk is not None and self._chunk.left:
            return self._chunk
        item = self._queue.peek(self.feed_timeout, self._server.progress)
        if not isinstance(item, Chunk):
            raise EOFError("the feed ended before any data arrived")
        return item

    def _next_chunk(self) -> Chunk | None:
        """The chunk to read from, or None at a partition end / the end of the feed."""
        if self._chunk is not None and self._chunk.left:
            return self._chunk
        item = self._queue.get(self.feed_timeout, self._server.progress)
        if item == _END:
            self._stopped = True
            self._queue.put(_END)  # keep the end visible to later reads
            return None
        if item == _END_PARTITION:
            return None
        self._chunk = item
        return item

    def _read(self, max_rows: int, stop_at_partition: bool) -> tuple[dict[str, np.ndarray], list[str], int]:
        """Up to ``max_rows`` rows as concatenated columns, never mixing training runs or partitions."""
        if self.train_mode:
            self._advance_session()
            left = self._session_rows_left()
            if left is not None:  # end the run's last batch without waiting for the next run's data
                max_rows = min(max_rows, left)
        pieces: list[tuple[Chunk, int, int]] = []
        count = 0
        while count < max_rows and not self._stopped and not self._server.terminated.is_set():
            chunk = self._next_chunk()
            if chunk is None:
                if (stop_at_partition and count) or self._stopped:
                    break
                continue
            if pieces and (chunk.stream is not pieces[0][0].stream or chunk.session != pieces[0][0].session):
                break
            take = min(chunk.left, max_rows - count)
            pieces.append((chunk, chunk.offset, chunk.offset + take))
            chunk.offset += take
            count += take
            if chunk.session is not None:
                # The run's plan may have arrived while this call waited: never wait past its end.
                left = self._server.rows_left(self.qname_in, chunk.session)
                if left is not None:
                    max_rows = min(max_rows, left)
        self._server.rows_read += count
        self._server.progress()
        if not pieces:
            return {}, [], 0
        first = pieces[0][0]
        if first.stream is not None:
            self._pending.append([first.stream, count])
        if first.session is not None:
            self._server.count_read(self.qname_in, first.session, count)
            if self.train_mode:
                self._session = first.session  # a run cut short (terminate) is skipped
        names = first.names
        if len(pieces) == 1:
            chunk, start, stop = pieces[0]
            return {n: chunk.columns[n][start:stop] for n in names}, names, count
        return {n: _concatenate(n, [c.columns[n][a:b] for c, a, b in pieces]) for n in names}, names, count


def _concatenate(name: str, parts: list[np.ndarray]) -> np.ndarray:
    """Join one column's pieces from several chunks, naming the column if their shapes differ."""
    try:
        return np.concatenate(parts)
    except ValueError as exc:
        shapes = sorted({part.shape[1:] for part in parts})
        raise FeedDataError(f"column {name!r} has rows of different shapes {shapes} in one batch; "
                            "pad or filter them before feeding") from exc
