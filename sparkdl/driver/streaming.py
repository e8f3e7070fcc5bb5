"""Structured Streaming into a live cluster: ``cluster.train_stream(df)``, exactly once across restarts.

A streaming DataFrame is run as a query whose ``foreachBatch`` function (:class:`MicroBatchTrainer`)
feeds each micro-batch to the data nodes as one training run (one epoch, the query's batch id in
its plan). The nodes read it with ``feed.micro_batches()``, and after each one save the model
together with the batch id (``ctx.stream_checkpoint``) and report that position. The function
returns, so Spark may commit the batch, only once every data node holds it. After a crash, Spark
replays at most the batches it had not committed; the driver asks the restarted nodes which batch
their restored model holds and skips those. Backpressure is the query's own: Spark starts the
next micro-batch only when this one is trained, and ``maxFilesPerTrigger``/``maxOffsetsPerTrigger``
bound its size.

A node's failure goes to the cluster's failure policy, as in ``cluster.train``: an elastic cluster
(``min_executors``) whose node lost its executor is relaunched on the nodes Spark can host, and
``max_restarts`` relaunches it as large; the micro-batch at hand is then trained again on the new
nodes (skipped if their restored model holds it), and the query goes on. A failure between
micro-batches is handled the same way, by the watcher thread. Otherwise the query stops with the
failure.

:class:`StreamingTraining` is the handle ``train_stream`` returns: Spark's ``StreamingQuery``
(status, progress, ``stop``, ``awaitTermination``) that raises the node's failure, not Spark's
wrapper of it, plus :attr:`StreamingTraining.training` (what was trained).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import asdict, dataclass, replace
from typing import Any

from ..common.errors import ClusterError, FeedDataError, FeedError
from ..common.errors import StreamEnded as StreamEnded  # re-exported: raised here
from ..feed.columns import ignoring_nullability, type_names
from ..transport.protocol import TrainingPlan
from .cluster_handle import ClusterHandle

logger = logging.getLogger(__name__)


@dataclass
class StreamTrainingStats:
    """What a streaming-training query has done so far (``StreamingTraining.training``)."""

    batches_trained: int = 0
    batches_skipped: int = 0  # replayed after a restart, already held by the restored model
    empty_batches: int = 0
    rows_trained: int = 0
    last_batch_id: int | None = None  # the last micro-batch every data node holds
    last_batch_seconds: float | None = None  # feeding and training it, until every node saved it


def schema_drift(expected, got) -> str | None:
    """How ``got`` (a StructType) differs from ``expected``, naming the column; None if it does not
    (nor when a type differs only in what it declares nullable: the feed checks each row's nulls)."""
    for field in expected.fields:
        if field.name not in got.names:
            return f"column {field.name!r} is missing"
        other = got[field.name].dataType
        if ignoring_nullability(other) != ignoring_nullability(field.dataType):
            before, after = type_names(field.dataType, other)
            return f"column {field.name!r} changed type from {before} to {after}"
    extra = [name for name in got.names if name not in expected.names]
    return f"column {extra[0]!r} is new" if extra else None


class MicroBatchTrainer:
    """The query's ``foreachBatch`` function: trains one micro-batch on the cluster, or skips it."""

    def __init__(self, cluster: ClusterHandle, plan: TrainingPlan):
        self._cluster = cluster
        self.plan = plan  #: every micro-batch's plan, but for its batch id (one epoch, no cache)
        self.qname = plan.qname
        self.report_wait_s = plan.feed_timeout  # how long the nodes may take to report their model's batch
        self.stats = StreamTrainingStats()
        self.error: BaseException | None = None  # what stopped the query (StreamEnded: the nodes ended it)
        #: Held while a micro-batch is trained, or while the watcher handles a failure between two.
        self.turn = threading.Lock()
        self._schema = None  # the first micro-batch's: later ones must match it

    def __call__(self, frame, batch_id: int) -> None:
        with self.turn:
            if self.error is not None:
                raise self.error
            try:
                self._train(frame, int(batch_id))
            except BaseException as exc:
                self.error = exc
                raise

    def recover(self, error: ClusterError) -> None:
        """Relaunch the cluster as its failure policy decides on ``error`` (resized, or as large), or
        raise ``error``. A stream's micro-batches are the work a relaunch resumes, as a ``cluster.train``
        call's epochs are: the policy decides as for a failure while feeding."""
        with self._cluster.feeding():
            self._cluster.recover(error)

    def _train(self, frame, batch_id: int) -> None:
        drift = schema_drift(self._schema, frame.schema) if self._schema is not None else None
        if drift:
            raise FeedDataError(
                f"micro-batch {batch_id}: {drift} (the stream's first batch had {self._schema.simpleString()}); "
                f"the query stops, and the model checkpoint keeps micro-batch {self.stats.last_batch_id}"
            )
        self._schema = self._schema or frame.schema
        while True:
            try:
                with self._cluster.feeding():
                    self._train_on(self._cluster.attempt, frame, batch_id)
                return
            except ClusterError as error:
                # Relaunched: the batch again, on the new nodes (skipped if their restored model holds it).
                self.recover(error)
                logger.warning(
                    "sparkdl stream %r: the cluster was relaunched on %d nodes; micro-batch %d again",
                    self.qname,
                    len(self._cluster.attempt.feeder.data_nodes()),
                    batch_id,
                )

    def _train_on(self, attempt, frame, batch_id: int) -> None:
        """Micro-batch ``batch_id`` on ``attempt``'s nodes: skipped if their models hold it, else fed,
        then awaited until every data node saved it."""
        feeder = attempt.feeder
        nodes = feeder.data_nodes()
        position = self._model_position(attempt, nodes, batch_id)
        if batch_id <= position:
            self.stats.batches_skipped += 1
            logger.info(
                "sparkdl stream %r: micro-batch %d is already in the restored model; skipped", self.qname, batch_id
            )
            return
        started = time.monotonic()
        try:
            rows = feeder.train(replace(self.plan, batch_id=batch_id), frame)
        except FeedDataError as exc:
            raise FeedDataError(f"micro-batch {batch_id}: {exc}") from exc
        if not rows:
            self.stats.empty_batches += 1
            return
        self._await_position(attempt, nodes, batch_id)
        seconds = time.monotonic() - started
        stats = self.stats
        stats.batches_trained, stats.rows_trained = stats.batches_trained + 1, stats.rows_trained + rows
        stats.last_batch_id, stats.last_batch_seconds = batch_id, round(seconds, 3)
        logger.info("sparkdl stream %r: micro-batch %d trained (%d rows, %.1f s)", self.qname, batch_id, rows, seconds)

    def _model_position(self, attempt, nodes, batch_id: int) -> int:
        """The last micro-batch the nodes' models hold (-1: none), once each reported it; raises
        StreamEnded when a data node has ended its feed instead (``batch_id`` stays uncommitted)."""
        coordinator = attempt.coordinator
        if not attempt.waits.stream_positions(nodes, self.qname, self.report_wait_s):
            waiting = ", ".join(
                n.role.label for n in nodes if not (self.qname in n.stream_position or n.finished or n.feed_terminated)
            )
            raise FeedError(
                f"cluster.train_stream: {waiting} did not start reading the stream within feed_timeout="
                f"{self.report_wait_s:g} s: map_fun must read it with `for batch in feed.micro_batches(...)`"
            )
        self._raise_if_stopped(coordinator, "waiting for the nodes to read the stream")
        positions = [n.stream_position[self.qname] for n in nodes if self.qname in n.stream_position]
        if len(positions) < len(nodes):
            ended = ", ".join(n.role.label for n in nodes if self.qname not in n.stream_position)
            raise StreamEnded(f"{ended} ended its feed: micro-batch {batch_id} is left uncommitted for a later run")
        if len(set(positions)) > 1:
            logger.warning("sparkdl stream %r: the nodes' models hold different batches %s", self.qname, positions)
        return min(positions)

    def _await_position(self, attempt, nodes, batch_id: int) -> None:
        """Wait until every data node reports that its model holds ``batch_id`` (its checkpoint is saved)."""
        done = attempt.waits.batch_saved(nodes, self.qname, batch_id, self.report_wait_s)
        self._raise_if_stopped(attempt.coordinator, f"training micro-batch {batch_id}")
        missing = [n.role.label for n in nodes if n.stream_position.get(self.qname, -1) < batch_id]
        if missing and done:  # map_fun returned (or terminated its feed) before the batch was saved
            raise StreamEnded(f"{', '.join(missing)} ended its feed before saving micro-batch {batch_id}, uncommitted")
        if missing:
            why = f"did not report it trained within feed_timeout={self.report_wait_s:g} s"
            raise FeedError(
                f"micro-batch {batch_id}: {', '.join(missing)} read its rows but {why}; the query stops "
                "without committing it (map_fun must read the stream with feed.micro_batches())"
            )

    def _raise_if_stopped(self, coordinator, doing: str) -> None:
        if coordinator.failures:
            raise coordinator.error(f"sparkdl cluster {self._cluster.cluster_id}: a node failed while {doing}")
        if coordinator.aborted:
            raise FeedError(f"cluster.train_stream: the cluster was stopped ({coordinator.aborted})")


def _query_property(name: str, doc: str) -> property:
    """A property reading ``StreamingQuery.<name>`` of the handle's query."""

    def read(self):
        return getattr(self.query, name)

    read.__doc__ = f"Spark's ``StreamingQuery.{name}``: {doc}."
    return property(read)


class StreamingTraining:
    """A running streaming-training query (``cluster.train_stream``): Spark's ``StreamingQuery``,
    whose waits raise the cluster's failure (a node's traceback in ``ClusterError``) as it is."""

    def __init__(self, cluster: ClusterHandle, query, trainer: MicroBatchTrainer):
        self._cluster = cluster
        self.query = query  #: the underlying pyspark StreamingQuery
        self._trainer = trainer
        self._stopping = False
        self._watch = threading.Thread(target=self._watch_cluster, name="sparkdl-stream-watch", daemon=True)
        self._watch.start()

    # -- StreamingQuery's face --

    id = _query_property("id", "the query's id, the same after a restart from its checkpoint")
    runId = _query_property("runId", "this run's id, new at every start")
    name = _query_property("name", "the ``query_name`` given, or None")
    isActive = _query_property("isActive", "whether the query runs")
    status = _query_property("status", "what the query does now (a dict)")
    lastProgress = _query_property("lastProgress", "the last micro-batch's progress report, or None")
    recentProgress = _query_property("recentProgress", "the latest progress reports")

    @property
    def training(self) -> dict[str, Any]:
        """What was trained so far: batches trained, skipped (already in a restored model) and empty,
        rows, the last batch every node holds and how long it took (``StreamTrainingStats``)."""
        return asdict(self._trainer.stats)

    def exception(self):
        """The failure that stopped the query (the cluster's own error when it came from there), or None."""
        if isinstance(self._trainer.error, StreamEnded):
            return None
        return self._trainer.error or self.query.exception()

    def awaitTermination(self, timeout: float | None = None) -> bool | None:
        """Wait for the query to end (``timeout`` in seconds: returns whether it did); raises its failure."""
        return self._raising(lambda: self.query.awaitTermination(timeout))

    def processAllAvailable(self) -> None:
        """Block until every row available now is trained (for tests and notebooks); raises its failure."""
        self._raising(self.query.processAllAvailable)

    def stop(self) -> None:
        """Stop the query. A micro-batch cut short is not committed; its rows are replayed on restart
        (and skipped there if the model saved it)."""
        self._stopping = True
        self._cluster.coordinator.notify_external()
        self.query.stop()
        self._watch.join(30)

    def _relaunched(self, coordinator) -> bool:
        """Between micro-batches, after ``coordinator``'s nodes stopped: whether a node's failure
        relaunched the cluster (else the failure is the trainer's error, which stops the query)."""
        if not coordinator.failures:
            return False
        error = coordinator.error(f"sparkdl cluster {self._cluster.cluster_id}: a node failed between micro-batches")
        try:
            self._trainer.recover(error)
        except BaseException as exc:  # noqa: BLE001 - the query stops with it
            self._trainer.error = exc
            return False
        logger.warning("sparkdl stream %r: the cluster was relaunched between micro-batches", self._trainer.qname)
        return True

    def _raising(self, wait):
        try:
            result = wait()
        except Exception as exc:
            error = self._trainer.error
            if isinstance(error, StreamEnded):
                return True  # the nodes ended the stream: not a failure
            if error is not None:
                raise error from exc
            raise
        if self._trainer.error is not None and not isinstance(self._trainer.error, StreamEnded):
            if not self.query.isActive:
                raise self._trainer.error
        return result

    def _watch_cluster(self) -> None:
        """Stop the query when every data node ends its feed, or a node fails and the cluster is not
        relaunched; a failure between micro-batches goes to the failure policy, and the watch goes
        on on the relaunched cluster."""
        trainer = self._trainer
        while True:
            attempt = self._cluster.attempt
            attempt.waits.stream_over(attempt.feeder.data_nodes(), stopping=lambda: self._stopping)
            if self._stopping:
                return
            with trainer.turn:  # a micro-batch being trained handles a failure itself, first
                if self._stopping:
                    return
                if trainer.error is None and self._cluster.attempt is not attempt:
                    continue  # the micro-batch relaunched the cluster: watch the new nodes
                if trainer.error is None and self._relaunched(attempt.coordinator):
                    continue
            break
        coordinator = attempt.coordinator
        if trainer.error is None and not coordinator.aborted:
            trainer.error = StreamEnded("every data node ended its feed")
            logger.info("sparkdl stream %r: every data node ended its feed; stopping the query", trainer.qname)
        else:
            logger.error(
                "sparkdl stream %r: stopping the query: %s", trainer.qname, trainer.error or coordinator.aborted
            )
        try:
            self.query.stop()
        except Exception as exc:  # noqa: BLE001 - the query may already be gone
            logger.debug("sparkdl: stopping the streaming query: %s", exc)


def start_stream_training(
    cluster: ClusterHandle, frame, *, checkpoint_location, trigger, query_name, feed_timeout, qname, shuffle, seed
) -> StreamingTraining:
    """Start the query behind ``cluster.train_stream`` (its docstring says what each argument means)."""
    if cluster.spark.connect:
        raise NotImplementedError(
            "cluster.train_stream needs a classic SparkSession: under Spark Connect, foreachBatch runs "
            "on the server, away from this cluster's driver"
        )
    if not getattr(frame, "isStreaming", False):
        raise TypeError("cluster.train_stream needs a streaming DataFrame (spark.readStream...); use cluster.train")
    plan = TrainingPlan(epochs=1, qname=qname, feed_timeout=feed_timeout, cache=False, shuffle=shuffle, seed=seed)
    trainer = MicroBatchTrainer(cluster, plan)
    writer = frame.writeStream.foreachBatch(trainer)
    if query_name:
        writer = writer.queryName(query_name)
    if checkpoint_location:
        writer = writer.option("checkpointLocation", checkpoint_location)
    else:
        logger.warning(
            "sparkdl: cluster.train_stream without checkpoint_location: a restart of this application "
            "may train a micro-batch twice or skip one (give a checkpoint_location, and "
            "ctx.stream_checkpoint on the nodes, for exactly once)"
        )
    if trigger:
        writer = writer.trigger(**trigger)
    return StreamingTraining(cluster, writer.start(), trainer)
