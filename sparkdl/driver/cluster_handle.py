"""``ClusterHandle``: the few things of a ``TFCluster`` its streaming drivers use.

``TFCluster`` (``driver/cluster.py``) lends one to ``cluster.train(dstream)``/``shutdown(ssc)``
(``driver/dstreams.py``) and to ``cluster.train_stream`` (``driver/streaming.py``). They feed and
watch a cluster that may be relaunched under them (``max_restarts``), so the handle reads the
cluster's *current* attempt each time it is asked, never a copy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, ContextManager

if TYPE_CHECKING:
    from ..common.errors import ClusterError
    from .attempt import ClusterAttempt
    from .coordinator import Coordinator
    from .lifecycle import Lifecycle
    from .spark_access import SparkAccess


class ClusterHandle:
    """A cluster as its streaming drivers see it: its id and Spark, its current attempt and
    coordinator, whether it is closed, and the things they may do to it: feed it (``train``, under
    ``feeding()``), ``recover`` it from a node's failure as its failure policy decides, and ``abort`` it."""

    def __init__(
        self,
        cluster_id: str,
        spark: SparkAccess,
        current_attempt: Callable[[], ClusterAttempt],
        lifecycle: Lifecycle,
        train: Callable[..., Any],
        abort: Callable[[str], None],
        recover: Callable[[ClusterError], None] | None = None,
    ):
        self.cluster_id = cluster_id
        self.spark = spark  #: how the cluster reaches Spark (classic or Connect)
        self._current_attempt = current_attempt
        self._lifecycle = lifecycle
        self._train = train
        self._abort = abort
        self._recover = recover
        self.dstream_feed: Any = None  #: ``train(dstream)``'s ``dstreams.DStreamFeed``, once it is called

    @property
    def attempt(self) -> ClusterAttempt:
        """The cluster's current launch (a relaunch replaces it): its feeder, waits and coordinator."""
        return self._current_attempt()

    @property
    def coordinator(self) -> Coordinator:
        """The current attempt's coordinator: the nodes' states, failures and events."""
        return self._current_attempt().coordinator

    @property
    def closed(self) -> bool:
        """Whether the cluster was shut down or failed (it takes no more data)."""
        return self._lifecycle.state.ended

    def feeding(self) -> ContextManager:
        """The cluster's ``feeding`` state for the duration of a ``with`` block (one micro-batch)."""
        return self._lifecycle.feeding()

    def train(self, data, num_epochs: int, feed_timeout: float, qname: str, cache: bool) -> Any:
        """``TFCluster.train`` on ``data`` (one DStream interval's RDD)."""
        return self._train(data, num_epochs, feed_timeout, qname, cache=cache)

    def recover(self, error: ClusterError) -> None:
        """The cluster's failure policy on ``error`` (raised while ``feeding()``): relaunch the
        cluster, as large or resized (an elastic cluster's lost executor), or raise ``error``."""
        if self._recover is None:
            raise error
        self._recover(error)

    def abort(self, reason: str) -> None:
        """Stop the cluster now; ``shutdown()`` then raises instead of waiting on the nodes."""
        self._abort(reason)
