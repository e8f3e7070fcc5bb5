"""Driver side of InputMode.SPARK: plan, launch and watch the Spark jobs that feed the nodes.

``train`` counts each partition's rows (one cheap Spark job), makes a balanced plan (every
data node gets the same number of rows per epoch, see ``feed.plan``), sends each node its
plan, then runs one feeding job per epoch. While a job runs, the driver also watches the
cluster: if a node dies, the job is cancelled and ``ClusterError`` (with the node's traceback)
is raised at once instead of waiting for ``feed_timeout``.
"""

from __future__ import annotations

import contextlib
import logging
import re
import secrets
import time
from dataclasses import dataclass, replace
from typing import Any, Callable

from pyspark import RDD
from pyspark.sql import DataFrame

from ..errors import ClusterError
from ..feed.columns import FeedDataError, check_same_columns, check_spark_schema
from ..feed.feeder import FeedError, FeedTarget
from ..feed.plan import balanced_plan
from ..feed.wire import TRAIN_SPLIT, VALIDATION_SPLIT
from ..roles import COLLECTIVE_ROLES
from ..transport import protocol
from ..transport.channel import ChannelError, Endpoint, connect
from .arguments import check_feed_arguments
from .coordinator import CAUSE_WAIT_S, Coordinator, NodeState
from .feed_jobs import count_rows, feed_epoch, infer_frame, infer_frame_to_frame, infer_rdd
from .history import TrainingHistory
from .partitions import stable_partitions
from .progress import TrainProgress
from .spark_access import SparkAccess

logger = logging.getLogger(__name__)

#: How long train() waits for the chief's report of its last epoch once every row was read.
LAST_EPOCH_WAIT_S = 30.0


def _spark_error_summary(exc: BaseException) -> str:
    """The sparkdl error line inside a Spark job failure, else its first line."""
    text = str(exc)
    match = re.search(r"(FeedDataError|FeedError): ([^\n]+)", text)
    if match:
        return f"{match.group(1)}: {match.group(2)}"
    return text.strip().splitlines()[0] if text.strip() else type(exc).__name__


@dataclass(frozen=True)
class TrainingRun:
    """One ``cluster.train`` call, as ``TFCluster.train`` hands it to the feeder (its arguments
    mean what that method's docstring says)."""

    data: Any  # an RDD or a DataFrame
    num_epochs: int
    feed_timeout: float
    qname: str = "input"
    validation_data: Any = None
    cache: bool = True
    cache_max_bytes: int | None = None
    shuffle: bool = True
    seed: int | None = None  # None: a new one per call
    deterministic: bool = False  # epoch 1 read from the nodes' caches in the seeded order too
    first_epoch: int = 0  # the absolute number of the first epoch fed (a relaunch resumes past 0)
    batch_id: int | None = None  # the Structured Streaming micro-batch this run is (empty: no run)
    show_progress: bool = False
    history: TrainingHistory | None = None  # where the chief's epoch reports arrive
    history_reports: int = 0  # how many reports ``history`` holds once this call's epochs are all in


class ClusterFeeder:
    """Feeds RDDs and DataFrames to one cluster's data nodes (its chief and workers)."""

    def __init__(self, spark: SparkAccess, secret: bytes, coordinator: Coordinator, cluster_id: str):
        self.spark = spark
        self._secret = secret
        self._coordinator = coordinator
        self.job_group = f"sparkdl-{cluster_id}-feed"
        self._cluster_id = cluster_id
        self._sessions: dict[str, int] = {}
        self.qnames: set[str] = set()

    def data_nodes(self) -> list[NodeState]:
        """The nodes that receive data, in node-number order."""
        nodes = [n for n in self._coordinator.nodes.values() if n.role.job_name in COLLECTIVE_ROLES]
        return sorted(nodes, key=lambda n: n.role.node_number)

    def _target(self, feed_timeout: float, qname: str, run: str = "") -> FeedTarget:
        nodes = self.data_nodes()
        return FeedTarget(
            self._secret,
            tuple((n.host, n.feed_port) for n in nodes),
            tuple(map(self._endpoint, nodes)),
            tuple(n.role.label for n in nodes),
            float(feed_timeout),
            qname,
            run,
        )

    def _endpoint(self, node: NodeState) -> Endpoint:
        """The identity of ``node``'s feed server (the handshake is bound to it)."""
        return Endpoint.feed(self._cluster_id, node.role.node_number)

    def _tell_nodes(
        self, message: protocol.Message, timeout: float, nodes: list[NodeState] | None = None, need_ack: bool = True
    ) -> None:
        for node in nodes if nodes is not None else self.data_nodes():
            with connect(
                (node.host, node.feed_port), self._secret, timeout=timeout, endpoint=self._endpoint(node)
            ) as channel:
                channel.send(message.wire())
                try:
                    protocol.parse(channel.recv(timeout), protocol.Ack)
                except ChannelError:  # ProtocolError included
                    if need_ack:
                        raise

    # -- training --

    def train(self, run: TrainingRun) -> int:
        """Feed ``run.data`` (and ``run.validation_data``) ``run.num_epochs`` times, balanced over
        the data nodes; blocks until every data node has read its rows (or ended its feed).

        With ``cache``, epoch 1 is also kept on each node's disk and, when every node holds its
        whole share, epochs 2..N are served from there without Spark jobs. ``shuffle`` permutes
        each node's rows every epoch (seeded by ``seed``). ``show_progress`` displays rows
        fed/read, epochs, partitions and the chief's metrics, and ends with ``history``'s epoch
        lines once it holds ``history_reports`` epoch reports (the chief reports an epoch after
        its validation, so shortly after the rows were read). Returns the rows planned per epoch
        (0 for an empty micro-batch of a stream, which feeds nothing).
        """
        check_feed_arguments(run.qname, run.feed_timeout, run.seed)
        self.spark.require_frames(run.data, "cluster.train")
        if run.validation_data is not None:
            self.spark.require_frames(run.validation_data, "cluster.train(validation_data=...)")
        self._check_train_arguments(run.data, run.num_epochs, run.validation_data, run.cache_max_bytes)
        if run.deterministic and not run.cache:
            raise ValueError(
                "cluster.train(deterministic=True) reads epoch 1 from the nodes' caches: it needs cache=True"
            )
        self.qnames.add(run.qname)
        with contextlib.ExitStack() as pinned:
            # With AQE, pinning a shuffled frame already runs its shuffle: do it as a watched job.
            pin = lambda frame: self._run_job(
                lambda: pinned.enter_context(stable_partitions(frame)),  # noqa: E731
                "sparkdl: pin the partitions of a shuffled DataFrame",
            )
            return self._train(
                replace(
                    run,
                    data=pin(run.data),
                    validation_data=pin(run.validation_data) if run.validation_data is not None else None,
                    cache=run.cache and (run.num_epochs > 1 or run.deterministic),
                    seed=secrets.randbits(63) if run.seed is None else int(run.seed),
                )
            )

    @staticmethod
    def _check_train_arguments(data, num_epochs, validation_data, cache_max_bytes) -> None:
        """Reject bad arguments and unfeedable data before any Spark job runs."""
        if not isinstance(num_epochs, int) or num_epochs < 1:
            raise ValueError(f"num_epochs must be a positive integer, got {num_epochs!r}")
        if cache_max_bytes is not None and not (isinstance(cache_max_bytes, int) and cache_max_bytes > 0):
            raise ValueError(f"cache_max_bytes must be a positive number of bytes or None, got {cache_max_bytes!r}")
        for name, frame in (("cluster.train", data), ("validation_data", validation_data)):
            if isinstance(frame, DataFrame):
                check_spark_schema(frame.schema)
            elif not isinstance(frame, RDD) and not (frame is None and name == "validation_data"):
                raise TypeError(f"{name} needs an RDD or a DataFrame, got {type(frame).__name__}")
        if validation_data is not None and isinstance(validation_data, DataFrame) != isinstance(data, DataFrame):
            raise FeedDataError(
                "validation_data must be of the same kind as the training data (both DataFrames or both RDDs)"
            )
        if isinstance(data, DataFrame):
            check_same_columns(data.schema, validation_data.schema if validation_data is not None else None)

    def _train(self, run: TrainingRun) -> int:
        is_frame = isinstance(run.data, DataFrame)
        counts = self._run_job(lambda: count_rows(run.data), "sparkdl: count rows per partition")
        if sum(counts) == 0 and run.batch_id is not None:
            return 0  # an empty micro-batch: nothing to train
        if sum(counts) == 0:
            raise FeedDataError(
                f"cluster.train got an empty {'DataFrame' if is_frame else 'RDD'}: there is nothing to feed"
            )
        nodes = self.data_nodes()
        plan = balanced_plan(counts, len(nodes))
        splits = [(TRAIN_SPLIT, run.data, plan)]
        if run.validation_data is not None:
            validation_counts = self._run_job(
                lambda: count_rows(run.validation_data), "sparkdl: count validation rows per partition"
            )
            if sum(validation_counts) == 0:
                raise FeedDataError("cluster.train got empty validation_data: drop it or give it rows")
            splits.append((VALIDATION_SPLIT, run.validation_data, balanced_plan(validation_counts, len(nodes))))
        session = self._sessions.get(run.qname, 0) + 1
        self._sessions[run.qname] = session
        for index, node in enumerate(nodes):
            self._tell_nodes(
                protocol.Plan(
                    qname=run.qname,
                    session=session,
                    epochs=run.num_epochs,
                    rows_per_epoch=plan.rows_per_node,
                    validation_rows=splits[1][2].rows_per_node if len(splits) > 1 else 0,
                    cache=run.cache,
                    cache_max_bytes=run.cache_max_bytes,
                    shuffle=bool(run.shuffle),
                    seed=run.seed,
                    node=index,
                    deterministic=run.deterministic,
                    first_epoch=run.first_epoch,
                    batch_id=run.batch_id,
                ),
                min(run.feed_timeout, 60),
                [node],
            )
        target = self._target(run.feed_timeout, run.qname)
        logger.info(
            "sparkdl: feeding %d rows x %d epochs to %d nodes (%d rows each per epoch)",
            plan.total_rows,
            run.num_epochs,
            len(nodes),
            plan.rows_per_node,
        )
        total = sum(p.rows_per_node for _, _, p in splits) * len(nodes) * run.num_epochs
        progress = (
            TrainProgress(
                nodes,
                total,
                run.num_epochs,
                history=run.history,
                partitions=lambda: self.spark.feeding_job_progress(self.job_group),
            )
            if run.show_progress
            else None
        )
        self._coordinator.feed_timeout = float(run.feed_timeout)  # a node that stops reading is a stall
        try:
            with progress or contextlib.nullcontext():
                replaying = False
                for epoch in range(run.num_epochs):
                    if not replaying:
                        for split, frame, split_plan in splits:
                            description = (
                                f"sparkdl: feed {'' if split == TRAIN_SPLIT else 'validation '}epoch "
                                f"{epoch + 1}/{run.num_epochs} to {len(nodes)} TF nodes"
                            )
                            skipped = self._run_job(
                                lambda e=epoch, f=frame, p=split_plan, s=split: feed_epoch(
                                    f, target, session, e, p, s, run.seed if run.shuffle else None
                                ),
                                description,
                            )
                            if self._check_skipped(nodes, skipped, description):
                                logger.info("sparkdl: every node ended its feed; skipping the remaining epochs")
                                return plan.total_rows
                        if progress:
                            progress.epoch_done(epoch)
                        if epoch == 0 and run.cache:
                            replaying = self._settle_cache(nodes, run.qname, session, run.feed_timeout)
                            if run.deterministic and not replaying:
                                raise FeedError(
                                    "cluster.train(deterministic=True): not every node could cache its share of "
                                    "epoch 1 (its log says why); raise cache_max_bytes, free disk space, or train "
                                    "with deterministic=False"
                                )
                self._await_read(nodes, run.qname, session)
                if run.history is not None:
                    self._await_epoch_reports(run.history, run.history_reports, nodes[0])
            return plan.total_rows
        finally:
            self._coordinator.feed_timeout = None

    def _settle_cache(self, nodes: list[NodeState], qname: str, session: int, feed_timeout: float) -> bool:
        """After epoch 1: replay the nodes' caches if every node holds its whole share, else drop them."""
        timeout = min(feed_timeout, 60)
        live = [n for n in nodes if not (n.finished or n.feed_terminated)]
        problems = {}
        try:
            for node in live:
                with connect(
                    (node.host, node.feed_port), self._secret, timeout=timeout, endpoint=self._endpoint(node)
                ) as channel:
                    channel.send(protocol.CacheSeal(session, qname).wire())
                    problem = protocol.parse(channel.recv(timeout), protocol.CacheStatus).problem
                if problem:
                    problems[node.role.label] = str(problem)
            use = not problems
            self._tell_nodes(protocol.CacheUse(session, use, qname), timeout, live)
        except (OSError, ChannelError) as exc:
            if self._coordinator.wait_until(lambda c: bool(c.failures), CAUSE_WAIT_S):
                raise self._node_failed("settling the nodes' epoch caches") from exc
            raise FeedError(f"cluster.train: lost contact with a node while settling the epoch caches: {exc}") from exc
        if use:
            logger.info("sparkdl: epochs 2+ of training run %d are served from the nodes' caches", session)
        else:
            logger.info(
                "sparkdl: not every node could cache its rows (%s); feeding every epoch from Spark",
                "; ".join(f"{label}: {problem}" for label, problem in problems.items()),
            )
        return use

    def _await_read(self, nodes: list[NodeState], qname: str, session: int) -> None:
        """Wait until every data node has read all its rows of ``session`` (or ended its feed).

        The last rows may still sit in a node's queue when the feeding job ends; waiting here
        makes a failure while they are read surface from ``train`` rather than ``shutdown``. A
        node that stops reading is stopped by the stall watch (``feed_timeout``), so this ends.
        """

        def done(node: NodeState) -> bool:
            return node.feed_consumed.get(qname, 0) >= session or node.feed_terminated or node.finished

        self._coordinator.wait_until(lambda c: bool(c.failures) or c.aborted or all(done(n) for n in nodes), None)
        if self._coordinator.failures:
            raise self._node_failed("cluster.train: the nodes reading their last rows")
        if self._coordinator.aborted:
            raise FeedError(
                f"cluster.train: the cluster was stopped before its nodes read their rows ({self._coordinator.aborted})"
            )

    @staticmethod
    def _await_epoch_reports(history: TrainingHistory, reports: int, chief: NodeState) -> None:
        """Give the chief's last epoch report (sent after its last validation) a moment to arrive,
        when ``map_fun`` reports epochs at all (``ctx.progress_callback()``)."""
        if not history.as_dict():
            return
        deadline = time.monotonic() + LAST_EPOCH_WAIT_S
        while time.monotonic() < deadline and not chief.finished:
            if history.wait_for_reports(reports, 0.5):
                return

    def _check_skipped(self, nodes: list[NodeState], skipped_mask: int, description: str) -> bool:
        """Accept nodes skipped because they ended their feed; raise for any other loss.

        Returns whether every data node has ended its feed (so feeding can stop).
        """

        def ended(node: NodeState) -> bool:
            return node.feed_terminated or (node.finished and node.failure is None)

        lost = [n for i, n in enumerate(nodes) if skipped_mask >> i & 1 and not ended(n)]
        if lost:
            if self._coordinator.wait_until(lambda c: bool(c.failures) or all(ended(n) for n in lost), CAUSE_WAIT_S):
                if self._coordinator.failures:
                    raise self._node_failed(description)
            else:
                raise FeedError(f"{description}: lost contact with {', '.join(n.role.label for n in lost)}")
        return all(ended(n) for n in nodes)

    # -- inference --

    def inference(
        self, data: RDD | DataFrame, feed_timeout: float, qname: str, run: str = "", result_schema=None
    ) -> RDD | DataFrame:
        """The results, one per input row, partition by partition (lazy, like any RDD or DataFrame).

        An RDD of results, or with ``result_schema`` (a DataFrame input only) a DataFrame of that
        schema; under Spark Connect a DataFrame input and ``result_schema`` are required. ``run``
        names this call in the nodes' reports of answered partitions (the driver's progress).
        """
        check_feed_arguments(qname, feed_timeout)
        self.spark.require_frames(data, "cluster.inference")
        target = self._target(feed_timeout, qname, run)
        count = len(target.addresses)
        if isinstance(data, DataFrame):
            check_spark_schema(data.schema)
            if result_schema is not None:
                return infer_frame_to_frame(data, target, count, result_schema)
            if self.spark.connect:
                raise TypeError(
                    "cluster.inference under Spark Connect returns a DataFrame, whose schema Spark needs "
                    "up front: pass result_schema, e.g. result_schema='prediction double' (a DDL "
                    "string or StructType; several fields take a sequence or dict per result)"
                )
            return infer_frame(data, target, count)
        if not isinstance(data, RDD):
            raise TypeError(f"cluster.inference needs an RDD or a DataFrame, got {type(data).__name__}")
        if result_schema is not None:
            raise TypeError("result_schema is for DataFrame input; an RDD input gives an RDD of results")
        return infer_rdd(data, target, count).setName(f"sparkdl inference (cluster {self._cluster_id})")

    def end(self, timeout: float = 30.0) -> None:
        """Tell every node the feed is over (shutdown): ``should_stop()`` turns True once drained."""
        for qname in self.qnames | {"input"}:
            for node in self.data_nodes():
                if node.finished or not node.feed_port:
                    continue
                try:
                    # The node may finish (and close) as soon as it sees the end: no ack needed.
                    self._tell_nodes(protocol.End(qname), timeout, [node], need_ack=False)
                except (OSError, ChannelError) as exc:  # expected of a node that ended its feed and is finishing
                    level = logging.DEBUG if node.feed_terminated else logging.WARNING
                    logger.log(level, "sparkdl: could not tell %s that the feed ended: %s", node.role.label, exc)

    # -- job watching --

    def _node_failed(self, description: str) -> ClusterError:
        return self._coordinator.error(f"sparkdl cluster {self._cluster_id}: a node failed during '{description}'")

    def _run_job(self, action: Callable[[], object], description: str):
        """Run a Spark action in a thread; raise ClusterError as soon as a node fails."""
        outcome: dict = {}

        def body() -> None:
            self.spark.set_job_tag(self.job_group, f"{description} (cluster {self._cluster_id})")
            try:
                outcome["value"] = action()
            except BaseException as exc:  # noqa: BLE001 - re-raised below, in the caller's thread
                outcome["error"] = exc
            finally:
                outcome["done"] = True
                self._coordinator.notify_external()

        thread = self.spark.thread(body, "sparkdl-feed-job")
        thread.start()
        # ends on the job's end, a node's failure, or the cluster closing (abort, shutdown)
        self._coordinator.wait_until(lambda c: "done" in outcome or bool(c.failures) or bool(c.aborted), None)
        if self._coordinator.failures or ("done" not in outcome and self._coordinator.aborted):
            logger.debug("sparkdl: cancelling the feeding job '%s'", description)
            self.spark.cancel(self.job_group)
            thread.join(60)
            logger.debug("sparkdl: the feeding job ended")
            if not self._coordinator.failures:
                raise FeedError(f"{description}: the cluster was stopped ({self._coordinator.aborted})")
            raise self._node_failed(description)
        if "error" in outcome:
            error = outcome["error"]
            # A lost node is the usual cause of a failed feed: wait briefly for its report.
            if self._coordinator.wait_until(lambda c: bool(c.failures), CAUSE_WAIT_S):
                raise self._node_failed(description) from error
            summary = _spark_error_summary(error)
            kind = FeedDataError if summary.startswith("FeedDataError") else FeedError
            raise kind(f"{description} failed: {summary}") from error
        return outcome.get("value")
