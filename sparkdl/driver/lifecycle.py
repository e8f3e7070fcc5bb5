"""A cluster's life as named states, and the one policy that decides what a node failure does.

::

    STARTING ──► RUNNING ◄──► FEEDING                 (cluster.train and its kin feed the nodes)
       ▲            │  ▲          │
       │            ▼  │          ▼
       └──── RESTARTING ◄──── STOPPING ──► STOPPED     (shutdown waits for the nodes, stops servers)
                    │             │
                    └─────────────┴──────► FAILED      (from any state but STOPPED: raised, or aborted)

``TFCluster`` holds one :class:`Lifecycle`; every change of state goes through
:meth:`Lifecycle.move`, which refuses a transition the diagram does not have. A failure goes to
the :class:`FailurePolicy` (as Ray Train's ``FailurePolicy``): RESTART relaunches the cluster
(a fresh attempt, resuming the work the failure cut short), RAISE ends it. Both input modes use
the same rule, which reads the state the failure happened in: a relaunch can resume a
``cluster.train`` call (InputMode.SPARK: the failure came while FEEDING) or the nodes' own run
(InputMode.TENSORFLOW: while STOPPING, that is, while shutdown waits for them), nothing else.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from enum import Enum

from ..common.errors import ClusterError, ClusterStateError

logger = logging.getLogger(__name__)


class ClusterState(str, Enum):
    """Where a cluster is in its life (``TFCluster.state``)."""

    STARTING = "starting"  #: an attempt launches: its nodes register (and start their feed servers)
    RUNNING = "running"  #: every node is up; map_fun runs
    FEEDING = "feeding"  #: cluster.train (a DStream's RDD included) feeds the data nodes
    RESTARTING = "restarting"  #: a node failed and the failure policy relaunches the cluster
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
    S.RUNNING: frozenset({S.FEEDING, S.STOPPING, S.FAILED}),
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

    RESTART = "restart"  #: relaunch the cluster and resume the interrupted work
    RAISE = "raise"  #: end the cluster and raise the failure


class FailurePolicy:
    """Decides what a node failure does, the same way in both input modes (see the module docstring).

    ``max_restarts`` bounds the relaunches over the cluster's life; each one keeps the failure that
    caused it in :attr:`survived`.
    """

    def __init__(self, max_restarts: int, resumes_in: ClusterState):
        self.max_restarts = max_restarts
        self.resumes_in = resumes_in  #: the state whose work a relaunch resumes (FEEDING or STOPPING)
        self.survived: list[ClusterError] = []  #: the failures that caused a relaunch, in order

    @property
    def restarts(self) -> int:
        """Relaunches so far."""
        return len(self.survived)

    def decide(self, error: ClusterError, state: ClusterState) -> FailureDecision:
        """RESTART when ``error`` names failed nodes, came while in the state whose work a relaunch
        resumes, and relaunches are left (it is then counted); RAISE otherwise."""
        if state is not self.resumes_in or not error.failures or self.restarts >= self.max_restarts:
            return FailureDecision.RAISE
        self.survived.append(error)
        return FailureDecision.RESTART
