"""The driver's view of one cluster's nodes: registration, the cluster spec, and how each ended.

A ``Coordinator`` owns the authenticated channel server the node supervisors connect to.
All state lives in this object (one per cluster), guarded by one condition variable.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
import time
import traceback
from collections import deque
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Callable

from ..common.errors import ClusterError, NodeFailure, ReservationTimeout, cluster_error
from ..common.roles import COLLECTIVE_ROLES, STOPPED_AT_SHUTDOWN, NodeRole, build_cluster_spec
from ..common.timeouts import STALL_CHECK_S, STALL_REPORT_S
from ..transport import protocol
from ..transport.channel import Channel, ChannelError, ChannelServer, Endpoint
from ..transport.clients import SupervisorClient

logger = logging.getLogger(__name__)

RECENT_LINES = 40  # forwarded lines kept per node, for the failure of a node that is lost


class NodeStatus(str, Enum):
    """Where a node is in its life, as the driver sees it (``cluster_info[i]["status"]``)."""

    PENDING = "pending"  # not registered yet
    REGISTERED = "registered"  # its supervisor registered; the TF process is not started
    RUNNING = "running"  # the TF process runs
    EXITED = "exited"  # it ended, successfully or not


@dataclass(frozen=True)
class Listeners:
    """Who hears the nodes' events besides the coordinator's own state (given at construction)."""

    on_log: Callable | None = None  # (node, lines): the node's output, for the driver's console
    on_inferred: Callable | None = None  # (node, Inferred): an inference partition answered in full
    on_epoch_end: Callable | None = None  # (node, metrics): an epoch-end (or fit-end) progress report
    on_fit_begin: Callable | None = None  # (node, metrics): a model.fit began (its first epoch's number)


@dataclass
class NodeState:
    """What the driver knows about one node."""

    role: NodeRole
    host: str = ""
    port: int = 0
    spark_executor: str = ""
    log_path: str = ""
    status: NodeStatus = NodeStatus.PENDING
    serving: bool = False  # the node declared itself a long-running server
    feed_port: int = 0  # its feed server's port (InputMode.SPARK)
    feed_terminated: bool = False  # map_fun called DataFeed.terminate()
    feed_consumed: dict = field(default_factory=dict)  # qname -> the last cluster.train session read in full
    stream_position: dict = field(default_factory=dict)  # qname -> last micro-batch its model holds (-1: none)
    bad_rows: int = 0  # bad rows it skipped (cluster.train(bad_rows="skip")), over every epoch read
    bad_row_example: str = ""  # the first of them: column, partition, row and what is wrong
    pid: int = 0  # the TF process
    supervisor_pid: int = 0
    anchor_pid: int = 0  # the Spark task (or executor JVM) the node lives and dies with
    last_progress: float = 0.0  # time.monotonic() of the last heartbeat
    metrics: dict = field(default_factory=dict)  # the latest progress report (step, epoch, loss, ...)
    result: Any = None  # what map_fun returned (a Result message), when the node was asked for it
    stall_sent_at: float = 0.0  # when the driver told the supervisor the node stalled
    stop_sent: bool = False  # the driver asked the node to stop
    failure: NodeFailure | None = None
    channel: Channel | None = field(default=None, repr=False)  # the supervisor's, from its registration
    supervisor: SupervisorClient | None = field(default=None, repr=False)  # commands to it, on that channel
    # The last lines the node forwarded: the tail a lost node's failure shows. The driver never
    # opens the node's log_path: it names a file on the executor's host, not on the driver's.
    recent_lines: deque = field(default_factory=lambda: deque(maxlen=RECENT_LINES), repr=False)

    @property
    def finished(self) -> bool:
        """Whether the node's process has ended (successfully or not)."""
        return self.status is NodeStatus.EXITED

    @property
    def feed_ended(self) -> bool:
        """Whether the node wants no more data: ``DataFeed.terminate()``, or ``map_fun`` returned well."""
        return self.feed_terminated or (self.finished and self.failure is None)

    def has_read(self, qname: str, session: int) -> bool:
        """Whether the node read all its rows of training run ``session`` of ``qname`` (or ended)."""
        return self.feed_consumed.get(qname, 0) >= session or self.feed_terminated or self.finished

    def describe_failure(self, **details) -> NodeFailure:
        """A NodeFailure naming this node (role, number, host, executor, log) with ``details``."""
        details.setdefault("log_path", self.log_path)
        return NodeFailure(self.role.label, self.role.node_number, self.host, self.spark_executor, **details)


class Coordinator:
    """Registration and supervision of one cluster's nodes (driver side)."""

    def __init__(
        self,
        roles: list[NodeRole],
        secret: bytes,
        host: str,
        stall_timeout: float | None = None,
        advertise_host: str | None = None,
        *,
        cluster_id: str,
        listeners: Listeners = Listeners(),
    ):
        self.roles = roles
        self.nodes = {role.node_number: NodeState(role) for role in roles}
        self.cluster_spec: dict[str, list[str]] | None = None
        self.tensorboard_url: str | None = None
        self.aborted: str | None = None
        self.failures: list[NodeFailure] = []
        self.stall_timeout = stall_timeout
        self._read_stall_s: float | None = None  # while cluster.train feeds (watch_reads): a node not reading stalls
        self.listeners = listeners
        self._closed = False
        self._cond = threading.Condition()
        #: What the coordinator does with each message a registered node's supervisor sends.
        self._handlers = {
            protocol.Started: self._on_started,
            protocol.Progress: self._on_progress,
            protocol.TensorBoard: self._on_tensorboard,
            protocol.Serving: self._on_serving,
            protocol.FeedReady: self._on_feed_ready,
            protocol.FeedTerminated: self._on_feed_terminated,
            protocol.FeedConsumed: self._on_feed_consumed,
            protocol.StreamPosition: self._on_stream_position,
            protocol.Inferred: self._on_inferred,
            protocol.BadRows: self._on_bad_rows,
            protocol.Result: self._on_result,
            protocol.NodeWarning: self._on_warning,
            protocol.Log: self._on_log,
            protocol.Exited: self._on_exited,
        }
        self._server = ChannelServer(
            secret, self._handle, host=host, name="sparkdl-coordinator", endpoint=Endpoint.coordinator(cluster_id)
        )
        self._advertise_host = advertise_host or self._server.address[0]
        self._stall_watch = threading.Thread(target=self._watch_stalls, name="sparkdl-stall-watch", daemon=True)
        self._stall_watch.start()

    @property
    def address(self) -> tuple[str, int]:
        """Where node supervisors connect (the advertised host, the bound port)."""
        return self._advertise_host, self._server.address[1]

    # -- channel handling (one thread per node) --

    def _handle(self, channel: Channel) -> None:
        registration = protocol.parse(channel.recv(timeout=60), protocol.Register)
        node = self._register(channel, registration)
        if node is None:
            return
        spec = self._await_spec()
        if spec is None:
            channel.send(protocol.Abort(self.aborted).wire())
            return
        channel.send(protocol.ClusterSpec(spec).wire())
        try:
            while True:
                data = channel.recv()
                try:
                    message = protocol.parse(data, *self._handlers)
                    self._handlers[type(message)](node, message)
                except Exception as exc:  # noqa: BLE001 - a driver-side bug or a bad message fails the node, loudly
                    self._record_failure(
                        node,
                        node.describe_failure(
                            cause=f"the driver failed handling its {data.get('type')!r} message "
                            f"({type(exc).__name__}: {exc})",
                            traceback=traceback.format_exc(),
                        ),
                    )
                    return
                if node.finished:
                    return
        except ChannelError as exc:
            if not node.finished and (node.stop_sent or self._closed):
                with self._state_change():  # we stopped it, or we are closing: its end is not a failure
                    node.status = NodeStatus.EXITED
            elif not node.finished:
                self._record_failure(
                    node,
                    node.describe_failure(
                        cause=f"lost contact with its supervisor ({exc}): its Spark executor or host was lost",
                        log_tail="\n".join(node.recent_lines),
                        executor_lost=True,
                    ),
                )

    def _register(self, channel: Channel, message: protocol.Register) -> NodeState | None:
        with self._cond:
            node = self.nodes.get(message.node_number)
            if node is None or node.status is not NodeStatus.PENDING or self.aborted:
                reason = self.aborted or f"node #{message.node_number} is unknown or already registered"
                channel.send(protocol.Abort(reason).wire())
                return None
            node.host, node.port = message.host, message.port
            node.spark_executor, node.log_path = message.spark_executor, message.log_path
            node.supervisor_pid, node.anchor_pid = message.pid, message.anchor_pid
            node.status, node.channel, node.supervisor = NodeStatus.REGISTERED, channel, SupervisorClient(channel)
            if all(n.status is not NodeStatus.PENDING for n in self.nodes.values()):
                self.cluster_spec = build_cluster_spec(
                    self.roles, {i: f"{n.host}:{n.port}" for i, n in self.nodes.items()}
                )
            self._cond.notify_all()
            return node

    def _await_spec(self) -> dict | None:
        """The cluster spec once every node registered; None if the cluster aborted or closed first
        (``self.aborted`` then says why)."""
        with self._cond:
            self._cond.wait_for(lambda: self.cluster_spec is not None or self.aborted)
            return None if self.aborted else self.cluster_spec

    # -- what each message does (self._handlers) --

    @contextlib.contextmanager
    def _state_change(self):
        """Hold the lock while the nodes' state changes, then wake every waiter."""
        with self._cond:
            yield
            self._cond.notify_all()

    def _on_started(self, node: NodeState, message: protocol.Started) -> None:
        with self._state_change():
            node.status, node.pid, node.last_progress = NodeStatus.RUNNING, message.pid, time.monotonic()

    def _on_progress(self, node: NodeState, message: protocol.Progress) -> None:
        with self._state_change():
            node.last_progress = time.monotonic()
            node.metrics.update(message.metrics)
        ends = message.metrics.get("epoch_end") or message.metrics.get("fit_end")
        if ends and self.listeners.on_epoch_end is not None:
            self.listeners.on_epoch_end(node, message.metrics)
        if message.metrics.get("fit_begin") and self.listeners.on_fit_begin is not None:
            self.listeners.on_fit_begin(node, message.metrics)

    def _on_tensorboard(self, node: NodeState, message: protocol.TensorBoard) -> None:
        with self._state_change():
            self.tensorboard_url = message.url

    def _on_serving(self, node: NodeState, message: protocol.Serving) -> None:
        with self._state_change():
            node.serving = True

    def _on_feed_ready(self, node: NodeState, message: protocol.FeedReady) -> None:
        with self._state_change():
            node.feed_port = message.port

    def _on_feed_terminated(self, node: NodeState, message: protocol.FeedTerminated) -> None:
        with self._state_change():
            node.feed_terminated = True

    def _on_feed_consumed(self, node: NodeState, message: protocol.FeedConsumed) -> None:
        with self._state_change():
            node.feed_consumed[message.qname] = max(node.feed_consumed.get(message.qname, 0), message.session)
            node.metrics.update(rows_read=message.rows_read, rows_received=message.rows_received)
            node.last_progress = time.monotonic()

    def _on_stream_position(self, node: NodeState, message: protocol.StreamPosition) -> None:
        with self._state_change():
            node.stream_position[message.qname] = -1 if message.batch_id is None else message.batch_id
            node.last_progress = time.monotonic()

    def _on_inferred(self, node: NodeState, message: protocol.Inferred) -> None:
        if self.listeners.on_inferred is not None:
            self.listeners.on_inferred(node, message)

    def _on_result(self, node: NodeState, message: protocol.Result) -> None:
        with self._state_change():
            node.result = message.value

    def _on_bad_rows(self, node: NodeState, message: protocol.BadRows) -> None:
        with self._state_change():
            first = not node.bad_rows
            node.bad_rows += message.rows
            node.bad_row_example = node.bad_row_example or message.example
        level = logging.WARNING if first else logging.DEBUG
        logger.log(
            level, "%s skipped %d bad row(s) (bad_rows='skip'): %s", node.role.label, message.rows, message.example
        )

    def _on_warning(self, node: NodeState, message: protocol.NodeWarning) -> None:
        logger.warning("%s: %s", node.role.label, message.message)

    def _on_log(self, node: NodeState, message: protocol.Log) -> None:
        node.recent_lines.extend(message.lines)
        if self.listeners.on_log is not None:
            self.listeners.on_log(node, message.lines)

    def _on_exited(self, node: NodeState, message: protocol.Exited) -> None:
        if not message.failed:
            with self._state_change():
                node.status = NodeStatus.EXITED
            return
        details = dataclasses.asdict(message)  # how it ended: NodeFailure's fields, besides these two
        del details["stopped"], details["failed"]
        self._record_failure(node, node.describe_failure(**details))

    def _record_failure(self, node: NodeState, failure: NodeFailure) -> None:
        """Record a failed node and stop the others: a collective cannot go on without it."""
        with self._cond:
            if node.failure is not None:
                return
            node.status, node.failure = NodeStatus.EXITED, failure
            self.failures.append(failure)
            self._cond.notify_all()
        logger.error("sparkdl: %s", failure.summary())  # the whole account is the ClusterError's
        self.stop_nodes(lambda n: not n.finished, grace_s=0)

    # -- stall detection --

    def _stall_limit(self, node: NodeState) -> tuple[float, str] | None:
        """The stall limit that applies to ``node`` now, with its name, or None (lock held)."""
        if node.status is not NodeStatus.RUNNING or node.serving or node.role.job_name not in COLLECTIVE_ROLES:
            return None
        limits = []
        if self.stall_timeout:
            limits.append((self.stall_timeout, "stall_timeout"))
        if self._read_stall_s and not node.feed_terminated:
            limits.append((self._read_stall_s, "feed_timeout, while cluster.train fed it"))
        return min(limits) if limits else None

    def _watch_stalls(self) -> None:
        """Stop nodes that made no progress for their limit; fail them if they cannot even report."""
        while True:
            stalled, unresponsive = [], []
            with self._cond:
                self._cond.wait(STALL_CHECK_S)
                if self._closed:
                    return
                now = time.monotonic()
                for node in self.nodes.values():
                    if node.stall_sent_at:
                        if not node.finished and now - node.stall_sent_at > STALL_REPORT_S:
                            unresponsive.append(node)
                        continue
                    limit = self._stall_limit(node)
                    if limit is not None and now - node.last_progress > limit[0]:
                        node.stall_sent_at = now
                        stalled.append(
                            (node, f"made no progress for {now - node.last_progress:.0f} s ({limit[1]}={limit[0]:g} s)")
                        )
            for node, reason in stalled:
                logger.error("sparkdl: %s %s; stopping it", node.role.label, reason)
                node.supervisor.stall(reason)  # unreachable: reported as unresponsive on a later pass
            for node in unresponsive:
                self._record_failure(
                    node,
                    node.describe_failure(
                        stalled=True,
                        cause="made no progress and its supervisor did not answer the stop",
                    ),
                )

    # -- driver API --

    def wait_for_reservation(self, timeout: float, launch_error=lambda: None) -> None:
        """Block until every node registered; raise ReservationTimeout naming the missing ones.

        ``launch_error`` is polled so a failed launch job ends the wait at once.
        """
        deadline = time.monotonic() + timeout
        with self._cond:
            while self.cluster_spec is None and not self.failures:
                error = launch_error()
                if error is not None:
                    self.abort(f"the launch job failed: {error}")
                    raise error
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._cond.wait(min(remaining, 0.5))
            if self.cluster_spec is not None:
                return
            missing = [n.role for n in self.nodes.values() if n.status is NodeStatus.PENDING]
            registered = len(self.nodes) - len(missing)
        reason = (
            f"only {registered} of {len(self.nodes)} TF nodes registered within {timeout:.0f} s; missing: "
            + ", ".join(f"node #{r.node_number} ({r.label})" for r in missing)
            + ". Are there enough free executors (one task slot each) for every node?"
        )
        self.abort(reason)
        raise ReservationTimeout(reason)

    def abort(self, reason: str) -> None:
        """Refuse further registrations and release every waiting node."""
        with self._cond:
            self.aborted = self.aborted or reason
            self._cond.notify_all()
        self.stop_nodes(lambda n: n.status is not NodeStatus.PENDING and not n.finished, grace_s=0)

    def notify_external(self) -> None:
        """Wake waiters (e.g. when the launch job ended)."""
        with self._cond:
            self._cond.notify_all()

    @contextlib.contextmanager
    def watch_reads(self, read_stall_s: float):
        """While inside: a data node that reads nothing for ``read_stall_s`` (``cluster.train``'s
        ``feed_timeout``) is stalled, as by ``stall_timeout``."""
        with self._state_change():
            self._read_stall_s = read_stall_s
        try:
            yield
        finally:
            with self._state_change():
                self._read_stall_s = None

    def wait_until(self, predicate, timeout: float | None) -> bool:
        """Wait (bounded) until ``predicate(self)`` holds; returns whether it did (the primitive
        under ``driver/waits.py``'s named waits)."""
        with self._cond:
            return self._cond.wait_for(lambda: predicate(self), timeout)

    def stop_nodes(self, which, grace_s: float) -> None:
        """Ask the supervisors of nodes matching ``which`` to stop their TF processes."""
        with self._cond:
            targets = [n for n in self.nodes.values() if which(n) and n.supervisor is not None]
            for node in targets:
                node.stop_sent = True
        for node in targets:
            node.supervisor.stop(grace_s)

    def training_nodes_done(self) -> bool:
        """Whether every node that must end on its own (not ps/evaluator/servers) has ended."""
        return all(
            n.finished for n in self.nodes.values() if n.role.job_name not in STOPPED_AT_SHUTDOWN and not n.serving
        )

    def all_done(self) -> bool:
        """Whether every node has ended."""
        return all(n.finished for n in self.nodes.values())

    def registered_nodes_done(self) -> bool:
        """Whether every node that registered has ended (a node still pending after ``abort()`` never
        starts: its registration is refused)."""
        return all(n.finished for n in self.nodes.values() if n.status is not NodeStatus.PENDING)

    def running_labels(self) -> list[str]:
        """Labels of the nodes that have not ended."""
        with self._cond:
            return [n.role.label for n in self.nodes.values() if not n.finished]

    def error(self, summary: str) -> ClusterError:
        """The exception describing this cluster's failures (``NodeStalled`` for a stall)."""
        return cluster_error(self.failures, summary)

    def close(self) -> None:
        """Close the channel server and every node channel; stop the stall watch."""
        with self._cond:
            self._closed = True
            # Whoever still waits on the cluster (a node for its spec, cluster.train for its nodes)
            # is released with a reason, as by abort(), without stopping anything.
            self.aborted = self.aborted or "the cluster is shutting down"
            self._cond.notify_all()
        self._server.close()
        self._stall_watch.join(5)
