"""Exactly-once delivery of fed partitions: which rows of each partition a node has accepted.

Spark retries a failed feeding task, runs speculative copies of a slow one, and recomputes the
partitions of a lost executor, so the rows of one partition can reach a node from several
attempts, one after the other or at the same time, each starting from the partition's first row.
A node numbers the rows each stream brings it (its position in the partition's rows for this
node) and keeps, per ``(session, epoch, split, partition)``, a watermark: how many of them it
has accepted. A frame wholly below the watermark was delivered already and is dropped; a frame
at the watermark is accepted and raises it. Whichever attempt gets furthest delivers the rest,
so every row is queued (and cached) exactly once, in partition order, with no buffering.

That is only right if every attempt sends the same rows in the same order, which Spark does not
promise: a recomputed partition that came out of a shuffle (blocks of a cached DataFrame lost
with their executor) holds the same rows in another order, and a non-deterministic source other
rows. So the slot also keeps, for each frame it accepted, where it ends and a digest of its bytes
(8 bytes a frame, computed on the receiving path only). The feeder cuts a partition into frames
deterministically (the same rows give the same frames, byte for byte), so a frame of a later
attempt that overlaps the accepted rows must be one of the accepted frames, with the same
digest; any other frame there (rows in another order, other rows, other frame boundaries) is a
``DeliveryConflict``, which the node turns into a rejection naming node, partition and attempt.

Each slot has a lock that the receiving thread holds from admitting a frame until its rows are
queued and cached: two attempts racing never interleave a partition's rows out of order (the
epoch cache keeps them in partition order, which the reproducible shuffle relies on). The
watermark rises only once the frame's rows are queued (``commit``): rows that could not be queued
(the queue stayed full, the stream was dropped) are delivered by the next attempt.
"""

from __future__ import annotations

import threading
from array import array
from bisect import bisect_left
from dataclasses import dataclass, field

import xxhash

from ..common.errors import DeliveryConflict as DeliveryConflict  # re-exported: the server catches it

#: (qname, session, epoch, split, partition): one partition's rows of one epoch and split.
SlotKey = tuple[str, int, int, str, int]
#: Bytes kept per accepted frame to recognise it when another attempt sends it again.
DIGEST_BYTES = 8


def frame_digest(frame) -> bytes:
    """A 64-bit digest of a received frame's bytes (what ``PartitionSlot.admit`` compares): XXH3-64.

    A checksum against accidents, such as rows sent in another order, not against an adversary
    (feeders are authenticated, and the channel MACs every frame); but a real hash of every byte,
    so no structure of the data cancels out (the multilinear hash it replaced gave ``[x, y]`` and
    ``[-x, -y]``, words that differ in their top bits only, one digest). XXH3 (the xxhash package)
    digests about 24 GiB per CPU-second here, SHA-256 1.3 (``benchmarks/frame_digest.py``): with
    XXH3 the digest costs the node's receiving path next to nothing, with SHA-256 about 12%.
    """
    return xxhash.xxh3_64_digest(frame)


@dataclass
class PartitionSlot:
    """What this node accepted of one partition, for one epoch and split."""

    accepted: int = 0  # rows accepted so far (the watermark)
    closed: bool = False  # the run was read in full: a late attempt's rows are all surplus
    lock: threading.Lock = field(default_factory=threading.Lock)
    _ends: array = field(default_factory=lambda: array("q"))  # where each accepted frame ends, in order
    _digests: bytearray = field(default_factory=bytearray)  # each accepted frame's digest, in the same order

    def admit(self, position: int, rows: int, digest: bytes) -> bool:
        """Whether a frame holding the stream's rows ``[position, position + rows)`` (with
        ``digest``, ``frame_digest`` of its bytes) is new to this node; if so, queue its rows and
        then ``commit`` it. False for a frame that was delivered already (it is dropped).
        Raises ``DeliveryConflict`` for a frame that does not match what was delivered where it
        overlaps. Call with ``lock`` held."""
        if self.closed or rows == 0:
            return False
        if position > self.accepted:  # an attempt cannot skip rows: its stream starts at the first
            raise DeliveryConflict(f"rows from position {position} arrived, but only {self.accepted} were accepted")
        if position == self.accepted:
            return True
        if not self._delivered(position, position + rows, digest):
            raise DeliveryConflict(
                f"its rows {position}..{position + rows - 1} are not the rows delivered there (another order, "
                "other rows, or other frames)"
            )
        return False

    def commit(self, position: int, rows: int, digest: bytes) -> None:
        """Count a frame that ``admit`` found new as accepted, once its rows are queued. Call with ``lock`` held."""
        if len(digest) != DIGEST_BYTES:
            raise ValueError(f"a frame digest has {DIGEST_BYTES} bytes, not {len(digest)}")
        self._ends.append(position + rows)
        self._digests += digest
        self.accepted = position + rows

    def _delivered(self, start: int, stop: int, digest: bytes) -> bool:
        """Whether ``[start, stop)`` with ``digest`` is one of the accepted frames."""
        index = bisect_left(self._ends, stop)
        if index == len(self._ends) or self._ends[index] != stop:
            return False
        if (self._ends[index - 1] if index else 0) != start:
            return False
        return self._digests[index * DIGEST_BYTES : (index + 1) * DIGEST_BYTES] == digest

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
