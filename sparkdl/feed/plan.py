"""Balanced feeding plans: every training node gets the same number of rows per epoch.

With MultiWorkerMirroredStrategy every worker must run the same number of steps, or the
collective waits forever for the worker that ran out. The driver counts each partition's
rows, then gives node ``k`` the global rows ``[k*R, (k+1)*R)`` with ``R = ceil(T / N)``.
The last ``N*R - T`` (< N) global indices wrap around to the first rows, so nothing is dropped
and at most N-1 rows per epoch are seen twice. Pure functions, unit-testable.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import accumulate


@dataclass(frozen=True)
class Slice:
    """Rows ``[start, stop)`` of one partition (partition-local indices) go to node ``node``."""

    node: int
    start: int
    stop: int


@dataclass(frozen=True)
class FeedPlan:
    """Which partition rows go to which data node, for one epoch."""

    rows_per_node: int
    partition_rows: tuple[int, ...]
    slices: tuple[tuple[Slice, ...], ...]  # indexed by partition

    @property
    def total_rows(self) -> int:
        """Rows in the source data (one epoch, before wrap-around)."""
        return sum(self.partition_rows)


def balanced_plan(partition_rows: list[int], num_nodes: int) -> FeedPlan:
    """Assign rows so each of ``num_nodes`` nodes gets exactly ``ceil(total / num_nodes)`` rows."""
    if num_nodes < 1:
        raise ValueError("a feeding plan needs at least one node")
    total = sum(partition_rows)
    if total == 0:
        return FeedPlan(0, tuple(partition_rows), tuple(() for _ in partition_rows))
    per_node = -(-total // num_nodes)
    offsets = [0, *accumulate(partition_rows)]
    slices: list[list[Slice]] = [[] for _ in partition_rows]
    for node in range(num_nodes):
        # The node's global range, cut into segments of real rows (wrapping modulo total).
        position, end = node * per_node, (node + 1) * per_node
        while position < end:
            real_start = position % total
            length = min(end - position, total - real_start)
            _add_segment(slices, offsets, node, real_start, real_start + length)
            position += length
    return FeedPlan(per_node, tuple(partition_rows), tuple(tuple(s) for s in slices))


def _add_segment(slices, offsets, node, start, stop) -> None:
    """Split the real-row range ``[start, stop)`` over the partitions that hold it."""
    for partition, (first, last) in enumerate(zip(offsets, offsets[1:])):
        low, high = max(start, first), min(stop, last)
        if low < high:
            slices[partition].append(Slice(node, low - first, high - first))
