"""One launch of a cluster's nodes: its coordinator, its Spark launch job, its feeder.

A ``TFCluster`` runs one ``ClusterAttempt`` at a time; with ``max_restarts`` a failed attempt
is torn down completely (nodes stopped, Spark jobs cancelled, sockets closed) and a fresh one
takes its place, with a new secret and new ports. Nothing of an attempt outlives ``close()``.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass, replace
from typing import Any, Callable

from ..common.errors import ReservationTimeout
from ..common.roles import ClusterLayout
from ..common.timeouts import ABORT_WAIT_S, TURN_MARGIN_S, TURN_POLL_S, Deadline
from ..node.config import LaunchSpec, NodeSettings
from ..node.launch import launch_node, spark_partition_launcher
from ..transport.channel import new_secret
from .coordinator import Coordinator, Listeners
from .feeding import ClusterFeeder
from .node_groups import NodeGroups, node_groups
from .preflight import local_cluster_shape, local_master
from .spark_access import SparkAccess
from .waits import NodeWaits

logger = logging.getLogger(__name__)

#: How many times a launch whose tasks Spark ran off their placed executors is run again.
PLACEMENT_LAUNCHES = 10


@dataclass(frozen=True)
class ClusterRequest:
    """What ``TFCluster.run`` was asked to start: enough to launch it again.

    ``settings`` is what reaches the nodes (``node/config.py``); the rest stays on the driver.
    """

    settings: NodeSettings
    first_spark_node: int  # nodes before this one are ps nodes hosted by the driver
    use_barrier: bool
    stall_timeout: float | None
    launch_profile: Any = None  # the launch stage's ResourceProfile (driver/scheduling.py), None: default
    layout: ClusterLayout | None = None  # which nodes: an elastic cluster relaunches it resized

    @property
    def nodes(self) -> int:
        """How many nodes the cluster has, driver-hosted ps nodes included."""
        return len(self.settings.roles)

    @property
    def spark_nodes(self) -> int:
        """How many nodes the Spark launch job starts."""
        return self.nodes - self.first_spark_node

    def resized(self, nodes: int) -> "ClusterRequest":
        """The same request for ``nodes`` nodes (fewer or more workers; the other roles stay)."""
        if self.layout is None:
            raise ValueError("this cluster request has no layout to resize")
        layout = replace(self.layout, num_executors=nodes)
        return replace(self, layout=layout, settings=replace(self.settings, roles=tuple(layout.roles)))


class ClusterAttempt:
    """Launches and supervises one generation of a cluster's nodes (see the module docstring)."""

    def __init__(
        self, spark: SparkAccess, request: ClusterRequest, cluster_id: str, attempt: int, listeners: Listeners
    ):
        self.spark = spark
        self.request = request
        self.cluster_id = cluster_id
        self.attempt = attempt
        self.secret = new_secret()
        bind, advertise = spark.coordinator_addresses()
        self.coordinator = Coordinator(
            list(request.settings.roles),
            self.secret,
            bind,
            request.stall_timeout,
            advertise,
            cluster_id=cluster_id,
            listeners=listeners,
        )
        self.launch_errors: list[BaseException] = []
        self.waits = NodeWaits(self.coordinator, launch_failed=lambda: bool(self.launch_errors))
        self.feeder = ClusterFeeder(spark, self.secret, self.coordinator, self.waits, cluster_id)
        self.job_group = f"sparkdl-{cluster_id}" + (f"-attempt{attempt}" if attempt else "")
        self._threads: list[threading.Thread] = []
        self._returned: list[str] = []  # names of the threads whose target returned or raised
        self._closed = False
        # Set once the launch may start its nodes: at once, or when another cluster's executors
        # are free (node_groups.py). The nodes' registration is timed from then, not from a queue.
        self._turn = threading.Event()

    def start(self) -> None:
        """Start the launch job (and the driver-hosted ps nodes) in background threads."""
        request = self.request
        spec = LaunchSpec(
            settings=request.settings,
            cluster_id=self.cluster_id,
            secret=self.secret,
            driver_address=self.coordinator.address,
            default_fs=self.spark.default_fs(),
            attempt=self.attempt,
        )
        for number in range(request.first_spark_node):  # ps nodes hosted by the driver
            self._start_thread(
                lambda i=number: launch_node(spec, i, anchor_pid=os.getpid()), f"sparkdl-driver-ps-{number}"
            )
        self._start_thread(lambda: self._launch_on_spark(spec), f"sparkdl-launch-{self.cluster_id}")

    def _launch_on_spark(self, spec: LaunchSpec) -> None:
        count = self.request.spark_nodes
        attempt = f", attempt {self.attempt}" if self.attempt else ""
        self.spark.set_job_tag(
            self.job_group, f"sparkdl: run {count} TensorFlow nodes (cluster {self.cluster_id}{attempt})"
        )
        groups = self._node_groups()
        if groups is None:
            self._turn.set()
            records = self._launch_tasks(spec, None)
        else:
            # Another sparkdl cluster of this application may hold executors (its nodes run there):
            # wait for executors of our own, or launch anywhere if none does (node_groups.py).
            timeout = self.request.settings.reservation_timeout
            try:
                executors = groups.reserve(self.job_group, count, self.spark.executor_ids, timeout)
            finally:
                self._turn.set()  # given a turn, or failed (the launch error ends wait_ready)
            records = self._launch_tasks(spec, executors)
            placed = [r.get("executor_id") for r in records if not r.get("skipped")]
            if None in placed:  # the tasks could not tell: Spark's status store can
                placed = list((self.spark.task_executors(self.job_group, count) or {}).values())
            clashes = groups.placed(self.job_group, placed)
            if clashes:
                logger.warning(
                    "sparkdl cluster %s: nodes on executors %s, which host another sparkdl cluster's nodes",
                    self.cluster_id,
                    ", ".join(clashes),
                )
        # Each task's node number, GPUs, supervisor pid (and task CPUs): for whoever debugs a launch.
        logger.debug("sparkdl: the launch tasks of cluster %s returned %s", self.cluster_id, records)

    def _launch_tasks(self, spec: LaunchSpec, executors: list[str] | None) -> list[dict]:
        """Run the launch job; with ``executors``, again until every task ran where it was placed
        (a task elsewhere starts no node: ``node/launch.py``), at most ``PLACEMENT_LAUNCHES`` times."""
        spec = replace(spec, placement=tuple(executors or ()))
        for _ in range(PLACEMENT_LAUNCHES):
            # With a profile, each launch task takes a whole executor (driver/scheduling.py).
            records = self.spark.launch(
                self.request.spark_nodes,
                spark_partition_launcher(spec, self.request.first_spark_node),
                self.request.launch_profile,
                self.request.use_barrier,
                executors,
            )
            misplaced = {str(r["executor_id"]) for r in records if r.get("misplaced")}
            if not any("misplaced" in r for r in records):
                return records
            logger.info(
                "sparkdl cluster %s: Spark ran launch tasks on executors %s, not on %s: launching again",
                self.cluster_id,
                ", ".join(sorted(misplaced)),
                ", ".join(executors or ()),
            )
        raise ReservationTimeout(
            f"sparkdl cluster {self.cluster_id}: Spark did not run the launch tasks on executors "
            f"{', '.join(executors or ())} (free of other sparkdl clusters' nodes) in {PLACEMENT_LAUNCHES} launches"
        )

    def _node_groups(self) -> NodeGroups | None:
        """The application's executor leases, when this cluster takes part: detached nodes
        (InputMode.SPARK) under a SparkContext. A node that holds its task's slot (InputMode.TENSORFLOW,
        dynamic allocation) keeps others off its executor by itself; Spark Connect cannot place tasks."""
        settings = self.request.settings
        if self.spark.sc is None or not settings.feeds or settings.hold_executor or not self.request.use_barrier:
            return None
        if local_master(self.spark.master) and not local_cluster_shape(self.spark.master):
            return None  # local[N]: one JVM, every node beside every other whatever is leased
        return node_groups(self.spark.sc)

    def executors_of_other_clusters(self) -> set[str]:
        """The executors other sparkdl clusters of this application hold (their nodes run there):
        none this cluster can grow onto."""
        groups = self._node_groups()
        if groups is None:
            return set()
        return {e for owner, held in groups.holders().items() if owner != self.job_group for e in held}

    def _release_executors(self) -> None:
        groups = self._node_groups()
        if groups is not None:
            groups.release(self.job_group)

    def _start_thread(self, target: Callable[[], Any], name: str) -> None:
        def body() -> None:
            try:
                target()
            except BaseException as exc:  # noqa: BLE001 - reported to the driver thread
                self.launch_errors.append(exc)
            finally:
                self._returned.append(name)  # list.append is atomic: several threads end at once
                self.coordinator.notify_external()

        thread = self.spark.thread(body, name)
        self._threads.append(thread)
        thread.start()

    def launch_error(self) -> BaseException | None:
        """The first error of the launch job, if it failed."""
        return self.launch_errors[0] if self.launch_errors else None

    def wait_ready(self) -> None:
        """Block until every node registered (and, when feeding, listens); raise otherwise."""
        timeout = self.request.settings.reservation_timeout
        coordinator = self.coordinator
        self._wait_for_turn(timeout)
        coordinator.wait_for_reservation(timeout, self.launch_error)
        if not self.request.settings.feeds:
            return
        data_nodes = self.feeder.data_nodes()
        ready = self.waits.feed_servers(data_nodes, timeout)
        if coordinator.failures:
            raise coordinator.error("a node failed while starting")
        if not ready:
            missing = [n.role.label for n in data_nodes if not n.feed_port]
            raise ReservationTimeout(f"the feed servers of {', '.join(missing)} did not start within {timeout:.0f} s")

    def _wait_for_turn(self, timeout: float) -> None:
        """Wait while the launch waits for executors other clusters hold (bounded by ``reserve``'s
        own ``timeout``, a failed launch ending it at once): registration is timed from the turn."""
        deadline = Deadline(timeout + TURN_MARGIN_S)
        while not self._turn.wait(TURN_POLL_S):
            if self.launch_error() is not None or self._closed or deadline.expired():
                return  # wait_for_reservation reports the launch error, or times out as before

    def join(self, timeout: float) -> None:
        """Wait for the launch threads; cancel the launch job if they do not end in time."""
        for thread in self._threads:
            thread.join(timeout)
        if any(t.is_alive() for t in self._threads):
            self.spark.cancel(self.job_group)
            for thread in self._threads:
                thread.join(timeout)

    def abort(self, reason: str) -> None:
        """Stop every node now, cancel the Spark jobs, and close (used on errors and before a relaunch)."""
        if self._closed:
            return
        logger.debug("sparkdl: aborting cluster %s: %s", self.cluster_id, reason)
        self.coordinator.abort(reason)  # also stops every running node
        self._release_executors()  # a launch waiting for executors gives up now
        # Nodes still pending (e.g. after a reservation timeout) never start: wait for the others,
        # or for the launch tasks to return (then no node is left to end).
        self.waits.registered_ended(ABORT_WAIT_S, lambda: len(self._returned) == len(self._threads))
        logger.debug("sparkdl: every node of cluster %s ended", self.cluster_id)
        self.spark.cancel(self.job_group)
        self.spark.cancel(self.feeder.job_group)
        self.join(ABORT_WAIT_S)
        self.close()
        logger.debug("sparkdl: cluster %s closed", self.cluster_id)

    def close(self) -> None:
        """Release the coordinator's sockets and threads."""
        self._closed = True
        self._release_executors()
        self.coordinator.close()
