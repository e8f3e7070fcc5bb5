"""Feeds for a node's feed server in tests: large frames fed from a thread, small epochs of row
ids, and inference partitions answered by a ``DataFeed`` (shared by the feed's tests)."""

from __future__ import annotations

import time

import numpy as np
import pyarrow as pa
from feed_servers import Worker, target

from sparkdl.columns.arrow_rows import fixed_width
from sparkdl.feed import feeder
from sparkdl.feed.data_feed import DataFeed
from sparkdl.feed.shares import balanced_shares

ROW_FLOATS = 256  # 1 KiB of float32 per row
FRAME_ROWS = 32  # ~32 KiB per frame
BIG_BATCHES = 1024  # 32 MiB in all: far more than the queue and the socket buffers


def big_batches(count, produced=None):
    """``count`` record batches of FRAME_ROWS rows (float32[ROW_FLOATS] "x", row id "i"), made lazily."""
    for b in range(count):
        if produced is not None:
            produced.append(b)
        ids = np.arange(b * FRAME_ROWS, (b + 1) * FRAME_ROWS, dtype=np.int64)
        x = pa.FixedSizeListArray.from_arrays(pa.array(np.repeat(ids.astype(np.float32), ROW_FLOATS)), ROW_FLOATS)
        yield pa.RecordBatch.from_arrays([x, pa.array(ids)], names=["x", "i"])


def feed_epoch(secret, server, partitions, epoch=0, session=1, shuffle_seed=5):
    """Feed one epoch of ``partitions`` (lists of row ids) to one node, one feeding task per
    partition (each shuffling its rows with ``shuffle_seed``, None: in the order given)."""
    plan = balanced_shares([len(p) for p in partitions], 1)
    for index, ids in enumerate(partitions):
        batches = [
            pa.RecordBatch.from_arrays(
                [pa.array(np.asarray(ids, np.int64)), pa.array(np.asarray(ids, np.float32) * 2)], names=["i", "x"]
            )
        ]
        feeder.feed_training_partition(
            target(secret, server), session, epoch, index, plan, batches, shuffle_seed=shuffle_seed
        )


def start_big_feed(secret, server, produced, feed_timeout=30.0):
    total = BIG_BATCHES * FRAME_ROWS
    return total, Worker(
        feeder.feed_training_partition,
        target(secret, server, feed_timeout=feed_timeout),
        1,
        0,
        0,
        balanced_shares([total], 1),
        big_batches(BIG_BATCHES, produced),
    )


def wait_until(condition, timeout: float = 10.0) -> bool:
    """Poll ``condition`` until true or ``timeout`` (bounded); returns its last value."""
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.02)
    return condition()


def serve_inference(feed: DataFeed, answer, durations: list | None = None) -> Worker:
    """``map_fun`` of an inference node: read batches and answer each with ``answer(batch)``."""

    def consume():
        while not feed.should_stop():
            batch = feed.next_batch(64)
            if batch:
                start = time.monotonic()
                feed.batch_results(answer(batch))
                if durations is not None:
                    durations.append(time.monotonic() - start)

    return Worker(consume)


def infer(tgt, partition: int, rows: list) -> list:
    """Feed one inference partition to node 0 and return its results."""
    return [r for results in feeder.infer_partition(tgt, 0, partition, feeder.rdd_batches(rows)) for r in results]


def sequences_batch(first: int, lengths: list[int]) -> pa.RecordBatch:
    """A DataFrame's ``x array<float>, f array<float>, i long`` as Spark sends it (lists): row ``r``
    (from ``first``) has ``x`` of ``lengths`` values ``r`` and ``f`` of two, ``[r, -r]``."""
    ids = np.arange(first, first + len(lengths))
    offsets = pa.array(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32))
    x = pa.ListArray.from_arrays(offsets, pa.array(np.repeat(ids, lengths).astype(np.float32)))
    pairs = pa.array(np.stack([ids, -ids], axis=1).reshape(-1).astype(np.float32))
    f = pa.ListArray.from_arrays(pa.array(np.arange(0, 2 * len(ids) + 1, 2, dtype=np.int32)), pairs)
    return pa.RecordBatch.from_arrays([x, f, pa.array(ids)], names=["x", "f", "i"])


def fixed_width_batch(batch: pa.RecordBatch) -> pa.RecordBatch:
    """``batch`` as a feeder sends it: a list column whose rows agree in length as a fixed-size list."""
    return pa.RecordBatch.from_arrays([fixed_width(c) for c in batch.columns], names=batch.schema.names)
