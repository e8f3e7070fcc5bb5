"""``TFCluster``: a running TensorFlow cluster on Spark, as the driver sees and drives it.

``run()`` (``driver/run.py``) builds one; ``start`` launches one node per executor through a
(barrier) Spark job in a background thread and returns once every node has registered.
``train``/``train_stream``/``inference`` feed it (InputMode.SPARK). ``shutdown()`` waits for the
training nodes, stops the servers (ps, evaluator), and raises ``ClusterError`` with each failed
node's role, index, host and remote traceback. Every piece of state belongs to the ``TFCluster``
object, so a failed cluster leaves nothing behind for the next one.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from dataclasses import replace
from typing import Any, Callable

from ..columns.specs import check_bad_rows
from ..common import roles as roles_mod
from ..common.errors import (
    ClusterError,
    ClusterStateError,
    FeedError,
    InputModeError,
    ShutdownTimeout,
    TrainingStopped,
)
from ..common.timeouts import CAUSE_WAIT_S, ELASTIC_WAIT_S, FEED_TIMEOUT_S, SHUTDOWN_TIMEOUT_S, STOP_WAIT_S
from ..transport.protocol import DEFAULT_QNAME, TrainingPlan
from . import dstreams
from .arguments import InputMode, check_feed_arguments
from .attempt import ClusterAttempt, ClusterRequest
from .call_epochs import CallEpochs
from .cluster_handle import ClusterHandle
from .console import NodeOutputPrinter
from .coordinator import Listeners
from .history import TrainingHistory
from .lifecycle import (
    MAX_LOST_EXECUTOR_RELAUNCHES,
    ClusterState,
    Decision,
    FailureDecision,
    FailurePolicy,
    Lifecycle,
    NodeRange,
)
from .progress import InferenceProgress, progress_enabled
from .spark_access import SparkAccess
from .streaming import StreamingTraining, start_stream_training
from .tensorboard import DriverTensorBoard, board_log_dir

logger = logging.getLogger(__name__)


def _never_stop(_epoch: int, _logs: dict[str, float]) -> bool:
    """The epoch watcher that replaces one that raised: training goes on, the chief is told so."""
    return False


class TFCluster:
    """A running TensorFlow cluster on Spark executors. Create it with :func:`run`.

    The cluster's state lives here and in its current :class:`~sparkdl.driver.attempt.ClusterAttempt`
    (one per launch: a relaunch under ``max_restarts`` replaces it), never in module globals.
    """

    def __init__(
        self,
        spark: SparkAccess,
        request: ClusterRequest,
        cluster_id: str,
        input_mode: int,
        max_restarts: int = 0,
        progress: bool | None = None,
        node_range: NodeRange | None = None,
        elastic_wait: float = ELASTIC_WAIT_S,
        nodes_per_executor: int = 1,
        max_lost_executor_relaunches: int = MAX_LOST_EXECUTOR_RELAUNCHES,
    ):
        self.spark = spark  #: how this cluster reaches Spark (classic or Connect)
        self.sc = spark.sc  #: the SparkContext (TFoS's attribute); None under Spark Connect
        self.cluster_id = cluster_id
        self.input_mode = input_mode
        self.max_restarts = max_restarts
        self.progress = progress_enabled(progress)  #: show train() and inference progress on the driver
        self._lifecycle = Lifecycle(cluster_id)
        # A relaunch resumes a cluster.train call (SPARK) or the nodes' own run, awaited by shutdown().
        resumes_in = ClusterState.FEEDING if input_mode == InputMode.SPARK else ClusterState.STOPPING
        self._policy = FailurePolicy(max_restarts, resumes_in, node_range, cluster_id, max_lost_executor_relaunches)
        self._elastic_wait = elastic_wait  # how long a lost executor's replacement is waited for
        self._nodes_per_executor = nodes_per_executor  # 1 in InputMode.SPARK: a node takes a whole executor
        self._resizes: list[dict] = []  # each change of the node count: from, to, why, when, seconds
        self._relaunches = 0  # attempts started after the first (restarts and resizes)
        # A relaunch decided while a cluster.train call feeds (a growth at an epoch boundary, a relaunched
        # fit fed the wrong epochs), with its cause: carried out by the call it interrupts.
        self._pending: tuple[Decision, str] | None = None
        self._relaunch_lock = threading.Lock()  # guards the two above and below
        self._call: CallEpochs | None = None  # the epochs of the cluster.train call feeding now
        self._fits_resume = True  # whether a relaunched fit resumes from a backup (until one did not)
        self._fit_begun = 0  # the last attempt whose chief's fit began (attempt 0's is never checked)
        self._executors_at_start: set[str] = set()  # Spark's active executors when the attempt formed
        self._inference_progress = InferenceProgress() if self.progress else None
        self._request = request
        self._printer = NodeOutputPrinter() if request.settings.stream_logs else None
        self._history = TrainingHistory()  # the chief's epoch logs, kept across relaunches
        self._epoch_watcher: Callable[[int, dict[str, float]], bool] | None = None  # watch_epochs'
        self._stopped_at: int | None = None  # the epoch after which the epoch watcher stopped the nodes
        self._listeners = Listeners(
            on_log=self._printer,
            on_inferred=self._inference_progress,
            on_epoch_end=self._chief_epoch_end,
            on_fit_begin=self._chief_fit_begin,
        )
        self._attempt = self._new_attempt(0)
        self._streams: list[StreamingTraining] = []  # train_stream's queries: shutdown stops them
        self._board: DriverTensorBoard | None = None  # start_tensorboard's; outlives shutdown()
        # What the streaming drivers (train(dstream), shutdown(ssc), train_stream) may use of this cluster.
        self._handle = ClusterHandle(
            cluster_id,
            spark,
            lambda: self._attempt,
            self._lifecycle,
            self.train,
            self._abort,
            # No abort on RAISE: from inside the query's foreachBatch it would cancel the query's own
            # jobs; the query stops with the error, and shutdown() stops the cluster.
            self._recover_or_raise,
        )

    def _new_attempt(self, number: int) -> ClusterAttempt:
        return ClusterAttempt(self.spark, self._request, self.cluster_id, number, self._listeners)

    def _chief_epoch_end(self, node, report) -> None:
        """Only the chief's epoch logs make the history (with the node count, on an elastic
        cluster); at an epoch boundary an elastic cluster may grow."""
        spec = self._coordinator.cluster_spec or {}
        if not roles_mod.is_chief(spec, node.role.job_name, node.role.task_index):
            return
        if self._stopped_at is not None:
            return  # stopped at an epoch boundary by the epoch watcher: no later epoch is kept
        if not self._policy.elastic or report.get("fit_end"):
            self._history.record(report)
            self._tell_watcher(node, report, word=True)
            return
        self._history.record({**report, "nodes": self._request.nodes})
        if self._tell_watcher(node, report, word=False):  # going on, the elastic gate below gives the word
            return
        # The chief waits at this epoch boundary for the word: grow now, or go on.
        if not self._maybe_grow():
            self._attempt.feeder.epoch_gate(node, int(report.get("epoch", 0)))

    def watch_epochs(self, watcher: Callable[[int, dict[str, float]], bool] | None) -> None:
        """Call ``watcher(epoch, logs)`` on the driver as the chief ends each epoch (0-based ``epoch``,
        its Keras logs as :attr:`history` keeps them; ``ctx.progress_callback()`` reports them).

        When it returns True the cluster stops at that epoch boundary: every node is stopped (its
        executor freed), no later epoch enters :attr:`history`, and the ``train`` call raises
        :class:`TrainingStopped` (never a relaunch). This is how a tuning trial is pruned. The chief is
        sent the decision as an epoch gate word: a chief that waits for it at each epoch end
        (``ctx.mgr.await_epoch_gate(epoch, timeout)``, as KerasEstimator's node program does) trains
        no step past the boundary; others are stopped wherever the stop finds them. The watcher runs on
        the thread that receives the nodes' reports: keep it short. One that raises is logged and no
        longer called. None removes the watcher."""
        self._epoch_watcher = watcher

    @property
    def stopped_at_epoch(self) -> int | None:
        """The epoch (0-based) after which the epoch watcher stopped the cluster, or None."""
        return self._stopped_at

    def _tell_watcher(self, node, report, word: bool) -> bool:
        """Give the epoch watcher the chief's epoch-end report, and the chief its word (``word``: also
        when it goes on); whether the watcher stopped the cluster there."""
        watcher = self._epoch_watcher
        if watcher is None or not report.get("epoch_end") or report.get("epoch") is None:
            return False
        epoch = int(report["epoch"])
        logs = {name: values[epoch] for name, values in self.history.items() if epoch < len(values)}
        try:
            stop = bool(watcher(epoch, logs))
        except Exception:  # noqa: BLE001 - the user's watcher: training goes on without it
            logger.exception("sparkdl cluster %s: the epoch watcher failed; it is no longer called", self.cluster_id)
            # Not None: a chief that waits at each epoch end for the word must still be told to go on.
            self._epoch_watcher = _never_stop
            stop = False
        if stop:  # before the word: a chief that stops at once must find the cluster stopped
            with self._relaunch_lock:
                self._stopped_at = epoch
        if word or stop:
            self._attempt.feeder.epoch_gate(node, epoch, go_on=not stop)
        if not stop:
            return False
        logger.info("sparkdl cluster %s: stopped after epoch %d by its epoch watcher", self.cluster_id, epoch + 1)
        self._coordinator.abort(f"stopped after epoch {epoch + 1} by the epoch watcher")
        return True

    def _raise_if_stopped(self, error: BaseException | None = None) -> None:
        """After the epoch watcher stopped the nodes: stop everything and raise ``TrainingStopped``."""
        epoch = self._stopped_at
        if epoch is None:
            return
        self._abort(f"stopped after epoch {epoch + 1} by the epoch watcher")
        raise TrainingStopped(
            epoch, f"sparkdl cluster {self.cluster_id}: stopped after epoch {epoch + 1} by its epoch watcher"
        ) from error

    def _chief_fit_begin(self, node, report) -> None:
        """The chief's ``model.fit`` began (``ctx.progress_callback()``). The first fit of a relaunched
        attempt drops from the history the epochs it will run again, and is checked against the epochs
        its attempt is fed (``call_epochs.py``): a fit that begins elsewhere (without a backup, at 0)
        is stopped before it trains and the cluster relaunched, fed from where it began. The chief of a
        relaunched InputMode.SPARK attempt waits for that word (``awaits_word``)."""
        coordinator = self._coordinator
        spec = coordinator.cluster_spec or {}
        if coordinator.nodes.get(node.role.node_number) is not node:
            return  # a stopped attempt's node, stopping
        if not roles_mod.is_chief(spec, node.role.job_name, node.role.task_index):
            return
        epoch, attempt = int(report.get("epoch", 0)), self._attempt.attempt
        start = None
        with self._relaunch_lock:
            if attempt > self._fit_begun:  # this attempt's first fit
                self._fit_begun = attempt
                self._history.forget_from(epoch)
                if self._call is not None:
                    planned = self._call.first_epoch
                    start = self._call.fit_began(epoch, attempt)
                    if start.resumes is not None:
                        self._fits_resume = start.resumes
                    if start.mismatch:
                        logger.warning(
                            "sparkdl cluster %s: the relaunched model.fit began at epoch %d, but this cluster.train "
                            "call feeds it from epoch %d of %d: it may run out of data",
                            self.cluster_id,
                            epoch + 1,
                            planned + 1,
                            self._call.epochs,
                        )
                    if not start.go_on and self._pending is None:
                        decision = self._policy.refeed(self._request.nodes, epoch, planned)
                        self._pending = (decision, "the relaunched model.fit was fed other epochs than it runs")
        go_on = start is None or start.go_on
        if report.get("awaits_word"):  # the fit-begin word, apart from the elastic gate at the epoch's end
            self._attempt.feeder.epoch_gate(node, epoch, go_on, fit_begin=True)
        if not go_on:
            coordinator.abort(f"the relaunched model.fit began at epoch {epoch + 1}: relaunching fed from there")

    def _maybe_grow(self) -> bool:
        """At an epoch boundary of a cluster.train call with epochs left, the chief waiting: when Spark
        can host more nodes, stop this attempt (the call relaunches the cluster larger and feeds the
        epochs left). Whether it did."""
        with self._relaunch_lock:
            if self._call is None or self._pending is not None:
                return False
            if self._call.done(self._history.reports) >= self._call.epochs:
                return False  # the last epoch: nothing left to grow for
            try:
                capacity = self._capacity()
            except Exception:  # noqa: BLE001 - Spark stopped or unreachable: no growth, never a node's failure
                logger.debug("sparkdl cluster %s: cannot read Spark's executors", self.cluster_id, exc_info=True)
                return False
            decision = self._policy.grow(self._request.nodes, capacity)
            if decision is None:
                return False
            self._pending = (decision, "Spark added executors")
        self._coordinator.abort(f"growing to {decision.nodes} nodes at an epoch boundary")
        return True

    def _take_pending(self) -> tuple[Decision, str] | None:
        """The relaunch decided during the feeding call that just ended (its nodes were stopped), with
        its cause, if any; none can be decided until the call feeds again."""
        with self._relaunch_lock:
            pending, self._pending, self._call = self._pending, None, None
            return pending

    def _capacity(self, want: int = 0, wait_s: float = 0.0, lost: int = 0) -> int:
        """How many nodes Spark can host now: the driver-hosted ps nodes plus the active executors
        (but those where another sparkdl cluster's nodes run).

        After ``lost`` nodes lost their executors, an executor Spark has not yet removed (a dead host
        is noticed a moment after its node) is not counted: until ``lost`` executors of the last
        start have gone, that many are taken off. Waits up to ``wait_s`` seconds for ``want`` nodes
        (a lost executor's replacement)."""
        first = self._request.first_spark_node
        deadline = time.monotonic() + wait_s
        while True:
            active = set(self.spark.active_executors() or ()) - self._attempt.executors_of_other_clusters()
            unnoticed = max(0, lost - len(self._executors_at_start - active))
            nodes = first + max(0, len(active) - unnoticed) * self._nodes_per_executor
            if (nodes >= want and not unnoticed) or time.monotonic() >= deadline:
                return nodes
            time.sleep(0.5)  # polling the JVM's executor list; no event is exposed to Python

    @property
    def state(self) -> ClusterState:
        """Where the cluster is in its life: ``starting``, ``running``, ``feeding``, ``restarting``,
        ``stopping``, ``stopped`` or ``failed`` (see ``driver/lifecycle.py``)."""
        return self._lifecycle.state

    @property
    def restarts(self) -> int:
        """Relaunches so far (``max_restarts``)."""
        return self._policy.restarts

    @property
    def lost_executor_relaunches(self) -> int:
        """Relaunches of an elastic cluster after lost executors so far (``max_lost_executor_relaunches``)."""
        return self._policy.lost_executor_relaunches

    @property
    def failures_survived(self) -> list[ClusterError]:
        """The failures that caused the relaunches counted against ``max_restarts``, in order."""
        return list(self._policy.survived)

    @property
    def num_nodes(self) -> int:
        """How many nodes the cluster runs on now (it changes with ``min_executors``)."""
        return self._request.nodes

    @property
    def resizes(self) -> list[dict]:
        """Each change of an elastic cluster's node count (``TFCluster.run(min_executors=...)``), in
        order: ``{"from_nodes", "to_nodes", "reason", "epochs_done", "seconds"}``, where
        ``epochs_done`` counts the chief's epoch reports before it and ``seconds`` is how long the
        relaunch took (stopping the nodes, starting the new ones)."""
        return [dict(r) for r in self._resizes]

    @property
    def _closed(self) -> bool:
        return self._lifecycle.state.ended

    @property
    def _coordinator(self):
        return self._attempt.coordinator

    # -- TFoS-compatible API --

    @property
    def cluster_info(self) -> list[dict[str, Any]]:
        """One dict per node: executor_id (TFoS's name for the node number), job_name, task_index, host,
        port, spark_executor, status, log_path; and feed_port (InputMode.SPARK, else None) and metrics
        (a copy of the node's latest progress report: step, epoch, loss, rows_read, ...)."""
        return [
            {
                "executor_id": n.role.node_number,
                "job_name": n.role.job_name,
                "task_index": n.role.task_index,
                "host": n.host,
                "port": n.port,
                "spark_executor": n.spark_executor,
                "status": n.status.value,
                "log_path": n.log_path,
                "feed_port": n.feed_port or None,
                "metrics": dict(n.metrics),
            }
            for n in self._coordinator.nodes.values()
        ]

    @property
    def coordinator_address(self) -> tuple[str, int]:
        """``(host, port)`` of the driver's coordinator, which every node must reach (firewall rules)."""
        return self._coordinator.address

    @property
    def cluster_spec(self) -> dict[str, list[str]]:
        """``{job: ["host:port", ...]}`` of the running cluster."""
        return dict(self._coordinator.cluster_spec or {})

    @property
    def history(self) -> dict[str, list[float]]:
        """The chief's Keras metrics per epoch, shaped like Keras ``History.history``.

        ``{"loss": [epoch 0, epoch 1, ...], "val_loss": [...], ...}`` from the epoch ends the chief
        reported through ``ctx.progress_callback()`` (empty without it). A relaunched fit that begins
        at epoch ``k`` (a backup's next epoch, or 0 without one) replaces what earlier attempts reported
        from ``k`` on, so no epoch mixes two attempts; an epoch or metric never reported is NaN, so
        entry ``i`` of every list is epoch ``i``. A snapshot: read it again for later epochs.
        """
        return self._history.as_dict()

    @property
    def bad_rows(self) -> dict[str, dict]:
        """Bad rows the nodes skipped (``cluster.train(bad_rows="skip")``), by node label:
        ``{"worker:0": {"rows": 3, "first": "column 'image', partition 2, row 17: ..."}}``. Rows
        are counted each time they are read (every epoch); nodes that skipped none are left out."""
        return {
            n.role.label: {"rows": n.bad_rows, "first": n.bad_row_example}
            for n in self._coordinator.nodes.values()
            if n.bad_rows
        }

    @property
    def results(self) -> list[Any]:
        """What each node's ``map_fun`` returned, by node number (None for a node that returned
        nothing, or has not returned yet: read it after ``shutdown()``), with
        ``TFCluster.run(..., return_results="all")``; ValueError otherwise (by default only the
        chief sends its value, which ``shutdown()`` returns)."""
        if self._request.settings.return_results != "all":
            raise ValueError(
                "cluster.results needs TFCluster.run(..., return_results='all'); by default only the "
                "chief sends what map_fun returned, and shutdown() returns it"
            )
        nodes = self._coordinator.nodes
        return [nodes[number].result for number in sorted(nodes)]

    def _chief_result(self) -> Any:
        """What the chief's (else worker 0's) ``map_fun`` returned; None if nothing."""
        spec = self._coordinator.cluster_spec or {}
        for node in self._coordinator.nodes.values():
            if roles_mod.is_chief(spec, node.role.job_name, node.role.task_index):
                return node.result
        return None

    def tensorboard_url(self, timeout: float = 90.0) -> str | None:
        """TensorBoard's URL, waiting (bounded) for it to answer; None when not requested."""
        if self._request.settings.tensorboard_node is None:
            return None
        self._attempt.waits.tensorboard(timeout)
        return self._coordinator.tensorboard_url

    def start_tensorboard(self, log_dir: str | None = None, port: int = 0, host: str = "127.0.0.1") -> str:
        """Start TensorBoard on the driver and return its URL once it answers.

        It reads ``log_dir``, by default this cluster's (``TFCluster.run(log_dir=...)``, which the
        nodes see as ``ctx.log_dir``), while the nodes train and after they end: it keeps serving
        after :meth:`shutdown`, until :meth:`stop_tensorboard` or until the driver process exits.
        The nodes write there and the driver reads it, so it must be an absolute path on a file
        system both share (any local path on ``local-cluster``), or a URL TensorBoard reads itself:
        ``gs://``, or ``s3://`` and ``hdfs://`` with ``tensorflow-io`` installed on the driver.
        ``port`` 0 picks a free one; ``host`` is loopback by default (TensorBoard has no
        authentication: bind another interface only on a trusted network). A second call with the
        same arguments returns the running TensorBoard's URL; with others it replaces it.

        ``tensorboard=True`` in ``TFCluster.run`` is another TensorBoard, TensorFlowOnSpark's: on the
        chief's executor, ending with the cluster (:meth:`tensorboard_url`). ValueError without a
        log dir or for one the driver cannot read; SparkDLError when TensorBoard does not start
        (with its output)."""
        log_dir = log_dir or self._request.settings.log_dir
        board = self._board
        if board is not None and board.running and board.host == host and port in (0, board.port):
            if board.log_dir == board_log_dir(log_dir):
                return board.url
        self.stop_tensorboard()
        self._board = DriverTensorBoard.start(log_dir, port=port, host=host)
        logger.info("sparkdl cluster %s: TensorBoard at %s reads %s", self.cluster_id, self._board.url, log_dir)
        return self._board.url

    def stop_tensorboard(self) -> None:
        """Stop the TensorBoard :meth:`start_tensorboard` started, if it runs."""
        board, self._board = self._board, None
        if board is not None:
            board.stop()

    def train(
        self,
        dataRDD,
        num_epochs: int = 1,
        feed_timeout: float = FEED_TIMEOUT_S,
        qname: str = DEFAULT_QNAME,
        *,
        validation_data=None,
        cache: bool = True,
        cache_max_bytes: int | None = None,
        shuffle: bool = True,
        seed: int | None = None,
        deterministic: bool = False,
        bad_rows: str = "fail",
    ) -> dict[str, list[float]]:
        """Feed an RDD or DataFrame to the chief and workers ``num_epochs`` times (InputMode.SPARK).

        Rows are balanced so every node gets the same number per epoch (rows are striped over
        the nodes; at most N-1 rows per epoch are repeated to make the counts equal; none are
        dropped). Blocks until every chief and worker has read all of its rows (or called
        ``DataFeed.terminate()``, or returned from ``map_fun``), as in TensorFlowOnSpark, so a
        node failing on the last rows fails this call. Returns :attr:`history` (the chief's
        metrics per epoch, when ``map_fun`` passes ``ctx.progress_callback()`` to ``fit``).

        ``validation_data`` (a DataFrame or RDD like ``dataRDD``, same columns and types) is
        shared out by the same rule and read in the node with ``feed.as_dataset(...,
        split="validation")``, once per epoch. ``cache`` keeps each node's rows of the first
        epoch on its executor's local disk and serves epochs 2..N from there without Spark jobs
        (at most ``cache_max_bytes`` per node, and never filling the disk; a node whose share
        does not fit says so in its log and the whole call is fed from Spark every epoch).
        ``shuffle`` gives each node its rows in a new order every epoch, within its own share:
        epoch 1 as Spark delivers it with each arriving frame permuted, later epochs a full
        permutation of the node's share, reproducible with ``seed`` (None: a new seed per call).
        ``deterministic=True`` makes epoch 1 reproducible too: each node reads it, like the later
        epochs, from its cache in an order set by ``seed`` and the data alone, so its training starts
        once its whole share of epoch 1 has arrived (it needs ``cache``; a share that does not fit
        fails the call). Every row reaches its node exactly once per epoch whatever Spark does
        (task retries, speculative copies, lost executors): see docs/reliability.md.

        ``bad_rows``: a row no tensor can take (a null, text that is not UTF-8, a corrupt image,
        an array longer than declared, a Vector of another size...) fails the call naming its
        column, Spark partition and row (``"fail"``, the default: the node refuses the rows it
        can check as they arrive, raising FeedDataError here; the rest fail the node reading
        them); ``"skip"`` leaves such rows out of their batch (each node still runs the same
        number of steps), and counts them: each node's count reaches the driver, which logs the
        first and keeps the totals in :attr:`bad_rows`.

        Raises ClusterError with the node's traceback as soon as a node fails, NodeStalled
        when a node reads nothing for ``feed_timeout`` seconds (naming it, with its Python
        stacks), FeedError when a feeding task sends nothing for ``feed_timeout`` seconds (its
        node drops that stream), and FeedDataError for data that cannot become tensors, or
        validation data that differs from the training data (naming the column). ``num_epochs=0`` means 1, as
        in TFoS. With ``max_restarts``, a failed node relaunches the cluster and the call goes
        on, fed the epochs the relaunched ``model.fit`` runs: with ``ctx.backup_and_restore(dir)``
        and ``ctx.progress_callback()`` (after it in the callbacks list) the fit resumes after the
        last epoch backed up and only the epochs not yet completed are fed; a fit that starts again
        at epoch 0 (``ctx.progress_callback()`` without a backup) is fed all of them again, and so is
        every fit when the nodes report no epochs. The relaunched chief's progress callback says
        where its fit begins before it trains; a fit fed other epochs (the driver expects a fit to
        resume until one of the cluster's did not) is stopped there and the cluster relaunched fed
        right, which does not count against ``max_restarts`` (docs/reliability.md).
        """
        self._require_spark_mode("train")
        num_epochs = num_epochs or 1
        if dstreams.is_dstream(dataRDD):  # TensorFlowOnSpark's Spark Streaming: every RDD as it arrives
            return dstreams.train_dstream(self._handle, dataRDD, num_epochs, feed_timeout, qname)
        if getattr(dataRDD, "isStreaming", False):
            raise TypeError("cluster.train got a streaming DataFrame: train on it with cluster.train_stream(df, ...)")
        plan = TrainingPlan(
            epochs=num_epochs,
            qname=qname,
            feed_timeout=feed_timeout,
            cache=cache,
            cache_max_bytes=cache_max_bytes,
            shuffle=shuffle,
            seed=seed,
            deterministic=deterministic,
            bad_rows=check_bad_rows(bad_rows, "cluster.train"),
        )
        call = CallEpochs(num_epochs, self._history.reports, self._attempt.attempt)
        try:
            self._feed_call(call, plan, dataRDD, validation_data)
        finally:
            with self._relaunch_lock:
                self._call = None
        self._raise_if_stopped()  # the nodes read the call's last rows as the watcher stopped them
        if self._printer is not None:
            self._printer.flush(timeout=5)  # what the nodes printed during the call, before it returns
        return self.history

    def _feed_call(self, call: CallEpochs, plan: TrainingPlan, data, validation_data) -> None:
        """Feed one ``cluster.train`` call until its nodes read it, relaunching the cluster as its
        failure policy decides (a node failed, Spark added executors, a relaunched fit is fed other
        epochs than it runs); each relaunch is fed the epochs its fit runs (``call_epochs.py``)."""
        while True:
            with self._relaunch_lock:
                self._call = call
            try:
                with self._lifecycle.feeding():
                    self._attempt.feeder.train(
                        plan,
                        data,
                        validation_data,
                        show_progress=self.progress,
                        history=self._history,
                        history_reports=call.last_report,
                    )
                pending = self._take_pending()
                if pending is None:
                    break
                self._relaunch(*pending)  # decided as the call ended
            except (ClusterError, FeedError) as error:
                self._raise_if_stopped(error)  # stopped by the epoch watcher: never relaunched
                pending = self._take_pending()
                if pending is not None:  # this attempt was stopped to grow, or to be fed other epochs
                    self._relaunch(*pending)
                elif isinstance(error, ClusterError):
                    # Nothing of a failed cluster may linger: without a relaunch, stop it all now
                    # (shutdown() is then a no-op).
                    self._recover_or_raise(error, "a node failed during cluster.train")
                else:
                    raise
            # Feed the relaunched nodes the epochs their fit runs: a fit that resumes after its last
            # completed epoch, only the rest; one that starts again from 0, all (see call_epochs.py).
            with self._relaunch_lock:
                call.replan(self._history.reports, self._attempt.attempt, self._fits_resume)
            plan = replace(plan, epochs=call.fed_epochs, first_epoch=call.first_epoch)
            logger.info(
                "sparkdl cluster %s: feeding epochs %d to %d of the call to %d nodes",
                self.cluster_id,
                call.first_epoch + 1,
                call.epochs,
                self._request.nodes,
            )

    def train_stream(
        self,
        df,
        checkpoint_location: str | None = None,
        *,
        trigger: dict | None = None,
        query_name: str | None = None,
        feed_timeout: float = FEED_TIMEOUT_S,
        qname: str = DEFAULT_QNAME,
        shuffle: bool = True,
        seed: int | None = None,
    ) -> StreamingTraining:
        """Train on a streaming DataFrame (Structured Streaming) until stopped; returns the running query.

        Each micro-batch is fed to the chief and workers as one training run, read in ``map_fun``
        with ``for batch in feed.micro_batches(ctx.stream_checkpoint(dir, model=model)):
        model.fit(batch.as_dataset(...))``; the next starts once every node has trained and saved it.
        ``checkpoint_location`` is the query's (HDFS or any Hadoop path): with it and
        ``ctx.stream_checkpoint`` a restarted application trains each micro-batch exactly once
        (docs/reliability.md). ``trigger`` is ``DataStreamWriter.trigger``'s keywords (e.g.
        ``{"processingTime": "10 seconds"}``). The handle behaves like a ``StreamingQuery``
        (``status``, ``lastProgress``, ``stop()``, ``awaitTermination()``) and raises a node's failure
        (``ClusterError`` with its traceback), which stops the query; ``shutdown()`` stops it too.
        """
        self._require_spark_mode("train_stream")
        check_feed_arguments(qname, feed_timeout, seed)
        stream = start_stream_training(
            self._handle, df, checkpoint_location=checkpoint_location, trigger=trigger, query_name=query_name,
            feed_timeout=feed_timeout, qname=qname, shuffle=shuffle, seed=seed,
        )  # fmt: skip
        self._streams.append(stream)
        return stream

    def inference(
        self, dataRDD, feed_timeout: float = FEED_TIMEOUT_S, qname: str = DEFAULT_QNAME, *, result_schema=None
    ):
        """An RDD with one result per input row, in input order partition by partition (lazy).

        ``dataRDD`` may be an RDD or a DataFrame; the result is an RDD either way (as in
        TensorFlowOnSpark), unless ``result_schema`` (a DDL string such as ``"prediction
        double"``, or a StructType) asks for a DataFrame of results: each result fills the one
        field, or with several fields is a sequence or dict of them. Under Spark Connect (no
        RDDs) the input must be a DataFrame and ``result_schema`` is required. Each partition
        is served by one node (``partition % nodes``), whose ``map_fun`` reads it with
        ``ctx.get_data_feed(train_mode=False)`` and answers with ``batch_results``. A
        partition whose node returns fewer or more results than rows fails with FeedError; no
        row is ever dropped or duplicated silently. ``feed_timeout`` bounds each wait of a
        partition's stream: a node that answers nothing for that long fails the partition's
        task, and so does a task that sends no rows, or reads none of its results, for that long
        (its node drops the stream; ``map_fun`` goes on with the next).
        """
        self._require_spark_mode("inference")
        run = uuid.uuid4().hex[:8]
        results = self._attempt.feeder.inference(dataRDD, feed_timeout, qname, run, result_schema)
        if self._inference_progress is not None:
            # A DataFrame's partition count is known only once it runs (its progress shows no total).
            self._inference_progress.watch(run, results.getNumPartitions() if result_schema is None else None)
        return results

    def _require_spark_mode(self, what: str) -> None:
        if self.input_mode != InputMode.SPARK:
            raise InputModeError(
                f"cluster.{what}() feeds data, which needs TFCluster.run(..., "
                "input_mode=InputMode.SPARK); this cluster runs InputMode.TENSORFLOW"
            )
        if self._closed:
            how = "shut down" if self.state is ClusterState.STOPPED else "ended by a failure"
            raise ClusterStateError(
                f"cluster.{what}() on cluster {self.cluster_id}, which was {how}: start a new one with TFCluster.run"
            )

    def shutdown(self, ssc=None, grace_secs: float = 0, timeout: float = SHUTDOWN_TIMEOUT_S) -> Any:
        """Wait for the training nodes to finish, stop the servers, and release everything.

        Returns what the chief's ``map_fun`` returned (without a chief, worker 0's; None if it
        returned nothing), as JSON values: see ``TFCluster.run``'s ``return_results``.
        TensorFlowOnSpark's ``shutdown`` returned None.

        ``grace_secs``: how long ps/evaluator nodes may keep running once the training nodes
        are done (they may also end by themselves). ``timeout``: how long to wait for the
        training nodes before stopping everything and raising ShutdownTimeout. Raises
        ClusterError naming each failed node (role, index, host, traceback); with
        ``max_restarts``, a failure in InputMode.TENSORFLOW relaunches the cluster first, as
        long as relaunches are left. ``ssc``: a StreamingContext whose DStream ``train`` was
        given (TensorFlowOnSpark's streaming): waits until the nodes end their feed
        (``DataFeed.terminate()`` or ``map_fun`` returning), then stops ``ssc`` gracefully
        (leaving the SparkContext running) before the rest of the shutdown.
        """
        if ssc is not None:  # stops ssc; raises a failed stream batch's error (which may have closed the cluster)
            dstreams.await_dstream_end(self._handle, ssc, grace_secs, timeout)
        if self._closed:
            return self._chief_result()
        self._stop_streams()
        self._lifecycle.move(ClusterState.STOPPING)
        outcome = ClusterState.FAILED
        try:
            while True:
                try:
                    self._finish_attempt(grace_secs, timeout)
                    outcome = ClusterState.STOPPED
                    return self._chief_result()
                except ClusterError as error:
                    self._recover_or_raise(error)
                    self._lifecycle.move(ClusterState.STOPPING)
        finally:
            if not self._closed:
                self._lifecycle.move(outcome)
            self._attempt.close()
            self._close_displays()

    def _finish_attempt(self, grace_secs: float, timeout: float) -> None:
        attempt, coordinator, waits = self._attempt, self._coordinator, self._attempt.waits
        if self.input_mode == InputMode.SPARK and not coordinator.failures:
            attempt.feeder.end()
        finished = waits.training_nodes_ended(timeout)
        if attempt.launch_errors and not coordinator.failures:
            # A lost executor fails the launch job and its node at once; prefer the node's report.
            waits.failure_or_all_ended(CAUSE_WAIT_S)
        if not finished:
            running = coordinator.running_labels()
            coordinator.stop_nodes(lambda n: not n.finished, grace_s=0)
            waits.all_ended(STOP_WAIT_S)
            raise ShutdownTimeout(
                f"nodes still running after shutdown(timeout={timeout}) were stopped: " + ", ".join(running)
            )
        if grace_secs and not coordinator.failures:
            waits.all_ended(grace_secs)
        coordinator.stop_nodes(lambda n: not n.finished, grace_s=0)
        if not waits.all_ended(STOP_WAIT_S, or_launch_failed=True):
            logger.warning(
                "sparkdl: nodes %s did not report their end; cancelling their Spark tasks", coordinator.running_labels()
            )
        attempt.join(STOP_WAIT_S)
        if coordinator.failures:
            raise coordinator.error(f"sparkdl cluster {self.cluster_id} failed")
        if attempt.launch_errors:
            raise ClusterError(
                [], f"sparkdl cluster {self.cluster_id}: the launch job failed: {attempt.launch_errors[0]}"
            ) from attempt.launch_errors[0]

    def _recover_or_raise(self, error: ClusterError, abort_reason: str | None = None) -> None:
        """Carry out the failure policy's decision on ``error`` (raised from the state the cluster
        is in): relaunch the cluster (as large, or resized within its node range), or re-raise
        ``error`` (after stopping everything, with an ``abort_reason``). Call it from an ``except``
        block."""
        want = self._policy.node_range.max_nodes if self._policy.node_range else self._request.nodes
        lost = sum(1 for failure in error.failures if failure.executor_lost)
        capacity = lambda: self._capacity(want, self._elastic_wait, lost)  # noqa: E731 - asked only when elastic
        decision = self._policy.decide(error, self.state, self._request.nodes, capacity)
        if decision.action is FailureDecision.RAISE:
            if abort_reason:
                self._abort(abort_reason)
            raised = self._policy.raised(decision, error)
            if raised is error:
                raise error
            raise raised from error
        self._relaunch(decision, error.failures[0].summary())

    def _relaunch(self, decision: Decision, cause: str) -> None:
        """Stop the current attempt and start the next one on ``decision.nodes`` nodes."""
        self._lifecycle.move(ClusterState.RESTARTING)
        began, before = time.monotonic(), self._request.nodes
        logger.warning(
            "sparkdl cluster %s: relaunching on %d nodes (%s) after: %s",
            self.cluster_id,
            decision.nodes,
            decision.reason,
            cause,
        )
        self._attempt.abort(f"relaunching: {decision.reason}")
        if decision.nodes != before:
            self._request = self._request.resized(decision.nodes)
        self._relaunches += 1
        self._attempt = self._new_attempt(self._relaunches)
        self.start()
        if decision.nodes != before:
            record = {
                "from_nodes": before,
                "to_nodes": decision.nodes,
                "reason": decision.reason,
                "epochs_done": self._history.reports,
                "seconds": round(time.monotonic() - began, 3),
            }
            self._resizes.append(record)
            logger.warning(
                "sparkdl cluster %s resized from %d to %d nodes in %.1f s: %s",
                self.cluster_id,
                before,
                decision.nodes,
                record["seconds"],
                decision.reason,
            )

    def start(self) -> None:
        """Launch the current attempt and wait until every node has registered (aborting it on any
        error). ``run()`` calls it once, a relaunch again; a started cluster refuses it."""
        if self.state not in (ClusterState.STARTING, ClusterState.RESTARTING):
            raise ClusterStateError(f"sparkdl cluster {self.cluster_id} is {self.state.value}: it was started already")
        self._lifecycle.move(ClusterState.STARTING)
        self._attempt.start()
        try:
            self._attempt.wait_ready()
        except BaseException:
            self._abort("reservation failed")
            raise
        self._lifecycle.move(ClusterState.RUNNING)
        if self._policy.elastic:
            self._executors_at_start = (
                set(self.spark.active_executors() or ()) - self._attempt.executors_of_other_clusters()
            )
        logger.info("sparkdl cluster %s running: %s", self.cluster_id, self._coordinator.cluster_spec)

    # -- context manager: shut down on exit --

    def __enter__(self) -> "TFCluster":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.shutdown()
        else:
            self._abort(f"the driver raised {exc_type.__name__}")

    def _abort(self, reason: str) -> None:
        """Stop everything now (used on errors at the driver)."""
        if self._closed:
            return
        self._lifecycle.move(ClusterState.FAILED)
        self._stop_streams()
        self._attempt.abort(reason)
        self._close_displays()

    def _stop_streams(self) -> None:
        for stream in self._streams:
            stream.stop()

    def _close_displays(self) -> None:
        if self._inference_progress is not None:
            self._inference_progress.close()
        if self._printer is not None:
            self._printer.close(timeout=10)  # the nodes' last lines, before shutdown returns
