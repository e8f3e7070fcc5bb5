"""The first window of a run's first cached epoch, gathered from epoch 1's frames as they arrive.

A cached epoch is read a window at a time (``cache.CacheReplay``), the next window gathered while
one is read. The first window of the first cached epoch (epoch 2, or epoch 1 with
``deterministic``) could only be gathered once the node held its whole share, so that epoch
began by waiting for it, on cores Spark was still busy with, ending its feeding job. Its rows
are known before the first row arrives, though: the cache numbers rows by partition, then by
position within the partition, the plan says how many rows each partition sends this node
(``TrainingPlan.partition_rows``), and the epoch's permutation is seeded. So each frame's rows of
that window are copied into it as the frame is cached (epoch 1 mostly waits on Spark), and the
replay starts with the window in hand.

Only dense columns (numpy arrays of one dtype and row shape in every frame) are gathered so;
anything else (a column kept in Arrow, a partition sending more rows than planned) gives the
window up, and the replay gathers it as it gathers every other window.
"""

from __future__ import annotations

from itertools import accumulate

import numpy as np


class FirstWindow:
    """Rows ``order[:rows]`` of a cache numbered by ``partition_rows``, filled frame by frame.

    ``add`` takes each cached frame's columns (in the order the cache appends them); ``window``
    gives the columns, read-only, once every planned row was seen. Not thread-safe: the cache
    calls it under its lock.
    """

    def __init__(self, order: np.ndarray | None, rows: int, partition_rows: tuple[int, ...], columns: dict, take):
        """``take(shape, dtype)`` gives each column's memory (the run's ``WindowBuffers``);
        ``columns`` is the first frame's, for the names, dtypes and row shapes."""
        self.order = order
        wanted = np.arange(rows, dtype=np.int64) if order is None else np.asarray(order[:rows], dtype=np.int64)
        self._slots = np.argsort(wanted, kind="stable")  # wanted[_slots] ascending: each row's place in the window
        self._sorted = wanted[self._slots]
        self._planned = tuple(int(r) for r in partition_rows)
        self._starts = (0, *accumulate(self._planned))
        self._seen = [0] * len(self._planned)
        self._filled = 0
        self.columns = {name: take((rows, *column.shape[1:]), column.dtype) for name, column in columns.items()}

    @staticmethod
    def dense(columns: dict) -> bool:
        """Whether every column of a frame is a numpy array (not kept in Arrow)."""
        return all(isinstance(column, np.ndarray) and not column.dtype.hasobject for column in columns.values())

    def add(self, partition: int, columns: dict, rows: int) -> bool:
        """Copy the window's rows of a frame of ``rows`` rows from ``partition`` (the next rows the
        cache holds of it); False when the frame does not fit the plan or the first frame's
        columns, and the window is to be given up."""
        if not 0 <= partition < len(self._planned) or self._seen[partition] + rows > self._planned[partition]:
            return False
        if columns.keys() != self.columns.keys() or not self.dense(columns):
            return False
        for name, column in columns.items():
            kept = self.columns[name]
            if column.dtype != kept.dtype or column.shape[1:] != kept.shape[1:] or len(column) != rows:
                return False
        first = self._starts[partition] + self._seen[partition]
        low, high = np.searchsorted(self._sorted, (first, first + rows))
        if high > low:
            local, slots = self._sorted[low:high] - first, self._slots[low:high]
            for name, column in columns.items():
                self.columns[name][slots] = column[local]
        self._seen[partition] += rows
        self._filled += int(high - low)
        return True

    @property
    def complete(self) -> bool:
        """Whether every planned row of every partition was seen (so every row of the window)."""
        return self._filled == len(self._sorted) and tuple(self._seen) == self._planned

    def window(self) -> dict:
        """The gathered columns, read-only (a window serves a whole epoch unedited)."""
        for column in self.columns.values():
            column.flags.writeable = False
        return self.columns
