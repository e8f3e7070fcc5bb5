"""Exactly-once delivery on the node, over real sockets: the rows of one partition sent by several
attempts of its feeding task (a retry after a failure part-way, two speculative copies at once)
reach the reader once each, in partition order, and the epoch cache holds each once."""

from __future__ import annotations

import threading

import numpy as np
import pyarrow as pa
import pytest
from feed_servers import Worker

from sparkdl.feed import feeder
from sparkdl.feed.columns import FeedDataError
from sparkdl.feed.data_feed import DataFeed
from sparkdl.feed.feeder import FeedTarget
from sparkdl.feed.ledger import DeliveryConflict, PartitionSlot, frame_digest
from sparkdl.feed.server import FeedServer
from sparkdl.feed.shares import balanced_shares
from sparkdl.feed.wire import encode_batch
from sparkdl.transport import protocol
from sparkdl.transport.channel import Endpoint, connect, new_secret

pytestmark = pytest.mark.timeout(120)


ROWS, NODES, BATCH_ROWS = 5000, 2, 500


class FlakySource(Exception):
    """What a source failing part-way raises (a lost executor looks the same to the node)."""


@pytest.fixture
def secret():
    return new_secret()


@pytest.fixture
def nodes(secret):
    servers = [FeedServer(secret, "127.0.0.1", endpoint=Endpoint.feed("exactly-once", n)) for n in range(NODES)]
    yield servers
    for server in servers:
        server.terminated.set()
        server.close()


def tell(server, secret, message: protocol.Message) -> protocol.Message:
    """Send a driver message to a node's feed server; its reply."""
    with connect(server.address, secret, timeout=10, endpoint=server.endpoint) as channel:
        channel.send(message.wire())
        return protocol.parse(channel.recv(10), protocol.Ack, protocol.CacheStatus)


def batches(fail_after: int | None = None, barrier: threading.Barrier | None = None):
    """The partition's rows (column ``id``) in BATCH_ROWS batches; raises after ``fail_after`` rows."""
    for start in range(0, ROWS, BATCH_ROWS):
        if fail_after is not None and start >= fail_after:
            raise FlakySource(f"failing after {start} rows")
        if barrier is not None:
            barrier.wait(30)  # two attempts step through the partition side by side
        yield pa.RecordBatch.from_pydict({"id": np.arange(start, start + BATCH_ROWS, dtype=np.int64)})


def feed(secret, servers, plan, source, attempt: int, epoch: int = 0):
    target = FeedTarget(
        secret,
        tuple(s.address for s in servers),
        tuple(s.endpoint for s in servers),
        tuple(f"worker:{i}" for i in range(len(servers))),
        30.0,
        "input",
    )
    return feeder.feed_training_partition(target, 1, epoch, 0, plan, source, shuffle_seed=3, attempt=attempt)


def read_all(server) -> list[int]:
    return [int(row[0]) for row in DataFeed(server, feed_timeout=10).next_batch(ROWS)]


def planned_share(plan, node: int) -> list[int]:
    return sorted(plan.assignments(0, 0, ROWS)[node].tolist())


def send_plans(secret, servers, plan, epochs=1, cache=False):
    for index, server in enumerate(servers):
        message = protocol.Plan(
            protocol.TrainingPlan(
                session=1,
                epochs=epochs,
                rows_per_epoch=plan.rows_per_node,
                cache=cache,
                shuffle=True,
                seed=3,
                node=index,
            )
        )
        assert isinstance(tell(server, secret, message), protocol.Ack)


def test_a_retry_after_a_partial_stream_adds_no_row_and_misses_none(secret, nodes):
    plan = balanced_shares([ROWS], NODES)
    send_plans(secret, nodes, plan, epochs=2, cache=True)
    with pytest.raises(FlakySource):
        feed(secret, nodes, plan, batches(fail_after=3000), attempt=0)
    assert feed(secret, nodes, plan, batches(), attempt=1) == (ROWS, 0)
    for index, server in enumerate(nodes):
        status = tell(server, secret, protocol.CacheSeal(1))
        assert status.problem is None, "the cache holds the node's share exactly once"
        got = DataFeed(server, feed_timeout=10).next_batch(plan.rows_per_node)  # epoch 1, from the queue
        assert sorted(int(row[0]) for row in got) == planned_share(plan, index)
        assert server.rows_received == plan.rows_per_node, "no surplus row was ever queued"


def test_two_attempts_at_once_deliver_each_row_once_in_partition_order(secret, nodes):
    plan = balanced_shares([ROWS], NODES)
    send_plans(secret, nodes, plan)
    lockstep = threading.Barrier(2)
    results = [None, None]

    def attempt(number: int) -> None:
        results[number] = feed(secret, nodes, plan, batches(barrier=lockstep), attempt=number)

    threads = [threading.Thread(target=attempt, args=(n,), daemon=True) for n in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert results == [(ROWS, 0), (ROWS, 0)], "both copies end quietly: the loser's rows were surplus"
    for index, server in enumerate(nodes):
        got = read_all(server)
        assert sorted(got) == planned_share(plan, index)
        # frames are permuted within themselves (shuffle_seed) but never interleaved across attempts
        assert [row // BATCH_ROWS for row in got] == sorted(row // BATCH_ROWS for row in got)


def test_an_attempt_whose_rows_differ_fails_naming_node_partition_and_attempt(secret, nodes):
    plan = balanced_shares([ROWS], NODES)
    send_plans(secret, nodes, plan)
    with pytest.raises(FlakySource):
        feed(secret, nodes, plan, batches(fail_after=3000), attempt=0)
    short_plan = balanced_shares([2000], NODES)  # the retry's data has fewer rows than were delivered
    with pytest.raises(FeedDataError, match=r"node worker:0 rejected partition 0 \(attempt 2\).*attempt 2"):
        feed(secret, nodes, short_plan, (b for b in batches() if b["id"][0].as_py() < 2000), attempt=2)


def reordered_batches(seed: int):
    """The partition's rows (the same ids as ``batches``) in another order: a recomputed shuffle output."""
    ids = np.random.default_rng(seed).permutation(ROWS)
    for start in range(0, ROWS, BATCH_ROWS):
        yield pa.RecordBatch.from_pydict({"id": ids[start : start + BATCH_ROWS]})


def test_a_retry_sending_the_same_rows_in_another_order_fails_naming_node_partition_and_attempt(secret, nodes):
    """Issue 40 item 3: attempt 0 sends 3,000 of 5,000 rows and fails; attempt 1 sends the same rows in
    another order. Comparing positions only, the nodes read 5,000 rows of which 1,198 twice and 1,198
    never; now the retry is refused before it adds a row, naming node, partition and attempt."""
    plan = balanced_shares([ROWS], NODES)
    send_plans(secret, nodes, plan)
    with pytest.raises(FlakySource):
        feed(secret, nodes, plan, batches(fail_after=3000), attempt=0)
    # Either node may refuse first: the feeder streams to both at once (CI saw worker:1 once).
    with pytest.raises(
        FeedDataError, match=r"node worker:[01] rejected partition 0 \(attempt 1\): .*attempt 1.* rows 0\.\."
    ):
        feed(secret, nodes, plan, reordered_batches(seed=1), attempt=1)
    # Counted after the retry: attempt 0's last frames may still be arriving when its feeder fails.
    # Had the retry added rows, some would repeat attempt 0's (the bug: 1,198 doubled).
    delivered = [server.rows_received for server in nodes]
    assert 0 < sum(delivered) <= 3000, "no more than attempt 0's rows: the reordered retry added none"
    for index, server in enumerate(nodes):
        got = DataFeed(server, feed_timeout=10).next_batch(delivered[index])
        ids = [int(row[0]) for row in got]
        assert len(set(ids)) == len(ids) == delivered[index] and set(ids) <= set(planned_share(plan, index))


def stream_by_hand(server, secret, frames, attempt: int, limit: float) -> protocol.Message:
    """Send ``frames`` as a feeding task's training stream of partition 0 (stream limit ``limit``),
    then its ``Done``; the node's reply."""
    with connect(server.address, secret, timeout=10, endpoint=server.endpoint) as channel:
        channel.send(protocol.Train(session=1, timeout=limit, attempt=attempt).wire())
        for frame in frames:
            channel.send_bytes(frame)  # small frames: the socket's buffers take them all
        channel.send(protocol.Done(ROWS).wire())
        return protocol.parse(channel.recv(30), protocol.Ack, protocol.Dropped)


def test_rows_a_full_queue_refused_are_delivered_by_the_retry(secret):
    """Issue 40 item 11: a frame admitted by the watermark whose queue.put then timed out (nobody read
    the queue) was counted as delivered, so the retry skipped it and its rows were lost. The watermark
    now rises only once the rows are queued."""
    server = FeedServer(secret, "127.0.0.1", max_queue_bytes=1, endpoint=Endpoint.feed("exactly-once", 0))
    try:
        send_plans(secret, [server], balanced_shares([ROWS], 1))
        frames = [encode_batch(batch) for batch in batches()]
        # Attempt 0 with a stream limit of 0.2 s: the node waits 0.4 s for queue space, then drops it.
        dropped = stream_by_hand(server, secret, frames, attempt=0, limit=0.2)
        assert isinstance(dropped, protocol.Dropped) and "read none of the queued rows" in dropped.message
        assert server.rows_received == BATCH_ROWS, "the queue took one frame; the second timed out"
        reader = Worker(lambda: DataFeed(server, feed_timeout=10).next_batch(ROWS))
        assert stream_by_hand(server, secret, frames, attempt=1, limit=10) == protocol.Ack(ROWS)
        assert sorted(int(row[0]) for row in reader.outcome(30)) == list(range(ROWS))
        assert server.rows_received == ROWS
    finally:
        server.terminated.set()
        server.close()


@pytest.mark.parametrize("row_bytes", [1, 3, 8, 24, 1 << 19])
def test_the_frame_digest_tells_the_same_rows_in_another_order_apart(row_bytes):
    rows = [bytes([index % 251 + 1]) * row_bytes for index in range(6)]
    frame = b"head" + b"".join(rows)
    swapped = b"head" + b"".join([rows[0], rows[3], rows[2], rows[1], rows[4], rows[5]])
    assert frame_digest(frame) == frame_digest(bytearray(frame)), "the same bytes, the same digest"
    assert frame_digest(frame) != frame_digest(swapped)
    assert frame_digest(frame) != frame_digest(frame + b"\0"), "a trailing zero byte counts"


def test_a_slot_admits_only_frames_past_its_watermark_and_recognises_the_ones_it_holds():
    slot, first, second = PartitionSlot(), b"a" * 8, b"b" * 8
    assert slot.admit(0, 10, first)
    slot.commit(0, 10, first)
    assert slot.admit(10, 4, second)
    slot.commit(10, 4, second)
    assert slot.accepted == 14
    assert not slot.admit(0, 10, first), "a retry's first frame was delivered already"
    assert not slot.admit(10, 4, second)
    with pytest.raises(DeliveryConflict, match="rows 0..9 are not the rows delivered there"):
        slot.admit(0, 10, second)  # the same positions, other rows (or the same rows in another order)
    with pytest.raises(DeliveryConflict, match="rows 4..13"):
        slot.admit(4, 10, first)  # a frame straddling the delivered ones: cut another way, so other data
    with pytest.raises(DeliveryConflict, match="rows 10..19"):
        slot.admit(10, 10, second)  # it overlaps the watermark: its first rows were delivered in another frame
    assert not slot.admit(14, 0, first), "an empty frame adds nothing"
    with pytest.raises(DeliveryConflict):
        slot.admit(20, 5, first)  # a stream never skips rows
    with pytest.raises(DeliveryConflict, match="attempt 3 sent 12 rows"):
        slot.finish(3, 12)
    assert slot.admit(14, 3, first) and slot.accepted == 14, "admitting is not accepting: commit is"


def test_empty_results_for_an_empty_batch_are_accepted(nodes):
    feed_ = DataFeed(nodes[0], train_mode=False, feed_timeout=5)
    feed_.batch_results([])  # TensorFlowOnSpark's own test does this at the end of the feed
    with pytest.raises(ValueError, match="more results than rows"):
        feed_.batch_results([1.0])


def rich_batches(fail_after: int | None = None):
    """The partition's rows with a binary column (its id's bytes) and a sparse Vector column (one
    value, at the id), in BATCH_ROWS batches, as Spark sends them; raises after ``fail_after`` rows."""
    from pyspark.ml.linalg import SparseVector

    from sparkdl.columns.arrow_rows import vectors_to_arrow

    for start in range(0, ROWS, BATCH_ROWS):
        if fail_after is not None and start >= fail_after:
            raise FlakySource(f"failing after {start} rows")
        ids = np.arange(start, start + BATCH_ROWS, dtype=np.int64)
        blobs = pa.array([b"row-%d" % i for i in ids], pa.binary())
        vectors = vectors_to_arrow([SparseVector(ROWS, {int(i): float(i)}) for i in ids])
        yield pa.RecordBatch.from_arrays([pa.array(ids), blobs, vectors], names=["id", "blob", "vec"])


def test_a_retry_slices_binary_and_sparse_columns_exactly_once_and_the_cache_replays_them(secret, nodes):
    """A retried task whose frames straddle the watermark: the Arrow columns (bytes, a sparse
    Vector) are sliced with the rows, so each row is queued and cached once, whole, and the replay
    gives back the same bytes and coordinates, never a dense vector."""
    from sparkdl.columns.arrow_rows import vector_rows

    plan = balanced_shares([ROWS], NODES)
    send_plans(secret, nodes, plan, epochs=2, cache=True)
    with pytest.raises(FlakySource):
        feed(secret, nodes, plan, rich_batches(fail_after=2500), attempt=0)
    assert feed(secret, nodes, plan, rich_batches(), attempt=1) == (ROWS, 0)
    for index, server in enumerate(nodes):
        assert tell(server, secret, protocol.CacheSeal(1)).problem is None
        assert isinstance(tell(server, secret, protocol.CacheUse(1, True)), protocol.Ack)
        reader = DataFeed(server, feed_timeout=10, input_mapping={"id": "id", "blob": "blob"})
        for epoch in (1, 2):  # epoch 1 from the queue, epoch 2 from the cache
            if epoch == 2:
                replay = server.run_cache("input", 1).replay("train")
                columns = replay.take(None, 0, replay.rows)
                rows = vector_rows(columns["vec"])
                assert replay.rows == plan.rows_per_node and columns["vec"].nbytes < 64 * replay.rows, "kept sparse"
                assert (rows.columns == columns["id"]).all() and (rows.values == columns["id"]).all()
            got = reader.next_batch(plan.rows_per_node)
            assert sorted(got["id"].tolist()) == planned_share(plan, index), f"epoch {epoch}"
            assert all(blob == b"row-%d" % i for i, blob in zip(got["id"], got["blob"])), f"epoch {epoch}"


def float_frame(*values: float) -> pa.Buffer:
    """One frame of a float64 column ``x``: ``x`` and ``-x`` differ only in their top bit."""
    return encode_batch(pa.RecordBatch.from_pydict({"x": pa.array(values, pa.float64())}))


@pytest.mark.parametrize(
    "first,second",
    [
        (float_frame(1.0, 2.0), float_frame(-1.0, -2.0)),  # issue 53 item 4: the sign bits of two words
        (float_frame(1.0, 2.0, 3.0, 4.0), float_frame(-1.0, 2.0, -3.0, 4.0)),
        (np.array([1, 2], np.uint64).tobytes(), np.array([1 | 1 << 63, 2 | 1 << 63], np.uint64).tobytes()),
        # two words far apart: different 512 KiB blocks of the old hash, which each cancelled alike
        (bytes(1 << 20), bytes(7) + b"\x80" + bytes((1 << 19) - 8) + bytes(7) + b"\x80" + bytes((1 << 19) - 8)),
    ],
    ids=["x,y vs -x,-y", "two of four negated", "raw words", "two blocks"],
)
def test_the_frame_digest_tells_frames_whose_words_differ_only_in_their_top_bits_apart(first, second):
    assert len(first) == len(second) and bytes(first) != bytes(second)
    assert frame_digest(first) != frame_digest(second)


def hand_stream(server, secret, frames, attempt: int, rows: int) -> protocol.Message:
    """``frames`` as a feeding task's training stream of partition 0 that ends with ``Done(rows)``;
    the node's reply (its ``Rejected`` included)."""
    with connect(server.address, secret, timeout=10, endpoint=server.endpoint) as channel:
        channel.send(protocol.Train(session=1, timeout=10, attempt=attempt).wire())
        for frame in frames:
            channel.send_bytes(frame)
        channel.send(protocol.Done(rows).wire())
        return protocol.parse(channel.recv(30), protocol.Ack, protocol.Dropped, protocol.Rejected)


def test_a_retry_in_another_order_over_sign_symmetric_rows_is_refused(secret, nodes):
    """Issue 53 item 4: partition [1, 2, -1, -2] in frames [1, 2] and [-1, -2]; attempt 0 delivers
    the first and fails; attempt 1 sends the rows in another order, [-1, -2] then [1, 2]. The old
    digest took [-1, -2] for the delivered [1, 2] and then accepted [1, 2] at rows 2..3: the node
    held [1, 2, 1, 2]. Now the retry is refused and the node holds [1, 2] alone."""
    server = nodes[0]
    send_plans(secret, [server], balanced_shares([4], 1))
    assert hand_stream(server, secret, [float_frame(1.0, 2.0)], attempt=0, rows=2) == protocol.Ack(2)
    reply = hand_stream(server, secret, [float_frame(-1.0, -2.0), float_frame(1.0, 2.0)], attempt=1, rows=4)
    assert isinstance(reply, protocol.Rejected), f"the reordered retry was accepted: {reply}"
    assert "attempt 1" in reply.message and "rows 0..1 are not the rows delivered there" in reply.message
    assert server.rows_received == 2
    got = DataFeed(server, feed_timeout=10, input_mapping={"x": "x"}).next_batch(2)["x"]
    assert got.tolist() == [1.0, 2.0]
