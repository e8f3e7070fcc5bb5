"""What map_fun returns reaches the driver (issue 23 item 6): TFCluster.shutdown() returns the
chief's value, cluster.results every node's with return_results="all", TFParallel.run node 0's
(or every node's); values travel as JSON, and one that cannot fails its node naming its type."""

from __future__ import annotations

import pytest

from sparkdl import ClusterError, TFCluster, TFParallel

import cluster_functions as cluster_fns

pytestmark = pytest.mark.timeout(180)


def test_shutdown_returns_the_chiefs_value_and_results_every_nodes(sc2):
    cluster = TFCluster.run(sc2, cluster_fns.return_value, {}, 2, return_results="all")
    value = cluster.shutdown(timeout=120)
    assert value == {"node": 0, "role": "chief:0", "mean": 1.5}
    assert cluster.results == [value, {"node": 1, "role": "worker:0", "mean": 1.5}]
    assert cluster.shutdown() == value  # a second shutdown is a no-op that answers the same


def test_tfparallel_returns_node_0s_value_and_only_the_asked_nodes_send_theirs(sc2):
    # node 1 returns a set, which cannot travel: with the default only node 0 sends its value
    assert TFParallel.run(sc2, cluster_fns.return_value, {"bad_node": 1}, 2) == {
        "node": 0,
        "role": "worker:0",
        "mean": 1.5,
    }
    both = TFParallel.run(sc2, cluster_fns.return_value, {}, 2, return_results="all")
    assert both == [{"node": n, "role": f"worker:{n}", "mean": 1.5} for n in (0, 1)]


def test_a_value_that_cannot_travel_fails_its_node_naming_the_type(sc2):
    cluster = TFCluster.run(sc2, cluster_fns.return_value, {"bad_node": 0}, 2)
    with pytest.raises(ClusterError, match=r"builtins\.set at the return value\['oops'\]") as info:
        cluster.shutdown(timeout=120)
    assert "chief:0" in str(info.value)
    with pytest.raises(ValueError, match="cluster.results needs TFCluster.run"):
        _ = cluster.results
    with pytest.raises(ValueError, match="return_results must be 'chief'"):
        TFCluster.run(sc2, cluster_fns.return_value, {}, 2, return_results="every")
