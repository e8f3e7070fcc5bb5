"""balanced_shares: every node gets exactly ceil(T/N) rows, rows are striped, little is repeated."""

import random
from collections import Counter

import pytest

from sparkdl.feed.shares import RowShares, balanced_shares

pytestmark = pytest.mark.timeout(120)


def sent_rows(plan: RowShares, frame_rows: int = 7) -> dict[int, list[int]]:
    """Global rows each node receives, walking every partition in frames like a feeder does."""
    per_node: dict[int, list[int]] = {n: [] for n in range(plan.num_nodes)}
    for partition, rows in enumerate(plan.partition_rows):
        base = plan.partition_offsets[partition]
        for start in range(0, rows, frame_rows):
            stop = min(rows, start + frame_rows)
            for node, positions in plan.assignments(partition, start, stop).items():
                assert all(0 <= p < stop - start for p in positions)
                per_node[node] += [base + start + int(p) for p in positions]
    return per_node


def check_plan(partition_rows, num_nodes, frame_rows=7):
    plan = balanced_shares(list(partition_rows), num_nodes)
    total = sum(partition_rows)
    assert plan.partition_rows == tuple(partition_rows) and plan.total_rows == total
    per_node = sent_rows(plan, frame_rows)
    for node in range(num_nodes):  # counted without listing them, as a node's plan carries them
        listed = [len(plan.assignments(p, 0, rows).get(node, ())) for p, rows in enumerate(partition_rows)]
        assert plan.node_partition_rows(node) == tuple(listed)
        assert sum(listed) == plan.rows_per_node
    if total == 0:
        assert plan.rows_per_node == 0 and all(not rows for rows in per_node.values())
        return plan, per_node
    expected = -(-total // num_nodes)
    assert plan.rows_per_node == expected
    assert all(len(rows) == expected for rows in per_node.values()), {n: len(r) for n, r in per_node.items()}
    copies = Counter(row for rows in per_node.values() for row in rows)
    assert set(copies) == set(range(total)), "every row is fed"
    if total >= num_nodes:
        assert max(copies.values()) <= 2 and sum(c - 1 for c in copies.values()) <= num_nodes - 1
    return plan, per_node


def test_even_split_is_striped():
    _, per_node = check_plan([4, 4], 2)
    assert per_node == {0: [0, 2, 4, 6], 1: [1, 3, 5, 7]}


def test_every_partition_feeds_every_node():
    """Striping keeps every node fed whichever partitions Spark runs first (no starvation)."""
    plan, _ = check_plan([100, 100, 100], 3)
    for partition in range(3):
        assert set(plan.assignments(partition, 0, 100)) == {0, 1, 2}


def test_remainder_gets_one_extra_copy():
    plan, per_node = check_plan([5], 2)
    assert plan.extras == ((0, 1),)  # node 1 gets rows 1, 3 and a copy of row 0
    assert per_node == {0: [0, 2, 4], 1: [1, 3, 0]}


def test_heavy_skew_and_empty_partitions():
    check_plan([10000, 3, 0, 0, 1], 2)
    check_plan([0, 0, 1037], 2, frame_rows=100)


def test_fewer_rows_than_nodes():
    plan, per_node = check_plan([1], 3)
    assert plan.rows_per_node == 1 and per_node == {0: [0], 1: [0], 2: [0]}


def test_empty_and_invalid():
    check_plan([0, 0], 2)
    with pytest.raises(ValueError):
        balanced_shares([1], 0)


def test_random_layouts():
    rng = random.Random(7)
    for _ in range(300):
        partitions = [rng.choice([0, 0, 1, 2, 5, 17, 100, 333]) for _ in range(rng.randint(1, 9))]
        check_plan(partitions, rng.randint(1, 6), frame_rows=rng.randint(1, 50))
