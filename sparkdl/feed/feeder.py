"""The executor end of the data plane: Spark tasks that stream partitions to TF nodes.

Each task opens authenticated channels to the node(s) its rows belong to (each channel bound
to that node's feed server: a connection relayed to another node fails its handshake) and
sends Arrow record batches. Sends block while a node's queue is full (backpressure) and time
out after the stream timeout (``feed_timeout``: ``timeouts.FeedLimits.stream_s``) with a message
naming the node and partition. The node holds the task to the same limit (named in each stream's
first message): a task that sends nothing, or reads none of its inference results, for that long
is dropped and fails. The
functions here are shipped to executors inside Spark closures: they hold only the small
``FeedTarget`` description.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, replace
from typing import Iterable, Iterator

import numpy as np
import pyarrow as pa

from ..columns.arrow_rows import ORIGIN, describe_origin, fixed_width, origin_values, row_nbytes
from ..common.errors import FeedError as FeedError  # re-exported: raised here
from ..common.errors import NodeGone
from ..common.timeouts import control_timeout
from ..transport import channel as transport_channel  # its MAX_FRAME_BYTES, read at call time
from ..transport import protocol
from ..transport.channel import AuthenticationError, Channel, ChannelError, ChannelTimeout, Endpoint, connect
from .columns import FeedDataError, rows_to_record_batch
from .shares import RowShares
from .wire import TRAIN_SPLIT, batch_to_results, decode_batch, encode_batch

#: The rows' bytes a frame holds at most (a row larger than that travels alone).
FRAME_TARGET_BYTES = 4 * 1024 * 1024
#: What a frame may need beside its rows' bytes and its schema: the record batch's metadata and
#: padding, per buffer (FRAME_BUFFER_BYTES) and in all (FRAME_FIXED_BYTES).
FRAME_FIXED_BYTES = 64 * 1024
FRAME_BUFFER_BYTES = 128
#: Bytes a training frame adds to each row: its origin (``ORIGIN``, int64).
ORIGIN_BYTES = 8
RDD_CHUNK_ROWS = 1024


@dataclass(frozen=True)
class FeedTarget:
    """The data nodes of a cluster, as a feeding task needs them."""

    secret: bytes = field(repr=False)  # never in logs or error messages
    addresses: tuple[tuple[str, int], ...]
    endpoints: tuple[Endpoint, ...]  # who each address must be (the handshake is bound to it)
    labels: tuple[str, ...]
    stream_timeout: float  # each wait of a stream, at both ends (timeouts.FeedLimits.stream_s)
    qname: str
    run: str = ""  # which cluster.inference() call the partitions belong to (for the driver's progress)


def frames(batch: pa.RecordBatch, partition: int = 0, first_row: int = 0) -> list[pa.RecordBatch]:
    """``batch`` cut into the frames a feeding task sends, in order, by their bytes.

    Each frame holds the rows whose bytes (Arrow's buffers, from each column's offsets: one
    vectorised pass per column, one search per frame) add up to at most FRAME_TARGET_BYTES, and a
    row larger than that travels alone, so however unequal the rows no frame exceeds the channel's
    limit on a binary frame (``transport.channel.MAX_FRAME_BYTES``, which the node enforces). The
    cut depends on the batch alone: a retried task cuts the same frames (``ledger.py`` relies on
    it). A row that no frame can carry raises ``FeedDataError`` naming its column (the one holding
    most of its bytes), partition and row (``first_row``: the batch's first row's position in the
    partition); ``bad_rows="skip"`` cannot skip it, as it cannot reach a node.
    """
    rows = batch.num_rows
    if rows == 0:
        return []
    columns = [row_nbytes(column) for column in batch.columns]
    sizes = sum(columns, np.full(rows, ORIGIN_BYTES, np.int64))
    capacity = _frame_capacity(batch)
    oversized = np.flatnonzero(sizes > capacity)
    if len(oversized):
        row = int(oversized[0])
        column = batch.schema.names[int(np.argmax([column[row] for column in columns]))]
        where = describe_origin(int(origin_values(partition, first_row + row)))
        raise FeedDataError(
            f"column {column!r}, {where}: a row of {int(sizes[row]):,} bytes, more than a frame of the feed can "
            f"carry ({max(capacity, 0):,} bytes: the channel's limit of {transport_channel.MAX_FRAME_BYTES:,} "
            "bytes a frame, less the frame's own); such a row cannot reach a node. Make the value smaller "
            "(store large values as files and feed their paths)"
        )
    ends = np.cumsum(sizes)
    target = min(FRAME_TARGET_BYTES, capacity)
    pieces, start = [], 0
    while start < rows:
        before = int(ends[start - 1]) if start else 0
        stop = max(start + 1, int(np.searchsorted(ends, before + target, side="right")))
        pieces.append(batch.slice(start, stop - start))
        start = stop
    return pieces


def _frame_capacity(batch: pa.RecordBatch) -> int:
    """The rows' bytes a frame of ``batch``'s columns can carry: the channel's limit less the
    schema, the record batch's metadata and its buffers' padding (the origin column's included)."""
    buffers = sum(len(column.buffers()) for column in batch.columns) + 2
    overhead = batch.schema.serialize().size + FRAME_FIXED_BYTES + FRAME_BUFFER_BYTES * buffers
    return transport_channel.MAX_FRAME_BYTES - overhead


def _fixed_width(batch: pa.RecordBatch) -> pa.RecordBatch:
    """``batch`` with its equal-length list columns as fixed-size lists (no copy): Spark sends
    ``array<...>`` columns as lists, whose take is per element."""
    columns = [fixed_width(column) for column in batch.columns]
    if all(new is old for new, old in zip(columns, batch.columns)):
        return batch
    return pa.RecordBatch.from_arrays(columns, names=batch.schema.names, metadata=batch.schema.metadata)


def rdd_batches(rows: Iterable) -> Iterator[pa.RecordBatch]:
    """RDD elements as record batches of RDD_CHUNK_ROWS rows."""
    chunk = []
    for row in rows:
        chunk.append(row)
        if len(chunk) == RDD_CHUNK_ROWS:
            yield rows_to_record_batch(chunk)
            chunk = []
    if chunk:
        yield rows_to_record_batch(chunk)


class _NodeLink:
    """One partition's channel to one node."""

    def __init__(self, target: FeedTarget, node: int, header: protocol.Train | protocol.Infer, partition: int):
        self.label = target.labels[node]
        attempt = getattr(header, "attempt", 0)
        self.partition = f"{partition} (attempt {attempt})" if attempt else partition  # as error messages name it
        self.timeout = target.stream_timeout
        self.rows = 0
        try:
            self.channel: Channel = connect(
                target.addresses[node],
                target.secret,
                timeout=control_timeout(self.timeout),
                endpoint=target.endpoints[node],
            )
        except AuthenticationError as exc:  # a configuration or security problem, never "node gone"
            raise FeedError(f"node {self.label} refused this feeder's credentials: {exc}") from exc
        except (OSError, ChannelError) as exc:
            raise NodeGone(f"cannot reach node {self.label} to feed partition {partition}: {exc}") from exc
        self.channel.set_send_timeout(self.timeout)
        try:
            # The node holds this task to the same timeout.
            self.channel.send(replace(header, timeout=self.timeout).wire())
        except ChannelError as exc:
            self.channel.close()
            raise NodeGone(f"lost node {self.label} as partition {partition} started: {exc}") from exc

    def send(self, batch: pa.RecordBatch, check_replies: bool = True) -> bool:
        """Send one batch; False when the node has terminated its feed.

        ``check_replies=False`` when another thread reads this channel (inference).
        """
        if check_replies and self.channel.has_incoming():
            try:
                reply = self.channel.recv(self.timeout)
            except ChannelError as exc:
                raise NodeGone(f"lost node {self.label} while feeding partition {self.partition}: {exc}") from exc
            self._raise_or_stop(self._reply(reply))
            return False
        try:
            self.channel.send_bytes(encode_batch(batch))
        except ChannelTimeout as exc:
            raise FeedError(
                f"Timeout while feeding partition {self.partition} to node {self.label}: it accepted "
                f"no data for {self.timeout:.0f} s (feed_timeout). Is map_fun reading its feed?"
            ) from exc
        except OSError as exc:
            raise NodeGone(f"lost node {self.label} while feeding partition {self.partition}: {exc}") from exc
        self.rows += batch.num_rows
        return True

    def _raise_or_stop(self, reply: protocol.Message) -> None:
        """Raise for a node's Rejected or Dropped; return for Terminated (its map_fun wants no more)."""
        if isinstance(reply, protocol.Rejected):
            raise FeedDataError(f"node {self.label} rejected partition {self.partition}: {reply.message}")
        if isinstance(reply, protocol.Dropped):
            raise FeedError(f"node {self.label} dropped partition {self.partition}: {reply.message}")
        if not isinstance(reply, protocol.Terminated):
            raise FeedError(f"unexpected reply from node {self.label}: {reply}")

    def _reply(self, data: dict, *expected: type[protocol.Message]) -> protocol.Message:
        """The node's reply, one of ``expected`` or a stream ending (a FeedError otherwise)."""
        try:
            return protocol.parse(data, *expected, protocol.Rejected, protocol.Dropped, protocol.Terminated)
        except protocol.ProtocolError as exc:
            raise FeedError(f"unexpected reply from node {self.label}: {exc}") from exc

    def finish(self) -> None:
        """Tell the node this partition is complete and wait for its acknowledgement."""
        try:
            self.channel.send(protocol.Done(self.rows).wire())
            data = self.channel.recv(self.timeout)
        except (OSError, ChannelError) as exc:
            raise NodeGone(f"lost node {self.label} while finishing partition {self.partition}: {exc}") from exc
        reply = self._reply(data, protocol.Ack)
        if isinstance(reply, protocol.Ack):
            if reply.rows != self.rows:
                raise FeedError(
                    f"node {self.label} received {reply.rows} of {self.rows} rows of partition {self.partition}"
                )
        else:
            self._raise_or_stop(reply)

    def close(self) -> None:
        """Close the channel."""
        self.channel.close()


def feed_training_partition(
    target: FeedTarget,
    session: int,
    epoch: int,
    partition: int,
    shares: RowShares,
    batches: Iterable[pa.RecordBatch],
    split: str = TRAIN_SPLIT,
    shuffle_seed: int | None = None,
    attempt: int = 0,
) -> tuple[int, int]:
    """Send this partition's rows to their nodes per ``shares``, interleaved frame by frame.

    With ``shuffle_seed``, each frame's rows go out in a permuted order (seeded by the seed,
    epoch, partition and frame: the same data gives the same order). Returns ``(rows read,
    bitmask of nodes skipped)``: a node that terminated its feed or whose feed server is gone
    is skipped, and the driver decides whether that is an error. ``attempt`` is Spark's attempt
    number of this task: a node accepts each row once whichever attempts send it (``ledger.py``),
    so a retried or speculative attempt sends the partition from its first row again.
    """
    header = protocol.Train(
        session=session, epoch=epoch, partition=partition, split=split, qname=target.qname, attempt=attempt
    )
    sender = _PartitionSender(target, header, shares, shuffle_seed)
    try:
        for batch in batches:
            for piece in frames(_fixed_width(batch), partition, sender.offset):
                sender.send_frame(piece)
            if sender.every_node_skipped():
                return sender.offset, _mask(sender.skipped)  # every destination is gone: skip the rest quickly
        expected_rows = shares.partition_rows[partition]
        if sender.offset != expected_rows:
            raise FeedDataError(
                f"partition {partition} had {expected_rows} rows when sparkdl counted them and {sender.offset} now: "
                "the data is not deterministic between Spark jobs. cache() or checkpoint() it before cluster.train()."
            )
        sender.finish()
        return sender.offset, _mask(sender.skipped)
    finally:
        sender.close()


class _PartitionSender:
    """One training partition on its way to its nodes, frame by frame: each frame's rows go to the
    nodes ``shares`` assigns them to (permuted with a shuffle seed), each with its rows' origins; a
    node whose feed is gone or terminated is skipped from then on."""

    def __init__(self, target: FeedTarget, header: protocol.Train, shares: RowShares, shuffle_seed: int | None):
        self.target = target
        self.header = header
        self.shares = shares
        self.shuffle_seed = shuffle_seed
        self.links: dict[int, _NodeLink] = {}
        self.skipped: set[int] = set()
        self.offset = 0  # rows of the partition sent so far (to every node)

    def send_frame(self, piece: pa.RecordBatch) -> None:
        """Send one frame's rows to their nodes."""
        partition, end = self.header.partition, self.offset + piece.num_rows
        rng = None
        if self.shuffle_seed is not None:  # the same data gives the same order
            rng = np.random.default_rng([self.shuffle_seed, self.header.epoch, partition, self.offset])
        for node, rows in self.shares.assignments(partition, self.offset, end).items():
            if node not in self.skipped:
                self._send(node, self._node_part(piece, rows if rng is None else rng.permutation(rows), rng))
        self.offset = end

    def _node_part(self, piece: pa.RecordBatch, rows, rng) -> pa.RecordBatch:
        """``rows`` of ``piece``, with each row's place in the partition, so a node can name a bad row."""
        whole = self.shares.num_nodes == 1 and len(rows) == piece.num_rows and rng is None
        part = piece if whole else piece.take(rows)
        origins = origin_values(self.header.partition, self.offset + np.asarray(rows))
        return part.append_column(ORIGIN, pa.array(origins))

    def _send(self, node: int, part: pa.RecordBatch) -> None:
        try:
            if node not in self.links:
                self.links[node] = _NodeLink(self.target, node, self.header, self.header.partition)
            if not self.links[node].send(part):
                self.skipped.add(node)
        except NodeGone:
            self.skipped.add(node)

    def every_node_skipped(self) -> bool:
        return len(self.skipped) == self.shares.num_nodes

    def finish(self) -> None:
        """Tell every node still fed that the partition is whole, and wait for its answer."""
        for node, link in self.links.items():
            if node in self.skipped:
                continue
            try:
                link.finish()
            except NodeGone:
                self.skipped.add(node)

    def close(self) -> None:
        for link in self.links.values():
            link.close()


def _mask(nodes: set[int]) -> int:
    return sum(1 << node for node in nodes)


def _stage_id() -> int:
    """The Spark stage of the running task (0 outside Spark): one stage is one action's pass."""
    from pyspark import TaskContext

    context = TaskContext.get()
    return context.stageId() if context is not None else 0


def infer_partition(
    target: FeedTarget, node: int, partition: int, batches: Iterable[pa.RecordBatch], decode: bool = True
) -> Iterator[list | bytes]:
    """Send one partition to ``node`` and yield its results, one list per result frame, in order
    (with ``decode=False``, each result frame as it arrived: Arrow IPC bytes)."""
    header = protocol.Infer(partition=partition, qname=target.qname, run=target.run, stage=_stage_id())
    link = _NodeLink(target, node, header, partition)
    failure: list[BaseException] = []

    def produce() -> None:
        try:
            for batch in batches:
                for piece in frames(_fixed_width(batch), partition, link.rows):
                    link.send(piece, check_replies=False)
            link.channel.send(protocol.Done(link.rows).wire())
        except BaseException as exc:  # noqa: BLE001 - re-raised in the task's thread
            failure.append(exc)
            link.close()

    sender = threading.Thread(target=produce, name=f"sparkdl-infer-{partition}", daemon=True)
    sender.start()
    received = 0
    try:
        while True:
            try:
                frame = link.channel.recv_any(target.stream_timeout)
            except ChannelError as exc:
                if failure:
                    raise failure[0] from exc
                raise FeedError(
                    f"lost node {link.label} during inference on partition {partition} ({exc}): the node "
                    "failed, or this task read none of its results (or sent no rows) for feed_timeout "
                    f"({target.stream_timeout:g} s) and the node dropped it"
                ) from exc
            if isinstance(frame, dict):
                reply = link._reply(frame, protocol.Complete)
                if not isinstance(reply, protocol.Complete):
                    link._raise_or_stop(reply)
                break
            if decode:
                results = batch_to_results(decode_batch(frame))
                received += len(results)
                yield results
            else:
                received += decode_batch(frame).num_rows
                yield bytes(frame)
        sender.join(target.stream_timeout)
        if failure:
            raise failure[0]
        if received != link.rows:
            raise FeedError(
                f"node {link.label} returned {received} results for the {link.rows} rows of "
                f"partition {partition}: map_fun must call batch_results once per row read"
            )
    finally:
        link.close()
