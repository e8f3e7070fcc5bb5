"""Each data node's share of an epoch's rows: balanced (the same count for every node) and striped.

With MultiWorkerMirroredStrategy every worker must run the same number of steps, or the
collective waits forever for the worker that ran out. The driver counts each partition's
rows; then global row ``g`` (rows numbered in partition order) goes to node ``g % N``. The
nodes that get one row fewer (when ``N`` does not divide the total) get one extra copy of an
early row, so every node gets exactly ``R = ceil(T / N)`` rows, nothing is dropped, and at most
``N - 1`` rows per epoch are seen twice.

Striping (rather than giving each node a contiguous range) matters for progress: every
feeding task sends to every node as it goes, so no node starves while Spark's few task slots
are busy feeding another node whose queue is full (which, with nodes that train in lockstep,
would deadlock). Pure functions, unit-testable.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import accumulate

import numpy as np


@dataclass(frozen=True)
class RowShares:
    """Which rows go to which data node, for one epoch (the training run's plan is
    ``protocol.TrainingPlan``; this is how its rows are shared out)."""

    rows_per_node: int
    partition_rows: tuple[int, ...]
    num_nodes: int
    extras: tuple[tuple[int, int], ...] = ()  # (global row, node): copies that even out the counts

    @property
    def total_rows(self) -> int:
        """Rows in the source data (one epoch, without the extra copies)."""
        return sum(self.partition_rows)

    @property
    def partition_offsets(self) -> tuple[int, ...]:
        """The global number of each partition's first row."""
        return (0, *accumulate(self.partition_rows))[:-1]

    def node_partition_rows(self, node: int) -> tuple[int, ...]:
        """How many rows each partition sends ``node`` per epoch (its striped rows and extra copies),
        counted without listing them; they add up to ``rows_per_node``."""
        extras = [g for g, n in self.extras if n == node]  # at most one
        counts = []
        for offset, count in zip(self.partition_offsets, self.partition_rows):
            striped = len(range((node - offset) % self.num_nodes, count, self.num_nodes))
            counts.append(striped + sum(1 for g in extras if offset <= g < offset + count))
        return tuple(counts)

    def assignments(self, partition: int, start: int, stop: int) -> dict[int, np.ndarray]:
        """For the partition's rows ``[start, stop)``: each node's row positions relative to ``start``."""
        first_global = self.partition_offsets[partition] + start
        count = stop - start
        result = {}
        for node in range(self.num_nodes):
            first = (node - first_global) % self.num_nodes
            rows = np.arange(first, count, self.num_nodes, dtype=np.int64)
            extra = [g - first_global for g, n in self.extras if n == node and first_global <= g < first_global + count]
            if extra:
                rows = np.concatenate([rows, np.asarray(extra, dtype=np.int64)])
            if len(rows):
                result[node] = rows
        return result


def balanced_shares(partition_rows: list[int], num_nodes: int) -> RowShares:
    """Shares giving each of ``num_nodes`` nodes exactly ``ceil(total / num_nodes)`` rows per epoch."""
    if num_nodes < 1:
        raise ValueError("sharing rows out needs at least one node")
    total = sum(partition_rows)
    if total == 0:
        return RowShares(0, tuple(partition_rows), num_nodes)
    per_node = -(-total // num_nodes)
    extras = []
    for node in range(num_nodes):
        striped = len(range(node, total, num_nodes))
        # Copies of the node's own rows (wrapping), so the extra rows are spread over the data.
        extras += [((node + i * num_nodes) % total, node) for i in range(striped, per_node)]
    return RowShares(per_node, tuple(partition_rows), num_nodes, tuple(extras))
