"""One split's cached frames, from every Spark partition: a file written, mapped and decoded as it grows.

The epoch cache (``cache.py``) keeps each frame a node receives in epoch 1 in its split's file, and
the cached epochs read the rows back through numpy views over the file's mapping. Mapping and
decoding every frame once the whole share was in put that work at the very start of the first
cached epoch, on a thread that had to win the GIL from TensorFlow's: 0.02 s of CPU took 0.06-0.12 s
then, and the epoch waited for it. So the file is mapped ahead of what is written into it: it is
extended a region at a time (a hole: no disk is used until frames fill it), each region as large as
the file so far (at least ``MIN_REGION_BYTES``: a file of any size is a few mappings), each region
mapped once, and each frame written after the previous one and decoded from the mapping at once,
during epoch 1, when the node mostly waits on Spark. ``close`` cuts the file back to its frames.

One file per split, not per partition: an open file and each of its mappings hold a descriptor
(CPython's ``mmap`` keeps a duplicate of the file's), so a file per partition ran out of the usual
soft limit of 1,024 descriptors at about 510 partitions. A split's file holds a descriptor and one
per region, a few whatever the partition count; the cache appends under its lock, one frame at a
time, and the frames' partitions say where their rows fall in the canonical order (``canonical``).
"""

from __future__ import annotations

import mmap
import os
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ..columns.arrow_rows import origin_values
from .columns import batch_to_columns, data_names
from .elements import RowLayout
from .wire import decode_batch

#: The file is extended and mapped at least this many bytes at a time (or one frame, if larger).
MIN_REGION_BYTES = 8 << 20


class CachedFrame(NamedTuple):
    """Where one cached frame is: its partition, its bytes in the file, and its rows."""

    partition: int
    offset: int
    length: int
    rows: int


class CacheFile:
    """The frames of one split, from any partition, in arrival order, each decoded as it is written.

    ``columns`` holds each frame's columns as epoch 1 gave them (``batch_to_columns``): numpy
    views over the mapping where Arrow's layout allows, else Arrow arrays over it; rows without
    an origin column (a feeder driven by hand) get their position in their partition's stream.
    ``canonical`` lists the frames in the cache's row order (by partition, then arrival). Not
    thread-safe: the run's cache calls it under its lock.
    """

    def __init__(self, path: Path):
        self.path = path
        self.frames: list[CachedFrame] = []  # arrival order
        self.columns: list[dict] = []  # each frame's, arrival order
        self.layout: RowLayout | None = None  # how the elements were shaped (the first frame's schema)
        self.names: list[str] = []
        self.size = 0  # bytes of frames
        self.rows = 0
        self._partition_rows: dict[int, int] = {}  # rows cached so far of each partition
        self._regions: list[tuple[int, mmap.mmap]] = []  # (file offset, its mapping)
        self._handle = open(path, "w+b", buffering=0)  # noqa: SIM115 (closed by close())

    def append(self, partition: int, frame, rows: int) -> None:
        """Write ``frame`` (Arrow IPC bytes of ``rows`` rows of ``partition``) after the others and
        decode it from the mapping; OSError when the disk refuses it (nothing is added then)."""
        data = memoryview(frame).cast("B")
        start, length = self.size, len(data)
        if not self._regions or start + length > self._regions[-1][0] + len(self._regions[-1][1]):
            self._map_region(start, length)
        self._handle.seek(start)
        written = 0
        while written < length:  # a raw write may write less than asked
            written += self._handle.write(data[written:])
        base, mapped = self._regions[-1]
        batch = decode_batch(memoryview(mapped)[start - base : start - base + length])
        before = self._partition_rows.get(partition, 0)
        self.columns.append(batch_to_columns(batch, origin_values(partition, before + np.arange(rows))))
        if self.layout is None:
            self.layout, self.names = RowLayout.of(batch.schema), data_names(batch.schema)
        self.frames.append(CachedFrame(partition, start, length, rows))
        self._partition_rows[partition] = before + rows
        self.size += length
        self.rows += rows

    def canonical(self) -> list[int]:
        """The frames' indices in the cache's row order: by partition, then in arrival order (the
        ledger admits a partition's rows in order, whatever attempts delivered them)."""
        return sorted(range(len(self.frames)), key=lambda index: (self.frames[index].partition, index))

    def _map_region(self, start: int, length: int) -> None:
        """Extend the file past a frame of ``length`` bytes at ``start`` and map it from there."""
        base = start - start % mmap.ALLOCATIONGRANULARITY
        end = max(base + max(MIN_REGION_BYTES, start), start + length)  # doubling: O(log size) regions
        os.ftruncate(self._handle.fileno(), end)
        self._regions.append((base, mmap.mmap(self._handle.fileno(), end - base, access=mmap.ACCESS_READ, offset=base)))

    def close(self) -> None:
        """Cut the file back to its frames and close it (a no-op when closed); OSError if that fails."""
        if self._handle.closed:
            return
        try:
            os.ftruncate(self._handle.fileno(), self.size)
        finally:
            self._handle.close()

    def release_pages(self, last_region: bool = False) -> None:
        """Drop the mapped pages (of the region written last only, with ``last_region``) from this
        process; the kernel's page cache keeps them."""
        for _, mapped in self._regions[-1:] if last_region else self._regions:
            try:
                mapped.madvise(mmap.MADV_DONTNEED)
            except (AttributeError, OSError, ValueError):  # not on this platform, or already closed
                return

    def unmap(self) -> None:
        """Forget the frames' columns and unmap (a mapping still viewed is unmapped once freed)."""
        self.columns = []
        for _, mapped in self._regions:
            try:
                mapped.close()
            except BufferError:
                pass
        self._regions = []
