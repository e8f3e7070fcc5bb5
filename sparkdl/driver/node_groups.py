"""Which executors host live nodes of which sparkdl cluster, per Spark application.

In InputMode.SPARK a node's launch task returns once the node runs, so Spark counts its
executor as free: a second cluster's launch could put a node beside it. ``NodeGroups`` keeps
the executors each live cluster holds (its leases) so later clusters of the same application
launch elsewhere, or wait:

- launches take turns, first come first served (``reserve`` ... ``placed`` or ``release``);
- a cluster launching while no other one holds executors launches as it always did (``reserve``
  returns None) and records where its nodes went (``placed``);
- otherwise ``reserve`` waits (bounded, on a ``threading.Condition``: no polling) until enough
  registered executors are free, and leases them;
- ``release`` frees a cluster's executors on every end (shutdown, failure, abort) and wakes the
  waiters.

One registry per ``SparkContext`` (``node_groups``): the clusters of one application must see
each other's executors, and a ``SparkContext`` has no place to keep it.
"""

from __future__ import annotations

import threading
import weakref
from collections import deque
from typing import Any, Callable, Iterable

from ..common.errors import ReservationTimeout
from ..common.timeouts import Deadline


class NodeGroups:
    """The executor leases of one Spark application's sparkdl clusters (see the module docstring)."""

    def __init__(self):
        self._cond = threading.Condition()
        self._leases: dict[str, str] = {}  # executor id -> the owner (an attempt's name) whose node it hosts
        self._queue: deque[str] = deque()  # owners waiting for their turn to launch, first come first
        self._launching: str | None = None  # the owner between its turn and placed()/release()

    def reserve(
        self, owner: str, count: int, registered: Callable[[], Iterable[str]], timeout: float | None
    ) -> list[str] | None:
        """Wait for ``owner``'s turn to launch ``count`` nodes; then None when no other owner holds
        executors (launch anywhere), else ``count`` free executors of ``registered()`` (ids, now
        leased to ``owner``). The turn lasts until :meth:`placed` or :meth:`release`. Raises
        ``ReservationTimeout`` after ``timeout`` seconds (None: no limit), or when ``owner`` is
        released meanwhile."""
        deadline = Deadline(timeout)
        with self._cond:
            self._queue.append(owner)
            try:
                while True:
                    if owner not in self._queue:
                        raise ReservationTimeout(f"sparkdl: {owner} was stopped while it waited for executors")
                    if self._queue[0] == owner and self._launching is None:
                        held = {o for o in self._leases.values() if o != owner}
                        if not held:
                            self._take_turn(owner)
                            return None
                        free = [e for e in registered() if self._leases.get(e, owner) == owner]
                        if len(free) >= count:
                            chosen = sorted(free, key=_executor_order)[:count]
                            self._take_turn(owner)
                            for executor in chosen:
                                self._leases[executor] = owner
                            return chosen
                    remaining = deadline.remaining()
                    if remaining is not None and remaining <= 0:
                        raise ReservationTimeout(
                            f"sparkdl: {count} executors free of other sparkdl clusters' nodes were not available "
                            f"within {timeout} s (held: {self._held_summary()})"
                        )
                    self._cond.wait(remaining)
            finally:
                if owner in self._queue:
                    self._queue.remove(owner)
                    self._cond.notify_all()  # the next in line may now be first

    def placed(self, owner: str, executors: Iterable[str]) -> list[str]:
        """Record that ``owner``'s nodes run on ``executors`` and end its turn; the executors among
        them that another owner holds (a node placed beside another cluster's: nothing is leased then)."""
        executors = [e for e in executors if e and e != "driver"]  # unknown ids name no executor to lease
        with self._cond:
            if self._launching != owner:
                return []  # released meanwhile (stopped, aborted): its nodes are being stopped, nothing is leased
            self._launching = None
            clashes = [e for e in executors if self._leases.get(e, owner) != owner]
            if not clashes:
                for executor in [e for e, o in self._leases.items() if o == owner and e not in executors]:
                    del self._leases[executor]  # reserved, but its node went elsewhere
                for executor in executors:
                    self._leases[executor] = owner
            self._cond.notify_all()
            return clashes

    def release(self, owner: str) -> None:
        """Free everything ``owner`` holds or waits for (its executors, its turn, its place in line)."""
        with self._cond:
            for executor in [e for e, o in self._leases.items() if o == owner]:
                del self._leases[executor]
            if self._launching == owner:
                self._launching = None
            if owner in self._queue:
                self._queue.remove(owner)
            self._cond.notify_all()

    def waiting(self) -> list[str]:
        """The owners waiting for their turn, first in line first (a snapshot)."""
        with self._cond:
            return list(self._queue)

    def holders(self) -> dict[str, list[str]]:
        """Each owner's leased executors (a snapshot)."""
        with self._cond:
            owners: dict[str, list[str]] = {}
            for executor, owner in self._leases.items():
                owners.setdefault(owner, []).append(executor)
            return {owner: sorted(executors, key=_executor_order) for owner, executors in owners.items()}

    def _take_turn(self, owner: str) -> None:
        self._launching = owner
        self._queue.remove(owner)

    def _held_summary(self) -> str:
        return "; ".join(f"{owner}: {', '.join(ex)}" for owner, ex in self.holders().items()) or "none"


def _executor_order(executor: str) -> tuple:
    """Numeric executor ids in numeric order (``"10"`` after ``"9"``), others after them."""
    return (0, int(executor), "") if executor.isdigit() else (1, 0, executor)


#: One registry per SparkContext, dropped with it: sparkdl's second module-global (after the
#: inference model cache), because a SparkContext has no slot for what its clusters share.
_REGISTRIES: "weakref.WeakKeyDictionary[Any, NodeGroups]" = weakref.WeakKeyDictionary()
_REGISTRIES_LOCK = threading.Lock()


def node_groups(sc: Any) -> NodeGroups:
    """The registry of the application of ``sc`` (a ``SparkContext``), made on first use."""
    with _REGISTRIES_LOCK:
        groups = _REGISTRIES.get(sc)
        if groups is None:
            groups = _REGISTRIES[sc] = NodeGroups()
        return groups
