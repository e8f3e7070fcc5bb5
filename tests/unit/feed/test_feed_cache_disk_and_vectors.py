"""The epoch cache (``feed/cache.py``) when the disk fills up while sealing, and with sparse
pyspark.ml Vectors: real files, real Arrow frames, no Spark."""

from __future__ import annotations

import errno
import io
import logging
import tracemalloc

import numpy as np
import pyarrow as pa
import pytest
from pyspark.ml.linalg import DenseVector, SparseVector, VectorUDT
from pyspark.sql.pandas.types import to_arrow_type

from sparkdl.columns.arrow_rows import ORIGIN, describe_origin
from sparkdl.columns.readers import VectorReader
from sparkdl.feed.cache import RunCache, epoch_order
from sparkdl.feed.columns import batch_to_columns
from sparkdl.feed.wire import decode_batch, encode_batch

pytestmark = pytest.mark.timeout(120)


class FullDisk(io.FileIO):
    """A file on a disk with no space left: every write reaches the OS and fails with ENOSPC.

    A stand-in for a full disk or an exhausted quota (no small file system can be mounted here);
    wrapped in Python's own ``io.BufferedWriter``, small writes succeed into its buffer and the
    failure shows only when the buffer is flushed, as on a real full disk.
    """

    def write(self, data):
        raise OSError(errno.ENOSPC, "No space left on device")


def ids_frame(start: int, rows: int = 10) -> bytes:
    ids = np.arange(start, start + rows)
    return encode_batch(pa.RecordBatch.from_arrays([pa.array(ids)], names=["i"]))


def test_a_disk_that_fills_up_while_sealing_drops_the_cache_with_a_warning(tmp_path, caplog):
    cache = RunCache(tmp_path / "run", None, "training run 3")
    cache.append("train", 0, ids_frame(0), 10)
    part = cache._files[("train", 0)]
    part.handle.close()
    part.handle = io.BufferedWriter(FullDisk(part.path, "ab"))  # the same file, now on a full disk
    cache.append("train", 0, ids_frame(10), 10)  # buffered: no error yet
    caplog.set_level(logging.WARNING, logger="sparkdl.feed.cache")
    problem = cache.seal({"train": 20})  # closing flushes the buffer: ENOSPC
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
