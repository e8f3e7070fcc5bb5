"""The driver's view of one cluster's nodes: registration, the cluster spec, and how each ended.

A ``Coordinator`` owns the authenticated channel server the node supervisors connect to.
All state lives in this object (one per cluster), guarded by one condition variable.
"""

from __future__ import annotations

import logging
import threading
import time
import traceback
from collections import deque
from dataclasses import dataclass, field

from ..channel import Channel, ChannelError, ChannelServer, Endpoint
from ..errors import ClusterError, NodeFailure, ReservationTimeout, cluster_error
from ..roles import COLLECTIVE_ROLES, STOPPED_AT_SHUTDOWN, NodeRole, build_cluster_spec

logger = logging.getLogger(__name__)

STALL_CHECK_S = 0.5  # how often the driver looks for stalled nodes
RECENT_LINES = 40  # forwarded lines kept per node, for the failure of a node that is lost
STALL_REPORT_S = 5.0  # how long a stalled node's supervisor has to report before the driver gives up on it
CAUSE_WAIT_S = 10.0  # how long a failed Spark job (launch or feed) waits for the node report that explains it


@dataclass
class NodeState:
    """What the driver knows about one node."""

    role: NodeRole
    host: str = ""
    port: int = 0
    spark_executor: str = ""
    log_path: str = ""
    status: str = "pending"  # pending, registered, running, exited
    serving: bool = False  # the node declared itself a long-running server
    feed_port: int = 0  # its feed server's port (InputMode.SPARK)
    feed_terminated: bool = False  # map_fun called DataFeed.terminate()
    feed_consumed: dict = field(default_factory=dict)  # qname -> the last cluster.train session read in full
    pid: int = 0  # the TF process
    supervisor_pid: int = 0
    anchor_pid: int = 0  # the Spark task (or executor JVM) the node lives and dies with
    last_progress: float = 0.0  # time.monotonic() of the last heartbeat
    metrics: dict = field(default_factory=dict)  # the latest progress report (step, epoch, loss, ...)
    stall_sent_at: float = 0.0  # when the driver told the supervisor the node stalled
    stop_sent: bool = False  # the driver asked the node to stop
    failure: NodeFailure | None = None
    channel: Channel | None = field(default=None, repr=False)
    # The last lines the node forwarded: the tail a lost node's failure shows. The driver never
    # opens the node's log_path: it names a file on the executor's host, not on the driver's.
    recent_lines: deque = field(default_factory=lambda: deque(maxlen=RECENT_LINES), repr=False)

    @property
    def finished(self) -> bool:
        """Whether the node's process has ended (successfully or not)."""
        return self.status == "exited"

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
    ):
        self.roles = roles
        self.nodes = {role.node_number: NodeState(role) for role in roles}
        self.cluster_spec: dict[str, list[str]] | None = None
        self.tensorboard_url: str | None = None
        self.aborted: str | None = None
        self.failures: list[NodeFailure] = []
        self.stall_timeout = stall_timeout
        self.feed_timeout: float | None = None  # set while cluster.train feeds: a stalled reader fails
        self.on_inferred = None  # called with (node, event) for each inference partition answered
        self.on_log = None  # called with (node, lines) for the node's output
        self.on_epoch_end = None  # called with (node, report) for each epoch-end progress report
        self._closed = False
        self._cond = threading.Condition()
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
        message = channel.recv(timeout=60)
        if message.get("type") != "register":
            return
        node = self._register(channel, message)
        if node is None:
            return
        spec = self._await_spec()
        if spec is None:
            channel.send({"type": "abort", "reason": self.aborted})
            return
        channel.send({"type": "cluster", "cluster_spec": spec})
        try:
            while True:
                message = channel.recv()
                try:
                    self._on_message(node, message)
                except Exception as exc:  # noqa: BLE001 - a driver-side bug must fail the node, loudly
                    self._record_failure(
                        node,
                        node.describe_failure(
                            cause=f"the driver failed handling its {message.get('type')!r} message "
                            f"({type(exc).__name__}: {exc})",
                            traceback=traceback.format_exc(),
                        ),
                    )
                    return
                if node.finished:
                    return
        except ChannelError as exc:
            if not node.finished and (node.stop_sent or self._closed):
                with self._cond:  # we stopped it, or we are closing: its end is not a failure
                    node.status = "exited"
                    self._cond.notify_all()
            elif not node.finished:
                self._record_failure(
                    node,
                    node.describe_failure(
                        cause=f"lost contact with its supervisor ({exc}): its Spark executor or host was lost",
                        log_tail="\n".join(node.recent_lines),
                    ),
                )

    def _register(self, channel: Channel, message: dict) -> NodeState | None:
        number = message.get("node_number")
        with self._cond:
            node = self.nodes.get(number)
            if node is None or node.status != "pending" or self.aborted:
                reason = self.aborted or f"node #{number} is unknown or already registered"
                channel.send({"type": "abort", "reason": reason})
                return None
            node.host, node.port = message["host"], int(message["port"])
            node.spark_executor = message.get("spark_executor", "")
            node.log_path = message.get("log_path", "")
            node.supervisor_pid, node.anchor_pid = int(message.get("pid", 0)), int(message.get("anchor_pid", 0))
            node.status, node.channel = "registered", channel
            if all(n.status != "pending" for n in self.nodes.values()):
                self.cluster_spec = build_cluster_spec(
                    self.roles, {i: f"{n.host}:{n.port}" for i, n in self.nodes.items()}
                )
            self._cond.notify_all()
            return node

    def _await_spec(self) -> dict | None:
        with self._cond:
            self._cond.wait_for(lambda: self.cluster_spec is not None or self.aborted)
            return None if self.aborted else self.cluster_spec

    def _on_message(self, node: NodeState, message: dict) -> None:
        kind = message.get("type")
        with self._cond:
            if kind == "started":
                node.status, node.pid, node.last_progress = "running", int(message.get("pid", 0)), time.monotonic()
            elif kind == "status" and message.get("event") == "progress":
                node.last_progress = time.monotonic()
                node.metrics.update({k: v for k, v in message.items() if k not in ("type", "event")})
            elif kind == "tensorboard":
                self.tensorboard_url = message["url"]
            elif kind == "status" and message.get("event") == "serving":
                node.serving = True
            elif kind == "status" and message.get("event") == "feed_ready":
                node.feed_port = int(message["port"])
            elif kind == "status" and message.get("event") == "feed_terminated":
                node.feed_terminated = True
            elif kind == "status" and message.get("event") == "feed_consumed":
                qname = message.get("qname", "input")
                node.feed_consumed[qname] = max(node.feed_consumed.get(qname, 0), int(message.get("session", 0)))
                node.metrics.update({k: message[k] for k in ("rows_read", "rows_received") if k in message})
                node.last_progress = time.monotonic()
            elif kind == "warning":
                logger.warning("%s: %s", node.role.label, message.get("message"))
            self._cond.notify_all()
        if kind == "status" and message.get("event") == "inferred" and self.on_inferred is not None:
            self.on_inferred(node, message)
        if (
            kind == "status"
            and message.get("event") == "progress"
            and message.get("epoch_end")
            and self.on_epoch_end is not None
        ):
            self.on_epoch_end(node, message)
        if kind == "log":
            lines = [line for line in message.get("lines", ()) if isinstance(line, str)]
            node.recent_lines.extend(lines)
            if self.on_log is not None:
                self.on_log(node, lines)
        if kind == "exited":
            failed = message.get("failed", message.get("exit_code") != 0 and not message.get("stopped"))
            failure = (
                node.describe_failure(
                    exit_code=message.get("exit_code"),
                    signal=message.get("signal"),
                    traceback=message.get("traceback", ""),
                    log_tail=message.get("log_tail", ""),
                    log_path=message.get("log_path", ""),
                    hint=message.get("hint", ""),
                    cause=message.get("cause", ""),
                    stalled=bool(message.get("stalled")),
                )
                if failed
                else None
            )
            if failure:
                self._record_failure(node, failure)
            else:
                with self._cond:
                    node.status = "exited"
                    self._cond.notify_all()

    def _record_failure(self, node: NodeState, failure: NodeFailure) -> None:
        """Record a failed node and stop the others: a collective cannot go on without it."""
        with self._cond:
            if node.failure is not None:
                return
            node.status, node.failure = "exited", failure
            self.failures.append(failure)
            self._cond.notify_all()
        logger.error("sparkdl: %s", failure.describe())
        self.stop_nodes(lambda n: not n.finished, grace_s=0)

    # -- stall detection --

    def _stall_limit(self, node: NodeState) -> tuple[float, str] | None:
        """The stall limit that applies to ``node`` now, with its name, or None (lock held)."""
        if node.status != "running" or node.serving or node.role.job_name not in COLLECTIVE_ROLES:
            return None
        limits = []
        if self.stall_timeout:
            limits.append((self.stall_timeout, "stall_timeout"))
        if self.feed_timeout and not node.feed_terminated:
            limits.append((self.feed_timeout, "feed_timeout, while cluster.train fed it"))
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
                try:
                    node.channel.send({"type": "stall", "reason": reason})
                except (OSError, ChannelError):
                    pass  # the supervisor is unreachable: reported as unresponsive below
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
            missing = [n.role for n in self.nodes.values() if n.status == "pending"]
            registered = len(self.nodes) - len(missing)
        reason = (
            f"only {registered} of {len(self.nodes)} TF nodes registered within {timeout:.0f} s; missing: "
            + ", ".join(f"node #{r.node_number} ({r.label})" for r in missing)
            + ". Are there enough free executors (one task slot each) for num_executors?"
        )
        self.abort(reason)
        raise ReservationTimeout(reason)

    def abort(self, reason: str) -> None:
        """Refuse further registrations and release every waiting node."""
        with self._cond:
            self.aborted = self.aborted or reason
            self._cond.notify_all()
        self.stop_nodes(lambda n: n.status != "pending" and not n.finished, grace_s=0)

    def notify_external(self) -> None:
        """Wake waiters (e.g. when the launch job ended)."""
        with self._cond:
            self._cond.notify_all()

    def wait_until(self, predicate, timeout: float | None) -> bool:
        """Wait (bounded) until ``predicate(self)`` holds; returns whether it did."""
        with self._cond:
            return self._cond.wait_for(lambda: predicate(self), timeout)

    def stop_nodes(self, which, grace_s: float) -> None:
        """Ask the supervisors of nodes matching ``which`` to stop their TF processes."""
        with self._cond:
            targets = [n for n in self.nodes.values() if which(n) and n.channel is not None]
            for node in targets:
                node.stop_sent = True
        for node in targets:
            try:
                node.channel.send({"type": "stop", "grace_s": grace_s})
            except (OSError, ChannelError):
                pass

    def training_nodes_done(self) -> bool:
        """Whether every node that must end on its own (not ps/evaluator/servers) has ended."""
        return all(
            n.finished for n in self.nodes.values() if n.role.job_name not in STOPPED_AT_SHUTDOWN and not n.serving
        )

    def all_done(self) -> bool:
        """Whether every node has ended."""
        return all(n.finished for n in self.nodes.values())

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
            self._cond.notify_all()
        self._server.close()
        self._stall_watch.join(5)
