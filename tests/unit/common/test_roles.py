"""Role assignment, cluster spec and TF_CONFIG: pure functions, TensorFlowOnSpark's order."""

import json

import pytest

from sparkdl.common.roles import (
    ClusterLayout,
    NodeRole,
    build_cluster_spec,
    count_workers,
    is_chief,
    roles_from_template,
    tf_config,
)

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize(
    "kwargs, expected",
    [
        (dict(num_executors=3, num_ps=1), {"ps": [0], "chief": [1], "worker": [2]}),
        (dict(num_executors=1), {"chief": [0]}),
        (dict(num_executors=4), {"chief": [0], "worker": [1, 2, 3]}),
        (
            dict(num_executors=5, num_ps=2, eval_node=True),
            {"ps": [0, 1], "chief": [2], "evaluator": [3], "worker": [4]},
        ),
        (dict(num_executors=3, eval_node=True), {"chief": [0], "evaluator": [1], "worker": [2]}),
        (dict(num_executors=3, master_node=None), {"worker": [0, 1, 2]}),
        (dict(num_executors=3, num_ps=1, master_node=None), {"ps": [0], "worker": [1, 2]}),
        (dict(num_executors=3, num_ps=1, master_node="master"), {"ps": [0], "master": [1], "worker": [2]}),
    ],
)
def test_cluster_template_follows_tfos_order(kwargs, expected):
    template = ClusterLayout(**kwargs).template
    assert template == expected
    assert list(template) == list(expected)  # ps, chief/master, evaluator, worker: in that order


@pytest.mark.parametrize(
    "kwargs, names",
    [
        (dict(num_executors=2, num_ps=2), ["num_executors", "num_ps"]),
        (dict(num_executors=3, num_ps=3), ["num_executors", "num_ps"]),
        (dict(num_executors=3, master_node="boss"), ["master_node", "boss"]),
        (dict(num_executors=0), ["num_executors"]),
        (dict(num_executors=-1), ["num_executors"]),
        (dict(num_executors=2, num_ps=-1), ["num_ps"]),
        (dict(num_executors=2, num_ps=1, eval_node=True), ["num_executors", "eval_node"]),
        (dict(num_executors=1, eval_node=True), ["num_executors", "eval_node"]),
        (dict(num_executors=2, driver_ps_nodes=True), ["driver_ps_nodes", "num_ps"]),
    ],
)
def test_a_layout_that_cannot_work_is_refused_naming_the_argument(kwargs, names):
    with pytest.raises(ValueError) as info:
        ClusterLayout(**kwargs)
    for name in names:
        assert name in str(info.value)


def test_a_layout_is_checked_once_when_built_and_by_keyword_only():
    layout = ClusterLayout(num_executors=3, num_ps=1, eval_node=True)
    assert layout.roles[0] == NodeRole(0, "ps", 0) and layout.chief_like == 1 and layout.first_spark_node == 0
    assert ClusterLayout(num_executors=1, master_node=None).template == {"worker": [0]}
    assert ClusterLayout(num_executors=3, num_ps=1, driver_ps_nodes=True).first_spark_node == 1
    with pytest.raises(TypeError):
        ClusterLayout(3, 1)  # keyword only: no argument can land in the wrong place


def test_roles_from_template_ordered_by_node_number():
    roles = roles_from_template({"ps": [0], "chief": [1], "evaluator": [2], "worker": [3, 4]})
    assert roles == [
        NodeRole(0, "ps", 0),
        NodeRole(1, "chief", 0),
        NodeRole(2, "evaluator", 0),
        NodeRole(3, "worker", 0),
        NodeRole(4, "worker", 1),
    ]
    assert [r.label for r in roles] == ["ps:0", "chief:0", "evaluator:0", "worker:0", "worker:1"]
    # order of the template's keys/values does not matter
    assert roles_from_template({"worker": [4, 3], "ps": [0]}) == [
        NodeRole(0, "ps", 0),
        NodeRole(3, "worker", 1),
        NodeRole(4, "worker", 0),
    ]


def test_build_cluster_spec_indexes_hosts_by_task():
    roles = ClusterLayout(num_executors=5, num_ps=1, eval_node=True).roles
    addresses = {i: f"h{i}:{2000 + i}" for i in range(5)}
    spec = build_cluster_spec(list(reversed(roles)), addresses)
    assert spec == {"ps": ["h0:2000"], "chief": ["h1:2001"], "evaluator": ["h2:2002"], "worker": ["h3:2003", "h4:2004"]}


def test_build_cluster_spec_needs_every_address():
    with pytest.raises(KeyError):
        build_cluster_spec([NodeRole(0, "chief", 0), NodeRole(1, "worker", 0)], {0: "h0:1"})


SPEC = {"ps": ["h0:1"], "chief": ["h1:1"], "evaluator": ["h2:1"], "worker": ["h3:1", "h4:1"]}


@pytest.mark.parametrize("job, index", [("chief", 0), ("worker", 1), ("ps", 0)])
def test_tf_config_for_cluster_members(job, index):
    config = json.loads(tf_config(SPEC, job, index))
    assert config == {
        "cluster": {"ps": ["h0:1"], "chief": ["h1:1"], "worker": ["h3:1", "h4:1"]},
        "task": {"type": job, "index": index},
    }


def test_tf_config_evaluator_is_outside_the_cluster_but_knows_its_task():
    config = json.loads(tf_config(SPEC, "evaluator", 0))
    assert "evaluator" not in config["cluster"]
    assert set(config["cluster"]) == {"ps", "chief", "worker"}
    assert config["task"] == {"type": "evaluator", "index": 0}
    assert "evaluator" in SPEC  # the input spec is not mutated


@pytest.mark.parametrize(
    "spec, expected",
    [
        (SPEC, 3),
        ({"worker": ["a", "b", "c"]}, 3),
        ({"master": ["a"], "worker": ["b"]}, 2),
        ({"ps": ["a", "b"], "evaluator": ["c"]}, 0),
        ({}, 0),
    ],
)
def test_count_workers(spec, expected):
    assert count_workers(spec) == expected


@pytest.mark.parametrize(
    "spec, job, index, expected",
    [
        ({"chief": ["a"], "worker": ["b"]}, "chief", 0, True),
        ({"chief": ["a"], "worker": ["b"]}, "worker", 0, False),
        ({"master": ["a"], "worker": ["b"]}, "master", 0, True),
        ({"worker": ["a", "b"]}, "worker", 0, True),  # no chief: worker 0 writes, as in TensorFlow
        ({"worker": ["a", "b"]}, "worker", 1, False),
        ({"ps": ["p"], "worker": ["a"]}, "ps", 0, False),
        ({"chief": ["a"], "evaluator": ["e"]}, "evaluator", 0, False),
    ],
)
def test_is_chief_follows_tensorflows_rule(spec, job, index, expected):
    assert is_chief(spec, job, index) is expected
