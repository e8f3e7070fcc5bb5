"""balanced_plan: every node gets exactly ceil(T/N) rows, nothing is dropped, little is repeated."""

import random
from collections import Counter

import pytest

from sparkdl.feed.plan import FeedPlan, Slice, balanced_plan

pytestmark = pytest.mark.timeout(120)


def check_plan(partition_rows, num_nodes):
    """Assert every invariant of a balanced plan; returns it."""
    plan = balanced_plan(list(partition_rows), num_nodes)
    total = sum(partition_rows)
    assert isinstance(plan, FeedPlan)
    assert plan.partition_rows == tuple(partition_rows) and plan.total_rows == total
    assert len(plan.slices) == len(partition_rows)
    if total == 0:
        assert plan.rows_per_node == 0 and all(s == () for s in plan.slices)
        return plan
    per_node = -(-total // num_nodes)
    assert plan.rows_per_node == per_node
    offsets = [sum(partition_rows[:p]) for p in range(len(partition_rows))]
    per_node_ranges = {node: [] for node in range(num_nodes)}
    sent = Counter()
    for partition, slices in enumerate(plan.slices):
        for s in slices:
            assert isinstance(s, Slice) and 0 <= s.node < num_nodes
            assert 0 <= s.start < s.stop <= partition_rows[partition]
            rows = range(offsets[partition] + s.start, offsets[partition] + s.stop)
            sent.update(rows)
            per_node_ranges[s.node].append(rows)
    for node, ranges in per_node_ranges.items():
        assert sum(len(r) for r in ranges) == per_node, f"node {node}"
        # The node's rows are the global range [node*R, (node+1)*R) taken modulo T.
        got = sorted(row for r in ranges for row in r)
        want = sorted(g % total for g in range(node * per_node, (node + 1) * per_node))
        assert got == want, f"node {node}"
    assert set(sent) == set(range(total)), "every row is sent"
    extra = per_node * num_nodes - total  # sends beyond one per row (wrap-around)
    assert sum(sent.values()) - total == extra <= num_nodes - 1
    if total >= num_nodes:
        assert max(sent.values()) <= 2
    else:  # fewer rows than nodes: each node still gets R = 1 row, so rows repeat across nodes
        assert per_node == 1 and max(sent.values()) == -(-num_nodes // total)
    return plan


@pytest.mark.parametrize("rows, nodes", [
    ([10, 10, 10, 10], 4),          # even split
    ([5, 5], 2),
    ([7, 3, 4], 3),                 # remainder
    ([10], 3),
    ([10000, 3, 0, 17], 3),         # heavy skew and an empty partition
    ([0, 10000, 3], 7),
    ([1], 3),                       # T < N
    ([2, 0], 5),
    ([0, 0, 0], 4),                 # all empty
    ([], 2),
    ([13], 1),
])
def test_cases(rows, nodes):
    check_plan(rows, nodes)


def test_even_split_slices_exact():
    plan = balanced_plan([4, 4], 2)
    assert plan.rows_per_node == 4
    assert plan.slices == ((Slice(0, 0, 4),), (Slice(1, 0, 4),))


def test_fewer_rows_than_nodes_every_node_gets_the_row():
    plan = check_plan([1], 3)
    assert plan.rows_per_node == 1
    assert sorted(plan.slices[0], key=lambda s: s.node) == [Slice(0, 0, 1), Slice(1, 0, 1), Slice(2, 0, 1)]


def test_remainder_wraps_to_first_rows():
    plan = check_plan([3, 4], 3)  # T=7, R=3: node 2 gets rows 6, 0, 1
    node2 = sorted((p, s.start, s.stop) for p, sl in enumerate(plan.slices) for s in sl if s.node == 2)
    assert node2 == [(0, 0, 2), (1, 3, 4)]


def test_all_empty():
    plan = balanced_plan([0, 0], 3)
    assert plan.rows_per_node == 0 and plan.slices == ((), ()) and plan.total_rows == 0


@pytest.mark.parametrize("nodes", [0, -1])
def test_no_nodes_is_an_error(nodes):
    with pytest.raises(ValueError):
        balanced_plan([3, 4], nodes)


def test_random_plans():
    rng = random.Random(20240601)
    for _ in range(300):
        parts = [rng.choice([0, 0, 1, 2, rng.randint(0, 50), rng.randint(0, 3000)])
                 for _ in range(rng.randint(0, 12))]
        check_plan(parts, rng.randint(1, 16))
