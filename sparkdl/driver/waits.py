"""The named waits on one attempt's nodes: each says what it waits for.

The coordinator (``coordinator.py``) changes its nodes' state under one condition variable and
wakes every waiter; a wait here sleeps on it until its condition holds or its time is up, and
returns whether the condition held. Waits for the nodes to do something also end when a node
fails or the cluster stops (the caller then raises the failure).
"""

from __future__ import annotations

from typing import Callable, Iterable

from .coordinator import Coordinator, NodeState


class NodeWaits:
    """The waits on one attempt's nodes (``ClusterAttempt.waits``); ``launch_failed`` says whether
    the attempt's Spark launch job failed (it ends the waits on the nodes' end)."""

    def __init__(self, coordinator: Coordinator, launch_failed: Callable[[], bool] = lambda: False):
        self._coordinator = coordinator
        self._launch_failed = launch_failed

    def _until(self, condition: Callable[[Coordinator], bool], timeout: float | None) -> bool:
        return self._coordinator.wait_until(condition, timeout)

    @staticmethod
    def _stopped(c: Coordinator) -> bool:
        """A node failed, or the cluster was aborted or closed."""
        return bool(c.failures) or bool(c.aborted)

    # -- the cluster as a whole --

    def until(self, condition: Callable[[], bool], timeout: float | None) -> bool:
        """Until ``condition()`` holds (it reads state that the coordinator's events change)."""
        return self._until(lambda c: condition(), timeout)

    def failure(self, timeout: float | None) -> bool:
        """Until a node's failure is reported (e.g. the cause of a failed Spark job)."""
        return self._until(lambda c: bool(c.failures), timeout)

    def tensorboard(self, timeout: float | None) -> bool:
        """Until TensorBoard's URL is known, or a node failed."""
        return self._until(lambda c: c.tensorboard_url is not None or bool(c.failures), timeout)

    def training_nodes_ended(self, timeout: float | None) -> bool:
        """Until every node that ends by itself (not ps, evaluator, servers) ended, a node failed,
        or the launch job failed."""
        return self._until(lambda c: c.training_nodes_done() or bool(c.failures) or self._launch_failed(), timeout)

    def failure_or_all_ended(self, timeout: float | None) -> bool:
        """Until a node's failure is reported or every node ended (a failed launch job's cause)."""
        return self._until(lambda c: bool(c.failures) or c.all_done(), timeout)

    def registered_ended(self, timeout: float | None, tasks_returned: Callable[[], bool]) -> bool:
        """Until every node that registered ended, or every launch task returned (after ``abort()``,
        which refuses the rest: a registered node's task may then return without starting it)."""
        return self._until(lambda c: c.registered_nodes_done() or tasks_returned(), timeout)

    def all_ended(self, timeout: float | None, or_launch_failed: bool = False) -> bool:
        """Until every node ended (or, with ``or_launch_failed``, the launch job failed)."""
        return self._until(lambda c: c.all_done() or (or_launch_failed and self._launch_failed()), timeout)

    # -- the data nodes (InputMode.SPARK) --

    def feed_servers(self, nodes: Iterable[NodeState], timeout: float | None) -> bool:
        """Until every one of ``nodes`` has its feed server listening (or ended), or a node failed."""
        nodes = list(nodes)
        return self._until(lambda c: all(n.feed_port or n.finished for n in nodes) or bool(c.failures), timeout)

    def spark_job(self, done: Callable[[], bool]) -> bool:
        """Until a Spark job ends (``done()``), a node fails or the cluster stops; whether it ended."""
        self._until(lambda c: done() or self._stopped(c), None)
        return done()

    def rows_read(self, nodes: Iterable[NodeState], qname: str, session: int) -> bool:
        """Until every one of ``nodes`` has read all its rows of training run ``session`` (or ended its
        feed), a node fails or the cluster stops (no time limit: the stall watch ends a node that
        stops reading)."""
        nodes = list(nodes)
        return self._until(lambda c: self._stopped(c) or all(n.has_read(qname, session) for n in nodes), None)

    def feeds_ended(self, nodes: Iterable[NodeState], timeout: float | None) -> bool:
        """Until every one of ``nodes`` ended its feed (``terminate()``, or ``map_fun`` returned
        well), or a node failed."""
        nodes = list(nodes)
        return self._until(lambda c: bool(c.failures) or all(n.feed_ended for n in nodes), timeout)

    # -- streaming training (driver/streaming.py) --

    def stream_positions(self, nodes: Iterable[NodeState], qname: str, timeout: float | None) -> bool:
        """Until every one of ``nodes`` reported the micro-batch its model holds on stream ``qname``
        (or ended), a node fails or the cluster stops."""
        nodes = list(nodes)
        reported = lambda n: qname in n.stream_position or n.finished or n.feed_terminated  # noqa: E731
        return self._until(lambda c: self._stopped(c) or all(map(reported, nodes)), timeout)

    def batch_saved(self, nodes: Iterable[NodeState], qname: str, batch_id: int, timeout: float | None) -> bool:
        """Until every one of ``nodes`` holds micro-batch ``batch_id`` of ``qname`` (or ended), a node
        fails or the cluster stops."""
        nodes = list(nodes)
        holds = lambda n: n.stream_position.get(qname, -1) >= batch_id or n.finished  # noqa: E731
        return self._until(lambda c: self._stopped(c) or all(map(holds, nodes)), timeout)

    def stream_over(self, nodes: Iterable[NodeState], stopping: Callable[[], bool]) -> None:
        """Until ``stopping()``, a node fails, the cluster stops, or every one of ``nodes`` ended its
        feed (no time limit)."""
        nodes = list(nodes)
        over = lambda: all(n.finished or n.feed_terminated for n in nodes)  # noqa: E731
        self._until(lambda c: stopping() or self._stopped(c) or over(), None)
