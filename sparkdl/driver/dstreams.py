"""TensorFlowOnSpark's Spark Streaming (DStream) API: ``cluster.train(dstream)`` and ``shutdown(ssc)``.

DStreams are deprecated in Spark but still ship; TFoS jobs use them as below, unchanged but for
the import. (Structured Streaming, the way forward, is ``cluster.train_stream``: see
``driver/streaming.py``.)

``cluster.train(dstream)`` registers a ``foreachRDD`` output operation. Spark Streaming calls it
in the driver (a Py4J callback, one batch at a time) with each interval's RDD, which is fed to
the data nodes as an ordinary ``cluster.train(rdd, cache=False)`` call: one training session
per RDD, which a node reads with ``next_batch`` / ``should_stop`` across sessions. An empty
interval starts no session; once every data node has ended its feed (``DataFeed.terminate()``,
or ``map_fun`` returned) later RDDs are skipped. An RDD whose feeding fails (a node failed, bad
data, ...) is recorded here, because Spark would only log an exception raised in the callback;
``cluster.shutdown(ssc)`` then stops the StreamingContext and raises it.

``cluster.shutdown(ssc)`` waits until the data nodes have ended their feed (or a node failed, a
feed failed, the user stopped ``ssc``), then stops ``ssc`` gracefully, leaving the SparkContext
running, before the cluster's ordinary shutdown. In TFoS the first node to terminate its feed
set the reservation server's ``done`` flag, which ``shutdown(ssc)`` polled each second; here
every data node must have ended its feed (sparkdl feeds the others on until they do).

All state lives in a :class:`DStreamFeed` held by the cluster's handle (``ClusterHandle.dstream_feed``,
``driver/cluster_handle.py``): the functions here take that handle, never the ``TFCluster``.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from typing import Any

from ..common.errors import ShutdownTimeout
from ..common.timeouts import DSTREAM_POLL_S
from .arguments import check_feed_arguments
from .cluster_handle import ClusterHandle

logger = logging.getLogger(__name__)


class DStreamFeed:
    """What a cluster's DStreams have done so far (``ClusterHandle.dstream_feed``, created by
    ``train_dstream``): the RDDs fed and skipped, and the first failure, for ``shutdown(ssc)``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.fed = 0  #: RDDs fed to the nodes (one training session each)
        self.empty = 0  #: empty RDDs (intervals without new data): no session, no feeding job
        self.skipped = 0  #: RDDs that came after the feed was over (nodes ended it, a failure, shutdown)
        self.feeding = False  #: a stream batch is being fed now (in Spark Streaming's job thread)
        self.error: BaseException | None = None  #: the first RDD whose feeding failed; shutdown(ssc) raises it

    def record_error(self, error: BaseException) -> None:
        """Keep the first failure (later ones are usually its consequences)."""
        with self._lock:
            if self.error is None:
                self.error = error

    def take_error(self) -> BaseException | None:
        """The recorded failure, once (shutdown raises it a single time)."""
        with self._lock:
            error, self.error = self.error, None
            return error


def is_dstream(data: Any) -> bool:
    """Whether ``data`` is a Spark Streaming DStream."""
    try:
        from pyspark.streaming import DStream
    except ImportError:  # pragma: no cover - pyspark without streaming
        return False
    return isinstance(data, DStream)


def stream_state(cluster: ClusterHandle) -> DStreamFeed:
    """The cluster's :class:`DStreamFeed`, created on first use."""
    if cluster.dstream_feed is None:
        cluster.dstream_feed = DStreamFeed()
    return cluster.dstream_feed


def train_dstream(cluster: ClusterHandle, dstream, num_epochs: int, feed_timeout: float, qname: str) -> None:
    """Feed every RDD of ``dstream`` to ``cluster``'s nodes as it arrives (TFoS ``train(dstream)``).

    Call it before ``ssc.start()`` (Spark accepts no new output operation after). Each non-empty
    RDD is fed ``num_epochs`` times (sparkdl's default 1; TFoS fed each RDD once whatever it was
    given), balanced over the data nodes like any ``cluster.train`` call.
    """
    check_feed_arguments(qname, feed_timeout)
    if not isinstance(num_epochs, int) or num_epochs < 1:
        raise ValueError(f"num_epochs must be a positive integer, got {num_epochs!r}")
    state = stream_state(cluster)

    def feed_batch(batch_time, rdd) -> None:  # Spark Streaming's job thread, in this driver
        _feed_batch(cluster, state, batch_time, rdd, num_epochs, feed_timeout, qname)

    dstream.foreachRDD(feed_batch)
    logger.info("sparkdl cluster %s: every RDD of the stream will be fed to the nodes", cluster.cluster_id)


def _feed_over(cluster: ClusterHandle, state: DStreamFeed) -> str | None:
    """Why no more stream batches are fed, or None while they are."""
    if state.error is not None:
        return "feeding an earlier batch failed"
    if cluster.closed:
        return "the cluster was shut down"
    coordinator = cluster.coordinator
    if coordinator.failures:
        return "a node failed"
    if coordinator.aborted:
        return f"the cluster stopped ({coordinator.aborted})"
    if _feeds_ended(cluster):
        return "every data node ended its feed"
    return None


def _feeds_ended(cluster: ClusterHandle) -> bool:
    """Whether every data node has ended its feed (``terminate()``, or ``map_fun`` returned)."""
    return all(n.feed_ended for n in cluster.attempt.feeder.data_nodes())


def _feed_batch(
    cluster: ClusterHandle, state: DStreamFeed, batch_time, rdd, num_epochs: int, feed_timeout: float, qname: str
):
    """Feed one interval's RDD; never raises (Spark would only log it): failures are recorded."""
    with state._lock:
        reason = _feed_over(cluster, state)
        if reason is None:
            state.feeding = True
        else:
            state.skipped += 1
    if reason is not None:  # said once: a stream that is stopped gracefully may have many batches due
        logger.log(
            logging.INFO if state.skipped == 1 else logging.DEBUG,
            "sparkdl: skipping the stream's batch of %s and any later one: %s",
            batch_time,
            reason,
        )
        return
    coordinator = cluster.coordinator
    try:
        if rdd is None or rdd.getNumPartitions() == 0 or rdd.isEmpty():
            state.empty += 1
            logger.debug("sparkdl: the stream's batch of %s is empty", batch_time)
            return
        logger.info("sparkdl: feeding the stream's batch of %s", batch_time)
        cluster.train(rdd, num_epochs, feed_timeout, qname, cache=False)
        state.fed += 1
    except BaseException as exc:  # noqa: BLE001 - shutdown(ssc) raises it in the user's thread
        state.record_error(exc)
        logger.error(
            "sparkdl: feeding the stream's batch of %s failed; cluster.shutdown(ssc) will stop the "
            "StreamingContext and raise: %s",
            batch_time,
            (str(exc).strip().splitlines() or [type(exc).__name__])[0],  # the nodes' tracebacks are logged already
        )
    finally:
        state.feeding = False
        coordinator.notify_external()  # wake shutdown(ssc)
        if cluster.coordinator is not coordinator:  # relaunched during the call
            cluster.coordinator.notify_external()


def await_dstream_end(cluster: ClusterHandle, ssc, grace_secs: float, timeout: float) -> None:
    """TFoS ``shutdown(ssc)``: wait for the nodes to end their feed, then stop ``ssc`` gracefully.

    The wait ends when every data node has ended its feed, a node fails, feeding a batch fails,
    or ``ssc`` stops (the user stopped it); ``ssc`` is then stopped gracefully (batches still
    due are skipped, the SparkContext keeps running). A batch that failed is raised here, after
    the cluster was stopped. After ``timeout`` seconds (negative: no limit, as in TFoS) the
    stream and the cluster are stopped and ShutdownTimeout is raised. ``grace_secs`` applies to
    the ordinary shutdown that follows.
    """
    del grace_secs  # the caller's ordinary shutdown applies it
    state = stream_state(cluster)
    if _state_of(ssc) == "INITIALIZED":
        logger.warning("sparkdl: shutdown(ssc) got a StreamingContext that was never started (ssc.start())")
        _stop(ssc, graceful=False)
        return
    deadline = None if timeout is None or timeout < 0 else time.monotonic() + timeout
    stream_error = None
    while True:
        attempt = cluster.attempt
        ended = attempt.waits.until(functools.partial(_wait_over, cluster, state, attempt.coordinator), DSTREAM_POLL_S)
        if ended:
            logger.info("sparkdl: the stream's feed is over (%s); stopping the StreamingContext", _describe(cluster))
            break
        try:
            if ssc.awaitTerminationOrTimeout(0):
                logger.info("sparkdl: the StreamingContext was stopped; shutting the cluster down")
                break
        except Exception as exc:  # noqa: BLE001 - the stream failed outside sparkdl's batches
            stream_error = exc
            break
        if deadline is not None and time.monotonic() >= deadline:
            running = [n.role.label for n in cluster.attempt.feeder.data_nodes() if not n.finished]
            cluster.abort("shutdown(ssc) timed out")
            _stop(ssc, graceful=False)
            raise ShutdownTimeout(
                f"the data nodes had not ended their feed after shutdown(ssc, timeout={timeout}): the "
                "StreamingContext and the nodes were stopped: " + ", ".join(running)
            )
    _stop(ssc, graceful=True)
    error = state.take_error() or stream_error
    if error is not None:
        cluster.abort("a stream batch failed")  # shutdown() raises this error instead of waiting on the nodes
        raise error


def _wait_over(cluster: ClusterHandle, state: DStreamFeed, coordinator) -> bool:
    """Whether ``shutdown(ssc)`` may stop the stream (``coordinator``'s lock held)."""
    if coordinator is not cluster.coordinator:  # relaunched (max_restarts): wait on the new one
        return False
    if state.error is not None or cluster.closed:
        return True
    if state.feeding:  # the batch being fed ends by itself; with max_restarts it may relaunch the nodes
        return False
    return bool(coordinator.failures or coordinator.aborted) or _feeds_ended(cluster)


def _describe(cluster: ClusterHandle) -> str:
    state = stream_state(cluster)
    return f"{state.fed} batches fed, {state.empty} empty, {state.skipped} skipped"


def _state_of(ssc) -> str:
    """``INITIALIZED``, ``ACTIVE`` or ``STOPPED`` (empty if Spark cannot say)."""
    try:
        return str(ssc._jssc.getState())
    except Exception:  # noqa: BLE001 - only used to spot a context that was never started
        return ""


def _stop(ssc, graceful: bool) -> None:
    """Stop ``ssc`` (a no-op if it is stopped already), leaving the SparkContext running."""
    ssc.stop(stopSparkContext=False, stopGraceFully=graceful)
