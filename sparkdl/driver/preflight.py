"""Pre-flight checks: fail at once, with what to change, when Spark cannot host the cluster.

Without these, a cluster that cannot be scheduled waits for the whole reservation timeout
(TensorFlowOnSpark's most common first-day surprise).
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass
from typing import Callable

from ..common.errors import PreflightError

logger = logging.getLogger(__name__)

_LOCAL_CLUSTER = re.compile(r"local-cluster\[\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*]")
_LOCAL = re.compile(r"local(\[(\d+|\*)(,\s*\d+)?])?$")


@dataclass(frozen=True)
class SlotLayout:
    """What the Spark configuration says about executors and task slots (None = unknown)."""

    expected_executors: int | None
    slots_per_executor: int | None


def local_cluster_shape(master: str) -> tuple[int, int, int] | None:
    """``(executors, cores each, MiB each)`` of a ``local-cluster[N,C,M]`` master, else None."""
    match = _LOCAL_CLUSTER.match(master)
    return (int(match.group(1)), int(match.group(2)), int(match.group(3))) if match else None


def local_master(master: str) -> bool:
    """Whether ``master`` runs every executor on this machine (``local``, ``local[N]``,
    ``local[N,F]``, ``local-cluster[N,C,M]``)."""
    return bool(_LOCAL.match(master) or _LOCAL_CLUSTER.match(master))


def slot_layout(master: str, conf: Callable[[str], str | None]) -> SlotLayout:
    """Read the executor count and task slots per executor from the master URL and conf."""
    task_cpus = int(conf("spark.task.cpus") or 1)
    shape = local_cluster_shape(master)
    if shape:
        executors, cores, _ = shape
        return SlotLayout(executors, max(cores // task_cpus, 0))
    match = _LOCAL.match(master)
    if match:
        threads = match.group(2)
        cores = None if threads in (None, "*") else int(threads)
        if threads is None:
            cores = 1
        return SlotLayout(1, None if cores is None else max(cores // task_cpus, 0))
    instances = conf("spark.executor.instances")
    cores = conf("spark.executor.cores")
    return SlotLayout(int(instances) if instances else None, int(cores) // task_cpus if cores else None)


def dynamic_allocation(conf: Callable[[str], str | None]) -> bool:
    """Whether ``spark.dynamicAllocation.enabled`` (Spark itself refuses it at start without shuffle
    tracking or an external shuffle service): the nodes then launch without barrier mode, each
    launch task holding its executor for its node's life (``driver/run.py``)."""
    return (conf("spark.dynamicAllocation.enabled") or "false").lower() == "true"


def check_configuration(
    master: str, conf: Callable[[str], str | None], num_executors: int, nodes_param: str = "num_executors"
) -> SlotLayout:
    """Check what the configuration alone can tell; raise PreflightError naming the setting (and
    the node count by the name the user gave it, ``nodes_param``).

    Whether nodes that must each own an executor (InputMode.SPARK) can share one is
    ``scheduling.py``'s question: it gives their launch stage a whole executor per task.
    """
    dynamic = dynamic_allocation(conf)
    layout = slot_layout(master, conf)
    if dynamic:  # Spark asks for executors as the launch stage needs them: the count is not fixed
        layout = SlotLayout(None, layout.slots_per_executor)
    if (
        layout.expected_executors is not None
        and layout.expected_executors == 1
        and num_executors > 1
        and master.startswith("local")
        and not master.startswith("local-cluster")
    ):
        raise PreflightError(
            f"master {master!r} runs a single executor, but {nodes_param}={num_executors} TF nodes need one "
            f"executor each. Use local-cluster[{num_executors},1,1024] (or a real cluster) instead."
        )
    if layout.expected_executors is not None and layout.expected_executors < num_executors:
        raise PreflightError(
            f"{nodes_param}={num_executors} but this Spark application is configured with only "
            f"{layout.expected_executors} executor(s); start it with at least {num_executors} "
            "(spark.executor.instances / local-cluster[N,...])."
        )
    return layout


def wait_for_executors(
    count_executors: Callable[[], int],
    num_executors: int,
    layout: SlotLayout,
    wait_s: float,
    one_node_per_executor: bool = False,
    nodes_param: str = "num_executors",
    at_least: int | None = None,
) -> int:
    """Wait (bounded) until ``num_executors`` task slots are registered; raise if they never are
    (PreflightError naming the node count as ``nodes_param``). Returns the executors registered.

    ``at_least`` (an elastic cluster's smallest size) is enough once the wait is over: the
    cluster starts on what Spark has and grows later.

    With ``one_node_per_executor`` (InputMode.SPARK: each node takes a whole executor) each
    executor counts as one slot. Executors register a few seconds after the SparkContext
    starts, so an immediate count would be wrong; the wait is short and ends as soon as
    enough are there.
    """
    slots_each = 1 if one_node_per_executor else layout.slots_per_executor or 1
    deadline = time.monotonic() + wait_s
    while True:
        executors = count_executors()
        if executors * slots_each >= num_executors:
            return executors
        if time.monotonic() >= deadline:
            if at_least is not None and executors * slots_each >= at_least:
                return executors
            need, have = (
                (f"{num_executors} executors (one each)", f"{executors} executor(s)")
                if one_node_per_executor
                else (f"{num_executors} executor task slots", f"{executors} executor(s) with {slots_each} slot(s) each")
            )
            raise PreflightError(
                f"{nodes_param}={num_executors} TF nodes need {need}, but only {have} registered within "
                f"{wait_s:g} s. Start Spark with more executors or lower {nodes_param}."
            )
        time.sleep(0.2)  # polling the JVM's executor list; no event is exposed to Python
