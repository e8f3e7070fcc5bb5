"""Exactly-once delivery of fed partitions: which rows of each partition a node has accepted.

Spark retries a failed feeding task, runs speculative copies of a slow one, and recomputes the
partitions of a lost executor, so the rows of one partition can reach a node from several
attempts, one after the other or at the same time, each starting from the partition's first row.
A node numbers the rows each stream brings it (its position in the partition's rows for this
node: the plan and the data are deterministic, so every attempt sends the same rows in the same
order) and keeps, per ``(session, epoch, split, partition)``, a watermark: how many of them it
has accepted. A frame's rows below the watermark were delivered already and are dropped; the
rest are accepted and raise the watermark. Whichever attempt gets furthest delivers the rest,
so every row is queued (and cached) exactly once, in partition order, with no buffering.

Each slot has a lock that the receiving thread holds from admitting a frame until its rows are
queued and cached: two attempts racing never interleave a partition's rows out of order (the
epoch cache keeps them in partition order, which the reproducible shuffle relies on).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from ..errors import DeliveryConflict as DeliveryConflict  # re-exported: the server catches it

#: (qname, session, epoch, split, partition): one partition's rows of one epoch and split.
SlotKey = tuple[str, int, int, str, int]


@dataclass
class PartitionSlot:
    """What this node accepted of one partition, for one epoch and split."""

    accepted: int = 0  # rows accepted so far (the watermark)
    closed: bool = False  # the run was read in full: a late attempt's rows are all surplus
    lock: threading.Lock = field(default_factory=threading.Lock)

    def admit(self, position: int, rows: int) -> tuple[int, int]:
        """Of a frame holding the stream's rows ``[position, position + rows)``, the range
        ``(start, stop)`` relative to the frame that is new to this node (empty when it has them all).
        Call with ``lock`` held."""
        if self.closed:
            return rows, rows
        if position > self.accepted:  # an attempt cannot skip rows: its stream starts at the first
            raise DeliveryConflict(f"rows from position {position} arrived, but only {self.accepted} were accepted")
        start = self.accepted - position
        if start >= rows:
            return rows, rows
        self.accepted = position + rows
        return start, rows

    def finish(self, attempt: int, rows: int) -> None:
        """Check an attempt's stream that ended with ``rows`` rows in all (its ``Done``): fewer
        than were delivered means the data changed between attempts."""
        if not self.closed and rows < self.accepted:
            raise DeliveryConflict(
                f"attempt {attempt} sent {rows} rows, but an earlier attempt delivered {self.accepted}"
            )


class DeliveryLedger:
    """Every partition slot of one node's training runs (thread-safe)."""

    def __init__(self) -> None:
        self._slots: dict[SlotKey, PartitionSlot] = {}
        self._closed: set[tuple[str, int]] = set()  # training runs read in full
        self._lock = threading.Lock()

    def slot(self, key: SlotKey) -> PartitionSlot:
        """The slot of ``key`` (created on first use)."""
        with self._lock:
            if key[:2] in self._closed:
                return PartitionSlot(closed=True)
            return self._slots.setdefault(key, PartitionSlot())

    def close_run(self, qname: str, session: int) -> None:
        """A training run was read in full: forget its slots; streams that still come for it
        (a straggling attempt Spark has not killed yet) deliver nothing."""
        with self._lock:
            self._closed.add((qname, session))
            for key in [k for k in self._slots if k[:2] == (qname, session)]:
                del self._slots[key]
