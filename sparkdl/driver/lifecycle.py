"""A cluster's life as named states, and the one policy that decides what a node failure does.

::

    STARTING ──► RUNNING ◄──► FEEDING                 (cluster.train and its kin feed the nodes)
       ▲            │  ▲          │
       │            ▼  │          ▼                   (RUNNING → RESTARTING: an elastic cluster grows)
       └──── RESTARTING ◄──── STOPPING ──► STOPPED     (shutdown waits for the nodes, stops servers)
                    │             │
                    └─────────────┴──────► FAILED      (from any state but STOPPED: raised, or aborted)

``TFCluster`` holds one :class:`Lifecycle`; every change of state goes through
:meth:`Lifecycle.move`, which refuses a transition the diagram does not have. A failure goes to
the :class:`FailurePolicy` (as Ray Train's ``FailurePolicy``): RESTART relaunches the cluster
(a fresh attempt, resuming the work the failure cut short), RESIZE relaunches it on another
node count within its :class:`NodeRange` (an elastic cluster whose executor was lost, or to which
Spark added executors: it grows at an epoch boundary, RUNNING or FEEDING → RESTARTING), RAISE
ends it; each decision is logged with its reason. Both input modes use the same rule, which
reads the state the failure happened in: a relaunch can resume a ``cluster.train`` call
(InputMode.SPARK: the failure came while FEEDING) or the nodes' own run (InputMode.TENSORFLOW:
while STOPPING, that is, while shutdown waits for them), nothing else.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from dataclasses import dataclass
from enum import Enum
from typing import Callable

from ..common.errors import ClusterError, ClusterStateError, cluster_error

logger = logging.getLogger(__name__)

#: Default ``max_lost_executor_relaunches`` of ``TFCluster.run``: how many times an elastic cluster
#: (``min_executors``) is relaunched after its nodes lost their Spark executors. Such relaunches do not
#: spend ``max_restarts``, but a node whose own memory gets its container killed (YARN's memory check)
#: loses its executor on every attempt, so they need a bound of their own.
MAX_LOST_EXECUTOR_RELAUNCHES = 10


class ClusterState(str, Enum):
    """Where a cluster is in its life (``TFCluster.state``)."""

    STARTING = "starting"  #: an attempt launches: its nodes register (and start their feed servers)
    RUNNING = "running"  #: every node is up; map_fun runs
    FEEDING = "feeding"  #: cluster.train (a DStream's RDD included) feeds the data nodes
    RESTARTING = "restarting"  #: a node failed (or Spark added executors): the cluster is relaunched
    STOPPING = "stopping"  #: shutdown(): waiting for the training nodes, then stopping the servers
    STOPPED = "stopped"  #: shut down, every node ended well
    FAILED = "failed"  #: ended by a failure (raised to the caller) or stopped at once (abort)

    @property
    def ended(self) -> bool:
        """Whether nothing more can happen (STOPPED or FAILED)."""
        return self in (ClusterState.STOPPED, ClusterState.FAILED)


S = ClusterState
#: The legal moves; FAILED is reachable from every state that has not ended.
TRANSITIONS: dict[ClusterState, frozenset[ClusterState]] = {
    S.STARTING: frozenset({S.RUNNING, S.FAILED}),
    S.RUNNING: frozenset({S.FEEDING, S.RESTARTING, S.STOPPING, S.FAILED}),
    S.FEEDING: frozenset({S.RUNNING, S.RESTARTING, S.STOPPING, S.FAILED}),
    S.RESTARTING: frozenset({S.STARTING, S.FAILED}),
    S.STOPPING: frozenset({S.STOPPED, S.RESTARTING, S.FAILED}),
    S.STOPPED: frozenset(),
    S.FAILED: frozenset(),
}


class Lifecycle:
    """The state of one cluster, changed only along :data:`TRANSITIONS` (thread-safe)."""

    def __init__(self, cluster_id: str):
        self.cluster_id = cluster_id
        self._state = ClusterState.STARTING
        self._feeders = 0  # calls feeding the nodes now (a DStream's batch may overlap a train call)
        self._lock = threading.Lock()

    @property
    def state(self) -> ClusterState:
        """The current state."""
        return self._state

    def move(self, target: ClusterState) -> None:
        """Go to ``target``; RuntimeError (a bug in sparkdl) for a move the diagram does not have.
        Moving to the state the cluster is in does nothing."""
        with self._lock:
            self._move(target)

    def _move(self, target: ClusterState) -> None:
        if target is self._state:
            return
        if target not in TRANSITIONS[self._state]:
            raise RuntimeError(
                f"sparkdl cluster {self.cluster_id}: no transition from {self._state.value} to {target.value}"
            )
        logger.debug("sparkdl cluster %s: %s -> %s", self.cluster_id, self._state.value, target.value)
        self._state = target

    @contextlib.contextmanager
    def feeding(self):
        """FEEDING for the duration of a feeding call; RUNNING again once the last one ends, unless
        the cluster moved on meanwhile (stopping, failed) or a node failed: a ``ClusterError`` leaves
        the cluster FEEDING for the failure policy to decide (``TFCluster`` restarts or ends it).
        ClusterStateError unless the cluster runs (it may be shutting down in another thread)."""
        with self._lock:
            if self._state not in (ClusterState.RUNNING, ClusterState.FEEDING):
                raise ClusterStateError(
                    f"sparkdl cluster {self.cluster_id} is {self._state.value}: it takes data only while it runs "
                    "(not once shutdown() has been called)"
                )
            self._move(ClusterState.FEEDING)
            self._feeders += 1
        failed = False
        try:
            yield
        except ClusterError:
            failed = True
            raise
        finally:
            with self._lock:
                self._feeders -= 1
                if not self._feeders and not failed and self._state is ClusterState.FEEDING:
                    self._move(ClusterState.RUNNING)


class FailureDecision(str, Enum):
    """What the failure policy decided."""

    RESTART = "restart"  #: relaunch the cluster with as many nodes and resume the interrupted work
    RESIZE = "resize"  #: relaunch it with another node count (within its NodeRange) and resume
    RAISE = "raise"  #: end the cluster and raise the failure


@dataclass(frozen=True)
class NodeRange:
    """How many nodes a cluster may run on: ``TFCluster.run(min_executors=..., num_executors=...)``.

    ``min_nodes == max_nodes`` (the default) is a fixed cluster; below ``max_nodes`` the cluster is
    elastic: it goes on with fewer nodes when executors are lost, and grows back when Spark adds some.
    """

    min_nodes: int
    max_nodes: int

    def __post_init__(self) -> None:
        if not 1 <= self.min_nodes <= self.max_nodes:
            raise ValueError(
                f"min_executors must be between 1 and num_executors={self.max_nodes}, got {self.min_nodes!r}"
            )

    @property
    def elastic(self) -> bool:
        """Whether the node count may change during the cluster's life."""
        return self.min_nodes < self.max_nodes


@dataclass(frozen=True)
class Decision:
    """One decision of the failure policy, with the node count of the next attempt and why."""

    action: FailureDecision
    nodes: int  #: nodes of the next attempt (RESTART, RESIZE); the current count for RAISE
    reason: str
    #: A RAISE whose reason belongs in the raised error (a budget is spent, too few executors are
    #: left): the node's failure alone would not say why the cluster was not relaunched.
    explained: bool = False


class FailurePolicy:
    """Decides what a node failure (or Spark adding executors) does, the same way in both input
    modes (see the module docstring), and logs every decision with its reason.

    ``max_restarts`` bounds the relaunches that follow a node's own failure; each one keeps the
    failure that caused it in :attr:`survived`. With an elastic ``node_range``, a node whose Spark
    executor was lost is not its own failure: the cluster is relaunched on as many nodes as Spark
    can host (``capacity``, after a bounded wait for a replacement), down to ``min_nodes``, without
    counting against ``max_restarts``; below that the failure is raised. Those relaunches have their
    own budget, ``max_lost_executor_relaunches`` (a node that gets its own container killed loses its
    executor on every attempt): once it is spent, the next lost executor is raised, naming the node
    and the setting.
    """

    def __init__(
        self,
        max_restarts: int,
        resumes_in: ClusterState,
        node_range: NodeRange | None = None,
        cluster_id: str = "",
        max_lost_executor_relaunches: int = MAX_LOST_EXECUTOR_RELAUNCHES,
    ):
        self.max_restarts = max_restarts
        self.resumes_in = resumes_in  #: the state whose work a relaunch resumes (FEEDING or STOPPING)
        self.node_range = node_range
        self.cluster_id = cluster_id
        self.max_lost_executor_relaunches = max_lost_executor_relaunches
        self.survived: list[ClusterError] = []  #: the failures that caused a counted relaunch, in order
        self.lost: list[ClusterError] = []  #: the lost executors that caused an elastic relaunch, in order
        self.decisions: list[Decision] = []  #: every decision, in order (a resize's reason included)

    @property
    def restarts(self) -> int:
        """Relaunches counted against ``max_restarts`` so far."""
        return len(self.survived)

    @property
    def lost_executor_relaunches(self) -> int:
        """Relaunches after lost executors so far (an elastic cluster's; ``max_lost_executor_relaunches``)."""
        return len(self.lost)

    @property
    def elastic(self) -> bool:
        """Whether the cluster may change its node count."""
        return self.node_range is not None and self.node_range.elastic

    def decide(
        self, error: ClusterError, state: ClusterState, nodes: int, capacity: Callable[[], int] = lambda: 0
    ) -> Decision:
        """What to do about ``error``, raised while in ``state`` on a cluster of ``nodes`` nodes.

        ``capacity()`` (asked only when an executor was lost on an elastic cluster) says how many
        nodes Spark can host, after waiting (bounded) for a replacement executor.
        """
        failed = ", ".join(f.label for f in error.failures) or "the cluster"
        if state is not self.resumes_in or not error.failures:
            return self._log(FailureDecision.RAISE, nodes, f"{failed} failed while {state.value}: nothing to resume")
        if self.elastic and any(f.executor_lost for f in error.failures):
            assert self.node_range is not None
            lost = ", ".join(f.label for f in error.failures if f.executor_lost)
            if self.lost_executor_relaunches >= self.max_lost_executor_relaunches:
                why = (
                    f"{lost} lost its Spark executor and max_lost_executor_relaunches="
                    f"{self.max_lost_executor_relaunches} relaunch(es) after lost executors are used up (a node "
                    "whose own memory gets its container killed loses its executor on every attempt: give it "
                    "more memory, or raise the setting)"
                )
                return self._log(FailureDecision.RAISE, nodes, why, explained=True)
            available = min(capacity(), self.node_range.max_nodes)
            if available < self.node_range.min_nodes:
                why = (
                    f"{lost} lost its Spark executor and Spark can host {available} node(s), "
                    f"fewer than min_executors={self.node_range.min_nodes}"
                )
                return self._log(FailureDecision.RAISE, nodes, why, explained=True)
            self.lost.append(error)
            action = FailureDecision.RESTART if available == nodes else FailureDecision.RESIZE
            why = (
                f"{lost} lost its Spark executor; Spark can host {available} node(s) (relaunch "
                f"{self.lost_executor_relaunches} of max_lost_executor_relaunches={self.max_lost_executor_relaunches})"
            )
            return self._log(action, available, why)
        if self.restarts >= self.max_restarts:
            why = f"{failed} failed and max_restarts={self.max_restarts} relaunch(es) are used up"
            return self._log(FailureDecision.RAISE, nodes, why)
        self.survived.append(error)
        why = f"{failed} failed: relaunch {self.restarts} of max_restarts={self.max_restarts}"
        return self._log(FailureDecision.RESTART, nodes, why)

    def grow(self, nodes: int, capacity: int) -> Decision | None:
        """At an epoch boundary: RESIZE up to ``capacity`` nodes (at most ``max_nodes``) when the
        cluster is elastic, below its maximum and Spark can host more nodes; None otherwise."""
        if not self.elastic or capacity <= nodes:
            return None
        assert self.node_range is not None
        target = min(capacity, self.node_range.max_nodes)
        if target <= nodes:
            return None
        why = f"Spark can host {capacity} node(s): growing at the epoch boundary"
        return self._log(FailureDecision.RESIZE, target, why)

    def refeed(self, nodes: int, began: int, planned: int) -> Decision:
        """A relaunched chief's ``model.fit`` began at epoch ``began`` (0-based), though its attempt is
        fed from ``planned`` (a fit without a backup begins at 0 with fresh weights): RESTART on as many
        nodes, fed from ``began``. No node failed: ``max_restarts`` is not spent."""
        how = "again at epoch 1 (no backup restored)" if began == 0 else f"at epoch {began + 1} (its backup)"
        why = (
            f"the relaunched chief's model.fit began {how}, but its attempt is fed from epoch {planned + 1}: "
            f"relaunching, fed from epoch {began + 1}"
        )
        return self._log(FailureDecision.RESTART, nodes, why)

    def raised(self, decision: Decision, error: ClusterError) -> ClusterError:
        """What a RAISE ``decision`` on ``error`` raises: ``error`` itself, or when the decision explains
        why the cluster was not relaunched (a spent budget, too few executors), a ``ClusterError`` of the
        same failures that says so first (raise it ``from error``)."""
        if not decision.explained:
            return error
        return cluster_error(error.failures, f"sparkdl cluster {self.cluster_id}: {decision.reason}")

    def _log(self, action: FailureDecision, nodes: int, reason: str, explained: bool = False) -> Decision:
        decision = Decision(action, nodes, reason, explained)
        self.decisions.append(decision)
        level = logging.ERROR if action is FailureDecision.RAISE else logging.WARNING
        logger.log(level, "sparkdl cluster %s: %s (%d nodes): %s", self.cluster_id, action.value, nodes, reason)
        return decision
