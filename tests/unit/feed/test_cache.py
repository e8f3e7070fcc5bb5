"""The node-side epoch cache over real sockets and files: feeder functions -> FeedServer (cache) -> DataFeed."""

from __future__ import annotations

import errno
import io
import logging
import os
import resource
import tracemalloc
from collections import Counter

import numpy as np
import pyarrow as pa
import pytest
from pyspark.ml.linalg import DenseVector, SparseVector, VectorUDT
from pyspark.sql.pandas.types import to_arrow_type

from sparkdl.columns.arrow_rows import ORIGIN, describe_origin
from sparkdl.columns.readers import VectorReader
from sparkdl.feed.cache import CacheReplay, RunCache, WindowBuffers, epoch_order, run_orders
from sparkdl.feed.columns import batch_to_columns
from sparkdl.feed.data_feed import DataFeed
from sparkdl.feed.server import FeedServer
from sparkdl.feed.wire import decode_batch, encode_batch
from sparkdl.transport import protocol
from sparkdl.transport.channel import Endpoint, connect, new_secret

from node_feeds import feed_epoch, fixed_width_batch, sequences_batch

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def secret():
    return new_secret()


@pytest.fixture
def server(secret, tmp_path):
    server = FeedServer(secret, "127.0.0.1", cache_dir=tmp_path / "cache", endpoint=Endpoint.feed("test-cluster", 0))
    yield server
    server.terminated.set()
    server.close()


def ask(server, secret, message):
    with connect(server.address, secret, timeout=10, endpoint=server.endpoint) as channel:
        channel.send(message)
        return channel.recv(10)


def plan_message(session, rows, epochs, **extra):
    plan = protocol.TrainingPlan(session=session, epochs=epochs, rows_per_epoch=rows, seed=5, **extra)
    return protocol.Plan(plan).wire()


def batches_of(count, rows=10):
    for b in range(count):
        ids = np.arange(b * rows, (b + 1) * rows)
        yield pa.RecordBatch.from_arrays([pa.array(ids), pa.array(ids.astype(np.float32))], names=["i", "x"])


def test_replay_gathers_any_order_from_frames_of_several_partitions(tmp_path):
    cache = RunCache(tmp_path / "run", None, "training run 1")
    for partition, batch in zip((1, 0, 1), batches_of(3)):  # frames arrive out of partition order
        cache.append("train", partition, encode_batch(batch), batch.num_rows)
    assert cache.seal({"train": 30}) is None
    replay = cache.replay("train")
    # Canonical order: partition 0's frame (ids 10..19), then partition 1's frames in arrival order.
    canonical = np.concatenate([np.arange(10, 20), np.arange(0, 10), np.arange(20, 30)])
    assert list(replay.take(None, 0, 30)["i"]) == list(canonical)
    order = epoch_order(30, seed=3, node=0, epoch=1)
    gathered = np.concatenate([replay.take(order, start, 7)["i"] for start in range(0, 30, 7)])
    assert list(gathered) == list(canonical[order])
    np.testing.assert_array_equal(replay.take(order, 0, 30)["x"], canonical[order].astype(np.float32))
    cache.drop()
    assert not (tmp_path / "run").exists()


def test_a_frame_that_arrives_after_the_cache_was_dropped_is_not_cached_and_fails_nothing(tmp_path):
    """A straggling or speculative feeding task's frame can reach a run whose cache was dropped (the
    run released, the driver chose Spark): it is not cached, and no directory comes back."""
    cache = RunCache(tmp_path / "run", None, "training run 1")
    first, late = batches_of(2)
    assert cache.append("train", 0, encode_batch(first), first.num_rows) is False  # the share is 20 rows
    cache.drop()
    assert cache.append("train", 1, encode_batch(late), late.num_rows) is False
    assert not (tmp_path / "run").exists()


def test_a_window_served_again_next_epoch_cannot_be_edited_in_place(tmp_path):
    """Without a shuffle every epoch has the same order, so a share of one window is served from
    the same arrays each epoch: they are read-only, as epoch 1's arrays from Arrow are."""
    cache = RunCache(tmp_path / "run", None, "training run 1")
    for partition, batch in enumerate(batches_of(2)):
        cache.append("train", partition, encode_batch(batch), batch.num_rows)
    assert cache.seal({"train": 20}) is None
    replay = cache.replay("train")
    first = replay.take(None, 0, 20)["x"]
    with pytest.raises(ValueError, match="read-only"):
        first *= 0
    np.testing.assert_array_equal(replay.take(None, 0, 20)["x"], np.arange(20, dtype=np.float32))
    cache.drop()


def test_windows_read_ahead_give_every_epoch_its_own_order(tmp_path):
    """Small windows, each gathered ahead by the reader thread (across the epochs' ends too): the
    rows come out exactly as a gather on the spot gives them."""
    orders = run_orders(True, 3, 0, "train")
    cache = RunCache(tmp_path / "run", None, "training run 1", {"train": 30}, orders)
    complete = [cache.append("train", p, encode_batch(b), b.num_rows) for p, b in zip((1, 0, 1), batches_of(3))]
    assert complete == [False, False, True], "the last frame completes the share"
    assert cache.seal({"train": 30}) is None
    replay = cache.replay("train")
    replay.window_rows = 4  # many windows, so most are read ahead
    canonical = np.asarray(replay.take(None, 0, 30)["i"]).copy()
    replay.read_ahead(1)
    for epoch in (1, 2, 3):
        got = np.concatenate([replay.take_epoch(epoch, start, 7)["i"] for start in range(0, 30, 7)])
        assert list(got) == list(canonical[epoch_order(30, 3, 0, epoch)])
    cache.drop()


def test_epoch_orders_are_reproducible_and_differ_by_epoch_and_node():
    assert list(epoch_order(100, 1, 0, 1)) == list(epoch_order(100, 1, 0, 1))
    assert list(epoch_order(100, 1, 0, 1)) != list(epoch_order(100, 1, 0, 2))
    assert list(epoch_order(100, 1, 0, 1)) != list(epoch_order(100, 1, 1, 1))
    assert sorted(epoch_order(100, 1, 0, 1)) == list(range(100))


def test_a_cache_refuses_past_its_limit_and_says_why_once(tmp_path, caplog):
    cache = RunCache(tmp_path / "run", 500, "training run 4")
    for batch in batches_of(3, rows=20):  # 3 frames of ~1 KiB
        cache.append("train", 0, encode_batch(batch), batch.num_rows)
    assert "cache limit of 500 bytes" in cache.seal({"train": 60})
    assert [r.message for r in caplog.records].count(
        "sparkdl: not caching training run 4 on this node: this node's share is more than the cache limit of "
        "500 bytes (cache_max_bytes); its epochs are fed from Spark each time"
    ) == 1
    assert not (tmp_path / "run").exists()


def test_an_incomplete_cache_is_not_sealed(tmp_path):
    cache = RunCache(tmp_path / "run", None, "training run 1")
    batch = next(batches_of(1))
    cache.append("train", 0, encode_batch(batch), batch.num_rows)
    assert "holds 10 of the 11 train rows" in cache.seal({"train": 11})


def test_a_node_serves_later_epochs_from_its_cache_and_deletes_it_at_the_run_end(server, secret, tmp_path):
    partitions = [list(range(0, 40)), list(range(40, 70))]
    assert ask(server, secret, plan_message(1, 70, 3)) == {"type": "ack"}
    feed_epoch(secret, server, partitions)
    cache_files = sorted(p.name for p in (tmp_path / "cache").rglob("*.arrows"))
    assert cache_files == ["train.arrows"], "one file per split, whatever the partitions"
    assert ask(server, secret, {"type": "cache_seal", "qname": "input", "session": 1}) == {
        "type": "cache_status",
        "problem": None,
    }
    assert ask(server, secret, {"type": "cache_use", "qname": "input", "session": 1, "use": True}) == {"type": "ack"}
    feed = DataFeed(server, input_mapping={"i": "i"}, feed_timeout=10)
    epochs = [np.concatenate([feed.next_batch(10)["i"] for _ in range(7)]) for _ in range(3)]
    assert [sorted(e) for e in epochs] == [list(range(70))] * 3
    assert list(epochs[1]) != list(epochs[2]) and list(epochs[0]) != list(epochs[1])
    assert not list((tmp_path / "cache").rglob("*.arrows")), "the run's cache is gone once it was read"


def test_a_node_whose_cache_failed_drops_it_and_reads_the_queue(server, secret, tmp_path):
    assert ask(server, secret, plan_message(1, 30, 2, cache_max_bytes=100)) == {"type": "ack"}
    feed_epoch(secret, server, [list(range(30))])
    assert not list((tmp_path / "cache").rglob("*.arrows"))
    problem = ask(server, secret, {"type": "cache_seal", "qname": "input", "session": 1})["problem"]
    assert "cache limit of 100 bytes" in problem
    ask(server, secret, {"type": "cache_use", "qname": "input", "session": 1, "use": False})
    feed_epoch(secret, server, [list(range(100, 130))], epoch=1)
    feed = DataFeed(server, input_mapping={"i": "i"}, feed_timeout=10)
    assert sorted(feed.next_batch(30)["i"]) == list(range(30))
    assert sorted(feed.next_batch(30)["i"]) == list(range(100, 130))


def test_a_node_replays_its_whole_share_without_waiting_for_the_driver(server, secret, tmp_path):
    """Once its share of epoch 1 is in, a node serves epoch 2 from its cache before the driver says
    a word; if another node could not cache (the driver's use=False), the rows fed again are dropped."""
    assert ask(server, secret, plan_message(1, 30, 2, shuffle=False)) == {"type": "ack"}
    feed_epoch(secret, server, [list(range(30))])
    feed = DataFeed(server, input_mapping={"i": "i"}, feed_timeout=10)
    first = list(feed.next_batch(30)["i"])
    assert sorted(first) == list(range(30))
    assert server.replay_decision("input", 1, timeout=0) is True, "decided by the node itself"
    ask(server, secret, {"type": "cache_use", "qname": "input", "session": 1, "use": False})
    feed_epoch(secret, server, [list(range(100, 130))], epoch=1)  # fed again for another node: dropped here
    assert list(feed.next_batch(30)["i"]) == first, "epoch 2 from the cache, in the cached order"
    assert server.rows_left("input", 1) == 0


def test_serving_from_the_cache_keeps_memory_to_a_few_batches(tmp_path):
    """Replaying ~190 MiB of cached rows (memory-mapped) does not grow the process by that much."""
    cache = RunCache(tmp_path / "run", None, "training run 1")
    rows, width, frame_rows = 64_000, 784, 2_000
    for start in range(0, rows, frame_rows):
        values = np.full((frame_rows, width), start, np.float32)
        column = pa.FixedSizeListArray.from_arrays(pa.array(values.reshape(-1)), width)
        batch = pa.RecordBatch.from_arrays([column], names=["x"])
        cache.append("train", 0, encode_batch(batch), frame_rows)
    assert cache.seal({"train": rows}) is None
    replay: CacheReplay = cache.replay("train")
    order = epoch_order(rows, 1, 0, 1)
    before = _rss_mib()
    for start in range(0, rows, 256):
        batch = replay.take(order, start, 256)["x"]
        assert batch.shape == (min(256, rows - start), width)
    grown = _rss_mib() - before
    assert grown < 64, f"serving from the cache grew the process by {grown:.0f} MiB"
    assert Counter(replay.take(None, 0, rows)["x"][:, 0].tolist()) == {
        float(s): frame_rows for s in range(0, rows, frame_rows)
    }
    cache.drop()


def _rss_mib() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * resource.getpagesize() / 2**20


def test_tfos_train_mode_false_still_reads_cached_epochs_as_training(server, secret):
    """TFoS's own Keras example trains through ``TFNode.DataFeed(ctx.mgr, False)``: its
    ``train_mode=False`` only ended batches at partition ends. Epochs 2..N served from the cache
    never pass the queue, so a reader that took the inference path hung at epoch 2."""
    assert ask(server, secret, plan_message(1, 30, 2)) == {"type": "ack"}
    feed_epoch(secret, server, [list(range(30))])
    ask(server, secret, {"type": "cache_seal", "qname": "input", "session": 1})
    assert ask(server, secret, {"type": "cache_use", "qname": "input", "session": 1, "use": True}) == {"type": "ack"}
    feed = DataFeed(server, train_mode=False, input_mapping={"i": "i"}, feed_timeout=10)
    epochs = [np.concatenate([feed.next_batch(10)["i"] for _ in range(3)]) for _ in range(2)]
    assert [sorted(e) for e in epochs] == [list(range(30))] * 2


class FullDisk(io.FileIO):
    """A file on a disk with no space left: every write reaches the OS and fails with ENOSPC.

    A stand-in for a full disk or an exhausted quota (no small file system can be mounted here).
    """

    def write(self, data):
        raise OSError(errno.ENOSPC, "No space left on device")


def ids_frame(start: int, rows: int = 10) -> bytes:
    ids = np.arange(start, start + rows)
    return encode_batch(pa.RecordBatch.from_arrays([pa.array(ids)], names=["i"]))


def test_a_disk_that_fills_up_while_caching_drops_the_cache_with_a_warning(tmp_path, caplog):
    cache = RunCache(tmp_path / "run", None, "training run 3")
    cache.append("train", 0, ids_frame(0), 10)
    part = cache.file("train")
    part._handle.close()
    part._handle = FullDisk(part.path, "r+b")  # the same file, now on a full disk
    caplog.set_level(logging.WARNING, logger="sparkdl.feed.cache")
    assert cache.append("train", 0, ids_frame(10), 10) is False
    problem = cache.seal({"train": 20})
    assert problem is not None and "No space left on device" in problem
    assert cache.failure == problem
    assert [r.levelname for r in caplog.records] == ["WARNING"]
    assert "its epochs are fed from Spark each time" in caplog.records[0].message
    assert not (tmp_path / "run").exists(), "the incomplete files are deleted"
    cache.drop()  # and dropping it again later is harmless


def vectors_frame(vectors: list) -> bytes:
    """A DataFrame's Arrow frame with a pyspark.ml Vector column ``v`` (as Spark encodes VectorUDT)."""
    udt = VectorUDT()
    column = pa.array([udt.serialize(v) for v in vectors], type=to_arrow_type(udt.sqlType()))
    ids = pa.array(np.arange(len(vectors)))
    return encode_batch(pa.RecordBatch.from_arrays([ids, column], names=["i", "v"]))


def test_a_replayed_epoch_gives_sparse_vectors_in_the_form_epoch_one_gave_them(tmp_path):
    vectors = [SparseVector(6, {1: 2.0, 4: -1.0}), DenseVector([0, 1, 2, 3, 4, 5]), SparseVector(6, {})]
    frame = vectors_frame(vectors)
    first_epoch = batch_to_columns(decode_batch(frame))  # what the queue hands DataFeed in epoch 1
    cache = RunCache(tmp_path / "run", None, "training run 1")
    cache.append("train", 0, frame, len(vectors))
    assert cache.seal({"train": 3}) is None
    replayed = cache.replay("train").take(None, 0, 3)
    assert replayed.keys() == {*first_epoch.keys(), ORIGIN}  # each row's partition and position, for errors
    assert [describe_origin(o) for o in replayed[ORIGIN]] == [f"partition 0, row {r}" for r in range(3)]
    np.testing.assert_array_equal(replayed["i"], first_epoch["i"])
    assert replayed["v"].equals(first_epoch["v"])  # Arrow, as Spark sent it: sparse rows stay sparse
    dense = VectorReader("v", first_epoch["v"][:1], size=6)  # what as_dataset reads by default
    np.testing.assert_array_equal(dense.parts(replayed["v"])["v"], np.stack([v.toArray() for v in vectors]))
    shuffled = cache.replay("train").take(np.array([2, 0, 1]), 0, 3)["v"]
    assert shuffled.equals(first_epoch["v"].take(pa.array([2, 0, 1])))
    cache.drop()


def test_replaying_sparse_vectors_does_not_expand_the_whole_cache_in_memory(tmp_path):
    """8 frames of 250 one-hot vectors of size 8192: ~100 KiB on disk, 125 MiB if made dense.
    Opening the replay must keep them compact; a batch is dense, as in epoch 1."""
    size, rows, frames = 8192, 250, 8
    cache = RunCache(tmp_path / "run", None, "training run 1")
    for f in range(frames):
        vectors = [SparseVector(size, {(f * rows + r) % size: 1.0}) for r in range(rows)]
        cache.append("train", 0, vectors_frame(vectors), rows)
    assert cache.seal({"train": rows * frames}) is None
    assert sum(p.stat().st_size for p in (tmp_path / "run").iterdir()) < 1 << 20, "the cache on disk is compact"
    tracemalloc.start()
    try:
        replay = cache.replay("train")
        opened = tracemalloc.get_traced_memory()[1]
        batch = replay.take(epoch_order(rows * frames, 1, 0, 1), 0, 64)["v"]
    finally:
        tracemalloc.stop()
    assert opened < 8 << 20, f"opening the replay allocated {opened / 2**20:.0f} MiB"
    assert batch.nbytes < 64 << 10, "a batch of sparse vectors stays sparse"
    sparse = VectorReader("v", batch[:1], size=size, sparse=True).parts(batch)
    assert len(sparse["v/values"]) == 64 and (sparse["v/values"] == 1.0).all()
    dense = VectorReader("v", batch[:1], size=size).parts(batch)["v"]  # dense only when asked, per batch
    assert dense.shape == (64, size) and dense.dtype == np.float64 and (dense.sum(axis=1) == 1.0).all()
    cache.drop()


def wide_batches(count, rows, width=1024):
    """Frames of ``rows`` rows of ``width`` float32 (row ``i`` holds ``i`` everywhere), ids in ``i``."""
    for b in range(count):
        ids = np.arange(b * rows, (b + 1) * rows)
        values = np.repeat(ids.astype(np.float32), width)
        x = pa.FixedSizeListArray.from_arrays(pa.array(values), width)
        yield pa.RecordBatch.from_arrays([pa.array(ids), x], names=["i", "x"])


def test_windows_reuse_memory_prepared_in_epoch_1_but_never_memory_a_batch_still_uses(tmp_path):
    """Windows of 1.2 MB (4 KiB rows): the first windows' memory is allocated and touched while
    epoch 1 streams in, later windows take it again once nothing refers to it, and a batch held
    across many later windows keeps its rows."""
    cache = RunCache(tmp_path / "run", None, "training run 1", {"train": 1200}, run_orders(True, 3, 0, "train"))
    for partition, batch in enumerate(wide_batches(4, 300)):
        cache.append("train", partition, encode_batch(batch), batch.num_rows)
    cache.preparing.join(timeout=30)
    prepared = {id(buffer) for buffer in cache.buffers._buffers}  # ids: a reference would hold them
    assert cache.buffers.kept == 4, "the window read, the one read ahead, those TensorFlow still holds"
    assert cache.seal({"train": 1200}) is None
    replay = cache.replay("train")
    replay.window_rows = 300  # four windows an epoch
    held = replay.take_epoch(1, 0, 100)["x"]  # kept while the rest of two epochs goes by
    rows_held = held[:, 0].copy()
    assert id(held.base) in prepared, "the first window is in memory made ready"
    bases = []
    for epoch in (1, 2):
        for start in range(100 if epoch == 1 else 0, 1200, 100):
            batch = replay.take_epoch(epoch, start, 100)["x"]
            if epoch == 2 or start >= 300:  # past the held batch's own window
                assert batch.base is not held.base, "memory a batch still uses is never gathered into again"
            order = epoch_order(1200, 3, 0, epoch)
            np.testing.assert_array_equal(batch[:, 0], order[start : start + 100].astype(np.float32))
            np.testing.assert_array_equal(batch[:, -1], batch[:, 0])
            bases.append(id(batch.base))
            del batch
    np.testing.assert_array_equal(held[:, 0], rows_held)
    pooled = {id(buffer) for buffer in cache.buffers._buffers}
    assert set(bases) <= pooled, "every window of two epochs was gathered into the run's pooled memory"
    assert len(set(bases)) <= WindowBuffers.KEEP < 8, "eight windows in at most four buffers: reused"
    cache.drop()
    assert cache.buffers.kept == 0


def test_the_training_and_validation_replays_never_gather_through_the_same_scratch(tmp_path):
    """Keras validates while the next training epoch's first window is read ahead: the two
    splits' gathers run at once, so each replay has its own scratch rows (shared ones mixed the
    splits' rows)."""
    cache = RunCache(tmp_path / "run", None, "training run 1", {"train": 600, "validation": 600})
    for partition, batch in enumerate(wide_batches(2, 300)):
        cache.append("train", partition, encode_batch(batch), batch.num_rows)
        cache.append("validation", partition, encode_batch(batch), batch.num_rows)
    assert cache.seal({"train": 600, "validation": 600}) is None
    train, validation = cache.replay("train"), cache.replay("validation")
    order = epoch_order(600, 3, 0, 1)
    train.take(order, 0, 600), validation.take(order, 0, 600)
    assert not np.shares_memory(train._scratch["x"], validation._scratch["x"])
    cache.drop()


def test_window_buffers_give_object_and_small_columns_memory_of_their_own():
    buffers = WindowBuffers()
    strings = buffers.take((300_000,), object)  # 2.4 MB of pointers: not a view of raw bytes
    assert strings.dtype == object and buffers.kept == 0
    assert buffers.take((10,), np.float32).shape == (10,) and buffers.kept == 0
    held = buffers.take((1 << 19,), np.float32)  # 2 MiB: pooled
    assert buffers.kept == 1 and buffers.take((1 << 19,), np.float32).base is not held.base, "in use: not reused"
    del held
    first = buffers.take((1 << 19,), np.float32)
    assert any(first.base is kept for kept in buffers._buffers), "free again: reused"


def test_an_epoch_order_that_does_not_cover_the_cache_is_refused(tmp_path):
    cache = RunCache(tmp_path / "run", None, "training run 1", {"train": 30}, lambda split, epoch, rows: np.arange(29))
    for partition, batch in enumerate(batches_of(3)):
        cache.append("train", partition, encode_batch(batch), batch.num_rows)
    assert cache.seal({"train": 30}) is None
    with pytest.raises(RuntimeError, match="29 rows, the cache 30"):
        cache.replay("train").take_epoch(1, 0, 10)
    cache.drop()


@pytest.mark.parametrize("ragged_frame", [False, True], ids=["widths-3-and-5", "and-a-ragged-frame"])
def test_a_list_column_cached_at_several_widths_replays_every_row(tmp_path, ragged_frame):
    """Issue 53, item 1: the feeder sends a list column as a fixed-size list per frame whenever the
    frame's rows agree in length, so one run caches frames of shape (n, 3) and (n, 5) of one column.
    The cached epoch (and the first window gathered during epoch 1) must serve every row of it, as
    epoch 1 did; the columns of one width in every frame stay dense numpy (the fast path)."""
    lengths = {0: [3] * 8, 1: [5] * 8, 2: [1, 2, 3, 4, 1, 2, 3, 4] if ragged_frame else [3] * 8}
    orders = run_orders(True, 3, 0, "train")
    cache = RunCache(tmp_path / "run", None, "training run 1", {"train": 24}, orders, ("train", 1, (8, 8, 8)))
    for partition, start in ((1, 0), (0, 0), (2, 0), (1, 4), (0, 4), (2, 4)):  # partitions interleave
        first = partition * 8 + start
        batch = fixed_width_batch(sequences_batch(first, lengths[partition][start : start + 4]))
        cache.append("train", partition, encode_batch(batch), 4)
    assert cache.seal({"train": 24}) is None
    replay = cache.replay("train")
    per_row = {partition * 8 + r: n for partition, row in lengths.items() for r, n in enumerate(row)}
    for epoch in (1, 2):
        taken = replay.take_epoch(epoch, 0, 24)
        ids = np.asarray(taken["i"])
        assert list(ids) == list(np.arange(24)[epoch_order(24, 3, 0, epoch)])
        x = taken["x"].tolist() if isinstance(taken["x"], np.ndarray) else taken["x"].to_pylist()
        assert x == [[float(i)] * per_row[i] for i in ids]
        assert isinstance(taken["f"], np.ndarray) and taken["f"].shape == (24, 2), "one width: dense"
        np.testing.assert_array_equal(taken["f"], np.stack([ids, -ids], axis=1).astype(np.float32))
        assert isinstance(taken["i"], np.ndarray)
    cache.drop()


def open_descriptors() -> set[int]:
    """This process's open file descriptors."""
    return {int(fd) for fd in os.listdir("/proc/self/fd")}


def test_ten_thousand_partitions_cache_under_a_soft_limit_of_1024_descriptors(tmp_path):
    """Issue 53, item 8: the cache held a file and a mapping (two descriptors) per partition, so
    under the usual soft limit of 1,024 it failed with EMFILE near partition 510 and the run was fed
    from Spark every epoch. Its descriptors are bounded whatever the partition count."""
    partitions, frame = 10_000, ids_frame(0, 1)  # one row a partition (told apart by its origin)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, 1024), hard))
    try:
        before = open_descriptors()
        cache = RunCache(tmp_path / "run", None, "training run 1", {"train": partitions})
        complete = [cache.append("train", p, frame, 1) for p in range(partitions)]
        held = len(open_descriptors() - before)
        assert cache.failure is None and complete[-1], cache.failure
        assert cache.seal({"train": partitions}) is None
        origins = cache.replay("train").take(None, 0, partitions)[ORIGIN]
        replaying = len(open_descriptors() - before)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    print(f"descriptors the cache holds at {partitions:,} partitions: {held} caching, {replaying} replaying")
    assert list(origins >> 40) == list(range(partitions)), "every partition's row, in partition order"
    assert held <= 4 and replaying <= 4
    cache.drop()
    assert not open_descriptors() - before, "dropped: every descriptor closed"
