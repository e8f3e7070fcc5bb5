"""sparkdl.feed.queues: every wait is bounded (issue 22, item 6), a queue's ``put`` given a timeout
included; numpy and Arrow pieces of one column join."""

from __future__ import annotations

import threading
import time

import numpy as np
import pyarrow as pa
import pytest

from sparkdl.feed.queues import END, BoundedQueue, concatenate, same_kind

pytestmark = pytest.mark.timeout(60)


def test_put_on_a_queue_that_stays_full_times_out():
    queue = BoundedQueue(max_bytes=10)
    queue.put("a", nbytes=10)
    start = time.monotonic()
    with pytest.raises(TimeoutError, match="stayed full"):
        queue.put("b", nbytes=5, timeout=0.2)
    assert 0.15 < time.monotonic() - start < 2
    queue.put(END, timeout=0.2)  # markers never wait
    assert queue.nbytes == 10 and [queue.get(timeout=1), queue.get(timeout=1)] == ["a", END]


def test_put_with_a_timeout_goes_in_once_a_reader_makes_room():
    queue, done = BoundedQueue(max_bytes=10), []
    queue.put("a", nbytes=10)  # the old signature still works
    writer = threading.Thread(target=lambda: done.append(queue.put("b", nbytes=5, timeout=10)), daemon=True)
    writer.start()
    assert queue.get(timeout=1) == "a"
    writer.join(5)
    assert done == [None] and queue.get(timeout=1) == "b"


def test_numpy_and_arrow_pieces_of_one_column_join_and_compare():
    dense = np.arange(6, dtype=np.float32).reshape(2, 3)
    ragged = pa.array([[1.0], [2.0, 3.0]], pa.list_(pa.float32()))
    joined = concatenate("x", [dense, ragged])
    assert joined.to_pylist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0], [1.0], [2.0, 3.0]]
    assert same_kind(dense, ragged) and not same_kind(dense, pa.array([["a"]]))
    assert concatenate("y", [np.arange(2), np.arange(3)]).tolist() == [0, 1, 0, 1, 2]


def test_where_widths_vary_two_widths_of_one_list_column_are_one_kind():
    narrow, wide = np.zeros((2, 3), np.float32), np.zeros((4, 5), np.float32)
    assert not same_kind(narrow, wide), "an RDD's arrays: the shape is the column's"
    assert same_kind(narrow, wide, widths_vary=True), "a DataFrame's array<float>: the width is the batch's"
    assert not same_kind(narrow, wide.astype(np.float64), widths_vary=True)
    assert not same_kind(narrow, np.zeros((2, 3, 1), np.float32), widths_vary=True), "another depth"
