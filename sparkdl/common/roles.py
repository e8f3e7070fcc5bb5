"""Roles as data: which node is ps, chief, evaluator or worker, and the TF_CONFIG each one gets.

Pure functions, no Spark and no TensorFlow, so the driver and the nodes compute the same
answers and the rules are unit-testable. The assignment order is TensorFlowOnSpark's: ps
nodes first, then the master/chief, then the evaluator, then workers.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

#: Roles stopped by ``shutdown()`` once the training nodes are done (they never end on their own).
STOPPED_AT_SHUTDOWN = frozenset({"ps", "evaluator"})
#: Roles that take part in the collective (MultiWorkerMirroredStrategy's workers).
COLLECTIVE_ROLES = ("chief", "master", "worker")
VALID_MASTER_NODES = (None, "chief", "master")


@dataclass(frozen=True)
class NodeRole:
    """One node's place in the cluster: ``node_number`` is its 0-based number (TFoS's ``executor_id``)."""

    node_number: int
    job_name: str
    task_index: int

    @property
    def label(self) -> str:
        """``job:index``, the way errors and logs name a node."""
        return f"{self.job_name}:{self.task_index}"


@dataclass(frozen=True, kw_only=True)
class ClusterLayout:
    """Which nodes a cluster has: ``TFCluster.run``'s layout arguments, checked once, when built
    (ValueError naming the argument)."""

    num_executors: int
    num_ps: int = 0
    master_node: str | None = "chief"
    eval_node: bool = False
    driver_ps_nodes: bool = False  # the ps nodes run on the driver, not on executors

    def __post_init__(self) -> None:
        if not isinstance(self.num_executors, int) or self.num_executors < 1:
            raise ValueError(f"num_executors must be a positive integer, got {self.num_executors!r}")
        if not isinstance(self.num_ps, int) or self.num_ps < 0:
            raise ValueError(f"num_ps must be a non-negative integer, got {self.num_ps!r}")
        if self.master_node not in VALID_MASTER_NODES:
            raise ValueError(f"master_node must be one of {VALID_MASTER_NODES}, got {self.master_node!r}")
        needed = self.num_ps + (1 if self.eval_node else 0) + 1
        if self.num_executors < needed:
            raise ValueError(
                f"num_executors={self.num_executors} leaves no chief/worker node: num_ps={self.num_ps}"
                f"{' and eval_node=True' if self.eval_node else ''} need at least {needed} executors"
            )
        if self.driver_ps_nodes and self.num_ps == 0:
            raise ValueError("driver_ps_nodes=True needs num_ps > 0")

    @property
    def template(self) -> dict[str, list[int]]:
        """Each job name and the node numbers that play it, in TFoS's order."""
        remaining = list(range(self.num_executors))
        template: dict[str, list[int]] = {}

        def take(job: str, count: int) -> None:
            template[job] = remaining[:count]
            del remaining[:count]

        if self.num_ps:
            take("ps", self.num_ps)
        if self.master_node:
            take(self.master_node, 1)
        if self.eval_node:
            take("evaluator", 1)
        if remaining:
            take("worker", len(remaining))
        return template

    @property
    def roles(self) -> list[NodeRole]:
        """One NodeRole per node, ordered by node number."""
        return roles_from_template(self.template)

    @property
    def first_spark_node(self) -> int:
        """The first node Spark launches (the ps nodes before it run on the driver, if asked)."""
        return self.num_ps if self.driver_ps_nodes else 0

    @property
    def chief_like(self) -> int | None:
        """The node that runs TensorBoard: the chief (or master), else worker 0."""
        template = self.template
        nodes = template.get(self.master_node or "", []) or template.get("worker", [])[:1]
        return nodes[0] if nodes else None


def roles_from_template(template: dict[str, list[int]]) -> list[NodeRole]:
    """Flatten a template into one NodeRole per node, ordered by node number."""
    roles = [NodeRole(number, job, index) for job, numbers in template.items() for index, number in enumerate(numbers)]
    return sorted(roles, key=lambda role: role.node_number)


def build_cluster_spec(roles: list[NodeRole], addresses: dict[int, str]) -> dict[str, list[str]]:
    """``{job: ["host:port", ...]}`` from each node's registered address, indexed by task."""
    spec: dict[str, list[str]] = {}
    for role in sorted(roles, key=lambda r: (r.job_name, r.task_index)):
        spec.setdefault(role.job_name, []).append(addresses[role.node_number])
    return spec


def tf_config(cluster_spec: dict[str, list[str]], job_name: str, task_index: int) -> str:
    """The TF_CONFIG JSON for one node.

    The evaluator is left out of ``cluster`` (as TensorFlow expects: it runs outside the
    collective and is not addressable), but it still gets its own ``task``.
    """
    cluster = {job: hosts for job, hosts in cluster_spec.items() if job != "evaluator"}
    return json.dumps({"cluster": cluster, "task": {"type": job_name, "index": task_index}})


def count_workers(cluster_spec: dict[str, list[str]]) -> int:
    """Nodes that train in the collective: chief/master plus workers (TFoS's ``num_workers``)."""
    return sum(len(cluster_spec.get(job, [])) for job in COLLECTIVE_ROLES)


def is_chief(cluster_spec: dict[str, list[str]], job_name: str, task_index: int) -> bool:
    """Whether this node is the one that writes checkpoints and exports under MWMS: the chief
    (or TFoS's master), else worker 0 of a cluster without one (TensorFlow's own rule)."""
    if job_name in ("chief", "master"):
        return True
    return job_name == "worker" and task_index == 0 and not (cluster_spec.get("chief") or cluster_spec.get("master"))
