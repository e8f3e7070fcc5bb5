"""Driver side of InputMode.SPARK: plan, launch and watch the Spark jobs that feed the nodes.

``train`` counts each partition's rows (one cheap Spark job), shares them out (every data node
gets the same number of rows per epoch, see ``feed/shares.py``), sends each node the call's
``TrainingPlan`` (through its ``FeedClient``), then runs one feeding job per epoch. While a job
runs, the driver also watches the cluster: if a node dies, the job is cancelled and
``ClusterError`` (with the node's traceback) is raised at once instead of waiting for
``feed_timeout``.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import threading
from dataclasses import replace
from typing import Any, Callable, NamedTuple

from pyspark import RDD
from pyspark.sql import DataFrame

from ..common.errors import ClusterError, FeedDataError, FeedError
from ..common.roles import COLLECTIVE_ROLES
from ..common.timeouts import CAUSE_WAIT_S, CONTROL_CALL_MAX_S, LAST_EPOCH_WAIT_S, Deadline, FeedLimits
from ..feed.columns import check_same_columns, check_spark_schema
from ..feed.feeder import FeedTarget
from ..feed.shares import RowShares, balanced_shares
from ..transport import protocol
from ..transport.channel import ChannelError, Endpoint
from ..transport.clients import FeedClient
from ..transport.protocol import TRAIN_SPLIT, VALIDATION_SPLIT
from .arguments import check_feed_arguments, check_training_plan
from .coordinator import Coordinator, NodeState
from .feed_jobs import count_rows, feed_epoch, infer_frame, infer_frame_to_frame, infer_rdd
from .history import TrainingHistory
from .partitions import stable_partitions
from .progress import TrainProgress
from .spark_access import SparkAccess
from .spark_errors import task_failure
from .waits import NodeWaits

logger = logging.getLogger(__name__)

#: A node's plan carries its rows per partition (so its cache gathers the first cached epoch's
#: first window as epoch 1 arrives) up to this many partitions: past it the plan would near the
#: control channel's message limit, and the node gathers that window when the epoch starts.
MAX_PLANNED_PARTITIONS = 50_000


class FedSplit(NamedTuple):
    """One split of a ``cluster.train`` call: its name, its data and how its rows are shared out."""

    name: str  # TRAIN_SPLIT or VALIDATION_SPLIT
    frame: Any  # the RDD or DataFrame
    shares: RowShares


class ClusterFeeder:
    """Feeds RDDs and DataFrames to one cluster's data nodes (its chief and workers)."""

    def __init__(self, spark: SparkAccess, secret: bytes, coordinator: Coordinator, waits: NodeWaits, cluster_id: str):
        self.spark = spark
        self._secret = secret
        self._coordinator = coordinator
        self._waits = waits
        self.job_group = f"sparkdl-{cluster_id}-feed"
        self._cluster_id = cluster_id
        self._sessions: dict[str, int] = {}
        self.qnames: set[str] = set()

    def data_nodes(self) -> list[NodeState]:
        """The nodes that receive data, in node-number order."""
        nodes = [n for n in self._coordinator.nodes.values() if n.role.job_name in COLLECTIVE_ROLES]
        return sorted(nodes, key=lambda n: n.role.node_number)

    def _target(self, stream_timeout: float, qname: str, run: str = "") -> FeedTarget:
        nodes = self.data_nodes()
        return FeedTarget(
            self._secret,
            tuple((n.host, n.feed_port) for n in nodes),
            tuple(map(self._endpoint, nodes)),
            tuple(n.role.label for n in nodes),
            stream_timeout,
            qname,
            run,
        )

    def _endpoint(self, node: NodeState) -> Endpoint:
        """The identity of ``node``'s feed server (the handshake is bound to it)."""
        return Endpoint.feed(self._cluster_id, node.role.node_number)

    def _client(self, node: NodeState) -> FeedClient:
        """The driver's requests to ``node``'s feed server."""
        return FeedClient((node.host, node.feed_port), self._secret, self._endpoint(node), node.role.label)

    # -- training --

    def train(
        self,
        plan: protocol.TrainingPlan,
        data,
        validation_data=None,
        *,
        show_progress: bool = False,
        history: TrainingHistory | None = None,
        history_reports: int = 0,
    ) -> int:
        """Feed ``data`` (and ``validation_data``) ``plan.epochs`` times, balanced over the data
        nodes; blocks until every data node has read its rows (or ended its feed).

        With ``plan.cache``, epoch 1 is also kept on each node's disk and, when every node holds
        its whole share, epochs 2..N are served from there without Spark jobs. ``plan.shuffle``
        permutes each node's rows every epoch (seeded by ``plan.seed``). ``show_progress``
        displays rows fed/read, epochs, partitions and the chief's metrics, and ends with
        ``history``'s epoch lines once it holds ``history_reports`` epoch reports (the chief
        reports an epoch after its validation, so shortly after the rows were read). Returns the
        rows planned per epoch (0 for an empty micro-batch of a stream, which feeds nothing).
        """
        check_training_plan(plan)
        self.spark.require_frames(data, "cluster.train")
        if validation_data is not None:
            self.spark.require_frames(validation_data, "cluster.train(validation_data=...)")
        self._check_data(data, validation_data)
        self.qnames.add(plan.qname)
        with contextlib.ExitStack() as pinned:
            # With AQE, pinning a shuffled frame already runs its shuffle: do it as a watched job.
            pin = lambda frame: self._run_job(
                lambda: pinned.enter_context(stable_partitions(frame)),  # noqa: E731
                "sparkdl: pin the partitions of a shuffled DataFrame",
            )
            plan = replace(
                plan,
                cache=plan.cache and (plan.epochs > 1 or plan.deterministic),
                seed=secrets.randbits(63) if plan.seed is None else int(plan.seed),
            )
            watch = (show_progress, history, history_reports)
            return self._train(plan, pin(data), pin(validation_data) if validation_data is not None else None, watch)

    @staticmethod
    def _check_data(data, validation_data) -> None:
        """Reject unfeedable data before any Spark job runs."""
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

    def _train(self, plan: protocol.TrainingPlan, data, validation_data, watch: tuple) -> int:
        show_progress, history, history_reports = watch
        reports_before = history.reports if history is not None else 0
        nodes = self.data_nodes()
        splits = self._count_splits(data, validation_data, len(nodes), empty_ok=plan.batch_id is not None)
        if not splits:
            return 0  # an empty micro-batch: nothing to train
        plan = self._start_session(plan, splits, nodes)
        limits = FeedLimits.of(plan.feed_timeout)
        shares = splits[0].shares
        logger.info(
            "sparkdl: feeding %d rows x %d epochs to %d nodes (%d rows each per epoch)",
            shares.total_rows,
            plan.epochs,
            len(nodes),
            shares.rows_per_node,
        )
        progress = self._train_progress(plan, splits, nodes, history) if show_progress else None
        # A data node that stops reading while it is fed is stalled.
        with self._coordinator.watch_reads(limits.read_stall_s), progress or contextlib.nullcontext():
            if self._feed_epochs(plan, splits, nodes, self._target(limits.stream_s, plan.qname), progress):
                logger.info("sparkdl: every node ended its feed; skipping the remaining epochs")
                return shares.total_rows
            self._await_read(nodes, plan.qname, plan.session)
            if history is not None:
                self._await_epoch_reports(history, history_reports, reports_before, nodes[0])
        return shares.total_rows

    def _count_splits(self, data, validation_data, num_nodes: int, empty_ok: bool) -> list[FedSplit]:
        """Each split's rows counted per partition and shared out over ``num_nodes`` (a Spark job
        each); empty (``empty_ok``: a micro-batch) when there are no training rows."""
        counts = self._run_job(lambda: count_rows(data), "sparkdl: count rows per partition")
        if sum(counts) == 0 and empty_ok:
            return []
        if sum(counts) == 0:
            kind = "DataFrame" if isinstance(data, DataFrame) else "RDD"
            raise FeedDataError(f"cluster.train got an empty {kind}: there is nothing to feed")
        splits = [FedSplit(TRAIN_SPLIT, data, balanced_shares(counts, num_nodes))]
        if validation_data is not None:
            validation_counts = self._run_job(
                lambda: count_rows(validation_data), "sparkdl: count validation rows per partition"
            )
            if sum(validation_counts) == 0:
                raise FeedDataError("cluster.train got empty validation_data: drop it or give it rows")
            splits.append(FedSplit(VALIDATION_SPLIT, validation_data, balanced_shares(validation_counts, num_nodes)))
        return splits

    def _start_session(
        self, plan: protocol.TrainingPlan, splits: list[FedSplit], nodes: list[NodeState]
    ) -> protocol.TrainingPlan:
        """Number this call's training session on its queue and send each data node its plan."""
        session = self._sessions.get(plan.qname, 0) + 1
        self._sessions[plan.qname] = session
        plan = replace(
            plan,
            session=session,
            rows_per_epoch=splits[0].shares.rows_per_node,
            validation_rows=splits[1].shares.rows_per_node if len(splits) > 1 else 0,
        )
        control_s = FeedLimits.of(plan.feed_timeout).control_s
        try:
            shares = splits[0].shares
            planned = len(shares.partition_rows) <= MAX_PLANNED_PARTITIONS
            for index, node in enumerate(nodes):
                counts = shares.node_partition_rows(index) if planned else ()
                self._client(node).plan(replace(plan, node=index, partition_rows=counts), control_s)
        except (OSError, ChannelError) as exc:  # TimeoutError included
            # A node may fail on the plan itself before its answer is out (map_fun wakes on the
            # plan: asking for validation the call was not given raises at once): its error, not ours.
            if self._waits.failure(CAUSE_WAIT_S):
                raise self._node_failed("sending the nodes their training plan") from exc
            raise
        return plan

    def _train_progress(self, plan, splits: list[FedSplit], nodes: list[NodeState], history) -> TrainProgress:
        total = sum(split.shares.rows_per_node for split in splits) * len(nodes) * plan.epochs
        partitions = lambda: self.spark.feeding_job_progress(self.job_group)  # noqa: E731
        return TrainProgress(nodes, total, plan.epochs, history=history, partitions=partitions)

    def _feed_epochs(self, plan, splits: list[FedSplit], nodes: list[NodeState], target: FeedTarget, progress) -> bool:
        """Feed every epoch from Spark, or epoch 1 only when the nodes' caches replay the rest;
        whether every node ended its feed first (the remaining epochs are skipped)."""
        for epoch in range(plan.epochs):
            if self._feed_epoch(plan, splits, nodes, target, epoch):
                return True
            if progress:
                progress.epoch_done(epoch)
            if epoch == 0 and plan.cache and self._replay_caches(plan, nodes):
                if progress:
                    progress.replaying(epoch + 1)
                return False
        return False

    def _feed_epoch(self, plan, splits: list[FedSplit], nodes: list[NodeState], target: FeedTarget, epoch: int) -> bool:
        """One feeding job per split for ``epoch``; whether every node has ended its feed."""
        seed = plan.seed if plan.shuffle else None
        for split in splits:
            description = (
                f"sparkdl: feed {'' if split.name == TRAIN_SPLIT else 'validation '}epoch "
                f"{epoch + 1}/{plan.epochs} to {len(nodes)} TF nodes"
            )
            skipped = self._run_job(
                lambda split=split: feed_epoch(
                    split.frame, target, plan.session, epoch, split.shares, split.name, seed
                ),
                description,
            )
            if self._check_skipped(nodes, skipped, description):
                return True
        return False

    def _replay_caches(self, plan: protocol.TrainingPlan, nodes: list[NodeState]) -> bool:
        """After epoch 1: whether the nodes replay their caches for the later epochs (required with
        ``deterministic``)."""
        control_s = FeedLimits.of(plan.feed_timeout).control_s
        problems = self._settle_cache(nodes, plan.qname, plan.session, control_s)
        if plan.deterministic and problems:
            raise FeedError(
                f"cluster.train(deterministic=True): not every node could cache its share of epoch 1 ({problems}); "
                "remove that cause, or train with deterministic=False"
            )
        return not problems

    def _settle_cache(self, nodes: list[NodeState], qname: str, session: int, timeout: float) -> str:
        """After epoch 1: replay the nodes' caches if every node holds its whole share, else drop them
        and warn, naming each node's reason (its ``CacheStatus``); those reasons, "" when replaying."""
        live = [n for n in nodes if not (n.finished or n.feed_terminated)]
        problems = {}
        try:
            for node in live:
                problem = self._settle_call(node, qname, session, lambda c: c.seal_cache(qname, session, timeout))
                if problem:
                    problems[node.role.label] = str(problem)
            use = not problems
            for node in live:
                self._settle_call(node, qname, session, lambda c: c.use_cache(qname, session, use, timeout))
        except (OSError, ChannelError) as exc:  # TimeoutError included
            if self._waits.failure(CAUSE_WAIT_S):
                raise self._node_failed("settling the nodes' epoch caches") from exc
            raise FeedError(f"cluster.train: lost contact with a node while settling the epoch caches: {exc}") from exc
        reasons = "; ".join(f"{label}: {problem}" for label, problem in problems.items())
        if use:
            logger.info("sparkdl: epochs 2+ of training run %d are served from the nodes' caches", session)
        else:
            logger.warning(
                "sparkdl: the epoch cache of training run %d cannot be used (%s): feeding every epoch from Spark",
                session,
                reasons,
            )
        return reasons

    def _settle_call(self, node: NodeState, qname: str, session: int, call):
        """``call(client)`` to ``node``'s feed server; None if the node is out of reach because it
        already read the whole run (a node replays its cache once its share is in, without waiting
        for the driver, and may be done, its process gone, before the driver asks)."""
        try:
            return call(self._client(node))
        except (OSError, ChannelError):
            self._waits.feeds_ended([node], CAUSE_WAIT_S)  # its FeedConsumed or its end may still be on the way
            if node.has_read(qname, session):
                return None
            raise

    def _await_read(self, nodes: list[NodeState], qname: str, session: int) -> None:
        """Wait until every data node has read all its rows of ``session`` (or ended its feed).

        The last rows may still sit in a node's queue when the feeding job ends; waiting here
        makes a failure while they are read surface from ``train`` rather than ``shutdown``. A
        node that stops reading is stopped by the stall watch (``feed_timeout``), so this ends.
        """
        self._waits.rows_read(nodes, qname, session)
        if self._coordinator.failures:
            raise self._node_failed("cluster.train: the nodes reading their last rows")
        if self._coordinator.aborted:
            raise FeedError(
                f"cluster.train: the cluster was stopped before its nodes read their rows ({self._coordinator.aborted})"
            )

    @staticmethod
    def _await_epoch_reports(history: TrainingHistory, reports: int, reports_before: int, chief: NodeState) -> None:
        """Give the chief's last epoch report (sent after its last validation) a moment to arrive,
        when ``map_fun`` reports epochs at all (``ctx.progress_callback()``); a fit that stopped
        early (it reports its end) or a chief that finished ends the wait at once."""
        if not history.as_dict():
            return
        deadline = Deadline(LAST_EPOCH_WAIT_S, "waiting for the chief's last epoch report")
        while not deadline.expired() and not chief.finished:
            if history.wait_for_reports(reports, 0.5, since=reports_before):
                return

    def _check_skipped(self, nodes: list[NodeState], skipped_mask: int, description: str) -> bool:
        """Accept nodes skipped because they ended their feed; raise for any other loss.

        Returns whether every data node has ended its feed (so feeding can stop).
        """
        lost = [n for i, n in enumerate(nodes) if skipped_mask >> i & 1 and not n.feed_ended]
        if lost:
            if self._waits.feeds_ended(lost, CAUSE_WAIT_S):
                if self._coordinator.failures:
                    raise self._node_failed(description)
            else:
                raise FeedError(f"{description}: lost contact with {', '.join(n.role.label for n in lost)}")
        return all(n.feed_ended for n in nodes)

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
        target = self._target(FeedLimits.of(feed_timeout).stream_s, qname, run)
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

    def epoch_gate(self, node: NodeState, epoch: int, go_on: bool = True, fit_begin: bool = False) -> None:
        """Tell a chief waiting on ``epoch`` whether to go on: an elastic cluster's at the end of
        that epoch, a relaunched attempt's as its first fit begins it (best effort: a chief that
        hears nothing goes on after ``ELASTIC_GATE_WAIT_S`` / ``RELAUNCH_GATE_WAIT_S``)."""
        if not node.feed_port or node.finished:
            return
        try:
            self._client(node).epoch_gate(epoch, go_on, CONTROL_CALL_MAX_S, fit_begin=fit_begin)
        except (OSError, ChannelError) as exc:
            label = node.role.label
            logger.warning("sparkdl: could not tell %s whether to go on at epoch %d: %s", label, epoch + 1, exc)

    def end(self, timeout: float = 30.0) -> None:
        """Tell every node the feed is over (shutdown): ``should_stop()`` turns True once drained."""
        for qname in self.qnames | {protocol.DEFAULT_QNAME}:
            for node in self.data_nodes():
                if node.finished or not node.feed_port:
                    continue
                try:
                    self._client(node).end(qname, timeout)
                except (OSError, ChannelError) as exc:  # expected of a node that ended its feed and is finishing
                    level = logging.DEBUG if node.feed_terminated else logging.WARNING
                    logger.log(level, "sparkdl: could not tell %s that the feed ended: %s", node.role.label, exc)

    # -- job watching --

    def _node_failed(self, description: str) -> ClusterError:
        return self._coordinator.error(f"sparkdl cluster {self._cluster_id}: a node failed during '{description}'")

    def _run_job(self, action: Callable[[], object], description: str):
        """Run a Spark action in a thread; raise ClusterError as soon as a node fails."""
        outcome: dict = {}
        finished = threading.Event()

        def body() -> None:
            self.spark.set_job_tag(self.job_group, f"{description} (cluster {self._cluster_id})")
            try:
                outcome["value"] = action()
            except BaseException as exc:  # noqa: BLE001 - re-raised below, in the caller's thread
                outcome["error"] = exc
            finally:
                finished.set()
                self._coordinator.notify_external()

        thread = self.spark.thread(body, "sparkdl-feed-job")
        thread.start()
        # ends on the job's end, a node's failure, or the cluster closing (abort, shutdown)
        done = self._waits.spark_job(finished.is_set)
        if self._coordinator.failures or (not done and self._coordinator.aborted):
            logger.debug("sparkdl: cancelling the feeding job '%s'", description)
            self.spark.cancel(self.job_group)
            thread.join(60)
            logger.debug("sparkdl: the feeding job ended")
            if not self._coordinator.failures:
                raise FeedError(f"{description}: the cluster was stopped ({self._coordinator.aborted})")
            raise self._node_failed(description)
        if "error" in outcome:
            error = outcome["error"]
            failure = task_failure(error)
            # Unfeedable data and a lost local checkpoint are their own causes, raised at once;
            # otherwise a lost node is the usual cause of a failed feed: wait briefly for its report.
            own_cause = failure.is_data_error or failure.lost_checkpoint
            if not own_cause and self._waits.failure(CAUSE_WAIT_S):
                raise self._node_failed(description) from error
            raise failure.as_feed_error(description) from error
        return outcome.get("value")
