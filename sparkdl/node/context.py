"""``ctx``: what a node's ``map_fun(args, ctx)`` knows about itself and its cluster.

Field names follow TensorFlowOnSpark's ``TFNodeContext`` so existing ``map_fun`` code runs
unchanged.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import tempfile
import time
from typing import Any

from ..common import paths, roles
from ..common.errors import FeedError, InputModeError
from ..common.timeouts import ELASTIC_GATE_WAIT_S, FEED_TIMEOUT_S, RELAUNCH_GATE_WAIT_S
from ..storage import Storage, StoreSettings, is_remote
from ..transport import protocol


class NodeContext:
    """The node's identity, its cluster and helpers, handed to ``map_fun(args, ctx)``.

    Attributes (TFoS names): ``executor_id`` (the node number, 0-based, also ``node_number``),
    ``job_name``, ``task_index``, ``cluster_spec`` (``{job: ["host:port", ...]}``, evaluator
    included), ``num_workers`` (chief + workers), ``worker_num`` (the node number again),
    ``defaultFS``, ``working_dir``, ``tmp_socket`` (the socket holding this node's TF port
    until released, or None) and ``mgr`` (in InputMode.SPARK, the node's feed server, so
    TFoS's ``TFNode.DataFeed(ctx.mgr, ...)`` works; None otherwise).
    Extra: ``host``, ``port``, ``cluster_id``, ``log_dir`` (TensorBoard's, or None),
    ``gpus`` (the CUDA_VISIBLE_DEVICES chosen for this node, or None), ``attempt`` (0 on the
    first run, k on the k-th relaunch by ``TFCluster.run(..., max_restarts=N)``).
    """

    #: Progress reports are sent at most this often (seconds); epoch ends always go out.
    PROGRESS_INTERVAL_S = 1.0

    def __init__(
        self,
        *,
        node_number: int,
        job_name: str,
        task_index: int,
        cluster_spec: dict[str, list[str]],
        default_fs: str,
        working_dir: str,
        host: str,
        port: int,
        cluster_id: str,
        tmp_socket: socket.socket | None = None,
        log_dir: str | None = None,
        gpus: str | None = None,
        attempt: int = 0,
        status_writer=None,
        feed_server=None,
        elastic: bool = False,
        store_settings: StoreSettings | None = None,
    ):
        self.node_number = node_number
        self.executor_id = self.worker_num = node_number  # TFoS's names for the node number
        self.job_name = job_name
        self.task_index = task_index
        self.cluster_spec = cluster_spec
        self.num_workers = roles.count_workers(cluster_spec)
        self.defaultFS = paths.normalize_default_fs(default_fs)
        self.working_dir = working_dir
        self.host = host
        self.port = port
        self.cluster_id = cluster_id
        self.tmp_socket = tmp_socket
        self.log_dir = log_dir
        self.gpus = gpus
        self.attempt = attempt
        self.mgr = feed_server  # TFoS code passes ctx.mgr to TFNode.DataFeed; here it is the feed server
        self._status_writer = status_writer
        self._feed_server = feed_server
        self._elastic = elastic  # TFCluster.run(min_executors=...): the chief waits at each epoch boundary
        self._last_progress: dict[frozenset, float] = {}  # per kind of report, so none starves another
        self._fits_begun = 0  # model.fit calls with progress_callback() that began an epoch in this process
        self._storage = Storage(store_settings)

    @classmethod
    def from_config(cls, config, tmp_socket=None, status_writer=None, feed_server=None) -> "NodeContext":
        """The context of the node a ``ProcessConfig`` (``node/config.py``) describes."""
        node, launch = config.node, config.node.launch
        return cls(
            node_number=node.node_number,
            job_name=node.role.job_name,
            task_index=node.role.task_index,
            cluster_spec=config.cluster_spec,
            default_fs=launch.default_fs,
            working_dir=node.working_dir,
            host=config.host,
            port=config.port,
            cluster_id=launch.cluster_id,
            tmp_socket=tmp_socket,
            log_dir=node.log_dir,
            gpus=node.gpus,
            attempt=launch.attempt,
            status_writer=status_writer,
            feed_server=feed_server,
            elastic=launch.settings.elastic,
            store_settings=launch.settings.storage,
        )

    def absolute_path(self, path: str) -> str:
        """Qualify ``path`` with TFoS's rules (see :func:`sparkdl.common.paths.hdfs_path`)."""
        return paths.hdfs_path(self.defaultFS, self.working_dir, path)

    def release_port(self) -> None:
        """Free this node's reserved TF port so a TF server can bind it (idempotent)."""
        if self.tmp_socket is not None:
            self.tmp_socket.close()
            self.tmp_socket = None

    @property
    def tf_config(self) -> dict[str, Any] | None:
        """The parsed ``TF_CONFIG`` of this node, or None when sparkdl did not set one."""
        raw = os.environ.get("TF_CONFIG")
        return json.loads(raw) if raw else None

    def report(self, event: protocol.Message) -> None:
        """Send one of ``protocol.NODE_EVENTS`` to the driver (through the supervisor)."""
        if self._status_writer is not None:
            self._status_writer(event)

    def heartbeat(self) -> None:
        """Tell the driver this node is making progress (throttled; cheap to call per step).

        The driver's stall detection (``TFCluster.run(..., stall_timeout=...)``, and
        ``feed_timeout`` while ``cluster.train`` feeds) stops a node that has not made progress
        for that long. Reading the feed counts as progress, and so does waiting for data.
        """
        self.report_progress()

    def report_progress(self, force: bool = False, **metrics: Any) -> None:
        """Report progress with optional metrics (``step``, ``epoch``, ``loss``, ...) to the driver.

        Throttled to one report per second unless ``force``; the driver shows the chief's
        latest metrics in its progress display and counts any report as a heartbeat.
        """
        now = time.monotonic()
        kind = frozenset(metrics)
        if not force and now - self._last_progress.get(kind, 0.0) < self.PROGRESS_INTERVAL_S:
            return
        self._last_progress[kind] = now
        self.report(protocol.Progress({key: _jsonable(value) for key, value in metrics.items()}))

    def progress_callback(self):
        """A Keras callback reporting step, epoch and loss to the driver (heartbeats included).

        Uses the Keras that ``tf.keras`` resolves to in this node (Keras 3 unless ``TF_USE_LEGACY_KERAS=1``).
        """
        import tensorflow as tf

        ctx = self

        class SparkdlProgress(tf.keras.callbacks.Callback):
            """Reports training progress of this node to the sparkdl driver."""

            def __init__(self):
                super().__init__()
                self.epoch = 0
                self.step = 0
                self.began = False  # whether this fit began its first epoch

            def on_train_begin(self, logs=None):
                self.began = False

            def on_epoch_begin(self, epoch, logs=None):
                self.epoch = epoch
                if not self.began:  # the fit's first epoch: after BackupAndRestore restored, the one it resumes at
                    self.began = True
                    ctx.report_fit_begin(epoch)

            def on_train_batch_end(self, batch, logs=None):
                self.step += 1
                ctx.report_progress(step=self.step, epoch=self.epoch, **_scalars(logs))

            def on_epoch_end(self, epoch, logs=None):
                ctx.report_progress(force=True, step=self.step, epoch=epoch, epoch_end=True, **_scalars(logs))
                if ctx._feed_server is not None:  # validation rows of an epoch Keras did not validate are dropped
                    ctx._feed_server.epoch_ended(epoch)
                    if ctx._elastic and ctx.is_chief:  # the driver may resize the cluster here, before epoch + 1
                        ctx._feed_server.await_epoch_gate(epoch, ELASTIC_GATE_WAIT_S)

            def on_train_end(self, logs=None):
                # The driver waits for the last epoch's report; a fit that stopped early (EarlyStopping,
                # TerminateOnNaN) sends no more, and says so here. (Only then: a map_fun may call fit
                # several times per train call, and an earlier fit's end must not end the wait.)
                if getattr(self.model, "stop_training", False):
                    ctx.report_progress(force=True, step=self.step, epoch=self.epoch, fit_end=True)
                if ctx._feed_server is not None:  # validation epochs Keras skipped hold no train() call
                    ctx._feed_server.fit_ended()

        return SparkdlProgress()

    def report_fit_begin(self, epoch: int) -> None:
        """Tell the driver a training loop begins its first epoch, ``epoch`` (0-based; past 0 when it
        resumed from a backup). :meth:`progress_callback` calls it as ``model.fit`` begins; a custom loop
        that reports its epochs (``report_progress(epoch=e, epoch_end=True)``) calls it before its first.

        The chief's first loop of a relaunched InputMode.SPARK attempt then waits for the driver's word:
        the driver feeds a relaunch the epochs it expects the loop to run, and stops the attempt (and
        relaunches it, fed from ``epoch``) when this loop runs others, e.g. one without a backup that
        begins again at 0 (``driver/call_epochs.py``). A later loop of the same attempt just reports."""
        awaits = not self._fits_begun and self.attempt > 0 and self.is_chief and self._feed_server is not None
        self._fits_begun += 1
        self.report_progress(force=True, epoch=epoch, fit_begin=True, awaits_word=awaits)
        if awaits and not self._feed_server.await_epoch_gate(epoch, RELAUNCH_GATE_WAIT_S, fit_begin=True):
            # The driver relaunches the cluster fed other epochs and stops this node; it has not yet:
            # this loop must not train on a plan made for another one.
            raise FeedError(
                f"the driver relaunches this cluster fed from epoch {epoch + 1}: this training loop, fed other "
                "epochs, stops before its first step"
            )

    def scaled_learning_rate(self, base_rate: float, base_workers: int, rule: str = "linear") -> float:
        """``base_rate`` (tuned for ``base_workers`` workers) for this attempt's ``num_workers``.

        An elastic cluster (``TFCluster.run(min_executors=...)``) keeps each worker's batch, so the
        global batch follows the node count; ``rule="linear"`` scales the rate with it (Goyal et al.'s
        rule), ``"sqrt"`` with its square root, ``"none"`` keeps it. sparkdl never changes a rate by
        itself: build the optimizer with this value to opt in.
        """
        if base_workers < 1:
            raise ValueError(f"base_workers must be at least 1, got {base_workers!r}")
        factor = self.num_workers / base_workers
        scales = {"linear": factor, "sqrt": factor**0.5, "none": 1.0}
        if rule not in scales:
            raise ValueError(f"rule must be 'linear', 'sqrt' or 'none', got {rule!r}")
        return base_rate * scales[rule]

    @property
    def storage(self) -> Storage:
        """This node's :class:`~sparkdl.storage.Storage`: reads and writes local paths and ``s3://``,
        ``gs://``, ``abfss://``, ``hdfs://`` with the Spark application's store settings. Use it for
        files of your own in ``map_fun`` where ``tf.io.gfile`` cannot reach the store."""
        return self._storage

    def scratch_dir(self, kind: str) -> str:
        """A new directory of this node's own on its executor's local disk (in the cluster's private
        directory, removed with it), named after ``kind``: where a store's files are staged."""
        from .launch import cluster_dir

        return tempfile.mkdtemp(prefix=f"{kind}-{self.job_name}{self.task_index}-", dir=cluster_dir(self.cluster_id))

    def backup_and_restore(self, backup_dir: str, **kwargs: Any):
        """A Keras ``BackupAndRestore`` callback on ``backup_dir`` (qualified by :meth:`absolute_path`).

        ``backup_dir`` must be storage every node sees: ``s3://`` (``s3a://``), ``gs://``,
        ``abfss://``, ``hdfs://`` or a shared mounted path (a local path only on one host). In a
        store, each node backs up to a local directory and the chief uploads every epoch's backup
        whole before the epoch ends (a node killed mid-upload leaves the previous one). With
        ``TFCluster.run(..., max_restarts=N)`` (or ``min_executors``) a relaunched cluster resumes
        ``model.fit`` from the last completed epoch instead of from zero. Put it before
        ``ctx.progress_callback()`` in ``callbacks``.
        """
        import tensorflow as tf

        path = self.absolute_path(backup_dir)
        if not is_remote(path):
            return tf.keras.callbacks.BackupAndRestore(backup_dir=path, **kwargs)
        from ..storage.keras_backup import backup_and_restore

        local = os.path.join(self.scratch_dir("backup"), "backup")
        return backup_and_restore(
            tf.keras.callbacks.BackupAndRestore, self._storage, path, self.is_chief, local, **kwargs
        )

    def stream_checkpoint(self, directory: str, max_to_keep: int = 3, **trackables: Any):
        """A :class:`~sparkdl.node.stream_checkpoint.StreamCheckpoint` of ``trackables`` (e.g.
        ``model=model``) in ``directory`` (qualified by :meth:`absolute_path`; storage every node
        sees: a store URI or a shared mounted path), restored from its newest checkpoint: pass it to
        ``feed.micro_batches(checkpoint)`` so the model and the last micro-batch it trained on are
        saved together (exactly once). In a store, the chief uploads each checkpoint whole."""
        from .stream_checkpoint import StreamCheckpoint, newest_only

        scratch = self.scratch_dir("stream")
        path = self.absolute_path(directory)
        if not is_remote(path):
            return StreamCheckpoint(path, self.is_chief, scratch, max_to_keep, **trackables)
        local = os.path.join(scratch, "checkpoint")
        storage, chief = self._storage, self.is_chief
        storage.fetch(path, local)  # every node starts from the newest checkpoint the chief published

        def published(batch_id: int) -> None:
            if chief:  # the newest checkpoint only: the others were published before
                storage.publish(newest_only(local, os.path.join(scratch, "publishing")), path, batch=batch_id)

        return StreamCheckpoint(local, chief, scratch, max_to_keep, published=published, **trackables)

    @property
    def is_chief(self) -> bool:
        """Whether this node writes what the cluster saves: the chief (or master), else worker 0."""
        return roles.is_chief(self.cluster_spec, self.job_name, self.task_index)

    @contextlib.contextmanager
    def export_path(self, path: str):
        """Where this node saves what every MWMS node must save but only the chief keeps.

        ``model.save`` (and checkpoint writes) under MultiWorkerMirroredStrategy are collective:
        every node must call them. Use ``with ctx.export_path(export_dir) as target:
        model.save(target)``: the chief gets ``path`` unchanged, the other nodes a scratch path
        of the same file name in this cluster's private directory, removed when the block ends,
        so nothing is left behind on their executors. For a store path (``s3://``, ``gs://``,
        ``abfss://``, ``hdfs://``) the chief too saves to a local path, uploaded when the block ends
        without an error: a file as one object, a directory (a SavedModel) with its
        ``saved_model.pb`` last, so no reader loads a model whose upload did not finish.
        """
        remote = is_remote(path)
        if self.is_chief and not remote:
            yield path
            return
        scratch = self.scratch_dir("export")
        try:
            local = os.path.join(scratch, os.path.basename(path.rstrip("/")) or "export")
            yield local
            if self.is_chief:
                if not os.path.exists(local):
                    raise FileNotFoundError(
                        f"ctx.export_path({path!r}): nothing was saved at the local path it gave ({local}), so "
                        "nothing was uploaded; save to the path the with-block yields"
                    )
                self._storage.upload(local, path)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def start_server(self):
        """Start and return a ``tf.distribute.Server`` for this node from its TF_CONFIG.

        Releases the reserved port first. The node is reported to the driver as a server,
        so ``shutdown()`` stops it once the training nodes are done instead of waiting for it.
        """
        import tensorflow as tf  # imported here: TF must only load inside the node process

        self.release_port()
        resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
        server = tf.distribute.Server(
            resolver.cluster_spec(), job_name=self.job_name, task_index=self.task_index, protocol="grpc", start=True
        )
        self.report(protocol.Serving())
        return server

    def start_cluster_server(self, num_gpus: int = 1, rdma: bool = False):
        """TensorFlowOnSpark's ``start_cluster_server``: returns ``(tf.train.ClusterSpec, server)``.

        Starts the server as :meth:`start_server` does. ``num_gpus`` and ``rdma`` are accepted for
        compatibility: sparkdl pins GPUs before the node starts, and gRPC is the only protocol
        TensorFlow 2 ships.
        """
        del num_gpus, rdma
        import tensorflow as tf

        server = self.start_server()
        addressable = {job: hosts for job, hosts in self.cluster_spec.items() if job != "evaluator"}
        return tf.train.ClusterSpec(addressable), server

    def serve(self) -> None:
        """Run this node as a TF server until the cluster shuts down (ps, or PSStrategy workers)."""
        self.start_server().join()

    def get_data_feed(
        self,
        train_mode: bool = True,
        qname_in: str = protocol.DEFAULT_QNAME,
        qname_out: str = "output",
        input_mapping: dict[str, str] | None = None,
        feed_timeout: float = FEED_TIMEOUT_S,
    ):
        """This node's :class:`~sparkdl.feed.data_feed.DataFeed` (InputMode.SPARK only).

        ``train_mode=False`` for ``cluster.inference`` (batches never mix partitions, and
        ``batch_results`` returns one result per row). ``input_mapping`` (``{column: tensor}``)
        makes ``next_batch`` return a dict of arrays keyed by tensor name. ``feed_timeout``
        bounds each wait of the feed: for the driver's plan, for rows, and for a feeding task to
        take ``batch_results``.
        """
        if self._feed_server is None:
            raise InputModeError(
                "ctx.get_data_feed() needs TFCluster.run(..., input_mode=InputMode.SPARK); in "
                "InputMode.TENSORFLOW each node reads its own data"
            )
        from ..feed.data_feed import DataFeed

        return DataFeed(self._feed_server, train_mode, qname_in, qname_out, input_mapping, feed_timeout)

    def __repr__(self) -> str:
        return (
            f"NodeContext({self.job_name}:{self.task_index}, node_number={self.node_number}, "
            f"num_workers={self.num_workers}, host={self.host}:{self.port}, attempt={self.attempt})"
        )


def _jsonable(value: Any) -> Any:
    """Numbers (numpy and TF scalars included) as float, other plain values as they are."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    try:
        return float(value)
    except (TypeError, ValueError):
        return str(value)


def _scalars(logs: dict | None) -> dict[str, float]:
    """The numeric entries of Keras logs, as floats."""
    out = {}
    for key, value in (logs or {}).items():
        try:
            out[key] = float(value)
        except (TypeError, ValueError):
            continue
    return out
