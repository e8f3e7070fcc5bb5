"""The node-side epoch cache over real sockets and files: feeder functions -> FeedServer (cache) -> DataFeed."""

from __future__ import annotations

import resource
from collections import Counter

import numpy as np
import pyarrow as pa
import pytest

from sparkdl.feed import feeder
from sparkdl.feed.cache import CacheReplay, RunCache, epoch_order
from sparkdl.feed.data_feed import DataFeed
from sparkdl.feed.feeder import FeedTarget
from sparkdl.feed.server import FeedServer
from sparkdl.feed.shares import balanced_shares
from sparkdl.feed.wire import encode_batch
from sparkdl.transport import protocol
from sparkdl.transport.channel import Endpoint, connect, new_secret

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


def feed_epoch(secret, server, partitions, epoch=0, session=1):
    """Feed one epoch of ``partitions`` (lists of row ids) to one node, one feeding task per partition."""
    target = FeedTarget(secret, (server.address,), (server.endpoint,), ("worker:0",), 30.0, "input")
    plan = balanced_shares([len(p) for p in partitions], 1)
    for index, ids in enumerate(partitions):
        batches = [
            pa.RecordBatch.from_arrays(
                [pa.array(np.asarray(ids, np.int64)), pa.array(np.asarray(ids, np.float32) * 2)], names=["i", "x"]
            )
        ]
        feeder.feed_training_partition(target, session, epoch, index, plan, batches, shuffle_seed=5)


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
    assert cache_files == ["train-p0.arrows", "train-p1.arrows"]
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


def test_a_node_told_not_to_replay_drops_its_cache_and_reads_the_queue(server, secret, tmp_path):
    assert ask(server, secret, plan_message(1, 30, 2)) == {"type": "ack"}
    feed_epoch(secret, server, [list(range(30))])
    ask(server, secret, {"type": "cache_use", "qname": "input", "session": 1, "use": False})
    assert not list((tmp_path / "cache").rglob("*.arrows"))
    feed_epoch(secret, server, [list(range(100, 130))], epoch=1)
    feed = DataFeed(server, input_mapping={"i": "i"}, feed_timeout=10)
    assert sorted(feed.next_batch(30)["i"]) == list(range(30))
    assert sorted(feed.next_batch(30)["i"]) == list(range(100, 130))


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
