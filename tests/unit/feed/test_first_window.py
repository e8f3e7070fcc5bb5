"""The first cached epoch's first window, gathered from epoch 1's frames as they arrive
(``feed/first_window.py``), over real cache files and a real feed server."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from sparkdl.feed import cache as epoch_cache
from sparkdl.feed import cache_file
from sparkdl.feed.cache import RunCache, epoch_order, run_orders
from sparkdl.feed.data_feed import DataFeed
from sparkdl.feed.server import FeedServer
from sparkdl.feed.shares import balanced_shares
from sparkdl.feed.wire import encode_batch
from sparkdl.transport import protocol
from sparkdl.transport.channel import Endpoint, connect, new_secret

from node_feeds import feed_epoch

pytestmark = pytest.mark.timeout(120)

PARTITION_ROWS = (100, 0, 120, 80)
FRAME_ROWS = 30


def frames(partition_rows=PARTITION_ROWS, text=False):
    """``(partition, Arrow IPC frame, rows)``, the partitions' frames interleaved (each
    partition's in order); row ``g`` holds id ``g``."""
    per_partition, start = [], 0
    for partition, rows in enumerate(partition_rows):
        ids = np.arange(start, start + rows)
        start += rows
        mine = []
        for first in range(0, rows, FRAME_ROWS):
            chunk = ids[first : first + FRAME_ROWS]
            arrays = [pa.array(chunk), pa.FixedSizeListArray.from_arrays(pa.array(np.repeat(chunk, 4).astype("f4")), 4)]
            if text:
                arrays.append(pa.array([str(i) for i in chunk]))
            batch = pa.RecordBatch.from_arrays(arrays, names=["i", "x", "s"][: len(arrays)])
            mine.append((partition, encode_batch(batch), len(chunk)))
        per_partition.append(mine)
    interleaved = []
    while any(per_partition):
        for mine in per_partition:
            if mine:
                interleaved.append(mine.pop(0))
    return interleaved


def cached(tmp_path, name, first_window, epoch=1, partition_rows=PARTITION_ROWS, text=False):
    rows = sum(PARTITION_ROWS)
    cache = RunCache(tmp_path / name, None, "training run 1", {"train": rows}, run_orders(True, 3, 0, "train"),
                     ("train", epoch, partition_rows) if first_window else None)  # fmt: skip
    for partition, frame, count in frames(text=text):
        cache.append("train", partition, frame, count)
    assert cache.seal({"train": rows}) is None
    return cache


def read_epochs(replay, epochs, step=25):
    return [np.concatenate([replay.take_epoch(e, s, step)["i"] for s in range(0, replay.rows, step)]) for e in epochs]


@pytest.fixture
def small_windows(monkeypatch):
    """Windows of 64 rows (i: 8 bytes, x: 16, the origin: 8), so an epoch has several."""
    monkeypatch.setattr(epoch_cache, "WINDOW_BYTES", 64 * 32)


def test_the_first_cached_epoch_starts_with_a_window_gathered_as_epoch_1_came_in(tmp_path, small_windows):
    cache = cached(tmp_path, "early", first_window=True)
    replay = cache.replay("train")
    assert replay.started_with == 1 and replay.window_rows == 64
    canonical = np.arange(sum(PARTITION_ROWS))  # partition order, then position: the ids themselves
    got = read_epochs(replay, (1, 2, 3))
    for epoch, rows in zip((1, 2, 3), got):
        assert list(rows) == list(canonical[epoch_order(len(canonical), 3, 0, epoch)])
    reference = cached(tmp_path, "gathered", first_window=False).replay("train")
    assert reference.started_with is None
    x = replay.take_epoch(1, 0, 64)["x"]
    assert not x.flags.writeable and list(x[:, 0]) == list(reference.take_epoch(1, 0, 64)["x"][:, 0])
    cache.drop()


def test_a_deterministic_run_gathers_epoch_1_s_own_first_window(tmp_path, small_windows):
    cache = cached(tmp_path, "run", first_window=True, epoch=0)
    replay = cache.replay("train")
    assert replay.started_with == 0
    [rows] = read_epochs(replay, (0,))
    assert list(rows) == list(epoch_order(len(rows), 3, 0, 0))
    cache.drop()


@pytest.mark.parametrize(
    "case",
    [
        "a column kept in Arrow",
        "a partition sends more rows than planned",
        "a partition the plan does not know",
        "the plan's rows do not add up",
    ],
)
def test_a_frame_that_cannot_take_part_gives_the_window_up_and_the_replay_gathers_it(tmp_path, small_windows, case):
    rows = sum(PARTITION_ROWS)
    options = {
        "a column kept in Arrow": dict(text=True),
        "a partition sends more rows than planned": dict(partition_rows=(101, 0, 119, 80)),  # 300 all the same
        "a partition the plan does not know": dict(partition_rows=(100, 0, 200)),
        "the plan's rows do not add up": dict(partition_rows=(100, 0, 120, 81)),
    }[case]
    cache = cached(tmp_path, "run", first_window=True, **options)
    replay = cache.replay("train")
    assert replay.started_with is None
    [got] = read_epochs(replay, (1,))
    assert list(got) == list(np.arange(rows)[epoch_order(rows, 3, 0, 1)])
    cache.drop()


def test_a_node_fed_with_its_partition_counts_serves_epoch_2_from_the_window_it_gathered(tmp_path):
    """Through the feed server: the plan carries the node's rows per partition (as the driver's
    shares count them), and epoch 2 starts with its first window gathered while epoch 1 was fed."""
    secret = new_secret()
    server = FeedServer(secret, "127.0.0.1", cache_dir=tmp_path / "cache", endpoint=Endpoint.feed("test-cluster", 0))
    try:
        partitions = [list(range(0, 40)), [], list(range(40, 70))]
        shares = balanced_shares([len(p) for p in partitions], 1)
        plan = protocol.TrainingPlan(
            session=1, epochs=3, rows_per_epoch=70, seed=5, partition_rows=shares.node_partition_rows(0)
        )
        with connect(server.address, secret, timeout=10, endpoint=server.endpoint) as channel:
            channel.send(protocol.Plan(plan).wire())
            assert channel.recv(10) == {"type": "ack"}
        feed_epoch(secret, server, partitions, shuffle_seed=None)  # position order is id order
        assert server.run_cache("input", 1).replay("train").started_with == 1
        feed = DataFeed(server, input_mapping={"i": "i"}, feed_timeout=10)
        epochs = [np.concatenate([feed.next_batch(10)["i"] for _ in range(7)]) for _ in range(3)]
        assert sorted(epochs[0]) == list(range(70))
        assert [list(e) for e in epochs[1:]] == [list(np.arange(70)[epoch_order(70, 5, 0, e)]) for e in (1, 2)]
    finally:
        server.terminated.set()
        server.close()


def test_a_cache_file_decodes_each_frame_as_it_is_written_across_regions_and_seals_to_its_frames(tmp_path, monkeypatch):
    """Regions of 64 KiB and up, frames of 8-200 KiB (some larger than a region): every frame decodes
    from the mapping as written, and the sealed file is exactly the frames, back to back."""
    monkeypatch.setattr(cache_file, "MIN_REGION_BYTES", 64 << 10)
    cache = RunCache(tmp_path / "run", None, "training run 1")
    sent, first = [], 0
    for rows in (1000, 9000, 25000, 3000, 1, 12000):
        ids = np.arange(first, first + rows)
        frame = encode_batch(pa.RecordBatch.from_arrays([pa.array(ids)], names=["i"]))
        cache.append("train", 0, frame, rows)
        sent.append(bytes(frame))
        first += rows
    part = cache.file("train")
    assert [int(c["i"][0]) for c in part.columns] == [0, 1000, 10000, 35000, 38000, 38001]
    assert cache.seal({"train": first}) is None
    assert part.path.read_bytes() == b"".join(sent), "no hole left past the frames"
    assert list(cache.replay("train").take(None, 0, first)["i"]) == list(range(first))
    cache.drop()
