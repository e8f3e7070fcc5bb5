"""What each data node should read under the balanced, striped plan (shared by the feed tests)."""

from __future__ import annotations

from collections import Counter

from sparkdl.feed.shares import balanced_shares


def planned_labels(sizes, nodes, start=0):
    """Each node's multiset of labels per epoch under the balanced, striped plan, when labels are
    global row numbers from ``start`` (partition 0's rows first)."""
    plan = balanced_shares(list(sizes), nodes)
    shares = [Counter() for _ in range(nodes)]
    for partition, offset in enumerate(plan.partition_offsets):
        for node, rows in plan.assignments(partition, 0, sizes[partition]).items():
            shares[node].update(float(start + offset + r) for r in rows)
    return shares
