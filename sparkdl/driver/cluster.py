"""The driver side of a TensorFlow cluster on Spark: reserve executors, start nodes, shut down.

``run()`` validates the request, checks that Spark can host it, starts one node per executor
through a (barrier) Spark job running in a background thread, and returns a ``TFCluster``
once every node has registered. ``TFCluster.shutdown()`` waits for the training nodes, stops
the servers (ps, evaluator), and raises ``ClusterError`` with each failed node's role, index,
host and remote traceback. Every piece of state belongs to the ``TFCluster`` object, so a
failed cluster leaves nothing behind for the next one.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from typing import Any, Callable

from pyspark import InheritableThread, SparkContext

from .. import roles as roles_mod
from ..channel import new_secret
from ..errors import ClusterError, ReservationTimeout, ShutdownTimeout
from ..node.launch import LaunchSpec, launch_node, spark_partition_launcher
from . import preflight
from .coordinator import Coordinator
from .feeding import ClusterFeeder

logger = logging.getLogger(__name__)

STOP_WAIT_S = 60.0


class InputMode:
    """How nodes get their data (TensorFlowOnSpark's values)."""

    TENSORFLOW = 0  #: nodes read their own data (files, generators)
    SPARK = 1       #: Spark feeds RDD/DataFrame partitions to the nodes


def _driver_host(sc: SparkContext) -> str:
    conf = sc.getConf()
    host = conf.get("spark.driver.bindAddress") or conf.get("spark.driver.host") or socket.gethostname()
    try:
        return socket.gethostbyname(host)
    except OSError:
        return "127.0.0.1"


def _validate_arguments(map_fun, num_executors, num_ps, input_mode, master_node, eval_node,
                        reservation_timeout, driver_ps_nodes) -> None:
    if not callable(map_fun):
        raise ValueError(f"map_fun must be callable, got {type(map_fun).__name__}")
    roles_mod.validate_layout(num_executors, num_ps, master_node, eval_node)
    if input_mode not in (InputMode.TENSORFLOW, InputMode.SPARK):
        raise ValueError(f"input_mode must be InputMode.TENSORFLOW or InputMode.SPARK, got {input_mode!r}")
    if eval_node and input_mode == InputMode.SPARK:
        raise ValueError("eval_node=True is not supported with input_mode=InputMode.SPARK: the evaluator "
                         "would receive no data; use InputMode.TENSORFLOW for an evaluator")
    if not reservation_timeout or reservation_timeout <= 0:
        raise ValueError(f"reservation_timeout must be positive, got {reservation_timeout!r}")
    if driver_ps_nodes and num_ps == 0:
        raise ValueError("driver_ps_nodes=True needs num_ps > 0")


class TFCluster:
    """A running TensorFlow cluster on Spark executors. Create it with :func:`run`."""

    def __init__(self, sc: SparkContext, cluster_id: str, coordinator: Coordinator, input_mode: int,
                 job_group: str, tensorboard: bool, secret: bytes):
        self.sc = sc
        self._feeder = ClusterFeeder(sc, secret, coordinator, cluster_id)
        self.cluster_id = cluster_id
        self.input_mode = input_mode
        self._coordinator = coordinator
        self._job_group = job_group
        self._tensorboard = tensorboard
        self._launch_threads: list[threading.Thread] = []
        self._launch_errors: list[BaseException] = []
        self._closed = False

    # -- TFoS-compatible API --

    @property
    def cluster_info(self) -> list[dict[str, Any]]:
        """One dict per node: executor_id, job_name, task_index, host, port, spark_executor, status."""
        return [{"executor_id": n.role.executor_id, "job_name": n.role.job_name, "task_index": n.role.task_index,
                 "host": n.host, "port": n.port, "spark_executor": n.spark_executor, "status": n.status,
                 "log_path": n.log_path} for n in self._coordinator.nodes.values()]

    @property
    def cluster_spec(self) -> dict[str, list[str]]:
        """``{job: ["host:port", ...]}`` of the running cluster."""
        return dict(self._coordinator.cluster_spec or {})

    def tensorboard_url(self, timeout: float = 90.0) -> str | None:
        """TensorBoard's URL, waiting (bounded) for it to answer; None when not requested."""
        if not self._tensorboard:
            return None
        self._coordinator.wait_until(lambda c: c.tensorboard_url is not None or c.failures, timeout)
        return self._coordinator.tensorboard_url

    def train(self, dataRDD, num_epochs: int = 1, feed_timeout: float = 600, qname: str = "input") -> None:
        """Feed an RDD or DataFrame to the chief and workers ``num_epochs`` times (InputMode.SPARK).

        Rows are balanced so every node gets the same number per epoch (at most N-1 rows per
        epoch are repeated to make the counts equal; none are dropped). Blocks until everything
        is fed. Raises ClusterError with the node's traceback as soon as a node fails, FeedError
        when a node stops accepting data for ``feed_timeout`` seconds, and FeedDataError for data
        that cannot become tensors (naming the column). ``num_epochs=0`` means 1, as in TFoS.
        """
        self._require_spark_mode("train")
        self._feeder.train(dataRDD, num_epochs or 1, feed_timeout, qname)

    def inference(self, dataRDD, feed_timeout: float = 600, qname: str = "input"):
        """An RDD with one result per input row, in input order partition by partition (lazy).

        ``dataRDD`` may be an RDD or a DataFrame; the result is an RDD either way (as in
        TensorFlowOnSpark). Each partition is served by one node (``partition % nodes``), whose
        ``map_fun`` reads it with ``ctx.get_data_feed(train_mode=False)`` and answers with
        ``batch_results``.
        """
        self._require_spark_mode("inference")
        return self._feeder.inference(dataRDD, feed_timeout, qname)

    def _require_spark_mode(self, what: str) -> None:
        if self.input_mode != InputMode.SPARK:
            raise ValueError(f"cluster.{what}() feeds data, which needs TFCluster.run(..., "
                             "input_mode=InputMode.SPARK); this cluster runs InputMode.TENSORFLOW")
        if self._closed:
            raise RuntimeError(f"cluster.{what}() after shutdown()")

    def shutdown(self, ssc=None, grace_secs: float = 0, timeout: float = 259200) -> None:
        """Wait for the training nodes to finish, stop the servers, and release everything.

        ``grace_secs``: how long ps/evaluator nodes may keep running once the training nodes
        are done (they may also end by themselves). ``timeout``: how long to wait for the
        training nodes before stopping everything and raising ShutdownTimeout. Raises
        ClusterError naming each failed node (role, index, host, traceback). ``ssc`` is
        accepted for TensorFlowOnSpark compatibility; streaming is not supported.
        """
        if ssc is not None:
            raise NotImplementedError("Spark Streaming contexts are not supported by sparkdl")
        if self._closed:
            return
        coordinator = self._coordinator
        try:
            if self.input_mode == InputMode.SPARK and not coordinator.failures:
                self._feeder.end()
            finished = coordinator.wait_until(
                lambda c: c.training_nodes_done() or bool(c.failures) or self._launch_failed(), timeout)
            if not finished:
                running = coordinator.running_labels()
                coordinator.stop_nodes(lambda n: not n.finished, grace_s=0)
                coordinator.wait_until(lambda c: c.all_done(), STOP_WAIT_S)
                raise ShutdownTimeout(f"nodes still running after shutdown(timeout={timeout}) were stopped: "
                                      + ", ".join(running))
            if grace_secs and not coordinator.failures:
                coordinator.wait_until(lambda c: c.all_done(), grace_secs)
            coordinator.stop_nodes(lambda n: not n.finished, grace_s=0)
            if not coordinator.wait_until(lambda c: c.all_done() or self._launch_failed(), STOP_WAIT_S):
                logger.warning("sparkdl: nodes %s did not report their end; cancelling their Spark tasks",
                               coordinator.running_labels())
            self._join_launch(STOP_WAIT_S)
            if coordinator.failures:
                raise ClusterError(list(coordinator.failures), f"sparkdl cluster {self.cluster_id} failed")
            if self._launch_errors:
                raise ClusterError([], f"sparkdl cluster {self.cluster_id}: the launch job failed: "
                                       f"{self._launch_errors[0]}") from self._launch_errors[0]
        finally:
            self._release()

    # -- context manager: shut down on exit --

    def __enter__(self) -> "TFCluster":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.shutdown()
        else:
            self._abort(f"the driver raised {exc_type.__name__}")

    # -- internals --

    def _launch_failed(self) -> bool:
        return bool(self._launch_errors)

    def _launch_error(self) -> BaseException | None:
        return self._launch_errors[0] if self._launch_errors else None

    def _start_launch(self, target: Callable[[], Any], name: str) -> None:
        def body() -> None:
            try:
                target()
            except BaseException as exc:  # noqa: BLE001 - reported to the driver thread
                self._launch_errors.append(exc)
                self._coordinator.notify_external()

        thread = InheritableThread(target=body, name=name, daemon=True)
        self._launch_threads.append(thread)
        thread.start()

    def _join_launch(self, timeout: float) -> None:
        for thread in self._launch_threads:
            thread.join(timeout)
        if any(t.is_alive() for t in self._launch_threads):
            self.sc.cancelJobGroup(self._job_group)
            for thread in self._launch_threads:
                thread.join(timeout)

    def _abort(self, reason: str) -> None:
        """Stop everything now (used on errors at the driver)."""
        if self._closed:
            return
        self._coordinator.abort(reason)  # also stops every running node
        self._coordinator.wait_until(lambda c: c.all_done(), 15)
        self.sc.cancelJobGroup(self._job_group)
        self._join_launch(15)
        self._release()

    def _release(self) -> None:
        self._closed = True
        self._coordinator.close()


def run(sc: SparkContext, map_fun: Callable[[Any, Any], Any], tf_args: Any, num_executors: int,
        num_ps: int = 0, tensorboard: bool = False, input_mode: int = InputMode.TENSORFLOW,
        log_dir: str | None = None, driver_ps_nodes: bool = False, master_node: str | None = "chief",
        reservation_timeout: float = 600, queues: Any = None, eval_node: bool = False,
        release_port: bool = True, *, num_gpus: int | None = None, env: dict[str, str] | None = None,
        use_barrier: bool = True, executor_wait_timeout: float = 30.0, set_tf_config: bool = True,
        feed_queue_bytes: int = 64 * 1024 * 1024) -> TFCluster:
    """Start a TensorFlow cluster of ``num_executors`` nodes and call ``map_fun(tf_args, ctx)`` on each.

    Arguments keep TensorFlowOnSpark's names and meanings: ``num_ps`` ps nodes come first,
    then the ``master_node`` ('chief', 'master' or None), then an evaluator if ``eval_node``,
    then workers. ``tf_args`` (argparse Namespace, dict or argv list) reaches ``map_fun`` as is.
    ``tensorboard`` starts TensorBoard on the chief (or worker 0) logging ``log_dir``.
    ``release_port=False`` keeps each node's TF port reserved in ``ctx.tmp_socket`` until
    ``ctx.release_port()``. ``queues`` is accepted for compatibility and ignored.

    sparkdl additions: ``num_gpus`` per node (default: Spark's GPU resources, else one GPU if
    nvidia-smi finds any, else CPU); ``env`` extra environment for the TF processes (nodes run
    with ``TF_USE_LEGACY_KERAS=1`` unless ``env`` or the executor environment says otherwise);
    ``use_barrier`` gang-schedules the nodes with Spark's barrier mode; ``set_tf_config=False``
    leaves TF_CONFIG unset (independent nodes, see ``TFParallel``); ``feed_queue_bytes``
    bounds each node's queue of fed data (InputMode.SPARK backpressure).

    Returns once every node has registered; raises PreflightError or ReservationTimeout
    (naming the missing nodes) otherwise.
    """
    del queues  # sparkdl has no multiprocessing-manager queues
    _validate_arguments(map_fun, num_executors, num_ps, input_mode, master_node, eval_node,
                        reservation_timeout, driver_ps_nodes)
    template = roles_mod.cluster_template(num_executors, num_ps, master_node, eval_node)
    node_roles = roles_mod.roles_from_template(template)
    first_spark_node = num_ps if driver_ps_nodes else 0
    spark_nodes = num_executors - first_spark_node
    conf = sc.getConf()
    layout = preflight.check_configuration(sc.master, conf.get, spark_nodes,
                                           node_owns_executor=input_mode == InputMode.SPARK)
    preflight.wait_for_executors(lambda: _count_executors(sc), spark_nodes, layout, executor_wait_timeout)

    from pyspark import cloudpickle

    cluster_id = uuid.uuid4().hex[:12]
    secret = new_secret()
    coordinator = Coordinator(node_roles, secret, _driver_host(sc))
    chief_like = template.get(master_node or "", []) or template.get("worker", [])[:1]
    spec = LaunchSpec(
        cluster_id=cluster_id, secret=secret, driver_address=coordinator.address, roles=tuple(node_roles),
        fn=cloudpickle.dumps((map_fun, tf_args)), detached=input_mode == InputMode.SPARK,
        set_tf_config=set_tf_config, release_port=release_port, reservation_timeout=float(reservation_timeout),
        tensorboard_executor=chief_like[0] if tensorboard and chief_like else None, log_dir=log_dir,
        default_fs=sc._jsc.hadoopConfiguration().get("fs.defaultFS") or "file://", num_gpus=num_gpus,
        env=dict(env or {}), feed_queue_bytes=int(feed_queue_bytes))
    job_group = f"sparkdl-{cluster_id}"
    cluster = TFCluster(sc, cluster_id, coordinator, input_mode, job_group, tensorboard, secret)

    def launch_on_spark() -> None:
        sc.setJobGroup(job_group, f"sparkdl: start {spark_nodes} TensorFlow nodes (cluster {cluster_id})",
                       interruptOnCancel=True)
        rdd = sc.parallelize(range(spark_nodes), spark_nodes)
        launcher = spark_partition_launcher(spec, first_spark_node)
        (rdd.barrier().mapPartitions(launcher) if use_barrier else rdd.mapPartitions(launcher)).collect()

    for executor_id in range(first_spark_node):  # ps nodes hosted by the driver
        cluster._start_launch(lambda i=executor_id: launch_node(spec, i, anchor_pid=os.getpid()),
                              f"sparkdl-driver-ps-{executor_id}")
    cluster._start_launch(launch_on_spark, f"sparkdl-launch-{cluster_id}")
    try:
        coordinator.wait_for_reservation(reservation_timeout, cluster._launch_error)
        if input_mode == InputMode.SPARK:
            _wait_for_feed_servers(cluster, reservation_timeout)
    except BaseException:
        cluster._abort("reservation failed")
        raise
    logger.info("sparkdl cluster %s running: %s", cluster_id, coordinator.cluster_spec)
    return cluster


def _wait_for_feed_servers(cluster: TFCluster, timeout: float) -> None:
    """InputMode.SPARK: return once every data node's feed server listens (or raise)."""
    data_nodes = cluster._feeder.data_nodes()
    ready = cluster._coordinator.wait_until(
        lambda c: all(n.feed_port or n.finished for n in data_nodes) or bool(c.failures), timeout)
    if cluster._coordinator.failures:
        raise ClusterError(list(cluster._coordinator.failures), "a node failed while starting")
    if not ready:
        missing = [n.role.label for n in data_nodes if not n.feed_port]
        raise ReservationTimeout(f"the feed servers of {', '.join(missing)} did not start within {timeout:.0f} s")


def _count_executors(sc: SparkContext) -> int:
    """Registered executors (the driver excluded, except in local mode where it is the executor)."""
    count = sc._jsc.sc().getExecutorMemoryStatus().size()
    return count if sc.master.startswith("local") and not sc.master.startswith("local-cluster") else count - 1
