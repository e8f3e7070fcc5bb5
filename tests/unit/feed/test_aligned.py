"""Blocks handed to tf.data start on 64-byte boundaries, so TensorFlow adopts them without a copy."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from sparkdl.feed import aligned
from sparkdl.feed.cache import RunCache, epoch_order
from sparkdl.feed.wire import encode_batch

pytestmark = pytest.mark.timeout(60)


def test_empty_concatenate_and_ensure_give_aligned_arrays_with_the_same_values():
    for shape, dtype in (((7, 3), np.float32), ((5,), np.int64), ((3, 2, 2), np.float64)):
        assert aligned.is_aligned(aligned.empty(shape, dtype))
    parts = [np.arange(12, dtype=np.float32).reshape(4, 3), np.ones((2, 3), np.float32)]
    joined = aligned.concatenate(parts)
    assert aligned.is_aligned(joined)
    np.testing.assert_array_equal(joined, np.concatenate(parts))
    unaligned = np.empty(1001, np.float32)[1:]
    unaligned[:] = np.arange(1000)
    assert not aligned.is_aligned(unaligned)
    copy = aligned.ensure(unaligned)
    assert aligned.is_aligned(copy) and np.array_equal(copy, unaligned)
    assert aligned.ensure(copy) is copy  # already aligned: no copy


def test_concatenate_refuses_pieces_of_different_shapes():
    with pytest.raises(ValueError, match="different shapes"):
        aligned.concatenate([np.zeros((2, 3)), np.zeros((2, 4))])


def test_cached_rows_are_served_in_aligned_blocks(tmp_path):
    """A cached epoch's blocks reach TensorFlow without a copy: every column of every block is aligned,
    including blocks that span two of the replay's windows."""
    cache = RunCache(tmp_path / "run", None, "training run 1")
    rows, width = 600, 784
    for partition in range(3):
        ids = np.arange(partition * 200, (partition + 1) * 200)
        features = pa.FixedSizeListArray.from_arrays(pa.array(np.repeat(ids, width).astype(np.float32)), width)
        batch = pa.RecordBatch.from_arrays([features, pa.array(ids)], names=["features", "label"])
        cache.append("train", partition, encode_batch(batch), batch.num_rows)
    assert cache.seal({"train": rows}) is None
    replay = cache.replay("train")
    replay.window_rows = 96  # several windows, so some blocks straddle two
    order = epoch_order(rows, seed=1, node=0, epoch=1)
    for start in range(0, rows, 64):
        block = replay.take(order, start, 64)
        assert all(aligned.is_aligned(column) for column in block.values()), start
        np.testing.assert_array_equal(block["label"], order[start : start + 64])
        np.testing.assert_array_equal(block["features"][:, 0], order[start : start + 64].astype(np.float32))
    cache.drop()
