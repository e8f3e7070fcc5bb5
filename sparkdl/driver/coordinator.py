"""The driver's view of one cluster's nodes: registration, the cluster spec, and how each ended.

A ``Coordinator`` owns the authenticated channel server the node supervisors connect to.
All state lives in this object (one per cluster), guarded by one condition variable.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field

from ..channel import Channel, ChannelError, ChannelServer
from ..errors import NodeFailure, ReservationTimeout
from ..roles import STOPPED_AT_SHUTDOWN, NodeRole, build_cluster_spec

logger = logging.getLogger(__name__)


@dataclass
class NodeState:
    """What the driver knows about one node."""

    role: NodeRole
    host: str = ""
    port: int = 0
    spark_executor: str = ""
    log_path: str = ""
    status: str = "pending"        # pending, registered, running, exited
    serving: bool = False          # the node declared itself a long-running server
    feed_port: int = 0             # its feed server's port (InputMode.SPARK)
    feed_terminated: bool = False  # map_fun called DataFeed.terminate()
    failure: NodeFailure | None = None
    channel: Channel | None = field(default=None, repr=False)

    @property
    def finished(self) -> bool:
        """Whether the node's process has ended (successfully or not)."""
        return self.status == "exited"


class Coordinator:
    """Registration and supervision of one cluster's nodes (driver side)."""

    def __init__(self, roles: list[NodeRole], secret: bytes, host: str):
        self.roles = roles
        self.nodes = {role.executor_id: NodeState(role) for role in roles}
        self.cluster_spec: dict[str, list[str]] | None = None
        self.tensorboard_url: str | None = None
        self.aborted: str | None = None
        self.failures: list[NodeFailure] = []
        self.shutting_down = False
        self._cond = threading.Condition()
        self._server = ChannelServer(secret, self._handle, host=host, name="sparkdl-coordinator")

    @property
    def address(self) -> tuple[str, int]:
        """Where node supervisors connect."""
        return self._server.address

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
                self._on_message(node, channel.recv())
                if node.finished:
                    return
        except ChannelError as exc:
            if not node.finished:
                self._record_failure(node, NodeFailure(
                    node.role.label, node.role.executor_id, node.host, node.spark_executor,
                    traceback=f"lost contact with the node's supervisor ({exc}): its executor or host may be gone",
                    log_path=node.log_path))

    def _register(self, channel: Channel, message: dict) -> NodeState | None:
        executor_id = message.get("executor_id")
        with self._cond:
            node = self.nodes.get(executor_id)
            if node is None or node.status != "pending" or self.aborted:
                reason = self.aborted or f"node #{executor_id} is unknown or already registered"
                channel.send({"type": "abort", "reason": reason})
                return None
            node.host, node.port = message["host"], int(message["port"])
            node.spark_executor = message.get("spark_executor", "")
            node.log_path = message.get("log_path", "")
            node.status, node.channel = "registered", channel
            if all(n.status != "pending" for n in self.nodes.values()):
                self.cluster_spec = build_cluster_spec(
                    self.roles, {i: f"{n.host}:{n.port}" for i, n in self.nodes.items()})
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
                node.status = "running"
            elif kind == "tensorboard":
                self.tensorboard_url = message["url"]
            elif kind == "status" and message.get("event") == "serving":
                node.serving = True
            elif kind == "status" and message.get("event") == "feed_ready":
                node.feed_port = int(message["port"])
            elif kind == "status" and message.get("event") == "feed_terminated":
                node.feed_terminated = True
            elif kind == "warning":
                logger.warning("%s: %s", node.role.label, message.get("message"))
            self._cond.notify_all()
        if kind == "exited":
            failed = message.get("exit_code") != 0 and not message.get("stopped")
            failure = NodeFailure(
                node.role.label, node.role.executor_id, node.host, node.spark_executor,
                exit_code=message.get("exit_code"), signal=message.get("signal"),
                traceback=message.get("traceback", ""), log_tail=message.get("log_tail", ""),
                log_path=message.get("log_path", ""), hint=message.get("hint", "")) if failed else None
            if failure:
                self._record_failure(node, failure)
            else:
                with self._cond:
                    node.status = "exited"
                    self._cond.notify_all()

    def _record_failure(self, node: NodeState, failure: NodeFailure) -> None:
        """Record a failed node and stop the others: a collective cannot go on without it."""
        with self._cond:
            node.status, node.failure = "exited", failure
            self.failures.append(failure)
            self._cond.notify_all()
        logger.error("sparkdl: %s", failure.describe())
        self.stop_nodes(lambda n: not n.finished, grace_s=0)

    # -- driver API --

    def wait_for_reservation(self, timeout: float, launch_error=lambda: None) -> dict:
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
                return self.cluster_spec
            missing = [n.role for n in self.nodes.values() if n.status == "pending"]
            registered = len(self.nodes) - len(missing)
        reason = (f"only {registered} of {len(self.nodes)} TF nodes registered within {timeout:.0f} s; missing: "
                  + ", ".join(f"node #{r.executor_id} ({r.label})" for r in missing)
                  + ". Are there enough free executors (one task slot each) for num_executors?")
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
            try:
                node.channel.send({"type": "stop", "grace_s": grace_s})
            except (OSError, ChannelError):
                pass

    def training_nodes_done(self) -> bool:
        """Whether every node that must end on its own (not ps/evaluator/servers) has ended."""
        return all(n.finished for n in self.nodes.values()
                   if n.role.job_name not in STOPPED_AT_SHUTDOWN and not n.serving)

    def all_done(self) -> bool:
        """Whether every node has ended."""
        return all(n.finished for n in self.nodes.values())

    def running_labels(self) -> list[str]:
        """Labels of the nodes that have not ended."""
        with self._cond:
            return [n.role.label for n in self.nodes.values() if not n.finished]

    def close(self) -> None:
        """Close the channel server and every node channel."""
        self._server.close()

    @property
    def rejected_connections(self) -> int:
        """How many connections failed authentication."""
        return self._server.rejected
